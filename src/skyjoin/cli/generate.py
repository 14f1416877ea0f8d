"""``skyjoin generate``: a seeded, reproducible data set written to a file."""

from __future__ import annotations

import click

from ..datasets import KIND_DIMS, KINDS, generate
from ..io import write_points
from .errors import user_errors
from .options import VERBOSE, phase
from .outputs import POINTS_OUT, check_out
from .wording import plural

__all__ = ["generate_cmd"]


@click.command("generate")
@click.argument("kind", type=click.Choice(list(KINDS)))
@click.option("-n", "--n-points", "n", type=click.IntRange(min=0), required=True,
              help="Number of points.")
@click.option("-d", "--dims", "d", type=click.IntRange(min=1), default=None,
              help="Number of dimensions (required, except for geographic: 2).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option("--degrees", is_flag=True,
              help="geographic: write degrees instead of radians.")
@click.option("--out", type=click.Path(dir_okay=False), required=True, metavar="FILE",
              help="Output file: .npy, .parquet or .csv/.txt (CSV and Parquet name the "
                   "columns x0, x1, ..., or lat, lon for geographic).")
@VERBOSE
@user_errors
def generate_cmd(kind, n, d, seed, degrees, out):
    """Generate a seeded, reproducible data set of KIND.

    \b
    uniform        uniform in [0, 100]^d
    exponential    rate 40, values above 1 redrawn
    blobs          50 Gaussian blobs (std 1.5) in [0, 100]^d
    independent, correlated, anticorrelated
                   the standard skyline generator (Borzsonyi et al.)
    pareto         x = (1 - r)^-1, normalised to [0, 1]
    geographic     (lat, lon) in radians (--degrees: degrees): 20 clusters
                   of 300 km on the sphere, at both poles and across the
                   antimeridian, 10% noise; for --metric haversine
    """
    fixed = KIND_DIMS.get(kind)
    if d is None and fixed is None:
        raise click.UsageError("Missing option '-d' / '--dims'.")
    if fixed is not None and d not in (None, fixed):
        raise click.BadParameter(f"{kind} data has {fixed} dimensions, got {d}",
                                 param_hint="'-d' / '--dims'")
    if degrees and kind != "geographic":
        raise click.UsageError("--degrees is for geographic data")
    check_out(out, POINTS_OUT, what="the points")
    d = fixed if fixed is not None else d
    params = {"degrees": True} if degrees else {}
    names = ["lat", "lon"] if kind == "geographic" else None
    with phase(f"generate {kind}"):
        X = generate(kind, n, d, seed=seed, **params)
    with phase(f"write {out}"):
        write_points(out, X, names=names)
    unit = " (lat, lon in degrees)" if degrees else \
        " (lat, lon in radians)" if kind == "geographic" else ""
    click.echo(f"wrote {plural(n, kind + ' point')} in {plural(d, 'dimension')}{unit} "
               f"(seed {seed}) to {out}")

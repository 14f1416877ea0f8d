"""``skyjoin generate``: a seeded, reproducible data set written to a file."""

from __future__ import annotations

import click

from ..datasets import generate
from ..io import write_points
from .errors import user_errors
from .options import VERBOSE, phase
from .outputs import POINTS_OUT, check_out
from .wording import plural

__all__ = ["generate_cmd"]


@click.command("generate")
@click.argument("kind", type=click.Choice(["uniform", "exponential", "blobs", "independent",
                                           "correlated", "anticorrelated", "pareto"]))
@click.option("-n", "--n-points", "n", type=click.IntRange(min=0), required=True,
              help="Number of points.")
@click.option("-d", "--dims", "d", type=click.IntRange(min=1), required=True,
              help="Number of dimensions.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option("--out", type=click.Path(dir_okay=False), required=True, metavar="FILE",
              help="Output file: .npy, .parquet or .csv/.txt (CSV and Parquet name the "
                   "columns x0, x1, ...).")
@VERBOSE
@user_errors
def generate_cmd(kind, n, d, seed, out):
    """Generate a seeded, reproducible data set of KIND.

    \b
    uniform        uniform in [0, 100]^d
    exponential    rate 40, values above 1 redrawn
    blobs          50 Gaussian blobs (std 1.5) in [0, 100]^d
    independent, correlated, anticorrelated
                   the standard skyline generator (Borzsonyi et al.)
    pareto         x = (1 - r)^-1, normalised to [0, 1]
    """
    check_out(out, POINTS_OUT, what="the points")
    with phase(f"generate {kind}"):
        X = generate(kind, n, d, seed=seed)
    with phase(f"write {out}"):
        write_points(out, X)
    click.echo(f"wrote {plural(n, kind + ' point')} in {plural(d, 'dimension')} (seed {seed}) "
               f"to {out}")

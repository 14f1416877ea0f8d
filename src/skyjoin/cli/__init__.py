"""The ``skyjoin`` command: join, dbscan, skyline, generate, demo, bench.

Subcommands that live with their operator (``dbscan``, ``skyline``) are
loaded on first use, so that ``skyjoin --help`` stays fast.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time

import click

from .distributed import client_from_options, distributed_options, uses_cluster

# name -> (module, attribute) of subcommands defined beside their operator
_LAZY = {
    "dbscan": ("skyjoin.cli.dbscan", "dbscan_cmd"),
    "skyline": ("skyjoin.cli.skyline", "skyline_cmd"),
}


def _lazy_available(name: str) -> bool:
    return importlib.util.find_spec(_LAZY[name][0]) is not None


class _Group(click.Group):
    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | {n for n in _LAZY if _lazy_available(n)})

    def get_command(self, ctx, name):
        if name in _LAZY and _lazy_available(name):
            module, attr = _LAZY[name]
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


def _echo_err(msg: str) -> None:
    click.echo(msg, err=True)


DEVICE = click.option("--device", type=click.Choice(["auto", "cpu", "gpu"]), default=None,
                      help="Where to run: the GPU when CuPy finds one ('auto', the default, "
                           "or $SKYJOIN_DEVICE), or force 'cpu' / 'gpu'.")
COLUMNS = click.option("--columns", default=None,
                       help="Comma-separated column names or 0-based positions to use "
                            "(default: every column).")


def _columns(spec):
    if spec is None:
        return None
    out = []
    for s in spec.split(","):
        s = s.strip()
        out.append(int(s) if s.lstrip("-").isdigit() else s)
    return out


def _load(path, columns):
    from ..io import read_points

    t0 = time.perf_counter()
    X = read_points(path, columns=_columns(columns))
    return X, time.perf_counter() - t0


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="skyjoin")
@click.option("-v", "--verbose", count=True, help="Log more (-v info, -vv debug).")
def main(verbose):
    """skyjoin: distance similarity join, DBSCAN and skyline on GPUs and multicore CPUs.

    \b
    Examples:
      skyjoin demo
      skyjoin generate uniform -n 1000000 -d 2 --out points.npy
      skyjoin join points.npy --eps 0.5 --out pairs.parquet
      skyjoin dbscan points.npy --eps 0.3 --min-samples 10 --plot clusters.png
      skyjoin skyline cars.csv --min price --max rating
      skyjoin bench join --device cpu
    """
    import logging

    if verbose:
        logging.basicConfig(level=logging.DEBUG if verbose > 1 else logging.INFO,
                            format="%(levelname)s %(name)s: %(message)s")


@main.command("join")
@click.argument("data", type=click.Path(exists=True, dir_okay=False))
@click.option("--eps", type=float, required=True, help="Join radius (distance <= eps).")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write the result: pairs to .parquet (streamed in bounded chunks, any size), "
                   "the CSR table to .npz; with --counts, counts to .csv/.parquet.")
@click.option("--counts", is_flag=True, help="Only count the neighbours of each point.")
@click.option("--include-self", is_flag=True, help="Report each point as its own neighbour.")
@click.option("--no-sort", is_flag=True, help="Skip sorting the columns within each row.")
@click.option("--pattern", type=click.Choice(["auto", "full", "unicomp", "lid_unicomp"]),
              default="auto", show_default=True, help="Cell access pattern.")
@click.option("--precision", type=click.Choice(["float64", "float32"]), default="float64",
              show_default=True, help="Working precision of the distance test.")
@click.option("--chunk-pairs", type=int, default=1 << 24, show_default=True,
              help="Pairs per chunk when streaming to Parquet.")
@COLUMNS
@DEVICE
@click.option("--progress/--no-progress", default=None,
              help="Progress bar (default: when writing to a terminal).")
@distributed_options
def join_cmd(data, eps, out, counts, include_self, no_sort, pattern, precision, chunk_pairs,
             columns, device, progress, scheduler, local_cluster):
    """All pairs of points of DATA within distance EPS (the self-join).

    DATA is a .csv/.txt (comma or whitespace separated, optional header),
    .parquet or .npy file of points, one per row.  Prints a one-line summary:
    points, dimensions, pairs, mean neighbours per point and time.  With
    --scheduler or --local-cluster the join runs on a Dask cluster (the
    workers read DATA themselves; --out naming a folder gets one Parquet file
    of pairs per partition).
    """
    import skyjoin as sj
    from .._core.device import resolve_device

    if uses_cluster(scheduler, local_cluster):
        from .distributed import run_join

        with client_from_options(scheduler, local_cluster, device=device, echo=click.echo) as client:
            click.echo(run_join(client, data, eps, out=out, counts=counts,
                                include_self=include_self, sort=not no_sort, precision=precision,
                                columns=_columns(columns), device=device))
        return
    X, t_load = _load(data, columns)
    dev = resolve_device(device)
    n, d = X.shape
    show = sys.stderr.isatty() if progress is None else progress
    t0 = time.perf_counter()
    if counts:
        c = sj.self_join(X, eps, output="counts", include_self=include_self, device=dev,
                         precision=precision, pattern=pattern)
        n_pairs = int(c.sum())
        if out:
            from ..io import write_labels

            write_labels(out, c, name="count")
    elif out and out.lower().endswith(".parquet"):
        from tqdm import tqdm

        from ..io import ParquetPairWriter

        n_pairs = 0
        with ParquetPairWriter(out, shape=(n, n), sorted=not no_sort) as w, \
                tqdm(total=n, unit="rows", disable=not show, desc="join") as bar:
            for ch in sj.self_join_chunks(X, eps, include_self=include_self, sort=not no_sort,
                                          max_pairs=chunk_pairs, device=dev, precision=precision):
                w.write(ch.i, ch.j)
                n_pairs += len(ch)
                bar.update(ch.row_stop - ch.row_start)
    else:
        nt = sj.self_join(X, eps, include_self=include_self, sort=not no_sort, device=dev,
                          precision=precision, pattern=pattern)
        n_pairs = nt.n_pairs
        if out:
            from ..io import write_neighbor_table

            write_neighbor_table(out, nt)
    dt = time.perf_counter() - t0
    mean = n_pairs / n if n else 0.0
    click.echo(f"{n:,} points, {d} dimensions, eps {eps:g}: {n_pairs:,} pairs "
               f"({mean:.2f} neighbours per point) in {dt:.3f} s on {dev} "
               f"(+{t_load:.2f} s reading)" + (f"; wrote {out}" if out else ""))


@main.command("generate")
@click.argument("kind", type=click.Choice(["uniform", "exponential", "blobs", "independent",
                                           "correlated", "anticorrelated", "pareto"]))
@click.option("-n", "--n-points", "n", type=int, required=True, help="Number of points.")
@click.option("-d", "--dims", "d", type=int, required=True, help="Number of dimensions.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option("--out", type=click.Path(dir_okay=False), required=True,
              help="Output file: .npy, .parquet or .csv.")
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
    import numpy as np

    from .. import datasets

    X = datasets.generate(kind, n, d, seed=seed)
    ext = os.path.splitext(out)[1].lower()
    if ext == ".npy":
        np.save(out, X)
    elif ext == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({f"x{k}": X[:, k] for k in range(d)}), out)
    elif ext in (".csv", ".txt"):
        np.savetxt(out, X, delimiter=",", fmt="%.17g")
    else:
        raise click.BadParameter(f"unknown extension {ext!r}: use .npy, .parquet or .csv",
                                 param_hint="--out")
    click.echo(f"wrote {n:,} {kind} points in {d} dimensions (seed {seed}) to {out}")


@main.command("bench")
@click.argument("suite", type=click.Choice(["join", "dbscan", "skyline", "distributed"]))
@DEVICE
@click.option("--quick", is_flag=True, help="Small versions of the cases (a smoke test).")
@click.option("--case", "names", multiple=True, help="Run only these cases (repeatable).")
@click.option("--out", "out_dir", default="bench-results", show_default=True,
              help="Folder for the JSON report and the PNG chart.")
def bench_cmd(suite, device, quick, names, out_dir):
    """Benchmark SUITE against its peers in one process; write JSON and PNG.

    Speed is reported as ratios against peers measured in the same run.
    """
    from .._core.device import resolve_device

    dev = resolve_device(device)
    if suite == "join":
        if dev == "gpu":
            from ..bench import join_gpu

            join_gpu.run(quick=quick, out_dir=out_dir, names=list(names) or None)
        else:
            from ..bench import join

            join.run(device="cpu", quick=quick, out_dir=out_dir, names=list(names) or None)
    else:
        mod = importlib.import_module(f"skyjoin.bench.{suite}")
        kwargs = {"device": dev, "quick": quick, "out_dir": out_dir}
        if names:
            kwargs["names"] = list(names)
        mod.run(**kwargs)


@main.command("demo")
@click.option("-n", "--n-points", "n", type=int, default=200_000, show_default=True,
              help="Points to generate.")
@click.option("--out", "out_dir", default="skyjoin-demo", show_default=True,
              help="Folder for the picture (demo.png).")
@click.option("--seed", type=int, default=0, show_default=True)
@DEVICE
def demo_cmd(n, out_dir, seed, device):
    """Generate data, run the join, DBSCAN and the skyline, print a table and draw them."""
    from .demo import run_demo

    run_demo(n=n, out_dir=out_dir, seed=seed, device=device, echo=click.echo)


if __name__ == "__main__":  # pragma: no cover
    main()

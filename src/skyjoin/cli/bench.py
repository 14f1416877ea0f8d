"""``skyjoin bench``: a benchmark suite against its peers, in one process."""

from __future__ import annotations

import functools

import click

from .._core.device import resolve_device
from ..bench import dbscan as bench_dbscan
from ..bench import distributed as bench_distributed
from ..bench import join as bench_join
from ..bench import join_gpu as bench_join_gpu
from ..bench import skyline as bench_skyline
from .errors import user_errors
from .options import DEVICE, VERBOSE

__all__ = ["bench_cmd", "suite_runner"]


def suite_runner(suite: str, device: str):
    """The function that runs ``suite`` on a resolved ``device``, called with
    ``quick``, ``out_dir`` and ``names`` (None: every case).

    The join has one module per device (``bench.join_gpu`` on the GPU,
    ``bench.join`` on the CPU); the other suites take the device.
    """
    if suite == "join":
        if device == "gpu":
            return bench_join_gpu.run
        return functools.partial(bench_join.run, device="cpu")
    mod = {"dbscan": bench_dbscan, "skyline": bench_skyline,
           "distributed": bench_distributed}[suite]

    def run(quick, out_dir, names):
        kwargs = {"device": device, "quick": quick, "out_dir": out_dir}
        if names:
            kwargs["names"] = names
        return mod.run(**kwargs)

    return run


@click.command("bench")
@click.argument("suite", type=click.Choice(["join", "dbscan", "skyline", "distributed"]))
@DEVICE
@click.option("--quick", is_flag=True, help="Small versions of the cases (a smoke test).")
@click.option("--case", "names", multiple=True, help="Run only these cases (repeatable).")
@click.option("--out", "out_dir", default="bench-results", show_default=True,
              help="Folder for the JSON report and the PNG chart.")
@VERBOSE
@user_errors
def bench_cmd(suite, device, quick, names, out_dir):
    """Benchmark SUITE against its peers in one process; write JSON and PNG.

    Speed is reported as ratios against peers measured in the same run.
    """
    run = suite_runner(suite, resolve_device(device))
    run(quick=quick, out_dir=out_dir, names=list(names) or None)

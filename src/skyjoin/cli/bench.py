"""``skyjoin bench``: a benchmark suite against its peers, in one process."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from types import ModuleType

import click

from .._core.device import resolve_device
from .errors import user_errors
from .options import DEVICE, VERBOSE

__all__ = ["bench_cmd", "suite_runner", "SUITES"]


class _Suites(Mapping):
    """Suite name -> module, each imported on first use (the suites import
    their peers: scikit-learn, SciPy, Numba's engines), so that ``skyjoin
    --help`` does not pay for them."""

    _MODULES = {"join": "skyjoin.bench.join", "dbscan": "skyjoin.bench.dbscan",
                "skyline": "skyjoin.bench.skyline", "distributed": "skyjoin.bench.distributed",
                "contention": "skyjoin.bench.contention"}

    #: suites that time the CPU alone, whatever the machine has
    CPU_ONLY = ("contention",)

    def __getitem__(self, name: str) -> ModuleType:
        return importlib.import_module(self._MODULES[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._MODULES)

    def __len__(self) -> int:
        return len(self._MODULES)


#: The suite modules by name; each has ``run(device, quick, out_dir, names)``
#: and ``case_names(device, quick)``.
SUITES = _Suites()


def suite_runner(suite: str, device: str):
    """The function that runs ``suite`` on a resolved ``device``, called with
    ``quick``, ``out_dir`` and ``names`` (None: every case).

    Every suite takes the device: the join suite times ``skyjoin.self_join``
    on it (``device="gpu"``: the GPU join from host data to a host table).
    """
    mod = SUITES[suite]

    def run(quick, out_dir, names):
        return mod.run(device=device, quick=quick, out_dir=out_dir, names=names or None)

    return run


@click.command("bench")
@click.argument("suite", type=click.Choice(list(SUITES)))
@DEVICE
@click.option("--quick", is_flag=True, help="Small versions of the cases (a smoke test); "
                                            "their names carry their real sizes.")
@click.option("--case", "names", multiple=True, metavar="NAME",
              help="Run only these cases (repeatable); --list shows them.")
@click.option("--list", "list_cases", is_flag=True,
              help="List the cases --case accepts (with --quick: the quick ones) and exit.")
@click.option("--out", "out_dir", default="bench-results", show_default=True, metavar="DIR",
              help="Folder for the JSON report and the PNG chart.")
@VERBOSE
@user_errors
def bench_cmd(suite, device, quick, names, list_cases, out_dir):
    """Benchmark SUITE against its peers in one process; write JSON and PNG.

    Every implementation, ours and the peers', runs once untimed (warm-up),
    then three times interleaved with the others; the fastest run counts.
    Ratios are only against peers timed in the same run on the same data;
    figures quoted from papers stand in their own column, never as a ratio.
    """
    # the one device decision of the bench (its cases and peers depend on
    # it): an explicit one as given to --list (no GPU needed to list the GPU
    # cases), else resolved
    if suite in SUITES.CPU_ONLY:
        if device == "gpu":
            raise click.UsageError(f"the {suite} suite times the CPU operators; leave out "
                                   f"--device gpu")
        dev = "cpu"
    else:
        dev = device if list_cases and device in ("cpu", "gpu") else resolve_device(device)
    if list_cases:
        for name in SUITES[suite].case_names(dev, quick):
            click.echo(name)
        return
    run = suite_runner(suite, dev)
    run(quick=quick, out_dir=out_dir, names=list(names) or None)

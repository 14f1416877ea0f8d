"""The ``skyjoin`` command: join, dbscan, skyline, generate, demo, bench, warmup.

One module per command (``join``, ``dbscan``, ``skyline``, ``generate``,
``bench``, ``demo``, ``warmup``), on shared parts: ``options`` (options defined once,
verbosity), ``errors`` (one error style), ``inputs`` (reading, with the
readers' notices), ``outputs`` (what ``--out`` accepts, checked before any
work), ``wording`` (counts and plurals), ``plots`` (every picture;
Matplotlib loaded on first use) and
``distributed`` (``--scheduler`` / ``--local-cluster``: the commands on a
Dask cluster; Dask loaded on first use).  The ``skyjoin`` entry point is
:func:`main` (also ``python -m skyjoin``); its exit statuses are
:mod:`skyjoin.cli.errors`'s rule.

Start-up: ``import skyjoin.cli`` loads click and the command modules, which
import at module level only what ``--help`` and the checks of the command
line need.  What a command computes with (Numba's engines, scikit-learn,
pandas, tqdm, Dask, the bench suites, Matplotlib) is imported when the
command runs, so that ``skyjoin --help`` and a usage error take about as
long as ``import skyjoin`` (``tests/test_cli_startup.py`` checks which
modules load).
"""

from __future__ import annotations

import sys

from .statuses import EXIT_INTERRUPTED, INTERRUPTED_LINE

try:      # a Ctrl-C while the command's modules load ends as one inside it would
    import click

    from .bench import bench_cmd
    from .dbscan import dbscan_cmd
    from .demo import demo_cmd
    from .errors import SkyjoinGroup
    from .generate import generate_cmd
    from .join import join_cmd
    from .options import VERBOSE
    from .skyline import skyline_cmd
    from .warmup import warmup_cmd
except KeyboardInterrupt:
    sys.stderr.write(INTERRUPTED_LINE + "\n")
    raise SystemExit(EXIT_INTERRUPTED) from None

__all__ = ["main"]


@click.group(cls=SkyjoinGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="skyjoin")
@VERBOSE
def main():
    """skyjoin: distance similarity join, DBSCAN and skyline on GPUs and multicore CPUs.

    \b
    Examples:
      skyjoin demo
      skyjoin generate uniform -n 1000000 -d 2 --out points.npy
      skyjoin join points.npy --eps 0.5 --out pairs.parquet
      skyjoin generate blobs -n 200000 -d 2 --out blobs.npy
      skyjoin dbscan blobs.npy --eps 0.3 --min-samples 10 --plot clusters.png
      skyjoin generate anticorrelated -n 100000 -d 3 --out cars.csv
      skyjoin skyline cars.csv --min x0,x1 --max x2
      skyjoin bench join --device cpu
      skyjoin warmup
    """


for _cmd in (join_cmd, dbscan_cmd, skyline_cmd, generate_cmd, demo_cmd, bench_cmd, warmup_cmd):
    main.add_command(_cmd)
del _cmd

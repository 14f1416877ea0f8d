"""Options shared by several commands, each defined once.

``DEVICE``, ``PRECISION``, ``COLUMNS`` and ``VERBOSE`` are click decorators;
:func:`distributed_options` adds ``--scheduler`` / ``--local-cluster``;
:func:`column_list` parses a ``--columns`` / ``--min`` / ``--max`` value.
"""

from __future__ import annotations

import logging

import click

__all__ = ["DEVICE", "PRECISION", "COLUMNS", "VERBOSE", "column_list", "distributed_options",
           "setup_logging"]

DEVICE = click.option("--device", type=click.Choice(["auto", "cpu", "gpu"]), default=None,
                      help="Where to run: the GPU when CuPy finds one ('auto', the default, "
                           "or $SKYJOIN_DEVICE), or force 'cpu' / 'gpu'.")
PRECISION = click.option("--precision", type=click.Choice(["float64", "float32"]),
                         default="float64", show_default=True,
                         help="Working precision of the distance test.")
COLUMNS = click.option("--columns", default=None,
                       help="Comma-separated column names or 0-based positions to use "
                            "(default: every column).")
VERBOSE = click.option("-v", "--verbose", count=True, help="Log more (-v info, -vv debug).")


def column_list(spec):
    """'a,b,3' -> ['a', 'b', 3] (0-based positions as ints); None stays None.

    Empty entries are skipped; a negative number is a position from the end.
    """
    if spec is None:
        return None
    out = []
    for s in spec.split(","):
        s = s.strip()
        if s:
            out.append(int(s) if s.lstrip("-").isdigit() else s)
    return out


def setup_logging(verbose: int) -> None:
    """Log to standard error: -v info, -vv debug (nothing without -v)."""
    if verbose:
        logging.basicConfig(level=logging.DEBUG if verbose > 1 else logging.INFO,
                            format="%(levelname)s %(name)s: %(message)s")


def distributed_options(fn):
    """Click decorator adding ``--scheduler ADDRESS`` and ``--local-cluster N`` to a command."""
    fn = click.option("--local-cluster", "local_cluster", type=click.IntRange(min=1),
                      default=None, metavar="N",
                      help="Run on a local Dask cluster of N workers (with --device gpu: one "
                           "worker per GPU, N GPUs).")(fn)
    fn = click.option("--scheduler", "scheduler", default=None, metavar="ADDRESS",
                      help="Run on the Dask cluster whose scheduler is at ADDRESS "
                           "(e.g. tcp://10.0.0.1:8786); the workers read the input file "
                           "themselves.")(fn)
    return fn

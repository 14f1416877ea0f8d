"""Options shared by several commands, each defined once.

``DEVICE``, ``PRECISION``, ``METRIC``, ``DEGREES``, ``COLUMNS`` and
``VERBOSE`` are click decorators;
:data:`EPS` is the type of every eps (a finite number > 0: anything else is
a usage error); :func:`distributed_options` adds ``--scheduler`` /
``--local-cluster``; :func:`column_list` parses a ``--columns`` / ``--min``
/ ``--max`` value; :func:`show_progress` says whether to draw progress bars
(on a terminal only, unless ``--progress`` / ``--no-progress`` says).

:func:`operator_clock` times an operator call without the kernel compiles
in it (:func:`compile_note` says how long they took).  The first call of an
operator in a process also loads its engine and kernels (imports, Numba's
cache, the GPU's start): the commands make it on the first
:data:`WARM_ROWS` rows, untimed, and report its time apart
(:func:`kernel_note`), so that the time printed is the operator's, as on
every later run.

Verbosity: ``-v`` (on ``skyjoin`` or on any command, counted together)
logs each operator's plan and the command's phases with their times
(:func:`phase`) on standard error; ``-vv`` also shows the traceback of an
error (:mod:`skyjoin.cli.errors`).  Only the ``skyjoin`` loggers are
configured, never the root logger (Numba's debug output stays off).
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import time

import click

from .._core import compiling

__all__ = ["DEVICE", "PRECISION", "METRIC", "METRICS", "DEGREES", "COLUMNS", "VERBOSE", "EPS", "PROGRESS", "column_list",
           "distributed_options", "setup_logging", "verbosity", "phase", "operator_clock",
           "compile_note", "kernel_note", "show_progress", "number_list", "ran_on", "WARM_ROWS"]

_VERBOSITY_KEY = "skyjoin.verbosity"
#: rows of the untimed first call that loads (or compiles) an operator's kernels
WARM_ROWS = 256
log = logging.getLogger("skyjoin.cli")

DEVICE = click.option("--device", type=click.Choice(["auto", "cpu", "gpu"]), default=None,
                      help="Where to run: the GPU when CuPy finds one ('auto', the default, "
                           "or $SKYJOIN_DEVICE), or force 'cpu' / 'gpu'.")
PRECISION = click.option("--precision", type=click.Choice(["float64", "float32"]),
                         default="float64", show_default=True,
                         help="Working precision of the distance test.")
#: the distances of ``--metric`` (scikit-learn's names and meanings)
METRICS = ("euclidean", "manhattan", "chebyshev", "haversine", "cosine")
METRIC = click.option("--metric", type=click.Choice(METRICS), default="euclidean",
                      show_default=True,
                      help="The distance, as scikit-learn defines it.  haversine: two "
                           "columns (lat, lon) in radians (or --degrees), eps a great-circle "
                           "distance in radians (km / 6371.0088); cosine: 1 - cos(angle).")
DEGREES = click.option("--degrees", is_flag=True,
                       help="With --metric haversine: the two columns are (lat, lon) in "
                            "degrees, converted to radians on reading (eps stays in radians).")
COLUMNS = click.option("--columns", default=None, metavar="COLS",
                       help="Comma-separated column names or 0-based positions to use "
                            "(default: every column; all must hold numbers).")
PROGRESS = click.option("--progress/--no-progress", default=None,
                        help="Progress bar on standard error (default: when it is a terminal).")


class _Eps(click.ParamType):
    """A join radius: a finite number > 0 (NaN, inf, 0 and negatives are usage errors)."""

    name = "eps"

    def convert(self, value, param, ctx):
        if isinstance(value, float) and math.isfinite(value) and value > 0:
            return value
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not (math.isfinite(x) and x > 0):
            self.fail(f"{value!r}: eps must be a finite number > 0", param, ctx)
        return x


#: The type of ``--eps``.
EPS = _Eps()


def number_list(spec: str, option: str, kind=float) -> list:
    """Parse "0.1,0.2" into a list of ``kind`` for ``option``: every entry a
    finite eps (float) or an integer >= 1 (int), else a usage error naming
    the option and the entry."""
    out = []
    for s in spec.split(","):
        s = s.strip()
        if not s:
            continue
        try:
            v = EPS.convert(s, None, None) if kind is float else int(s)
        except (click.BadParameter, ValueError):
            what = "a finite number > 0" if kind is float else "an integer >= 1"
            raise click.BadParameter(f"every entry must be {what}, got {s!r} in {spec!r}",
                                     param_hint=f"'{option}'") from None
        if kind is int and v < 1:
            raise click.BadParameter(f"every entry must be an integer >= 1, got {s!r} in "
                                     f"{spec!r}", param_hint=f"'{option}'")
        out.append(v)
    if not out:
        raise click.BadParameter(f"no value in {spec!r}", param_hint=f"'{option}'")
    return out


def ran_on(plans) -> str | None:
    """The device of the last plan an operator reported (the one that ran;
    see :func:`skyjoin._core.plans.recording`), or None if none reported
    one: the command line never decides the device again."""
    return getattr(plans[-1], "device", None) if plans else None


def show_progress(progress: bool | None) -> bool:
    """Whether to draw progress bars: as ``--progress`` / ``--no-progress``
    say, else only when standard error is a terminal (never into a file or
    a pipe)."""
    if progress is not None:
        return progress
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _count_verbosity(ctx, param, value):
    """Add this option's -v count to the command line's and set up logging."""
    root = ctx.find_root()
    total = root.meta.get(_VERBOSITY_KEY, 0) + (value or 0)
    root.meta[_VERBOSITY_KEY] = total
    setup_logging(total)


VERBOSE = click.option("-v", "--verbose", count=True, expose_value=False, is_eager=True,
                       callback=_count_verbosity,
                       help="-v: log the plan and the phases with their times; "
                            "-vv: also the traceback of an error.")


def verbosity() -> int:
    """The number of -v given on the command line (0 outside a command)."""
    ctx = click.get_current_context(silent=True)
    return ctx.find_root().meta.get(_VERBOSITY_KEY, 0) if ctx is not None else 0


@contextlib.contextmanager
def phase(name: str):
    """Log ``name`` and its wall time (``-v``) when the block ends."""
    t0 = time.perf_counter()
    yield
    log.info("%s: %.3f s", name, time.perf_counter() - t0)


@contextlib.contextmanager
def operator_clock():
    """Time an operator call without the kernel compiles it triggers.

    Yields a dict that is filled when the block ends: ``seconds``, the
    block's wall time less the wall time spent compiling kernels, and
    ``compile``, that compile time (0 once Numba's cache holds the
    kernels).  The commands print the two apart (:func:`compile_note`), so
    that a first run's timing is the operator's, as on every later run.
    """
    out: dict = {}
    t0 = time.perf_counter()
    with compiling.record() as events:
        yield out
    out["compile"] = compiling.compile_wall(events)
    out["seconds"] = max(0.0, time.perf_counter() - t0 - out["compile"])


def compile_note(seconds: float) -> str:
    """' (+N s compiling kernels, once)' when ``seconds`` is worth saying, else ''."""
    return f" (+{seconds:.1f} s compiling kernels, once)" if seconds >= 0.05 else ""


def kernel_note(warm: dict, clock: dict) -> str:
    """The note for a first call's one-time cost, apart from the operator's
    time, from the :func:`operator_clock` of the untimed first call
    (``warm``) and of the operator's (``clock``): ' (+N s compiling kernels,
    once)' when kernels compiled in either, else ' (+N s loading kernels,
    once)' (Numba's cache, imports, the GPU's start) when that is worth
    saying, else ''."""
    compile_s, load_s = warm["compile"] + clock["compile"], warm["seconds"]
    if compile_s >= 0.05:
        return f" (+{compile_s + load_s:.1f} s compiling kernels, once)"
    return f" (+{load_s:.1f} s loading kernels, once)" if load_s >= 0.05 else ""


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
    """With ``verbose`` >= 1, the ``skyjoin`` loggers print to standard error
    at debug level (the plans are logged there); without -v, whatever an
    earlier command line of this process set up is undone.  The one-time
    compile notice (logger ``skyjoin.compile``) goes to standard error
    either way, once."""
    notice = logging.getLogger("skyjoin.compile")
    if not any(isinstance(h, _EchoHandler) for h in notice.handlers):
        handler = _EchoHandler()
        handler.setFormatter(logging.Formatter("skyjoin: %(message)s"))
        notice.addHandler(handler)
        notice.propagate = False
    logger = logging.getLogger("skyjoin")
    ours = [h for h in logger.handlers if isinstance(h, _EchoHandler)]
    if not verbose:                   # a new command line without -v (tests run many)
        for h in ours:
            logger.removeHandler(h)
        if ours:
            logger.setLevel(logging.NOTSET)
        return
    logger.setLevel(logging.DEBUG)
    if not ours:
        handler = _EchoHandler()
        handler.setFormatter(logging.Formatter("skyjoin: %(message)s"))
        logger.addHandler(handler)


class _EchoHandler(logging.Handler):
    """Log records to the standard error of the moment (click.echo)."""

    def emit(self, record) -> None:
        click.echo(self.format(record), err=True)


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

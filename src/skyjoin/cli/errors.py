"""One error style for every command.

Two kinds of mistakes, two answers, the same in every command:

* the command line itself is wrong (a missing, malformed, out-of-range or
  conflicting option, an unknown column, an ``--out`` whose extension is not
  written or whose folder is missing or read-only): click's usage error,
  raised as :class:`click.UsageError` / :class:`click.BadParameter`, exit
  status 2; ``--out`` and ``--plot`` are checked before any computation
  (:func:`skyjoin.cli.outputs.check_out`);
* the library or the system refuses the data or the request
  (:data:`USER_ERRORS`: a ``ValueError``, ``TypeError``,
  :class:`GPUUnavailableError`, ``OSError`` or ``MemoryError``, the result
  guard's error included): one line ``Error: <message>`` on standard error,
  exit status 1, no traceback.

The second is raised as ``SystemExit("Error: ...")`` (what ``sys.exit(msg)``
does), so that a caller that runs the command in-process (click's test
runner) still finds the message in the exception.  With ``-vv`` the error
propagates instead, traceback and all.
"""

from __future__ import annotations

import functools

from .._core.device import GPUUnavailableError
from .options import verbosity

__all__ = ["USER_ERRORS", "user_errors", "error_line"]

#: Exceptions that mean "your data, request or system", not "a bug".
USER_ERRORS = (ValueError, TypeError, GPUUnavailableError, OSError, MemoryError)


def error_line(exc: BaseException) -> str:
    """The one line that reports ``exc``: ``Error: <message>``, a message of
    several lines joined into one; an exception without text is named by its
    class (``Error: MemoryError``)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return "Error: " + (" ".join(lines) if lines else type(exc).__name__)


def user_errors(fn):
    """Decorate a command's function: a :data:`USER_ERRORS` exception ends
    the command with one ``Error: <message>`` line and exit status 1 (with
    ``-vv``, the exception and its traceback)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except USER_ERRORS as exc:
            if verbosity() >= 2:
                raise
            raise SystemExit(error_line(exc)) from exc

    return wrapper

"""One error style for every command.

Two kinds of mistakes, two answers, the same in every command:

* the command line itself is wrong (a missing, malformed or conflicting
  option, an unknown column or output extension): click's usage error,
  raised as :class:`click.UsageError` / :class:`click.BadParameter`, exit
  status 2;
* the library refuses the data or the request (:data:`USER_ERRORS`: a
  ``ValueError``, ``TypeError`` or :class:`GPUUnavailableError`): one line
  ``Error: <message>`` on standard error, exit status 1, no traceback.

The second is raised as ``SystemExit("Error: ...")`` (what ``sys.exit(msg)``
does), so that a caller that runs the command in-process (click's test
runner) still finds the message in the exception.
"""

from __future__ import annotations

import functools

from .._core.device import GPUUnavailableError

__all__ = ["USER_ERRORS", "user_errors"]

#: Exceptions of the library that mean "your data or request", not "a bug".
USER_ERRORS = (ValueError, TypeError, GPUUnavailableError)


def user_errors(fn):
    """Decorate a command's function: a :data:`USER_ERRORS` exception ends
    the command with one ``Error: <message>`` line and exit status 1."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except USER_ERRORS as exc:
            raise SystemExit(f"Error: {exc}") from exc

    return wrapper

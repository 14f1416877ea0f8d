"""One error style and one set of exit statuses for every command.

The rule, the same in every command:

===========  ===============================================================
exit status  when
===========  ===============================================================
0            done
1            the data or the system refuses the request (:data:`USER_ERRORS`:
             a value that is not a number, a missing or NaN value, ragged
             rows, a file that cannot be read, a GPU that is not there, a
             result too large, a disk that is full): one line
             ``Error: <message>`` on standard error, no traceback
2            the command line itself is wrong: a missing, malformed, out of
             range (NaN included) or conflicting option, an unknown column,
             an input file that does not exist, an ``--out`` whose
             extension is not written or whose folder is missing or
             read-only.  Click's usage error (:class:`click.UsageError` /
             :class:`click.BadParameter`): the usage line, then one
             ``Error:`` line, before any work is done
130          interrupted (Ctrl-C, SIGINT), at any point after the command
             started, its imports included: one line on standard error, no
             traceback
141          standard output was closed early (``skyjoin ... | head -1``):
             nothing more is written, no message (the status a shell reports
             for a tool ended by SIGPIPE)
===========  ===============================================================

Data errors are raised as ``SystemExit("Error: ...")`` (what ``sys.exit(msg)``
does) by :func:`user_errors`, so that a caller that runs the command
in-process (click's test runner) still finds the message in the exception.
With ``-vv`` they propagate instead, traceback and all.  The statuses 130 and
141 are set by :class:`SkyjoinGroup`, the class of the ``skyjoin`` command
(``main``).
"""

from __future__ import annotations

import functools
import os
import sys

import click

from ..errors import GPUUnavailableError
from .options import verbosity
from .statuses import (EXIT_BROKEN_PIPE, EXIT_DATA, EXIT_INTERRUPTED, EXIT_USAGE,
                       INTERRUPTED_LINE)

__all__ = ["USER_ERRORS", "EXIT_DATA", "EXIT_USAGE", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE",
           "INTERRUPTED_LINE", "user_errors", "error_line", "SkyjoinGroup"]

#: Exceptions that mean "your data, request or system", not "a bug".
USER_ERRORS = (ValueError, TypeError, GPUUnavailableError, OSError, MemoryError)


#: The one line printed on Ctrl-C.


def error_line(exc: BaseException) -> str:
    """The one line that reports ``exc``: ``Error: <message>``, a message of
    several lines joined into one; an exception without text is named by its
    class (``Error: MemoryError``)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return "Error: " + (" ".join(lines) if lines else type(exc).__name__)


def user_errors(fn):
    """Decorate a command's function: a :data:`USER_ERRORS` exception ends
    the command with one ``Error: <message>`` line and exit status 1 (with
    ``-vv``, the exception and its traceback).  A closed standard output
    (:class:`BrokenPipeError`) is not a data error: it passes on to
    :class:`SkyjoinGroup`."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BrokenPipeError:
            raise
        except USER_ERRORS as exc:
            if verbosity() >= 2:
                raise
            raise SystemExit(error_line(exc)) from exc

    return wrapper


class _Interrupted(BaseException):
    """Ctrl-C inside a command, carried past click's own handler (which
    would print "Aborted!" and exit 1)."""


class _PipeClosed(BaseException):
    """Standard output closed, carried past click's own handler (which
    exits 1, the status of a data error)."""


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's last
    flush at exit does not fail again (the Python documentation's recipe
    for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):   # no file descriptor (a test runner's)
        pass


class SkyjoinGroup(click.Group):
    """The ``skyjoin`` command group: click's, with the exit statuses 130
    (Ctrl-C) and 141 (closed standard output) of the module's rule.

    Ctrl-C is caught from the moment the group's :meth:`main` runs, so it
    covers every command's own (lazy) imports; a Ctrl-C while
    ``skyjoin.cli`` imports its modules is caught there, with the same line
    and status, so only the interpreter's start comes before.
    """

    def invoke(self, ctx):
        """Run the command; its return value is not an exit status (None)."""
        try:
            super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise _Interrupted() from exc
        except BrokenPipeError as exc:
            raise _PipeClosed() from exc

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            try:
                code = super().main(args, prog_name, complete_var, standalone_mode=False,
                                    **extra)
                code = code or 0            # an int only from click.exceptions.Exit (--help)
            except click.ClickException as exc:
                exc.show()
                code = exc.exit_code
            except click.Abort as exc:
                if isinstance(exc.__context__, KeyboardInterrupt):  # while the line is parsed
                    raise _Interrupted() from exc
                _echo_err("Aborted!")                   # click's own abort, as click says it
                code = EXIT_DATA
            sys.stdout.flush()                          # a closed pipe shows here at the latest
        except (_Interrupted, KeyboardInterrupt):
            _echo_err(INTERRUPTED_LINE)
            code = EXIT_INTERRUPTED
        except (_PipeClosed, BrokenPipeError):
            _quiet_stdout()
            code = EXIT_BROKEN_PIPE
        sys.exit(code)


def _echo_err(line: str) -> None:
    """Write one line on standard error, whatever state it is in."""
    try:
        click.echo(line, err=True)
    except (OSError, ValueError):
        pass

"""The command's exit statuses and its Ctrl-C line (the rule is
:mod:`skyjoin.cli.errors`'s).  This module imports nothing, so that
``skyjoin.cli`` can report a Ctrl-C that arrives while its own modules load.
"""

__all__ = ["EXIT_DATA", "EXIT_USAGE", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE",
           "INTERRUPTED_LINE"]

EXIT_DATA = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

INTERRUPTED_LINE = "Interrupted (Ctrl-C)."

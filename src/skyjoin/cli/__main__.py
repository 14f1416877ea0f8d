"""``python -m skyjoin.cli``: the ``skyjoin`` command."""

from . import main

main()

"""``python -m skyjoin.cli``: the ``skyjoin`` command (as ``python -m skyjoin``)."""

from . import main

if __name__ == "__main__":
    main(prog_name="skyjoin")

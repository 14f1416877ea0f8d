"""``python -m skyjoin``: the ``skyjoin`` command."""

from skyjoin.cli import main

if __name__ == "__main__":
    main(prog_name="skyjoin")

"""``python -m nacelle``: the same as the ``nacelle`` command.

Imports the standard library and ``nacelle.cli``."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())

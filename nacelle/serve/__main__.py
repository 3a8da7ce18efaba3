"""``python -m nacelle.serve MODULE:FACTORY``: see :func:`nacelle.serve.main`.

Imports the standard library and the sibling ``server``."""

import sys

from .server import main

if __name__ == "__main__":
    sys.exit(main())

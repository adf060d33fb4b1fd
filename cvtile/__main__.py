"""``python -m cvtile``: the command line (see ``cvtile.cli``)."""

import sys

from .cli import main

sys.exit(main())

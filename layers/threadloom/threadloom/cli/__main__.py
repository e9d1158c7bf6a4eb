"""``python -m threadloom.cli``: the same as the ``threadloom`` command."""

import sys

from threadloom.cli import main

sys.exit(main())

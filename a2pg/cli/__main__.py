"""``python -m a2pg.cli``: the same as the ``a2pg`` command."""

import sys

from .main import main

sys.exit(main())

"""``python -m envelope``: the same as the ``envelope`` command."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())

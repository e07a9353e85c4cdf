"""``python -m agent_ref``: the same as the ``agent-ref`` command."""

from __future__ import annotations

import sys

from .cli.commands import main

sys.exit(main())

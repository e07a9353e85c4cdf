"""``agent-ref serve`` with ``--subagents demo``, for the browser tests, until the CLI has the flag.

``python serve_page.py --db DB --port 0 --subagents demo [--token T]`` takes ``agent-ref
serve``'s own arguments (the parser is the CLI's) and runs the CLI's own ``serve_main``:
the same SQLite store, file journal, scripted model and default tools, and the same
"agent-ref: serving on URL" line on stderr. The one addition: ``--subagents demo``
registers ``demo_subagents()`` (a researcher with the frontend ``confirm`` tool), as
``agent-ref run`` does. When the CLI's parser already knows ``--subagents``, this file
adds nothing and only runs the CLI; the tests then call ``agent-ref serve`` directly
(``serve_command()`` in ``agent_server.py`` checks its help) and this file can go.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agent_ref import server
from agent_ref.subagents import demo_subagents


def main(argv: list[str] | None = None) -> int:
    """Parse ``agent-ref serve``'s arguments (plus ``--subagents demo``) and serve until stopped."""
    parser = argparse.ArgumentParser(prog="agent-ref serve")
    server._serve_arguments(parser)  # the CLI's own arguments, nothing re-declared
    if any("--subagents" in action.option_strings for action in parser._actions):
        return server.serve_main(parser.parse_args(argv))  # the CLI has the flag: nothing to add
    parser.add_argument("--subagents", choices=["demo"], default=None, help="register demo_subagents()")
    args = parser.parse_args(argv)
    if args.subagents == "demo":
        make = server.create_app

        def with_subagents(**kwargs: Any) -> Any:
            config = dict(kwargs.pop("agent_config", None) or {})
            config["subagents"] = demo_subagents()
            return make(agent_config=config, **kwargs)

        server.create_app = with_subagents  # serve_main looks it up when it runs
    return server.serve_main(args)


if __name__ == "__main__":
    sys.exit(main())

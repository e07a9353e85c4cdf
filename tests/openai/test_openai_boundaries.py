"""The OpenAI translators are sans-I/O: no SDK, no HTTP client, no event loop ([O1-a])."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "envelope"
MODULES = ["openai.py", "_openai_common.py", "_openai_chat.py", "_openai_responses.py", "_openai_convert.py"]
FORBIDDEN = {"openai", "httpx", "httpx2", "asyncio", "anyio", "socket", "urllib", "http", "starlette", "anthropic"}


def test_the_modules_import_no_io_library() -> None:
    """[O1-a] read from the source: every import, deferred ones included."""
    for name in MODULES:
        tree = ast.parse((SRC / name).read_text())
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
        assert not found & FORBIDDEN, (name, found & FORBIDDEN)


def test_importing_and_translating_loads_no_sdk() -> None:
    """[O1-a] a capture translates with the SDK installed but never imported."""
    code = (
        "import sys\n"
        "from envelope.openai import ChatTranslator, ResponsesTranslator\n"
        "t = ChatTranslator('a')\n"
        "t.feed({'object': 'chat.completion.chunk', 'model': 'm', 'choices': "
        "[{'index': 0, 'delta': {'content': 'hi'}, 'finish_reason': 'stop'}]})\n"
        "ResponsesTranslator('a').feed({'type': 'response.created', 'response': {'id': 'r'}})\n"
        "bad = {'openai', 'httpx2', 'httpx', 'asyncio'} & set(sys.modules)\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

"""Rewrite ``fixtures/golden/`` from ``golden_cases.py``. Run by hand, then review the diff.

    .venv/bin/python tests/golden/regen.py

CI never runs this: the golden tests compare the committed files with what the code
produces now, and fail on any drift.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent.parent / "src")]

from envelope import DONE, frame  # noqa: E402  # after the path set-up above
from golden.golden_cases import CASES  # noqa: E402  # after the path set-up above

OUT = HERE.parent.parent / "fixtures" / "golden"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    index = []
    for make in CASES:
        case = make()
        folder = OUT / case.name
        folder.mkdir(exist_ok=True)
        (folder / "envelopes.jsonl").write_bytes(b"".join(line + b"\n" for line in case.lines))
        (folder / "input.sse").write_bytes(b"".join(frame(line) for line in case.lines) + DONE)
        (folder / "blocks.json").write_text(json.dumps(case.blocks(), indent=2, ensure_ascii=False) + "\n")
        index.append(f"| `{case.name}` | {case.max_bytes} | {case.about} |")
    readme = [
        "# Golden streams",
        "",
        "Each folder: `envelopes.jsonl` (one envelope per line), `input.sse` (the same, framed, then `[DONE]`),",
        "`blocks.json` (what it rebuilds to, spec §7.6). Written by `tests/golden/regen.py`; CI only compares.",
        "",
        "| case | max_bytes | what |",
        "| --- | --- | --- |",
        *index,
        "",
    ]
    (OUT / "README.md").write_text("\n".join(readme))
    print(f"wrote {len(index)} cases to {OUT.relative_to(Path.cwd()) if OUT.is_relative_to(Path.cwd()) else OUT}")


if __name__ == "__main__":
    main()

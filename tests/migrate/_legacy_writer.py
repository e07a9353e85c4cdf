"""A small legacy XML *writer* that follows the legacy format (spec/legacy-xml.md) for both eras.

Test-only. It renders blocks (in the shape ``envelope reconstruct`` prints) as the old
server wrote them, so that a property can check migrate(write(blocks)) == blocks.
"""

from __future__ import annotations

import html
import json
from typing import Any, Literal

Era = Literal["early", "later"]


def _attr(value: str) -> str:
    return html.escape(value, quote=True)


def _later(text: str) -> str:
    """The later era's scheme for text, thinking and the formatter's own tags."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _later_client(text: str) -> str:
    """The later era's scheme for client tool result bodies."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return text.replace("]]>", "]]]]><![CDATA[>")


def write(blocks: list[dict[str, Any]], era: Era) -> list[str]:
    """Render ``blocks`` as the chunks the old server wrote (open tag, deltas, close tag...)."""
    own = _later if era == "later" else (lambda s: s)
    chunks: list[str] = []
    for block in blocks:
        kind = block["type"]
        if kind in ("meta_init", "meta_final", "awaiting_frontend_tools"):
            chunks.append(f'<{kind} data="{_attr(json.dumps(block["data"]))}"></{kind}>')
        elif kind in ("thinking", "text"):
            tag = f"content-block-{kind}"
            chunks.append(f"<{tag}>")
            chunks.extend(own(d) for d in block["deltas"])
            chunks.append(f"</{tag}>")
            if kind == "text" and block["citations"]:
                parts = ["<citations>"]
                for c in block["citations"]:
                    attrs = [f'type="{_attr(c["citation_type"])}"']
                    attrs += [
                        f'{k}="{_attr(str(v))}"' for k, v in c.items() if k not in ("cited_text", "citation_type")
                    ]
                    parts.append(f"<citation {' '.join(attrs)}><![CDATA[{c['cited_text']}]]></citation>")
                parts.append("</citations>")
                chunks.append(own("".join(parts)))
        elif kind in ("tool_call", "server_tool_call"):
            tag = f"content-block-{kind}"
            args = _attr(json.dumps(block["input"]))
            chunks.append(
                own(f'<{tag} id="{_attr(block["id"])}" name="{_attr(block["name"])}" arguments="{args}"></{tag}>')
            )
        elif kind == "tool_result":
            body = block["content"] if era == "early" else _later_client(block["content"])
            head = f'<content-block-tool_result id="{_attr(block["id"])}" name="{_attr(block["name"])}">'
            if block["images"]:
                images = "".join(
                    f'<image src="{_attr(i["src"])}" media_type="{_attr(i["media_type"])}" />' for i in block["images"]
                )
                chunks.append(f"{head}<text><![CDATA[{body}]]></text>{images}</content-block-tool_result>")
            else:
                chunks.append(f"{head}<![CDATA[{body}]]></content-block-tool_result>")
        elif kind == "server_tool_result":
            tag = "content-block-server_tool_result"
            chunks.append(
                own(
                    f'<{tag} id="{_attr(block["id"])}" name="{_attr(block["name"])}">'
                    f"<![CDATA[{block['content']}]]></{tag}>"
                )
            )
        elif kind == "meta_files":
            body = json.dumps(block["data"], indent=2)  # pretty-printed, raw LFs, in both eras
            chunks.append(f"<content-block-meta_files><![CDATA[{body}]]></content-block-meta_files>")
        elif kind == "error":
            chunks.append(own(f"<content-block-error><![CDATA[{json.dumps(block['data'])}]]></content-block-error>"))
        else:  # pragma: no cover - the strategies make only the types above
            raise AssertionError(kind)
    return chunks


def frame_raw_sse(chunks: list[str], *, done: bool = True) -> bytes:
    """Frame chunks the old server's way: ``data: `` + chunk + a blank line, newlines untouched."""
    records = [f"data: {c}\n\n" for c in chunks]
    if done:
        records.append("data: [DONE]\n\n")
    return "".join(records).encode("utf-8")


def expected(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The blocks as ``Block.to_dict`` gives them back."""
    out: list[dict[str, Any]] = []
    for block in blocks:
        kind = block["type"]
        item: dict[str, Any] = {"type": kind, "complete": True}
        if kind in ("thinking", "text"):
            item["content"] = "".join(block["deltas"])
            if kind == "text":
                item["citations"] = [dict(c) for c in block["citations"]]
        elif kind in ("tool_call", "server_tool_call"):
            item.update(id=block["id"], name=block["name"], input=block["input"])
        elif kind == "tool_result":
            item.update(id=block["id"], name=block["name"], content=block["content"], images=block["images"])
        elif kind == "server_tool_result":
            item.update(id=block["id"], name=block["name"], content=block["content"])
        elif kind == "meta_init":
            # §M6.3: a migrated stream says it is JSON and keeps its origin.
            item["data"] = {**block["data"], "format": "json", "migrated_from": "xml"}
        else:
            item["data"] = block["data"]
        out.append(item)
    return out

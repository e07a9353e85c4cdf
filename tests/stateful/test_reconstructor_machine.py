"""A Hypothesis state machine drives a Reconstructor line by line against a plain model.

After every line, ``transcript()`` must equal the model, open blocks included (spec §7:
the state is visible at any moment, even mid-block).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from envelope import CitationData, Emitter, ImageRef, Reconstructor

AGENTS = ("parent", "child-1", "child-2")
texts = st.text(max_size=40)


class ReconstructorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.rec = Reconstructor()
        self.emitters = {a: Emitter(a, 120) for a in AGENTS}
        #: agent -> list of block dicts, as spec §7.6 shows them
        self.model: dict[str, list[dict[str, Any]]] = {}
        #: (agent, type) -> index into model[agent] of the open block
        self.open: dict[tuple[str, str], int] = {}
        self.last_text: dict[str, int] = {}

    def _send(self, lines: list[bytes]) -> None:
        for line in lines:
            self.rec.feed(line)

    def _block(self, agent: str, kind: str, **fields: Any) -> int:
        key = (agent, kind)
        if key not in self.open:
            self.model.setdefault(agent, []).append({"type": kind, "complete": False, **fields})
            self.open[key] = len(self.model[agent]) - 1
        return self.open[key]

    @rule(agent=st.sampled_from(AGENTS), kind=st.sampled_from(["text", "thinking"]), delta=texts)
    def stream(self, agent: str, kind: str, delta: str) -> None:
        lines = self.emitters[agent].streamed(kind, delta)  # type: ignore[arg-type]  # a streamed type
        if not lines:
            return
        extra: dict[str, Any] = {"content": ""}
        if kind == "text":
            extra["citations"] = []
        i = self._block(agent, kind, **extra)
        self.model[agent][i]["content"] += delta
        self._send(lines)

    @rule(agent=st.sampled_from(AGENTS), kind=st.sampled_from(["text", "thinking"]))
    def end(self, agent: str, kind: str) -> None:
        extra: dict[str, Any] = {"content": ""}
        if kind == "text":
            extra["citations"] = []
        i = self._block(agent, kind, **extra)
        self.model[agent][i]["complete"] = True
        del self.open[(agent, kind)]
        if kind == "text":
            self.last_text[agent] = i
        self._send([self.emitters[agent].end(kind)])  # type: ignore[arg-type]  # a streamed type

    @rule(agent=st.sampled_from(AGENTS), payload=texts, n=st.integers(0, 2))
    def tool_result(self, agent: str, payload: str, n: int) -> None:
        if (agent, "tool_result") in self.open:
            return
        images = [ImageRef(src=f"https://e.x/{k}.png", media_type="image/png") for k in range(n)]
        self.model.setdefault(agent, []).append(
            {
                "type": "tool_result",
                "complete": True,
                "id": "t",
                "name": "n",
                "content": payload,
                "images": [{"src": i.src, "media_type": i.media_type} for i in images],
            }
        )
        self._send(self.emitters[agent].tool_result("t", "n", payload, images))

    @precondition(lambda self: bool(self.last_text))
    @rule(data=st.data(), cited=st.lists(texts, min_size=1, max_size=3))
    def citations(self, data: st.DataObject, cited: list[str]) -> None:
        agent = data.draw(st.sampled_from(sorted(self.last_text)))
        i = self.last_text[agent]
        items = [CitationData(cited_text=c, citation_type="char_location", start_char_index=0) for c in cited]
        self.model[agent][i]["citations"] += [
            {"cited_text": c, "citation_type": "char_location", "start_char_index": 0} for c in cited
        ]
        self._send(self.emitters[agent].citations(items))

    @invariant()
    def transcript_matches_model(self) -> None:
        got = self.rec.transcript().to_dict()
        assert got["done"] is False
        assert {a: v["blocks"] for a, v in got["agents"].items()} == self.model
        assert sorted(self.rec.open_blocks()) == sorted(self.open)


TestReconstructorMachine = ReconstructorMachine.TestCase

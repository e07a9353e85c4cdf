"""The embedded offline model: deterministic, driven by the prompt, spoken through the real SDK.

Owns: ``ScriptedModel``, a fake Messages API behind an ``httpx2.MockTransport``. The
agent talks to it with a real ``anthropic.AsyncAnthropic`` client, so requests are
built and responses are parsed by the SDK exactly as with Claude; nothing leaves the
process and no key is needed. Also ``Fault``: failures to inject per request (HTTP
529/500/429, a stream cut mid-way, an ``error`` event mid-stream), for retry tests.
Does not own: the agent loop. What it answers (spec ``spec/agent-ref.md`` §8):

* arithmetic in the prompt and a ``calculator`` tool: thinking, a short text and a
  ``calculator`` call; after the result, the answer;
* "confirm" in the prompt and a ``confirm`` tool: a ``confirm`` call (a frontend tool,
  so the agent pauses); after the result, an answer that depends on it;
  both at once give both calls in one step (a backend and a frontend call);
* "cite"/"source" in the prompt: a text block with a citation;
* "keep calculating": a calculator call every step until ``tool_choice`` is ``none``;
* "long": a multi-kilobyte non-ASCII answer (exercises chunking);
* "Research X in the background [and check on it | and confirm]" with ``spawn_subagent``:
  a background spawn, with "confirm" a ``confirm`` call, with "check" a ``task_status``
  poll, then an end of turn; after a task notification, an answer with the task's result;
* "Join the background task" with ``task_status``: a notification that arrived answers;
  else one ``task_status(wait=true)`` call, then an answer with each task's result;
* "... in parallel, then confirm" with ``spawn_subagent`` and ``confirm``: the spawning
  calls and a ``confirm`` call in one step; a child whose task says "confirm" and that
  has a ``confirm`` tool calls it (a child that pauses the run);
* "... in parallel" with a ``spawn_subagent`` tool: one ``spawn_subagent`` call per topic
  ("Research X and Y in parallel": two); after the results, an answer joining them;
  "research X" alone (a subagent's task): a few streamed sentences of findings on X;
* a summary request (seed 001's summary prompt, spec §15): a ``<summary>`` naming the
  task and how many calculator results there were; a context that is only such a
  summary continues the task it names ("keep calculating" goes on counting);
* "keep repeating" with a ``calculator`` tool: the same call (``1 + 1``) every step, until
  a result is an error (the loop guard's, spec §16); then it says why it stopped;
* "as JSON": a weather report as a JSON object (spec §17); first a prose answer that is
  not JSON, the correct object once told what was wrong ("stubbornly": prose every time);
* "remember that X" with a ``memory`` tool: a ``view`` of ``/memories``, then a ``create``
  of ``/memories/notes.md`` (or a ``str_replace`` adding X under its heading); "what do you
  remember": a ``view`` of that file, then an answer listing its facts (spec §18.5-a);
* "call TOOL with {json}" (any number of such phrases) where each TOOL is among the
  request's tools: those calls, in one step, with the exact JSON objects as input; after
  the results, an answer quoting each result's text ("TOOL gave: ..." or "TOOL failed:
  ..."); a TOOL not offered or an input that is not a JSON object: an answer saying which,
  and no call (spec R8.3-a);
* "use the mcp tools" with a ``mcp__<server>__<tool>`` tool: a call of the first such
  tool with an input built from its schema's required properties ("demo" for a string,
  1 for a number, the first of an enum ...); after the result, an answer quoting it (R8.3-b);
* "delete the draft ['NAME']" with a ``delete_draft`` tool: its call; after the result,
  "Deleted ..." (approved) or, after an ``is_error`` result such as a denial, "I did not
  delete ..." (R8.3-c);
* "count slowly to N" with a ``count_slowly`` tool: a ``count_slowly`` call with ``n``;
  after the result, an answer quoting it (R8.3-d);
* "fix the failing test: read `T`, run `C`, replace `OLD` with `NEW` in `F`" with the
  ``Read``, ``Edit`` and ``Bash`` tools: one call a step (Read T, Bash C, Edit F, Bash C
  again), then an answer saying whether the test passes now (spec [WD1-a]);
* anything else: a short streamed greeting.

It honours ``max_tokens``: it counts a token per 4 characters of output and, at the
budget, cuts the current block (even inside a tool call's JSON) and stops with
``max_tokens``, as the API does.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from envelope._extras import import_failed

try:
    import httpx2
    from anthropic import AsyncAnthropic
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "agent") from None  # pragma: no cover  # in a subprocess (tests/install)

from ..store.state import NOTIFICATION_TAG
from ..tools.demo import evaluate
from .core import SDKModel

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator, Sequence

__all__ = ["Fault", "ScriptedModel", "demo_input"]

#: The name of the scripted model (priced at 0 in ``pricing.PRICES``).
SCRIPTED_MODEL: Final = "scripted"
_ARITH: Final = re.compile(r"[-+(]*\s*\d+(?:\.\d+)?(?:\s*(?:\*\*|//|[-+*/%])\s*[-+(]*\s*\d+(?:\.\d+)?\s*\)*)+\s*\)*")
_ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    529: "overloaded_error",
}
_YES: Final = re.compile(r"\b(yes|y|true|ok|okay|confirm(ed)?|approve(d)?|sure)\b", re.IGNORECASE)
_SPAWN: Final = "spawn_subagent"


def _spawn_input(agent: str, task: str, *, background: bool = False) -> dict[str, Any]:
    """A spawning call's input in the Claude Agent SDK's ``Agent`` tool shape (spec [SA1-a])."""
    made: dict[str, Any] = {"subagent_type": agent, "description": task[:40], "prompt": task}
    if background:
        made["run_in_background"] = True
    return made


_MEMORY: Final = "memory"
_NOTES: Final = "/memories/notes.md"
_NOTES_HEAD: Final = "# Notes\n"
_REMEMBER: Final = re.compile(r"\bremember\s+that\s+(.+?)[.!]*\s*$", re.IGNORECASE | re.DOTALL)
_RECALL: Final = re.compile(r"\bwhat\s+do\s+you\s+(?:remember|know\s+about\s+me)\b", re.IGNORECASE)
_SOURCE_DOC: Final = "The Moon orbits the Earth at an average distance of 384,400 kilometres."


@dataclass(frozen=True, slots=True)
class Fault:
    """A failure to inject into one request.

    Attributes:
        kind: ``status`` (an HTTP error answer), ``cut`` (the stream breaks after
            ``after`` events), ``error_event`` (an ``error`` event after ``after`` events).
        status: the HTTP status of a ``status`` fault.
        after: events sent before a ``cut`` or an ``error_event``.
        error_type: the API error type; derived from ``status`` when omitted.
        retry_after: the value of a ``retry-after`` header on a ``status`` answer.
    """

    kind: Literal["status", "cut", "error_event"] = "status"
    status: int = 529
    after: int = 0
    error_type: str | None = None
    retry_after: str | None = None

    def api_error(self) -> dict[str, Any]:
        """The API error body of this fault."""
        kind = self.error_type or _ERROR_TYPES.get(self.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": f"scripted fault: {kind}"}}


class _CutStream(httpx2.AsyncByteStream):
    """A response body that breaks after its bytes, as a dropped connection does."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self._data
        raise httpx2.ReadError("scripted fault: connection cut mid-stream")


class _EventStream(httpx2.AsyncByteStream):
    """A response body served one SSE event at a time, yielding to the event loop between them.

    So concurrent calls (subagents of one step) interleave as they would over a network.
    """

    def __init__(self, events: Sequence[bytes]) -> None:
        self._events = list(events)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for event in self._events:
            await asyncio.sleep(0)
            yield event


class ScriptedModel(SDKModel):
    """The offline model (see the module docstring), served to a real ``AsyncAnthropic``.

    Args:
        faults: failures for the first requests, one per request, in order; later
            requests succeed. ``None`` entries mean "no fault for this request".
        name: the model name reported and used for prices.

    Attributes:
        requests: the JSON body of every request received (for assertions).
        request_headers: the headers of every request (lower-case names).
    """

    def __init__(self, faults: Sequence[Fault | None] = (), *, name: str = SCRIPTED_MODEL) -> None:
        """See the class docstring."""
        self.faults: list[Fault | None] = list(faults)
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        client = AsyncAnthropic(
            api_key="scripted-offline-no-key",
            base_url="http://scripted.invalid",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self._handle)),
        )
        super().__init__(client, name)

    def _handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content or b"{}")
        self.requests.append(body)
        self.request_headers.append(dict(request.headers))
        fault = self.faults.pop(0) if self.faults else None
        if fault is not None and fault.kind == "status":
            headers = {"request-id": "req_scripted_fault"}
            if fault.retry_after is not None:
                headers["retry-after"] = fault.retry_after
            return httpx2.Response(fault.status, json=fault.api_error(), headers=headers)
        events = list(_Script(body).events())
        headers = {"content-type": "text/event-stream", "request-id": f"req_scripted_{len(self.requests)}"}
        if fault is not None and fault.kind == "cut":
            return httpx2.Response(200, headers=headers, stream=_CutStream(_sse(events[: fault.after])))
        if fault is not None and fault.kind == "error_event":
            data = _sse(events[: fault.after]) + _sse([fault.api_error()])
            return httpx2.Response(200, headers=headers, content=data)
        return httpx2.Response(200, headers=headers, stream=_EventStream([_sse([e]) for e in events]))


def _sse(events: Sequence[dict[str, Any]]) -> bytes:
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps(e, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()
        for e in events
    )


class _Budget(Exception):
    """The output reached ``max_tokens``."""


class _Script:
    """One response: decides what to say from the request, then renders it as stream events."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request
        self.messages: list[dict[str, Any]] = list(request.get("messages") or [])
        self.tools = {str(t.get("name")) for t in request.get("tools") or [] if isinstance(t, dict)}
        choice = request.get("tool_choice") or {}
        self.tools_allowed = bool(self.tools) and choice.get("type") != "none"
        self.max_tokens = int(request.get("max_tokens") or 1024)
        self.model = str(request.get("model") or SCRIPTED_MODEL)
        self.out: list[dict[str, Any]] = []
        self.index = 0
        self.tokens = 0
        self.stop_reason = "end_turn"
        self.prompt, self.results = self._read_history()

    # ---------------------------------------------------------------- reading

    def _read_history(self) -> tuple[str, list[tuple[str, str, bool]]]:
        """The last user prompt text, and the (tool name, result text, is_error) given since."""
        names: dict[str, str] = {}
        prompt = ""
        results: list[tuple[str, str, bool]] = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            if not isinstance(content, list):
                continue
            if message.get("role") == "assistant":
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        names[str(block.get("id"))] = str(block.get("name"))
                continue
            texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
            texts = [t for t in texts if not str(t).startswith(NOTIFICATION_TAG)]  # a task's news is no prompt
            # Results first: a new prompt merged into a turn of results (after an abort) starts afresh.
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    inner = block.get("content")
                    if isinstance(inner, list):
                        text = " ".join(str(b.get("text", "")) for b in inner if isinstance(b, dict))
                    else:
                        text = str(inner or "")
                    name = names.get(str(block.get("tool_use_id")), "?")
                    results.append((name, text, bool(block.get("is_error"))))
            if texts:
                prompt = " ".join(str(t) for t in texts)
                results = []
        return prompt, results

    def result_of(self, name: str) -> tuple[str, bool] | None:
        for tool_name, text, is_error in reversed(self.results):
            if tool_name == name:
                return text, is_error
        return None

    # ---------------------------------------------------------------- deciding

    def events(self) -> Iterator[dict[str, Any]]:
        """All events of the response, ``message_start`` to ``message_stop``."""
        try:
            self._decide()
        except _Budget:
            self.stop_reason = "max_tokens"
        usage_in = max(1, len(json.dumps(self.messages)) // 4)
        yield {
            "type": "message_start",
            "message": {
                "id": "msg_scripted_" + self._digest("msg"),
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": usage_in, "output_tokens": 1},
            },
        }
        yield {"type": "ping"}
        yield from self.out
        yield {
            "type": "message_delta",
            "delta": {"stop_reason": self.stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": max(1, self.tokens)},
        }
        yield {"type": "message_stop"}

    def _decide(self) -> None:
        if self._compaction_summary():
            return
        self._resume_from_summary()
        if _demo_prompt(self):  # spec R8.1-a: the demo prompts first (a JSON input may say "as JSON")
            return
        if self._repeat():
            return
        if self._structured():
            return
        prompt = self.prompt
        lowered = prompt.lower()
        if self._join_background(prompt) or self._background(prompt):
            return
        if self._subagents_and_confirm(prompt):
            return
        if self._subagents(prompt):
            return
        if self._memory(prompt):
            return
        if "keep calculating" in lowered and "calculator" in self.tools:
            done = sum(1 for name, _, _ in self.results if name == "calculator")
            if self.tools_allowed:
                self.text(f"Calculation {done + 1}.")
                self.tool_use("calculator", {"expression": f"{done + 1} + {done + 1}"})
                self.stop_reason = "tool_use"
                return
            self.text(f"I stopped after {done} calculations, as asked to wrap up.")
            return
        match = _ARITH.search(prompt)
        expression = " ".join(match.group(0).split()) if match else None
        wants_confirm = "confirm" in lowered and "confirm" in self.tools
        calls: list[tuple[str, dict[str, Any]]] = []
        if self.tools_allowed:
            if expression and "calculator" in self.tools and self.result_of("calculator") is None:
                calls.append(("calculator", {"expression": expression}))
            if wants_confirm and self.result_of("confirm") is None:
                calls.append(("confirm", {"question": _question(prompt)}))
        if calls:
            names = " and ".join(name for name, _ in calls)
            asked = prompt.strip()[:200].rstrip(".")
            self.thinking(f"The user asked: {asked}. I should use {names} before answering.")
            self.text("Let me use the " + names + (" tools." if len(calls) > 1 else " tool."))
            for name, arguments in calls:
                self.tool_use(name, arguments)
            self.stop_reason = "tool_use"
            return
        self.thinking("I have what I need; time to answer.")
        self._answer(prompt, expression)

    def _compaction_summary(self) -> bool:
        """Answer seed 001's summary request: the task and the calculator results so far (spec §15)."""
        last = self.messages[-1] if self.messages else {}
        asked = [b for b in _content(last) if b.get("type") == "text" and _SUMMARY_ASK in str(b.get("text", ""))]
        if last.get("role") != "user" or not asked:
            return False
        names: dict[str, str] = {}
        task, count, last_result = "", 0, ""
        for message in self.messages:
            for block in _content(message):
                kind = block.get("type")
                if kind == "tool_use":
                    names[str(block.get("id"))] = str(block.get("name"))
                elif kind == "tool_result" and names.get(str(block.get("tool_use_id"))) == "calculator":
                    count += 1
                    last_result = _result_text(block)
                elif kind == "text" and message.get("role") == "user" and _SUMMARY_ASK not in str(block.get("text")):
                    text = str(block.get("text", ""))
                    previous = _summary_fields(text)
                    if previous is not None:
                        task, count = previous[0], count + previous[1]
                    elif not task:
                        task = text.strip()
        self.text(
            f"<summary>\nTASK OVERVIEW: {task}\nCURRENT STATE: {count} calculator results so far"
            f"{'; the last was ' + last_result if last_result else ''}.\n"
            "NEXT STEPS: carry on with the task from where it stopped.\n</summary>"
        )
        return True

    def _resume_from_summary(self) -> None:
        """A context that is only a summary: go on with the task it names, counting its results (spec §15)."""
        said = [
            [str(b.get("text", "")) for b in _content(m) if b.get("type") == "text"]
            for m in self.messages
            if m.get("role") == "user"
        ]
        said = [texts for texts in said if texts]
        texts = said[-1] if said else []
        fields = _summary_fields(texts[0]) if texts else None
        if fields is None:
            return
        if len(texts) > 1:  # a new prompt after the summary: the summary is only context
            self.prompt = " ".join(texts[1:])
            return
        self.prompt = fields[0]
        self.results = [("calculator", "(in the summary)", False)] * fields[1] + self.results

    def _repeat(self) -> bool:
        """ "keep repeating": the same calculator call each step, until a result is an error (spec §16)."""
        if "keep repeating" not in self.prompt.lower() or "calculator" not in self.tools:
            return False
        errors = [text for name, text, is_error in self.results if name == "calculator" and is_error]
        if errors or not self.tools_allowed:
            self.text(f"I stopped repeating the calculation: {errors[-1] if errors else 'no more tool calls'}.")
            return True
        self.text("Let me check that once more.")
        self.tool_use("calculator", {"expression": "1 + 1"})
        self.stop_reason = "tool_use"
        return True

    def _structured(self) -> bool:
        """ "as JSON": prose first, the JSON object once corrected; "stubbornly": prose always (spec §17)."""
        users = [str(b.get("text", "")) for m in self.messages if m.get("role") == "user" for b in _content(m)]
        users = [t for t in users if t]
        if not users or "as json" not in users[0].lower():
            return False
        corrected = "did not match the output schema" in users[-1]
        if corrected and "stubborn" not in users[0].lower():
            self.text(json.dumps({"city": "Paris", "temperature_c": 21, "conditions": "sunny"}))
        else:
            self.text("The weather in Paris is sunny, about 21 degrees.")
        return True

    def _subagents(self, prompt: str) -> bool:
        """Parallel research: spawn one subagent per topic, then join their answers (spec R8.1-b)."""
        topics = _parallel_topics(prompt)
        spawned = [(text, is_error) for name, text, is_error in self.results if name == _SPAWN]
        if not topics or _SPAWN not in self.tools:
            return False
        if spawned:
            self.thinking("The subagents have reported; I will join their findings.")
            parts = [f"({'failed' if is_error else 'ok'}) {text}" for text, is_error in spawned]
            self.text("Here is what the subagents found: " + " | ".join(parts))
            return True
        if not self.tools_allowed:
            return False
        agent = self._spawn_names()[0] if self._spawn_names() else "researcher"
        self.thinking(f"This asks for parallel work on {len(topics)} topics; one subagent each.")
        self.text(f"I will start {len(topics)} subagents in parallel.")
        for topic in topics:
            self.tool_use(_SPAWN, _spawn_input(agent, f"Research {topic}"))
        self.stop_reason = "tool_use"
        return True

    def _memory(self, prompt: str) -> bool:
        """Memory (spec §18.5-a): "remember that X" saves X in the notes file; "what do you remember" reads it."""
        if _MEMORY not in self.tools:
            return False
        done = [(text, is_error) for name, text, is_error in self.results if name == _MEMORY]
        fact_match = _REMEMBER.search(prompt)
        if fact_match:
            fact = " ".join(fact_match.group(1).split())[:500]
            if not done or (len(done) == 1 and not done[0][1]):
                if not self.tools_allowed:
                    return False
                if not done:  # look before writing, as the memory tool's users are told to
                    self.thinking("The user wants me to remember something; first I look at my memory directory.")
                    self.tool_use(_MEMORY, {"command": "view", "path": "/memories"})
                elif re.search(rf"\t{re.escape(_NOTES)}$", done[0][0], re.MULTILINE):
                    self.text("I will add it to my notes.")
                    edit = {"old_str": _NOTES_HEAD, "new_str": f"{_NOTES_HEAD}- {fact}\n"}
                    self.tool_use(_MEMORY, {"command": "str_replace", "path": _NOTES, **edit})
                else:
                    self.text("I will start a notes file.")
                    self.tool_use(
                        _MEMORY, {"command": "create", "path": _NOTES, "file_text": f"{_NOTES_HEAD}- {fact}\n"}
                    )
                self.stop_reason = "tool_use"
                return True
            text, is_error = done[-1]
            self.text(f"I could not save that: {text}" if is_error else f"Noted. I will remember that {fact}.")
            return True
        if not _RECALL.search(prompt):
            return False
        if not done:
            if not self.tools_allowed:
                return False
            self.thinking("The user asks what I remember; I read my notes.")
            self.tool_use(_MEMORY, {"command": "view", "path": _NOTES})
            self.stop_reason = "tool_use"
            return True
        text, is_error = done[-1]
        facts = [m.group(1) for m in re.finditer(r"^\s*\d+\t- (.*)$", text, re.MULTILINE)]
        if is_error:
            self.text(f"I do not remember anything yet ({text}).")
        elif not facts:
            self.text("My notes are empty, so I do not remember anything yet.")
        else:
            self.text("Here is what I remember: " + "; ".join(facts) + ".")
        return True

    def _background(self, prompt: str) -> bool:
        """ "Research X in the background [and check on it]": a background spawn, then news (spec R14.7-a).

        The first step starts the task; with "check" a second polls ``task_status``; then
        the model ends its turn, and once a task notification is in the history it answers
        with the task's result.
        """
        match = re.search(r"research\s+(.+?)\s+in\s+the\s+background", prompt, re.IGNORECASE | re.DOTALL)
        if not match or _SPAWN not in self.tools:
            return False
        topic = match.group(1).strip()[:200]
        notes = self._notifications()
        if notes:
            self.text("The background task reported back: " + " | ".join(notes))
            return True
        spawned = self.result_of(_SPAWN)
        if spawned is None:
            if not self.tools_allowed:
                return False
            agent = (self._spawn_names() or ["researcher"])[0]
            self.text(f"I will research {topic} in the background.")
            self.tool_use(_SPAWN, _spawn_input(agent, f"Research {topic}", background=True))
            self.stop_reason = "tool_use"
            return True
        lowered = prompt.lower()
        if (
            "confirm" in lowered
            and "confirm" in self.tools
            and self.result_of("confirm") is None
            and self.tools_allowed
        ):
            self.text("While it runs, please confirm.")
            self.tool_use("confirm", {"question": _question(prompt)})
            self.stop_reason = "tool_use"
            return True
        polled = self.result_of("task_status")
        if "check" in lowered and "task_status" in self.tools and polled is None and self.tools_allowed:
            task_id = str(json.loads(spawned[0]).get("task_id", "")) if spawned[0].startswith("{") else ""
            self.text("Let me check on the task.")
            self.tool_use("task_status", {"task_id": task_id})
            self.stop_reason = "tool_use"
            return True
        if polled is not None and polled[0].startswith("{"):
            status = json.loads(polled[0])
            if status.get("status") in ("completed", "failed", "killed"):
                self.text(f"The task is {status['status']}: {status.get('result', '')}")
                return True
            self.text(f"The task is {status.get('status')}; I will report when it ends.")
            return True
        self.text(f"The research on {topic} runs in the background; I will report when it ends.")
        return True

    def _join_background(self, prompt: str) -> bool:
        """ "Join the background task": its notification, else a ``task_status(wait=true)`` call (spec [SA3-b])."""
        if not re.search(r"\bjoin\s+the\s+background\s+tasks?\b", prompt, re.IGNORECASE) or (
            "task_status" not in self.tools
        ):
            return False
        notes = self._notifications()
        polled = self.result_of("task_status")
        if notes:
            self.text("The background task reported back: " + " | ".join(notes))
        elif polled is not None:
            reports = json.loads(polled[0]).get("tasks", []) if polled[0].startswith("{") else []
            said = [f"{r.get('status')}: {r.get('result', '')}" for r in reports] or [polled[0]]
            self.text("Joined the background task: " + " | ".join(said))
        elif self.tools_allowed:
            self.text("Let me wait for the background task.")
            self.tool_use("task_status", {"wait": True})
            self.stop_reason = "tool_use"
        else:
            self.text("I cannot wait for the background task now.")
        return True

    def _notifications(self) -> list[str]:
        """The task notifications given since the last prompt (spec R14.4-a)."""
        notes: list[str] = []
        for message in self.messages:
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                if not isinstance(block, dict) or block.get("type") != "text":
                    continue
                text = str(block.get("text", ""))
                if text.startswith(NOTIFICATION_TAG):
                    notes.append(" ".join(text.split("\n")[1:-1]).strip())
                else:
                    notes = []
        return notes

    def _subagents_and_confirm(self, prompt: str) -> bool:
        """Parallel research *and* a confirmation asked after "in parallel": spawns and ``confirm`` in one step.

        (spec R13.8-a) "Research X and Y in parallel, then confirm" gives the parent's own
        frontend call beside the spawning calls, so a step can pause on both at once.
        """
        tail = re.split(r"\bin\s+parallel\b", prompt, maxsplit=1, flags=re.IGNORECASE)
        topics = _parallel_topics(prompt)
        if len(tail) < 2 or "confirm" not in tail[1].lower() or not topics:
            return False
        if _SPAWN not in self.tools or "confirm" not in self.tools:
            return False
        spawned = [(text, is_error) for name, text, is_error in self.results if name == _SPAWN]
        confirmation = self.result_of("confirm")
        if spawned or confirmation is not None:
            parts = [f"({'failed' if is_error else 'ok'}) {text}" for text, is_error in spawned]
            agreed = confirmation is not None and not confirmation[1] and _YES.search(confirmation[0])
            said = "You confirmed." if agreed else "You did not confirm."
            self.text(f"{said} Here is what the subagents found: " + " | ".join(parts))
            return True
        if not self.tools_allowed:
            return False
        agent = (self._spawn_names() or ["researcher"])[0]
        self.thinking(f"Parallel work on {len(topics)} topics, and the user wants to confirm.")
        self.text(f"I will start {len(topics)} subagents and ask you to confirm.")
        for topic in topics:
            self.tool_use(_SPAWN, _spawn_input(agent, f"Research {topic}"))
        self.tool_use("confirm", {"question": _question(prompt)})
        self.stop_reason = "tool_use"
        return True

    def _spawn_names(self) -> list[str]:
        for tool_def in self.request.get("tools") or []:
            if isinstance(tool_def, dict) and tool_def.get("name") == _SPAWN:
                properties = tool_def.get("input_schema", {}).get("properties", {})
                enum = (properties.get("subagent_type") or properties.get("agent") or {}).get("enum")
                if isinstance(enum, list):
                    return [str(n) for n in enum]
        return []

    def _answer(self, prompt: str, expression: str | None) -> None:
        lowered = prompt.lower()
        parts: list[str] = []
        research = re.match(r"\s*research\s+(.+?)[.?!]*\s*$", prompt, re.IGNORECASE | re.DOTALL)
        if research and "parallel" not in lowered:
            topic = research.group(1).strip()[:200]
            parts.append(
                f"Findings on {topic}: the scripted model read three sources on {topic}. "
                f"They agree on the basics of {topic} and differ on the details. "
                f"In short, {topic} is worth a closer look."
            )
        calc = self.result_of("calculator")
        if calc is not None and expression:
            text, is_error = calc
            parts.append(f"The calculator failed: {text}" if is_error else f"{expression} = {text}.")
        elif expression:
            try:
                parts.append(f"{expression} = {evaluate(expression)} (worked out without a tool).")
            except (ValueError, ZeroDivisionError) as exc:
                parts.append(f"I cannot evaluate {expression}: {exc}.")
        confirmation = self.result_of("confirm")
        if confirmation is not None:
            text, is_error = confirmation
            if is_error:
                parts.append(f"The confirmation failed ({text}), so I did nothing.")
            elif _YES.search(text):
                parts.append("You confirmed, so I went ahead.")
            else:
                parts.append("You declined, so I did nothing.")
        if any(word in lowered for word in ("cite", "citation", "source")):
            self.text("According to the reference document, ", citation=True)
            parts.append("That is the cited fact.")
        if "long" in lowered.split() or "long answer" in lowered:
            sentence = "Ceci est une longue réponse, déroulée pour montrer le découpage des enveloppes — ✓. "
            parts.append(sentence * 40)
        if not parts:
            parts.append(
                f"Hello! I am the embedded scripted model. You said: {prompt.strip()[:300]!r}. "
                "Ask me some arithmetic (What is 5 + (10 * 2)?), to confirm something, or to cite a source."
            )
        self.text(" ".join(parts))

    # ---------------------------------------------------------------- rendering

    def _digest(self, salt: str) -> str:
        seed = json.dumps(self.messages, sort_keys=True, default=str) + salt
        return hashlib.sha256(seed.encode()).hexdigest()[:16]

    def _spend(self, text: str) -> str:
        """Count tokens for ``text``; at the budget, return what fits and raise after emitting it."""
        cost = math.ceil(len(text) / 4)
        if self.tokens + cost <= self.max_tokens:
            self.tokens += cost
            return text
        room = max(0, self.max_tokens - self.tokens) * 4
        self.tokens = self.max_tokens
        return text[:room]

    def _emit_pieces(self, index: int, kind: str, field: str, pieces: Sequence[str]) -> None:
        for piece in pieces:
            kept = self._spend(piece)
            if kept:
                self.out.append({"type": "content_block_delta", "index": index, "delta": {"type": kind, field: kept}})
            if kept != piece:
                self.out.append({"type": "content_block_stop", "index": index})
                raise _Budget

    def thinking(self, text: str) -> None:
        index = self._next()
        self.out.append(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            }
        )
        self._emit_pieces(index, "thinking_delta", "thinking", _words(text))
        signature = "scripted-signature-" + self._digest(text)
        self.out.append(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "signature_delta", "signature": signature},
            }
        )
        self.out.append({"type": "content_block_stop", "index": index})

    def text(self, text: str, *, citation: bool = False) -> None:
        index = self._next()
        self.out.append({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
        if citation:
            text = text + _SOURCE_DOC
        self._emit_pieces(index, "text_delta", "text", _words(text))
        if citation:
            start = len(text) - len(_SOURCE_DOC)
            self.out.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {
                        "type": "citations_delta",
                        "citation": {
                            "type": "char_location",
                            "cited_text": _SOURCE_DOC,
                            "document_index": 0,
                            "document_title": "Scripted reference",
                            "start_char_index": start,
                            "end_char_index": start + len(_SOURCE_DOC),
                        },
                    },
                }
            )
        self.out.append({"type": "content_block_stop", "index": index})

    def tool_use(self, name: str, arguments: dict[str, Any]) -> None:
        index = self._next()
        tool_id = f"toolu_scripted_{self._digest(name + str(index))}"
        self.out.append(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": tool_id, "name": name, "input": {}},
            }
        )
        text = json.dumps(arguments, ensure_ascii=False)
        pieces = [""] + [text[i : i + 12] for i in range(0, len(text), 12)]
        self._emit_pieces(index, "input_json_delta", "partial_json", pieces)
        self.out.append({"type": "content_block_stop", "index": index})

    def _next(self) -> int:
        index = self.index
        self.index += 1
        return index


# ---------------------------------------------------------------- demo prompts (spec §8.3)

#: "call TOOL with {": the JSON object is read from the brace on (spec R8.3-a).
_CALL: Final = re.compile(r"\bcall\s+`?([A-Za-z0-9_\-]{1,128})`?\s+with\s+(?=\{)", re.IGNORECASE)
_MCP_ASK: Final = re.compile(r"\b(?:use|try|call)\s+(?:the\s+|my\s+|an?\s+)?mcp\s+tools?\b", re.IGNORECASE)
_MCP_PREFIX: Final = "mcp__"
_DELETE_DRAFT: Final = re.compile(r"\bdelete\s+(?:the\s+|my\s+|a\s+)?draft\b", re.IGNORECASE)
_DRAFT_NAME: Final = re.compile(r"\bdraft\s+(?:named\s+|called\s+)?[\"']([^\"'\n]{1,64})[\"']", re.IGNORECASE)
_DEFAULT_DRAFT: Final = "demo-draft"
_COUNT_SLOWLY: Final = re.compile(r"\bcount\s+slowly\s+to\s+(-?\d{1,9})\b", re.IGNORECASE)
_DEMO_STRING: Final = "demo"


def _demo_prompt(script: _Script) -> bool:
    """The demo prompts of spec §8.3, in order; whether one answered."""
    return (
        _generic_calls(script)
        or _mcp_demo(script)
        or _delete_draft(script)
        or _count_slowly(script)
        or _fix_failing_test(script)
    )


def _requested_calls(prompt: str) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """The (tool, input) pairs "call TOOL with {json}" asks for, and what is wrong with the others."""
    decoder = json.JSONDecoder()
    calls: list[tuple[str, dict[str, Any]]] = []
    problems: list[str] = []
    read_to = 0
    for match in _CALL.finditer(prompt):
        if match.start() < read_to:
            continue  # a phrase inside an input already read (a nested subagent's prompt, [SA2-a])
        name = match.group(1)
        try:
            value, read_to = decoder.raw_decode(prompt, match.end())
        except json.JSONDecodeError as exc:
            problems.append(f"the input of {name} is not valid JSON ({exc.msg} at character {exc.pos + 1})")
            continue
        calls.append((name, value))  # a dict: the text read starts at a brace
    return calls, problems


def _generic_calls(script: _Script) -> bool:
    """ "call TOOL with {json}": those calls in one step, then an answer quoting the results (R8.3-a)."""
    calls, problems = _requested_calls(script.prompt)
    if not calls and not problems:
        return False
    problems += [f"no tool named {name!r} is offered" for name, _ in calls if name not in script.tools]
    if problems:
        script.text("I did not call anything: " + "; ".join(problems) + ".")
        return True
    names = ", ".join(dict.fromkeys(name for name, _ in calls))
    if script.results:
        said = [f"{name} {'failed' if is_error else 'gave'}: {text}" for name, text, is_error in script.results]
        script.text("Results. " + " | ".join(said))
        return True
    if not script.tools_allowed:
        script.text(f"I may not use tools now, so I did not call {names}.")
        return True
    script.text(f"Calling {names}.")
    for name, arguments in calls:
        script.tool_use(name, arguments)
    script.stop_reason = "tool_use"
    return True


def _mcp_demo(script: _Script) -> bool:
    """ "use the mcp tools": the first ``mcp__`` tool with a demo input, then its result (R8.3-b)."""
    if not _MCP_ASK.search(script.prompt):
        return False
    tool_defs = [
        t
        for t in script.request.get("tools") or []
        if isinstance(t, dict) and str(t.get("name", "")).startswith(_MCP_PREFIX)
    ]
    if not tool_defs:
        return False
    name = str(tool_defs[0]["name"])
    done = script.result_of(name)
    if done is not None:
        text, is_error = done
        script.text(f"The MCP tool {name} failed: {text}" if is_error else f"The MCP tool {name} answered: {text}")
        return True
    if not script.tools_allowed:
        return False
    script.text(f"I will try the MCP tool {name}.")
    script.tool_use(name, demo_input(tool_defs[0].get("input_schema")))
    script.stop_reason = "tool_use"
    return True


def demo_input(schema: object) -> dict[str, Any]:
    """An input for a tool's JSON schema: each required property given a demo value (R8.3-b).

    A string is ``"demo"``, a number or an integer ``1``, a boolean ``true``, an array
    ``[]``, an object ``{}``; an ``enum`` or a ``const`` gives its (first) value; a union
    (a type list, ``anyOf``/``oneOf``) its first non-null member. Properties that are not
    required are left out.
    """
    if not isinstance(schema, dict):
        return {}
    properties = schema.get("properties")
    required = schema.get("required")
    if not isinstance(properties, dict) or not isinstance(required, list):
        return {}
    return {str(key): _demo_value(properties.get(key)) for key in required if isinstance(key, str)}


def _demo_value(schema: object) -> Any:
    if not isinstance(schema, dict):
        return _DEMO_STRING
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind is None:
        options = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(options, list):
            members = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            return _demo_value(members[0] if members else None)
    values: dict[object, Any] = {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}, "null": None}
    return values.get(kind, _DEMO_STRING)


def _delete_draft(script: _Script) -> bool:
    """ "delete the draft": a ``delete_draft`` call; "Deleted ..." or "I did not delete ..." (R8.3-c)."""
    if not _DELETE_DRAFT.search(script.prompt) or "delete_draft" not in script.tools:
        return False
    named = _DRAFT_NAME.search(script.prompt)
    draft = named.group(1).strip() if named else _DEFAULT_DRAFT
    done = script.result_of("delete_draft")
    if done is not None:
        text, is_error = done
        said = f"I did not delete the draft {draft!r}: {text}" if is_error else f"Deleted the draft {draft!r}: {text}"
        script.text(said)
        return True
    if not script.tools_allowed:
        return False
    script.thinking("Deleting a draft cannot be undone; the tool may ask for approval first.")
    script.text(f"I will delete the draft {draft!r}.")
    script.tool_use("delete_draft", {"name": draft})
    script.stop_reason = "tool_use"
    return True


def _count_slowly(script: _Script) -> bool:
    """ "count slowly to N": a ``count_slowly`` call (it reports progress), then its result (R8.3-d)."""
    match = _COUNT_SLOWLY.search(script.prompt)
    if match is None or "count_slowly" not in script.tools:
        return False
    n = int(match.group(1))
    done = script.result_of("count_slowly")
    if done is not None:
        text, is_error = done
        script.text(f"I could not count to {n}: {text}" if is_error else f"I counted slowly to {n}: {text}")
        return True
    if not script.tools_allowed:
        return False
    script.text(f"Counting to {n}, slowly.")
    script.tool_use("count_slowly", {"n": n})
    script.stop_reason = "tool_use"
    return True


_FIX: Final = re.compile(r"\bfix\s+the\s+failing\s+test\b", re.IGNORECASE)
_FIX_READ: Final = re.compile(r"\bread\s+`([^`]+)`", re.IGNORECASE)
_FIX_RUN: Final = re.compile(r"\brun\s+`([^`]+)`", re.IGNORECASE)
_FIX_REPLACE: Final = re.compile(r"\breplace\s+`([^`]+)`\s+with\s+`([^`]*)`\s+in\s+`([^`]+)`", re.IGNORECASE)
_EXIT_CODE: Final = re.compile(r"^\[exit code (-?\d+)\]$", re.MULTILINE)


def _fix_plan(prompt: str) -> list[tuple[str, str, dict[str, Any]]] | None:
    """The workspace demo's four calls (what is said, tool, input), or ``None`` when the prompt is not one ([WD1-a])."""
    read, run, replace = _FIX_READ.search(prompt), _FIX_RUN.search(prompt), _FIX_REPLACE.search(prompt)
    if not _FIX.search(prompt) or read is None or run is None or replace is None:
        return None
    command = {"command": run.group(1), "description": "Run the test"}
    old, new, path = replace.groups()
    return [
        (f"First I read the test, {read.group(1)}.", "Read", {"file_path": read.group(1)}),
        ("Now I run it to see it fail.", "Bash", command),
        (f"The test fails; I fix {path}.", "Edit", {"file_path": path, "old_string": old, "new_string": new}),
        ("I run the test again.", "Bash", command),
    ]


def _exit_code(text: str) -> int | None:
    """The exit code a ``Bash`` result ends with (its last ``[exit code N]`` line), if any."""
    codes = _EXIT_CODE.findall(text)
    return int(codes[-1]) if codes else None


def _fix_failing_test(script: _Script) -> bool:
    """ "fix the failing test: read, run, replace ... in ...": Read, Bash, Edit, Bash, one a step ([WD1-a])."""
    plan = _fix_plan(script.prompt)
    if plan is None or not {"Read", "Edit", "Bash"} <= script.tools:
        return False
    done = [(name, text, is_error) for name, text, is_error in script.results if name in ("Read", "Edit", "Bash")]
    for name, text, is_error in done:
        if is_error:
            script.text(f"I stopped: {name} failed: {text}")
            return True
    if len(done) == 2 and _exit_code(done[1][1]) == 0:
        script.text("The test already passes, so I changed nothing.")
        return True
    if len(done) >= len(plan):
        code = _exit_code(done[-1][1])
        said = "passes now" if code == 0 else f"still fails (exit code {code})"
        script.text(f"I edited {plan[2][2]['file_path']} and the test {said}.")
        return True
    if not script.tools_allowed:
        script.text(f"I may not use tools now, so I stopped after {len(done)} of {len(plan)} calls.")
        return True
    said, name, arguments = plan[len(done)]
    if not done:
        script.thinking("A failing test: read it, watch it fail, fix the code, run it again.")
    script.text(said)
    script.tool_use(name, arguments)
    script.stop_reason = "tool_use"
    return True


#: A phrase of seed 001's summary prompt, by which a summary request is recognised.
_SUMMARY_ASK: Final = "Write a continuation summary"
_SUMMARY: Final = re.compile(
    r"^<summary>\nTASK OVERVIEW: (?P<task>.*)\nCURRENT STATE: (?P<count>\d+) calculator results", re.DOTALL
)


def _content(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _result_text(block: dict[str, Any]) -> str:
    inner = block.get("content")
    if isinstance(inner, list):
        return " ".join(str(b.get("text", "")) for b in inner if isinstance(b, dict))
    return str(inner or "")


def _summary_fields(text: str) -> tuple[str, int] | None:
    """The task and the calculator count of a summary this model wrote, or ``None``."""
    match = _SUMMARY.match(text)
    if match is None:
        return None
    return match.group("task"), int(match.group("count"))


def _words(text: str) -> list[str]:
    """Split text into small deltas of about three words, as a model streams."""
    tokens = re.findall(r"\S+\s*|\s+", text)
    return ["".join(tokens[i : i + 3]) for i in range(0, len(tokens), 3)] or [text]


def _parallel_topics(prompt: str) -> list[str]:
    """The topics of "Research X and Y [and Z] in parallel" (empty when not such a prompt)."""
    match = re.search(r"research\s+(.+?)\s+in\s+parallel", prompt, re.IGNORECASE | re.DOTALL)
    if not match:
        return []
    parts = re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", match.group(1))
    return [p.strip()[:200] for p in parts if p.strip()][:8]


def _question(prompt: str) -> str:
    text = prompt.strip().rstrip("?.!")
    return f"Do you confirm: {text[:200]}?"

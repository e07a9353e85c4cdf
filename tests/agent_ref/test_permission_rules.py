"""Permission modes, rules, state, narrowing and durable-approval data (spec §12.5, §12.6).

Pure code: no agent runs here. The wiring into the agent's stages is tested where it is made.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import posixpath
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_ref.agent import DONE_LINE
from agent_ref.errors import ConfigError, StateError, ToolResultsError
from agent_ref.policy.permissions import (
    APPROVAL_KEY,
    PERMISSION_MODES,
    PendingApproval,
    PermissionAllow,
    PermissionAsk,
    PermissionDeny,
    PermissionMode,
    PermissionNarrowing,
    PermissionRule,
    PermissionRuleError,
    PermissionState,
    ToolPermissionContext,
    approval_reason,
    ask,
    check_pattern,
    decide,
    default_mode,
    narrow,
    parse_approval_answer,
    pattern_matches,
    resolve,
    stricter,
)
from envelope import Emitter
from validating import assert_valid

# ----------------------------------------------------------------------------- strategies

NAMES = ["calc", "calculator", "mcp__github__get_issue", "mcp__github__delete_repo", "mcp__fs__read", "memory"]
PATTERNS = [*NAMES, "*", "mcp__*", "mcp__github__*", "mcp__*__read", "calc*", "calc?", "*__delete_*", "memory"]
PATHS = ["/memories/notes/a.md", "/memories/secret.md", "/memories/notes/../secret.md", "/memories/./notes/b"]
INPUT_PATTERNS = ["/memories/notes/*", "/memories/secret*", "*"]

modes = st.sampled_from(PERMISSION_MODES)
behaviors = st.sampled_from(["allow", "deny", "ask"])
rules = st.builds(
    PermissionRule,
    behavior=behaviors,
    tool=st.sampled_from(PATTERNS),
    input=st.dictionaries(st.just("path"), st.sampled_from(INPUT_PATTERNS), max_size=1),
)
calls = st.tuples(st.sampled_from(NAMES), st.fixed_dictionaries({}, optional={"path": st.sampled_from(PATHS)}))
RANK = {PermissionAllow: 0, PermissionAsk: 1, PermissionDeny: 2}


def _strictness(decision: object) -> int:
    return RANK[type(decision)]


# ----------------------------------------------------------------------------- patterns


def test_spec_12_5_a_patterns_glob_whole_names_case_sensitively() -> None:
    """[R12.5-a] ``*`` any run (none included), ``?`` one character, the whole name, case-sensitive."""
    assert pattern_matches("mcp__github__*", "mcp__github__get_issue")
    assert pattern_matches("mcp__github__*", "mcp__github__")
    assert not pattern_matches("mcp__github__*", "mcp__githubx__get")
    assert not pattern_matches("mcp__github__*", "xmcp__github__get")
    assert pattern_matches("calc?", "calcs")
    assert not pattern_matches("calc?", "calc")
    assert not pattern_matches("Calc", "calc")
    assert pattern_matches("*", "anything-at_all")


@pytest.mark.parametrize(
    ("pattern", "needle"),
    [("mcp__github__.*", "'.' at character 13"), ("a b", "' ' at character 1"), ("[ab]", "'[' at character 0")],
)
def test_spec_12_5_a_a_pattern_with_a_character_no_tool_name_has_is_refused(pattern: str, needle: str) -> None:
    """[R12.5-a] A regex or bracket in a pattern is a mistake: refused, naming the field and the character."""
    with pytest.raises(PermissionRuleError, match="tool:") as caught:
        PermissionRule(behavior="deny", tool=pattern)
    assert needle in str(caught.value)
    assert isinstance(caught.value, ConfigError)


@pytest.mark.parametrize("pattern", ["", 7, None, "x" * 257])
def test_spec_12_5_a_empty_long_or_non_string_patterns_are_refused(pattern: Any) -> None:
    """[R12.5-a] The pattern's type and length are checked, with the field named."""
    with pytest.raises(PermissionRuleError, match=r"^where: "):
        check_pattern(pattern, "where")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab_-*?", max_size=8), st.text(alphabet="ab_-", max_size=8))
def test_spec_12_5_a_patterns_agree_with_fnmatch_on_tool_name_characters(pattern: str, name: str) -> None:
    """[R12.5-a] On the characters a tool name has, the glob is fnmatch's (case-sensitive) glob."""
    if not pattern:
        return
    assert pattern_matches(pattern, name) == fnmatch.fnmatchcase(name, pattern)


# ----------------------------------------------------------------------------- input conditions


def test_spec_12_5_b_input_conditions_match_a_memory_path_prefix() -> None:
    """[R12.5-b] A rule's input conditions: every key present, a string, matching its glob."""
    rule = PermissionRule(behavior="allow", tool="memory", input={"path": "/memories/notes/*"})
    assert rule.matches("memory", {"command": "view", "path": "/memories/notes/a.md"})
    assert not rule.matches("memory", {"command": "view", "path": "/memories/other.md"})
    assert not rule.matches("memory", {"command": "rename", "old_path": "/memories/notes/a.md"})
    assert not rule.matches("memory", {"path": ["/memories/notes/a.md"]})
    assert not rule.matches("calc", {"path": "/memories/notes/a.md"})
    assert rule.describe() == "allow memory where path=/memories/notes/*"


def test_spec_12_5_b_dot_dot_neither_escapes_an_allow_nor_slips_past_a_deny() -> None:
    """[R12.5-b] Paths are checked as given and normalised: allow needs both to match, deny either."""
    escape = {"path": "/memories/notes/../secret.md"}
    allow = PermissionRule(behavior="allow", tool="memory", input={"path": "/memories/notes/*"})
    deny = PermissionRule(behavior="deny", tool="memory", input={"path": "/memories/secret*"})
    assert not allow.matches("memory", escape)
    assert deny.matches("memory", escape)
    assert isinstance(decide("auto", [allow], "memory", escape), PermissionAsk)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["notes", "..", ".", "secret.md", "a.md", ""]), min_size=1, max_size=6))
def test_spec_12_5_b_an_allowed_path_is_inside_the_prefix_once_normalised(segments: list[str]) -> None:
    """[R12.5-b] Property: whatever the segments, an allowed path's normal form stays under the prefix."""
    path = "/memories/" + "/".join(segments)
    allow = PermissionRule(behavior="allow", tool="memory", input={"path": "/memories/notes/*"})
    if allow.matches("memory", {"path": path}):
        assert posixpath.normpath(path).startswith("/memories/notes/")


def test_spec_12_5_b_bad_input_conditions_are_refused_naming_the_key() -> None:
    """[R12.5-b] A condition's key and pattern must be non-empty strings."""
    with pytest.raises(PermissionRuleError, match=r"input\.path: "):
        PermissionRule(behavior="deny", tool="memory", input={"path": ""})
    with pytest.raises(PermissionRuleError, match="input: a key"):
        PermissionRule(behavior="deny", tool="memory", input={"": "x"})
    with pytest.raises(PermissionRuleError, match="behavior: "):
        PermissionRule(behavior="maybe", tool="memory")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- decide


def test_spec_12_5_c_each_mode_decides_as_specified() -> None:
    """[R12.5-c] full runs all but denials; ask asks all but denials; auto: ask rule, allow rule, else ask."""
    rules = [
        PermissionRule(behavior="allow", tool="calc*"),
        PermissionRule(behavior="ask", tool="calculator"),
        PermissionRule(behavior="deny", tool="mcp__github__delete_*"),
    ]
    expect: dict[str, dict[str, type]] = {
        "full": {"calc": PermissionAllow, "calculator": PermissionAllow, "mcp__fs__read": PermissionAllow},
        "ask": {"calc": PermissionAsk, "calculator": PermissionAsk, "mcp__fs__read": PermissionAsk},
        "auto": {"calc": PermissionAllow, "calculator": PermissionAsk, "mcp__fs__read": PermissionAsk},
    }
    for mode, table in expect.items():
        for name, kind in table.items():
            assert type(decide(mode, rules, name, {})) is kind, (mode, name)  # type: ignore[arg-type]
        denied = decide(mode, rules, "mcp__github__delete_repo", {})  # type: ignore[arg-type]
        assert isinstance(denied, PermissionDeny)
        assert denied.message == "denied by the permission rule 'deny mcp__github__delete_*'"
        assert not denied.interrupt
    unknown = decide("auto", rules, "mcp__fs__read", {})
    assert isinstance(unknown, PermissionAsk)
    assert unknown.reason == "no permission rule covers mcp__fs__read"
    asked = decide("auto", rules, "calculator", {})
    assert isinstance(asked, PermissionAsk)
    assert asked.rule == rules[1]


def test_spec_12_5_c_an_unknown_mode_is_refused() -> None:
    """[R12.5-c] The mode is checked, not treated as one of the three."""
    with pytest.raises(PermissionRuleError, match="mode: must be one of full, auto, ask, not 'yolo'"):
        decide("yolo", [], "calc", {})  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(modes, st.lists(rules, max_size=6), calls, st.randoms(use_true_random=False))
def test_spec_12_5_c_deny_always_wins_and_order_never_matters(
    mode: PermissionMode, rule_list: list[PermissionRule], call: tuple[str, dict[str, Any]], rnd: Any
) -> None:
    """[R12.5-c] Property: any matching deny denies, in every mode; the decision's kind ignores rule order."""
    name, tool_input = call
    first = decide(mode, rule_list, name, tool_input)
    shuffled = list(rule_list)
    rnd.shuffle(shuffled)
    assert type(decide(mode, shuffled, name, tool_input)) is type(first)
    if any(r.behavior == "deny" and r.matches(name, tool_input) for r in rule_list):
        assert isinstance(first, PermissionDeny)
    extra_allow = [*rule_list, PermissionRule(behavior="allow", tool="*")]
    if isinstance(first, PermissionDeny):
        assert isinstance(decide(mode, extra_allow, name, tool_input), PermissionDeny)


def test_spec_12_5_d_a_frontend_call_is_asked_but_never_durably() -> None:
    """[R12.5-d] A frontend call's ask goes to the callback only: its own pause is the person's approval."""
    backend = decide("ask", [], "calc", {})
    frontend = decide("ask", [], "user_confirm", {}, kind="frontend")
    spawn = decide("auto", [], "spawn_subagent", {}, kind="subagent")
    assert isinstance(backend, PermissionAsk)
    assert backend.durable
    assert isinstance(frontend, PermissionAsk)
    assert not frontend.durable
    assert isinstance(spawn, PermissionAsk)
    assert spawn.durable
    deny = PermissionRule(behavior="deny", tool="user_confirm")
    assert isinstance(decide("full", [deny], "user_confirm", {}, kind="frontend"), PermissionDeny)


def test_spec_12_5_e_an_agent_given_no_mode_behaves_as_before_modes() -> None:
    """[R12.5-e] With a callback: ask (the callback sees every call); without: full (every call runs)."""
    assert default_mode(True) == "ask"
    assert default_mode(False) == "full"
    assert isinstance(decide(default_mode(False), [], "anything", {}), PermissionAllow)
    assert isinstance(decide(default_mode(True), [], "anything", {}), PermissionAsk)


# ----------------------------------------------------------------------------- narrowing


def test_spec_12_5_f_a_child_inherits_and_narrows() -> None:
    """[R12.5-f] The child gets the stricter mode as its floor, every parent rule, then its narrowing's."""
    configured = [PermissionRule(behavior="allow", tool="calc")]
    parent = PermissionState(mode="auto", session=(PermissionRule(behavior="allow", tool="mcp__fs__*"),))
    cut = PermissionNarrowing(mode="full", rules=[PermissionRule(behavior="deny", tool="mcp__fs__write")])
    child = narrow(parent, configured, cut)
    assert child.mode == "auto"
    assert child.floor == "auto"
    assert child.inherited == (*configured, *parent.session, *cut.rules)
    assert child.session == ()
    assert isinstance(child.decide((), "mcp__fs__write", {}), PermissionDeny)
    assert isinstance(child.decide((), "mcp__fs__read", {}), PermissionAllow)
    assert narrow(parent, configured, PermissionNarrowing(mode="ask")).mode == "ask"
    assert narrow(parent, configured).mode == "auto"
    assert stricter("ask", "full") == "ask"
    assert stricter("full", None) == "full"


def test_spec_12_5_f_a_narrowing_cannot_add_an_allow() -> None:
    """[R12.5-f] An allow in a child's narrowing would widen: refused, naming the rule."""
    with pytest.raises(PermissionRuleError, match=r"rules\[1\]: 'allow \*'"):
        PermissionNarrowing(
            rules=[PermissionRule(behavior="deny", tool="x"), PermissionRule(behavior="allow", tool="*")]
        )


@settings(max_examples=300, deadline=None)
@given(
    modes,
    st.lists(rules, max_size=5),
    st.lists(rules, max_size=3),
    st.one_of(st.none(), modes),
    st.lists(rules.filter(lambda r: r.behavior != "allow"), max_size=3),
    calls,
)
def test_spec_12_5_f_a_narrowed_child_is_never_less_strict_than_its_parent(
    mode: PermissionMode,
    configured: list[PermissionRule],
    session: list[PermissionRule],
    child_mode: PermissionMode | None,
    child_rules: list[PermissionRule],
    call: tuple[str, dict[str, Any]],
) -> None:
    """[R12.5-f] Property: for every call, the child's decision is at least as strict as the parent's."""
    parent = PermissionState(mode=mode, session=tuple(session))
    child = narrow(parent, configured, PermissionNarrowing(mode=child_mode, rules=child_rules))
    name, tool_input = call
    theirs = parent.decide(configured, name, tool_input)
    mine = child.decide((), name, tool_input)
    assert _strictness(mine) >= _strictness(theirs)
    if isinstance(theirs, PermissionDeny):
        assert isinstance(mine, PermissionDeny)


# ----------------------------------------------------------------------------- updates and state


def test_spec_12_5_g_an_allow_adds_its_rules_once_and_may_set_the_mode() -> None:
    """[R12.5-g] updated_permissions are added for the rest of the run, each once; updated_mode is set."""
    rule = PermissionRule(behavior="allow", tool="mcp__github__get_*")
    state = PermissionState(mode="ask")
    once = state.updated(PermissionAllow(updated_permissions=[rule], updated_mode="auto"))
    twice = once.updated(PermissionAllow(updated_permissions=[rule]))
    assert twice.session == (rule,)
    assert twice.mode == "auto"
    assert isinstance(twice.decide((), "mcp__github__get_issue", {}), PermissionAllow)
    assert state.session == ()
    assert state.mode == "ask"


def test_spec_12_5_g_an_update_below_the_floor_is_refused() -> None:
    """[R12.5-g] A child's answer cannot set a mode less strict than its floor ([R12.5-f])."""
    child = narrow(PermissionState(mode="auto"), ())
    with pytest.raises(PermissionRuleError, match="updated_mode: 'full' is less strict than this agent's floor 'auto'"):
        child.updated(PermissionAllow(updated_mode="full"))
    assert child.updated(PermissionAllow(updated_mode="ask")).mode == "ask"


def test_spec_12_5_g_a_callback_allow_with_malformed_additions_fails_closed() -> None:
    """[R12.5-g] [R12.4-b] can_use_tool's allow with a non-rule addition denies the call, reported."""
    context = ToolPermissionContext(agent_uuid="a", run_id="r", tool_use_id="t")

    def callback(_name: str, _input: dict[str, Any], _ctx: ToolPermissionContext) -> PermissionAllow:
        return PermissionAllow(updated_permissions=[{"behavior": "allow", "tool": "*"}])  # type: ignore[list-item]

    answer, failed = asyncio.run(ask(callback, "calc", {}, context))
    assert isinstance(answer, PermissionDeny)
    assert failed is not None
    assert "updated_permissions[0]: must be a PermissionRule, not dict" in failed

    def bad_mode(_name: str, _input: dict[str, Any], _ctx: ToolPermissionContext) -> PermissionAllow:
        return PermissionAllow(updated_mode="everything")  # type: ignore[arg-type]

    answer, failed = asyncio.run(ask(bad_mode, "calc", {}, context))
    assert isinstance(answer, PermissionDeny)
    assert failed is not None
    assert "updated_mode" in failed


@settings(max_examples=200, deadline=None)
@given(modes, modes, st.lists(rules, max_size=4), st.lists(rules, max_size=4))
def test_spec_12_5_h_state_round_trips_through_json(
    mode: PermissionMode, floor: PermissionMode, inherited: list[PermissionRule], session: list[PermissionRule]
) -> None:
    """[R12.5-h] Property: from_json(to_json(state)) == state, whatever it holds."""
    mode = stricter(mode, floor)
    state = PermissionState(mode=mode, floor=floor, inherited=tuple(inherited), session=tuple(session))
    again = PermissionState.from_json(state.to_json())
    assert again == state
    assert PermissionState.from_json(state.to_json().decode()) == state


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"mode": "sometimes"}', "$.mode"),
        ('{"session": [{"behavior": "allow", "tool": "a.b"}]}', "$.session[0]"),
        ('{"session": [{"behavior": "allow"}]}', "missing required field `tool`"),
        ('{"mode": "full", "floor": "ask"}', "less strict than the floor"),
        ("[]", "Expected `object`"),
        ("{", "truncated"),
    ],
)
def test_spec_12_5_h_a_bad_stored_state_is_a_state_error_naming_the_field(text: str, needle: str) -> None:
    """[R12.5-h] A stored state that is not one raises StateError saying where."""
    with pytest.raises(StateError, match="stored permission state: ") as caught:
        PermissionState.from_json(text)
    assert needle in str(caught.value)


# ----------------------------------------------------------------------------- approvals

PENDING = PendingApproval(
    tool_use_id="toolu_9", name="mcp__github__delete_repo", input={"repo": "x"}, reason="mode ask", agent=None
)


def test_spec_12_6_a_the_marker_keeps_a_plain_pending_call() -> None:
    """[R12.6-a] The element is a §4.11 pending call plus ``approval: {reason}``; the stream is strictly valid."""
    child = PendingApproval(tool_use_id="toolu_1", name="calc", input={}, reason="rule asks", agent="child-uuid")
    elements = [PENDING.element(), child.element()]
    assert elements[0] == {
        "tool_use_id": "toolu_9",
        "name": "mcp__github__delete_repo",
        "input": {"repo": "x"},
        APPROVAL_KEY: {"reason": "mode ask"},
    }
    assert elements[1]["agent"] == "child-uuid"
    assert [approval_reason(e) for e in elements] == ["mode ask", "rule asks"]
    assert approval_reason({"tool_use_id": "t", "name": "n", "input": {}}) is None
    with pytest.raises(ValueError, match="approval: must be an object with a string 'reason'"):
        approval_reason({"approval": True})
    emitter = Emitter("agent-1", 2048)
    init = {"format": "json", "user_query": "q", "agent_uuid": "agent-1", "model": "m"}
    lines = [
        *emitter.buffered("meta_init", json.dumps(init)),
        *emitter.buffered("awaiting_frontend_tools", json.dumps(elements)),
        DONE_LINE,
    ]
    assert_valid(lines)


def test_spec_12_6_b_approve_approve_edited_and_deny() -> None:
    """[R12.6-b] The three answers, with their optional keys."""
    assert parse_approval_answer({"tool_use_id": "toolu_9", "decision": "approve"}, PENDING) == PermissionAllow()
    edited = parse_approval_answer(
        {
            "tool_use_id": "toolu_9",
            "decision": "approve",
            "updated_input": {"repo": "y"},
            "updated_permissions": [{"behavior": "allow", "tool": "mcp__github__*"}],
            "updated_mode": "auto",
        },
        PENDING,
    )
    assert isinstance(edited, PermissionAllow)
    assert edited.updated_input == {"repo": "y"}
    assert edited.updated_permissions == (PermissionRule(behavior="allow", tool="mcp__github__*"),)
    assert edited.updated_mode == "auto"
    denied = parse_approval_answer({"tool_use_id": "toolu_9", "decision": "deny", "message": "no"}, PENDING)
    assert denied == PermissionDeny(message="no")
    stop = parse_approval_answer({"tool_use_id": "toolu_9", "decision": "deny", "interrupt": True}, PENDING)
    assert stop == PermissionDeny(message="not approved", interrupt=True)


@pytest.mark.parametrize(
    ("answer", "needle"),
    [
        ([], "answer: must be an object, not list"),
        ({"tool_use_id": "other", "decision": "approve"}, "tool_use_id: must be 'toolu_9', not 'other'"),
        ({"tool_use_id": "toolu_9", "decision": "yes"}, "decision: must be 'approve' or 'deny', not 'yes'"),
        ({"tool_use_id": "toolu_9", "decision": "approve", "updatedInput": {}}, "updatedInput: not a key of"),
        ({"tool_use_id": "toolu_9", "decision": "approve", "message": "ok"}, "message: not a key of a 'approve'"),
        ({"tool_use_id": "toolu_9", "decision": "deny", "updated_input": {}}, "updated_input: not a key of a 'deny'"),
        (
            {"tool_use_id": "toolu_9", "decision": "approve", "updated_input": [1]},
            "updated_input: must be a JSON object",
        ),
        (
            {"tool_use_id": "toolu_9", "decision": "approve", "updated_input": {"a": object()}},
            "updated_input: is not JSON",
        ),
        (
            {
                "tool_use_id": "toolu_9",
                "decision": "approve",
                "updated_permissions": [{"behavior": "allow", "tool": 5}],
            },
            "updated_permissions[0]: Expected `str`, got `int` - at `rule.tool`",
        ),
        (
            {
                "tool_use_id": "toolu_9",
                "decision": "approve",
                "updated_permissions": [{"behavior": "allow", "tool": "x", "toolName": "y"}],
            },
            "updated_permissions[0]: Object contains unknown field `toolName`",
        ),
        (
            {"tool_use_id": "toolu_9", "decision": "approve", "updated_permissions": {"behavior": "allow"}},
            "updated_permissions: must be an array of rules",
        ),
        ({"tool_use_id": "toolu_9", "decision": "approve", "updated_mode": "max"}, "updated_mode: must be one of"),
        ({"tool_use_id": "toolu_9", "decision": "deny", "message": ""}, "message: must be a non-empty string"),
        ({"tool_use_id": "toolu_9", "decision": "deny", "interrupt": "yes"}, "interrupt: must be true or false"),
    ],
)
def test_spec_12_6_b_a_malformed_answer_names_the_call_and_the_field(answer: Any, needle: str) -> None:
    """[R12.6-b] A malformed answer is a ToolResultsError naming the call, the tool and the field."""
    with pytest.raises(ToolResultsError) as caught:
        parse_approval_answer(answer, PENDING)
    text = str(caught.value)
    assert text.startswith("the approval answer for toolu_9 (mcp__github__delete_repo): ")
    assert needle in text


def test_spec_12_6_c_a_plain_tool_result_is_a_denial() -> None:
    """[R12.6-c] A client that does not know approvals answers with a tool result: the call is not run."""
    answer = parse_approval_answer({"tool_use_id": "toolu_9", "content": "unknown tool", "is_error": True}, PENDING)
    assert answer == PermissionDeny(
        message="not approved: the client sent a tool result, not a decision (unknown tool)"
    )
    quiet = parse_approval_answer({"tool_use_id": "toolu_9", "content": [], "is_error": False}, PENDING)
    assert isinstance(quiet, PermissionDeny)
    assert quiet.message.startswith("not approved")


def test_spec_12_6_a_pending_approvals_survive_the_store_codec() -> None:
    """[R12.6-a] A pending approval is a msgspec Struct: what is saved is read back equal."""
    import msgspec

    again = msgspec.json.decode(msgspec.json.encode(PENDING), type=PendingApproval)
    assert again == PENDING


# ----------------------------------------------------------------------------- resolve

CONTEXT = ToolPermissionContext(agent_uuid="a", run_id="r", tool_use_id="toolu_1")


class _Callback:
    """A can_use_tool that records what it was told and answers as set."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.told: list[ToolPermissionContext] = []

    async def __call__(self, _name: str, _input: dict[str, Any], context: ToolPermissionContext) -> Any:
        self.told.append(context)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def _resolve(state: PermissionState, callback: Any, name: str = "calc", **kw: Any) -> Any:
    configured = [PermissionRule(behavior="deny", tool="rm"), PermissionRule(behavior="allow", tool="calc")]
    return asyncio.run(resolve(state, configured, name, {}, kw.pop("context", CONTEXT), callback, **kw))


def test_spec_12_5_i_resolve_denies_by_rule_without_asking() -> None:
    """[R12.5-i] A rule's deny is final: the callback is not asked, the state is unchanged."""
    callback = _Callback(PermissionAllow())
    state = PermissionState(mode="ask")
    done = _resolve(state, callback, "rm")
    assert isinstance(done.answer, PermissionDeny)
    assert (done.state, done.failure, callback.told) == (state, None, [])


def test_spec_12_5_i_resolve_asks_the_callback_and_applies_its_updates() -> None:
    """[R12.5-i] An ask goes to the callback, told why; an allow's rules and mode land in the new state."""
    rule = PermissionRule(behavior="allow", tool="mcp__*")
    callback = _Callback(PermissionAllow(updated_input={"x": 1}, updated_permissions=[rule], updated_mode="auto"))
    done = _resolve(PermissionState(mode="ask"), callback, "mcp__fs__read")
    assert done.answer.updated_input == {"x": 1}
    assert (done.state.mode, done.state.session, done.failure) == ("auto", (rule,), None)
    assert callback.told[0].permission == "permission mode 'ask': every call to mcp__fs__read needs approval"
    allowed = _resolve(PermissionState(mode="auto"), callback, "calc")
    assert allowed.answer == PermissionAllow()
    assert len(callback.told) == 1  # an allowed call is not put to the callback


def test_spec_12_5_i_with_no_callback_a_backend_ask_pauses_and_a_frontend_one_runs() -> None:
    """[R12.5-i] [R12.5-d] No callback: a durable ask is returned for the caller to pause on."""
    backend = _resolve(PermissionState(mode="ask"), None)
    assert isinstance(backend.answer, PermissionAsk)
    assert backend.answer.durable
    frontend = _resolve(PermissionState(mode="ask"), None, "user_confirm", kind="frontend")
    assert frontend.answer == PermissionAllow()


def test_spec_12_5_i_a_repeat_puts_an_allowed_call_to_the_callback() -> None:
    """[R12.5-i] [R16.1-a] The loop guard's repeat still reaches the callback in mode full."""
    callback = _Callback(PermissionDeny(message="enough", interrupt=True))
    repeat = ToolPermissionContext(agent_uuid="a", run_id="r", tool_use_id="t", reason="repeat: calc x3")
    done = _resolve(PermissionState(mode="full"), callback, context=repeat)
    assert done.answer == PermissionDeny(message="enough", interrupt=True)
    assert callback.told[0].reason == "repeat: calc x3"
    assert callback.told[0].permission is None


def test_spec_12_5_i_a_failing_callback_or_a_widening_update_fails_closed() -> None:
    """[R12.5-i] [R12.4-b] A raising callback, or an update below the floor, denies with a failure to report."""
    raising = _resolve(PermissionState(mode="ask"), _Callback(RuntimeError("db down")))
    assert isinstance(raising.answer, PermissionDeny)
    assert raising.failure == "RuntimeError: db down"
    child = narrow(PermissionState(mode="auto"), ())
    widening = _resolve(child, _Callback(PermissionAllow(updated_mode="full")), "mcp__fs__read")
    assert isinstance(widening.answer, PermissionDeny)
    assert widening.state == child
    assert widening.failure is not None
    assert "less strict than this agent's floor 'auto'" in widening.failure

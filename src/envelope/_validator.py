"""Judging a recorded stream against the protocol: coded violations, never an exception.

Owns: ``Violation``, the code table (``CODES``: severity, spec section and meaning of
each code, which ``explain`` and ``spec/validation.md`` §4 read), the rules (``RULES``:
the one function that reports each code), ``Validator`` (envelope lines in, violations
out, incremental), ``StreamValidator`` (the bytes of a recording in, with recovery after
unreadable input), and ``validate``. The reason for each judgement call is in
``spec/validation.md`` §5; each rule cites the rule id it enforces (``[V…]`` ids are
that file's, ``§`` numbers are ``spec/envelope-v1.md``'s).

How a line meets the rules: ``Validator`` reads it (``_parse``), checks its fields and
bound, dispatches the type's line rules from ``_LINE_RULES``, and routes it to its block
(``_route``), where opening, continuing and closing meet the block and stream rules; a
closing JSON block's payload meets ``_SHAPES`` (E141) and ``_PAYLOAD_RULES``.
``StreamValidator`` only reads: it finds lines, SSE field lines and positions, and hands
them to the ``Validator``, which judges all of them (the SSE line rules W112, W113, W118
included).

Where each part lives (issue 28 §3: split by role; this module only gathers them, so
``envelope._validator`` keeps every name it had):

* ``_validator_codes``: ``CODES``, ``explain``, ``Violation``, the type tables and the
  ``RULES`` registry (``@_rule``);
* ``_validator_rules``: the rules that need no state but what they are given (one
  function per code), the payload shapes, and the per-agent and per-block records;
* ``_validator_blocks``: the rules of a block's and the stream's flow, which read and
  move the line machine's state (``_BlockRules``, a base of ``Validator``);
* ``_validator_lines``: ``Validator``, the line machine (``feed``, the batch loop
  ``_run``, the SSE line rules), and ``validate``;
* ``_validator_stream``: ``StreamValidator``, the bytes of a recording.

Importing this module registers every rule: ``RULES`` is complete only once the five
modules are loaded (``envelope`` imports this one).

Does not own: rebuilding content (``_reconstruct``; the validator keeps no text, only
the payloads it must parse), splitting bytes into lines (``StreamReader`` does; this
module only restarts it after an error), printing (``cli``).

Memory: a ``Validator`` holds, per agent, a handful of flags and the ids of tool calls
still waiting for their result (at most ``MAX_PENDING_IDS`` each); per open block, its
position and, for the types whose payload is JSON, the deltas so far (at most
``max_payload_bytes``). It never holds a closed block or the stream.
"""

from __future__ import annotations

from ._validator_codes import (
    CODES,
    RULES,
    Profile,
    Severity,
    Violation,
    explain,
)
from ._validator_codes import (
    MAX_PENDING_IDS as MAX_PENDING_IDS,
)
from ._validator_codes import (
    SEED_UNKNOWN_TYPES as SEED_UNKNOWN_TYPES,
)
from ._validator_codes import (
    SEED_WHOLE_TYPES as SEED_WHOLE_TYPES,
)
from ._validator_lines import Validator, validate
from ._validator_rules import _id_key as _id_key
from ._validator_stream import StreamValidator

__all__ = ["CODES", "RULES", "Profile", "Severity", "StreamValidator", "Validator", "Violation", "explain", "validate"]

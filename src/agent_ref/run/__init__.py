"""The run wing: the loop, its stages, the run's context and its options.

Owns: the loop (``loop``) and its stages (``prepare``, ``compaction``, ``call_model``,
``tool_step``, ``checkpoints``, ``finish``), the run's context (``context``:
``RunContext``) and response (``response``), the agent's options (``options``), the
guards and policies a run applies (``loop_guard``, ``retry``, ``structured``,
``extras``), subagents (``subagents``, ``subagent_run``) and background tasks
(``background``). ``docs/architecture.md`` draws a turn's flow.

Must not import: server, cli, nor ``agent`` (a stage takes a ``RunContext``, never the
``Agent``). It may use fleet, models, store, tools, policy, ``tracing`` and ``errors``.
"""

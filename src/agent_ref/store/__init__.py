"""The store wing: what a run leaves behind and where it is kept.

Owns: the agent's state and its records (``state``: ``AgentState``, ``RunRecord``,
``PendingCall``), the transcript edits every stage uses (``record``), sessions (fork,
rewind, the inbox: ``sessions``), the ``Store`` protocol with its memory and SQLite
stores (``core``), the Postgres store and journal (``postgres``) and its SQL migrations
(``migrations/``, package data).

Must not import: models, fleet, run, server, cli, nor ``agent``. It may use tools
(a record names a ``ToolCallRequest``), policy and ``errors``.
"""

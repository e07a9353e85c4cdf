"""The policy wing: who may do what in a run, and what is never shown.

Owns: permissions (modes, rules, ``CanUseTool``, the pending approval and how an answer
is parsed: ``permissions``), hooks (the events, matchers and decisions: ``hooks``), and
redaction (``redact``: secrets in text; ``scrub``: the process-wide scrubber every
printed or stored string goes through).

Must not import: any other wing (tools, store, models, fleet, run, server, cli) nor
``agent``: policy is the lowest wing; it may use ``errors`` only.
"""

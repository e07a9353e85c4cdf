"""The models wing: what a run asks for its next turn.

Owns: the ``Model`` protocol and the Anthropic model (``core``), the scripted model for
tests and demos (``scripted``), offline replay of recorded streams (``replay``) and the
price table with the cost of a run (``pricing``).

Must not import: fleet, run, server, cli, nor ``agent``. It may use store (usage
records), tools, policy, ``errors`` and ``defaults``.
"""

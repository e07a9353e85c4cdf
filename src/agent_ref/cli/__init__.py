"""The cli wing: the ``agent-ref`` commands.

Owns: the commands and ``main`` (``commands``, the ``agent-ref`` entry point and
``python -m agent_ref``), the flags that become options (``flags``) and ``agent-ref
serve`` (``serve``).

Must not import: nothing imports the cli; it is the top wing and may use every other.
"""

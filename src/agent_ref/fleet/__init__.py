"""The fleet wing: work that outlives one process.

Owns: the durable task queue (``task_queue``) and the worker that claims tasks and runs
them under a lease (``worker``, ``python -m agent_ref.fleet.worker``).

Must not import: run, server, cli, nor ``agent`` (a worker is handed the agent it runs).
It may use store, policy and ``errors``.
"""

"""The store wing of agent_ref (see docs/architecture.md)."""

"""The cli wing of agent_ref (see docs/architecture.md)."""

"""The run wing of agent_ref (see docs/architecture.md)."""

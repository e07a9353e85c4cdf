"""The policy wing of agent_ref (see docs/architecture.md)."""

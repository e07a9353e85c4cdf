-- Who created each agent and run (spec server [OW1-a]): a verified principal's `sub`.
-- Rows made before this migration keep NULL: only an admin (or the single-user mode) sees them (spec server [OW1-d]).
ALTER TABLE agents ADD COLUMN principal TEXT;
ALTER TABLE runs ADD COLUMN principal TEXT;
CREATE INDEX agents_by_principal ON agents (principal, updated_at DESC);

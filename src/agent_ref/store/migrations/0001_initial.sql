-- The agents' store (spec agent-ref §4) and the server's journal (spec server §3.1),
-- shared by every server process of a deployment (spec scaleout §1).

-- One row per agent: its state blob, its version (optimistic concurrency, §4.3) and its
-- lease in columns of their own, so a heartbeat does not rewrite the blob (§10.2-a).
CREATE TABLE agents (
    agent_uuid TEXT PRIMARY KEY,
    version BIGINT NOT NULL,
    status TEXT NOT NULL,
    state BYTEA NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    lease_owner TEXT,
    lease_expires_at DOUBLE PRECISION NOT NULL DEFAULT 0
);
CREATE INDEX agents_by_update ON agents (updated_at DESC);

-- Completed runs: the conversation history.
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    agent_uuid TEXT NOT NULL,
    finished_at DOUBLE PRECISION NOT NULL,
    stop_reason TEXT NOT NULL,
    record BYTEA NOT NULL,
    position BIGSERIAL
);
CREATE INDEX runs_by_agent ON runs (agent_uuid, finished_at, position);

-- Each run's envelope lines, saved with the state that produced them.
CREATE TABLE envelope_log (
    run_id TEXT NOT NULL,
    response INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    line BYTEA NOT NULL,
    PRIMARY KEY (run_id, response, seq)
);

-- The server's journal: every line of every response, written before it is sent.
CREATE TABLE stream_journal (
    run_id TEXT NOT NULL,
    response INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    line BYTEA NOT NULL,
    PRIMARY KEY (run_id, response, seq)
);

-- Streaming input across processes (spec agent-ref §S2.4, [IN1-a]): per agent, the run whose
-- inbox is open and the last seq given out; the accepted messages, numbered per agent.
CREATE TABLE inbox_runs (
    agent_uuid TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    open BOOLEAN NOT NULL,
    last_seq BIGINT NOT NULL DEFAULT 0,
    taken BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX inbox_runs_by_run ON inbox_runs (run_id);
CREATE TABLE inbox (
    agent_uuid TEXT NOT NULL,
    seq BIGINT NOT NULL,
    run_id TEXT NOT NULL,
    text TEXT NOT NULL,
    accepted_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (agent_uuid, seq)
);

-- What file-changing tools changed, per call, under the agent's step (spec agent-ref §22):
-- seq orders an agent's records; step is the agent's counter of file-changing steps.
CREATE TABLE file_snapshots (
    agent_uuid TEXT NOT NULL,
    seq BIGINT NOT NULL,
    step BIGINT NOT NULL,
    run_id TEXT NOT NULL,
    run_step BIGINT NOT NULL,
    changes BYTEA NOT NULL,
    PRIMARY KEY (agent_uuid, seq)
);

// [S7.4-a] The resume property, against a real `agent-ref serve` (tests/js/test_js_client.py
// starts it): whatever the chunking of the bodies and whichever connections are cut, a run
// read through connect() gives every event once and in order, and the same transcript as
// an undisturbed read of the same run. fast-check, several fixed seeds. Each run is
// written to ENVELOPE_TEST_REPORT for the Python side (strict validator, Python decoder).
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { connect, DONE } from "../../../js/index.mjs";
import { disturbedFetch, report, server, undisturbed, yes } from "./support.mjs";

const { base, auth } = server();
const SEEDS = [20261125, 7, 4242];
/** Runs of the demo agent (ScriptedModel): a tool call, a pause answered, subagents, subagents with a pause. */
const PROMPTS = [
  "What is 5 + (10 * 2)?",
  "Please confirm: delete the temp files",
  "Research tides and volcanoes in parallel",
  "Research tides and volcanoes (confirm first) in parallel",
];
const seen = { reconnects: 0, byId: 0, fromStart: 0, responses: 0, cutToolResults: 0 };

const scenario = fc.record({
  prompt: fc.constantFrom(...PROMPTS),
  // per connection, in order (the first POST, resumptions, continuations): cut after n body bytes, or never
  cuts: fc.array(fc.option(fc.oneof(fc.nat({ max: 60 }), fc.nat({ max: 9000 })), { nil: null, freq: 3 }), { maxLength: 7 }),
  sizes: fc.array(fc.oneof(fc.integer({ min: 1, max: 7 }), fc.integer({ min: 8, max: 2048 })), { minLength: 1, maxLength: 6 }),
});

async function disturbedRun({ prompt, cuts, sizes }) {
  const log = [];
  const run = connect(`${base}/agent/run`, {
    body: { prompt },
    headers: auth,
    fetch: disturbedFetch({ cuts, sizes }, log),
    retries: cuts.length + 1,
    backoff: { initialMs: 0, maxMs: 0 },
  });
  const data = [];
  for await (const event of run.events()) {
    data.push(event.data);
    if (event.data === DONE && run.pending) await run.answer(yes(run.pending));
  }
  await run.finished;
  return { run, data, log };
}

for (const seed of SEEDS) {
  test(`[S7.4-a] seed ${seed}: any chunking and any cut connections give the undisturbed run`, async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (plan) => {
        const { run, data, log } = await disturbedRun(plan);
        const reference = await undisturbed(base, auth, run.runId, run.response + 1);
        assert.deepEqual(data, reference.lines); // every event once, in order
        assert.deepEqual(run.transcript(), reference.transcript);
        assert.equal(run.done, true);
        seen.reconnects += run.reconnects;
        seen.responses += run.response + 1;
        for (const entry of log) {
          if (entry.url.includes("/stream")) entry.lastEventId ? seen.byId++ : seen.fromStart++;
          if (entry.url.endsWith("/tool_results") && entry.cut !== null) seen.cutToolResults++;
        }
        report(run);
      }),
      { seed, numRuns: 8, endOnFailure: true },
    );
  });
}

test("[S7.4-a] the property did cut connections: resumed by Last-Event-ID, from a response's start, across pauses", () => {
  assert.ok(seen.reconnects >= 10, JSON.stringify(seen));
  assert.ok(seen.byId >= 5, JSON.stringify(seen));
  assert.ok(seen.fromStart >= 1, JSON.stringify(seen));
  assert.ok(seen.responses > SEEDS.length * 8, JSON.stringify(seen)); // some runs paused and went on
});

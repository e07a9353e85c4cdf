// [CN2-b] The client reads a dead response on into its continuation (tests/js/test_js_continue.py
// starts the servers): server A was killed mid-run; server B, in checkpoint mode, closed A's
// response with an `error` of type `lost` and no `meta_final`, and continues the run live in
// the next response. A client following response 0 must read on into response 1 by itself.
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { connect, DONE } from "../../../js/index.mjs";
import { report } from "./support.mjs";

const base = process.env.ENVELOPE_TEST_SERVER;
const runId = process.env.ENVELOPE_TEST_RUN;
const gate = process.env.ENVELOPE_TEST_GATE;
if (!base || !runId || !gate) throw new Error("run these tests through tests/js/test_js_continue.py");

const envelopes = (lines, type) =>
  lines.filter((l) => l !== DONE).map((l) => JSON.parse(l)).filter((e) => e.type === type).map((e) => JSON.parse(e.delta));

test("[CN2-b] a response closed lost without meta_final is followed into the next one, live", async () => {
  const run = connect(`${base}/agent/runs/${runId}/stream?response=0`);
  const lines = [];
  const responses = [];
  for await (const event of run.events()) {
    lines.push(event.data);
    responses.push(event.response);
    if (event.data.includes('\\"continued\\": true')) writeFileSync(gate, ""); // B's model waited for this
  }
  assert.equal(run.done, true);
  assert.equal(run.response, 1);
  assert.deepEqual([...new Set(responses)], [0, 1]);
  assert.equal(lines.filter((l) => l === DONE).length, 2);
  const dead = lines.slice(0, lines.indexOf(DONE) + 1);
  assert.deepEqual(envelopes(dead, "error").map((e) => e.type), ["lost"]);
  assert.deepEqual(envelopes(dead, "meta_final"), []);
  assert.deepEqual(envelopes(lines, "meta_final").map((m) => m.stop_reason), ["end_turn"]);
  report(run);
});

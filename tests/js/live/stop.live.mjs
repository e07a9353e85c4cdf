// [S7.4-c] run.stop() against a real server (tests/js/test_js_stop.py starts it, with a
// scripted model that holds a call marked "[hold]" until a gate file that never appears):
// a streaming run stopped mid-call ends on its own stream with its closing lines; a second
// stop is a 409; a paused run is abandoned and its closing response read as the next one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { connect, DONE, HTTPError } from "../../../js/index.mjs";
import { report } from "./support.mjs";

const base = process.env.ENVELOPE_TEST_SERVER;
if (!base) throw new Error("ENVELOPE_TEST_SERVER is not set: run these tests through tests/js/test_js_stop.py");
const HELD = "[hold] What is 5 + (10 * 2)?";
const CONFIRM = "Please confirm: delete the temp files";

function finalOf(lines) {
  const metas = lines.filter((l) => l !== DONE).map((l) => JSON.parse(l)).filter((e) => e.type === "meta_final");
  assert.equal(metas.length, 1);
  return JSON.parse(metas[0].delta);
}

test("[S7.4-c] stop() mid-call: the stream ends with error aborted, meta_final aborted, [DONE]; a second stop is 409", async () => {
  const began = Date.now();
  const run = connect(`${base}/agent/run`, { body: { prompt: HELD } });
  const lines = [];
  let answer = null;
  for await (const event of run.events()) {
    lines.push(event.data);
    if (answer === null && event.data !== DONE && JSON.parse(event.data).type !== "meta_init") {
      answer = await run.stop(); // the model holds after its first delta, for up to a minute unless stopped
    }
  }
  assert.ok(answer, "nothing came before the hold");
  assert.ok(Date.now() - began < 20_000, `the stop took ${Date.now() - began} ms: the hold was not cut`);
  assert.equal(answer.stopped, true);
  assert.equal(answer.stop_reason, "aborted");
  assert.equal(answer.run_id, run.runId);
  assert.equal(run.done, true);
  assert.equal(lines.at(-1), DONE);
  assert.equal(finalOf(lines).stop_reason, "aborted");
  assert.ok(lines.some((l) => l !== DONE && JSON.parse(l).type === "error" && l.includes("aborted")));
  report(run);
  await assert.rejects(run.stop(), (err) => err instanceof HTTPError && err.status === 409 && err.type === "run_finished" && err.body.error.stop_reason === "aborted");
});

test("[S7.4-c] stop() at a pause abandons the run: its closing response is read as the next one", async () => {
  const run = connect(`${base}/agent/run`, { body: { prompt: CONFIRM } });
  const lines = [];
  let answer = null;
  for await (const event of run.events()) {
    lines.push(event.data);
    if (answer === null && event.data === DONE && run.pending) answer = await run.stop();
  }
  assert.equal(answer.stop_reason, "abandoned");
  assert.equal(run.response, 1);
  assert.equal(run.done, true);
  assert.equal(run.pending, null);
  assert.equal(finalOf(lines.slice(lines.indexOf(DONE) + 1)).stop_reason, "abandoned");
  report(run);
});

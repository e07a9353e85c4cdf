// [S7.3-a]..[S7.6-a] connect() against a real `agent-ref serve` with a token
// (tests/js/test_js_client.py starts it): auth headers, the frontend-tool round trip and
// its refusals, following a run by GET, the growing transcript, the backoff, the
// AbortSignal, and the id checks that refuse a stream with an event missing or repeated.
import { test } from "node:test";
import assert from "node:assert/strict";
import { connect, DONE, HTTPError, ResumeError, parseEventId } from "../../../js/index.mjs";
import { disturbedFetch, report, server, undisturbed, yes } from "./support.mjs";

const { base, auth } = server();
const CONFIRM = "Please confirm: delete the temp files";
const CALC = "What is 5 + (10 * 2)?";

test("[S7.3-a] no token: the server's 401 is an HTTPError from the iteration and from started; nothing ran", async () => {
  const run = connect(`${base}/agent/run`, { body: { prompt: CALC } });
  await assert.rejects(run.started, (err) => err instanceof HTTPError && err.status === 401);
  await assert.rejects(async () => {
    for await (const _ of run) assert.fail("no envelope may come");
  }, (err) => err instanceof HTTPError && err.status === 401);
  assert.equal(run.runId, null);
});

test("[S7.3-a] envelopes, events and transcripts of one run agree with an undisturbed read; headers asked before each request", async () => {
  let asked = 0;
  const headers = async () => {
    asked++;
    return new Headers(auth);
  };
  const run = connect(`${base}/agent/run`, { body: { prompt: CALC }, headers, fetch: disturbedFetch({ cuts: [900] }), backoff: { initialMs: 1 } });
  const envelopes = [];
  const snapshots = [];
  await Promise.all([
    (async () => {
      for await (const env of run) envelopes.push(env);
    })(),
    (async () => {
      for await (const t of run.transcripts()) snapshots.push(t);
    })(),
  ]);
  report(run);
  assert.equal(asked, 1); // the POST; the resumption went with the run's resume link instead ([RL2-a], tests/js/test_links_client.py)
  assert.equal(run.reconnects, 1);
  const reference = await undisturbed(base, auth, run.runId, 1);
  assert.deepEqual(envelopes, reference.lines.filter((l) => l !== DONE).map((l) => JSON.parse(l)));
  assert.deepEqual(snapshots.at(-1), reference.transcript);
  assert.ok(snapshots.length >= 2, "the transcript grows while the run streams");
  const sizes = snapshots.map((t) => Object.values(t.agents).reduce((n, a) => n + a.blocks.length, 0));
  assert.deepEqual(sizes, [...sizes].sort((a, b) => a - b));
  assert.equal(parseEventId(run.lastEventId).run, run.runId);
  const root = Object.keys(reference.transcript.agents)[0];
  assert.equal(run.agentUuid, root);
});

test("[S7.5-a] a pause: pending, a refused answer (422) leaves it paused, the right answer goes on; GET follows the run", async () => {
  const run = connect(`${base}/agent/run`, { body: { prompt: CONFIRM }, headers: auth });
  let refused = null;
  for await (const event of run.events()) {
    if (event.data !== DONE || !run.pending) continue;
    assert.equal(run.pending[0].name, "confirm");
    await assert.rejects(run.answer([{ tool_use_id: "toolu_not_pending", content: "yes" }]), (err) => {
      refused = err;
      return err instanceof HTTPError && err.status === 422 && err.type === "invalid_tool_results";
    });
    assert.ok(run.pending, "still paused after a refused answer");
    await run.answer(yes(run.pending));
    assert.equal(run.pending, null);
  }
  assert.ok(refused);
  report(run);
  assert.equal(run.response, 1);
  await assert.rejects(run.answer(yes([{ tool_use_id: "x" }])), /not waiting/);
  const reference = await undisturbed(base, auth, run.runId, 2);
  assert.deepEqual(run.transcript(), reference.transcript);
  // following the finished run by GET gives its latest response, and ends there
  const follower = connect(`${base}/agent/runs/${run.runId}/stream`, { headers: auth });
  const lines = [];
  for await (const event of follower.events()) lines.push(event.data);
  assert.equal(follower.api.href, `${base}/agent/`);
  assert.deepEqual(lines, reference.lines.slice(reference.lines.indexOf(DONE) + 1));
});

test("[S7.4-b] backoff: delays grow by the factor up to the cap; retries spent in a row give a ResumeError", async () => {
  const real = disturbedFetch({ cuts: [700] });
  let calls = 0;
  const failing = async (url, init) => {
    if (calls++ === 0) return real(url, init);
    throw new TypeError("network error (test: nothing answers)");
  };
  const delays = [];
  const started = Date.now();
  const run = connect(`${base}/agent/run`, {
    body: { prompt: CALC },
    headers: auth,
    fetch: failing,
    retries: 4,
    backoff: { initialMs: 20, factor: 3, maxMs: 200 },
    onReconnect: (info) => delays.push(info.delayMs),
  });
  await assert.rejects(run.finished, (err) => err instanceof ResumeError && /broke 5 times in a row/.test(err.message));
  assert.deepEqual(delays, [20, 60, 180, 200]);
  assert.ok(Date.now() - started >= 460, "the delays were waited");
  assert.equal(calls, 5);
  report(run);
});

test("[S7.4-c] an AbortSignal stops the reading at once: pending waits and iterations reject with its reason", async () => {
  const controller = new AbortController();
  const run = connect(`${base}/agent/run`, { body: { prompt: CONFIRM }, headers: auth, signal: controller.signal });
  const reason = new Error("the user left");
  await assert.rejects(async () => {
    for await (const event of run.events()) if (event.data === DONE) controller.abort(reason); // paused: nobody answers
  }, (err) => err === reason);
  await assert.rejects(run.finished, (err) => err === reason);
  await assert.rejects(run.answer(yes(run.pending ?? [])), (err) => err === reason);
  report(run);
  const early = connect(`${base}/agent/run`, { body: { prompt: CALC }, headers: auth, signal: AbortSignal.abort(reason) });
  await assert.rejects(early.started, (err) => err === reason);
});

/** A fetch whose first body loses (or repeats) the SSE event with the given seq. */
function tampering(seq, mode) {
  return async (url, init) => {
    const real = await fetch(url, init);
    const text = await real.text();
    const events = text.split("\n\n");
    const at = events.findIndex((e) => e.includes(`:0:${seq}\n`));
    assert.ok(at >= 0, `event ${seq} in the body`);
    if (mode === "missing") events.splice(at, 1);
    else events.splice(at, 0, events[at]);
    return new Response(events.join("\n\n"), { status: real.status, headers: real.headers });
  };
}

for (const mode of ["missing", "repeated"]) {
  test(`[S7.4-d] an event ${mode} in the stream is refused (ResumeError), never shown`, async () => {
    const run = connect(`${base}/agent/run`, { body: { prompt: CALC }, headers: auth, fetch: tampering(3, mode) });
    await assert.rejects(run.finished, (err) => err instanceof ResumeError && err.message.includes(`an event is ${mode}`));
    assert.equal(parseEventId(run.lastEventId).seq, mode === "missing" ? 2 : 3);
    report(run);
  });
}

test("[S7.4-b] the first request is never retried; a resumption answered 5xx is, as an attempt", async () => {
  let posts = 0;
  const down = async () => {
    posts++;
    throw new TypeError("network error (test: refused)");
  };
  const run = connect(`${base}/agent/run`, { body: { prompt: CALC }, headers: auth, fetch: down });
  await assert.rejects(run.finished, (err) => err instanceof TypeError && /refused/.test(err.message));
  assert.equal(posts, 1);
  const cut = disturbedFetch({ cuts: [800] });
  let resumes = 0;
  const flaky = async (url, init) => {
    if (url.includes("/stream") && resumes++ === 0) return new Response("busy", { status: 503 });
    return cut(url, init);
  };
  const again = connect(`${base}/agent/run`, { body: { prompt: CALC }, headers: auth, fetch: flaky, backoff: { initialMs: 1 } });
  await again.finished;
  report(again);
  assert.equal(again.reconnects, 2);
  assert.equal(resumes, 2);
  assert.deepEqual(again.transcript(), (await undisturbed(base, auth, again.runId, 1)).transcript);
});

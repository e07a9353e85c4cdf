// [RL2-a]..[RL2-d] the client's resume links against a real `agent-ref serve --token`
// reached through the cutting TCP proxy of tests/js/test_links_client.py, which records
// every request head: ENVELOPE_TEST_SERVER is the proxy, ENVELOPE_TEST_DIRECT the server.
// Each test is run alone (--test-name-pattern) behind a fresh proxy that cuts its first
// connection; the Python side then reads what the proxy saw.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { connect, HTTPError } from "../../../js/index.mjs";
import { report, server, undisturbed } from "./support.mjs";

const { base, auth } = server();
const direct = process.env.ENVELOPE_TEST_DIRECT ?? base;
const CALC = "What is 5 + (10 * 2)?";

/** A deferred: a promise and its resolve, for waiting on a state instead of a time. */
function deferred() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}

/** A clock whose time moves only when the test says (advance); `armed(n)` resolves once n timers were set. */
function fakeClock() {
  const timers = new Map();
  const waits = [];
  let now = Date.now();
  let ids = 0;
  let set = 0;
  return {
    now: () => now,
    setTimeout(fn, ms) {
      const id = ++ids;
      timers.set(id, { fn, at: now + ms });
      set++;
      for (const w of waits.filter((w) => set >= w.n)) w.resolve();
      return id;
    },
    clearTimeout: (id) => timers.delete(id),
    armed(n) {
      const d = deferred();
      if (set >= n) d.resolve();
      else waits.push({ n, resolve: d.resolve });
      return d.promise;
    },
    dueIn: () => Math.min(...[...timers.values()].map((t) => t.at - now)),
    advance(ms) {
      now += ms;
      for (const [id, t] of [...timers]) {
        if (t.at <= now) {
          timers.delete(id);
          t.fn();
        }
      }
    },
  };
}

/** A fetch that logs each request (url, method, its headers) and lets `edit` change an answer's headers or body. */
function loggingFetch(log, edit = (r) => r) {
  return async (url, init = {}) => {
    const entry = { url, method: init.method ?? "GET", headers: { ...(init.headers || {}) } };
    log.push(entry);
    const answer = await fetch(url, init);
    entry.status = answer.status;
    if (entry.url.endsWith("/link")) entry.answer = await answer.clone().json();
    return edit(answer, entry);
  };
}

/** A link minted by the library's Python `mint` (tests/js/test_links_client.py gives the program): `expired` or `forged`. */
const mint = (runId, kind) =>
  execFileSync(process.env.ENVELOPE_TEST_PYTHON, ["-c", process.env.ENVELOPE_TEST_MINT, runId, kind], { encoding: "utf8" }).trim();

const tokenOf = (url) => new URL(url).searchParams.get("token");
const streams = (log) => log.filter((e) => e.method === "GET" && e.url.includes("/stream"));

/** The run read to its end; its transcript is the one read whole, without the client, straight from the server. */
async function readWhole(run) {
  await run.finished;
  report(run);
  const reference = await undisturbed(direct, auth, run.runId, run.response + 1);
  assert.deepEqual(run.transcript(), reference.transcript);
  return reference;
}

test("[RL2-a] a cut response is resumed at the link's URL with no header of the caller's but Last-Event-ID", async () => {
  const log = [];
  const run = connect(`${base}/agent/run`, {
    body: { prompt: CALC },
    headers: { ...auth, "X-Caller": "page" },
    fetch: loggingFetch(log),
    backoff: { initialMs: 1 },
  });
  const first = await run.started;
  await readWhole(run);
  assert.ok(run.reconnects >= 1, "the proxy cut the first answer");
  const resumed = streams(log);
  assert.ok(resumed.length >= 1);
  for (const entry of resumed) {
    assert.equal(tokenOf(entry.url), first.headers.get("X-Resume-Token"));
    for (const name of Object.keys(entry.headers)) assert.equal(name, "Last-Event-ID");
    assert.equal(entry.status, 200);
  }
  assert.equal(run.link.expiresAt, Number(first.headers.get("X-Resume-Expires")));
  // [RL2-d] the same link as a URL for EventSource: it needs no header at all
  const bare = await fetch(run.streamUrl({ response: 0 }));
  assert.equal(bare.status, 200);
  const reference = await undisturbed(direct, auth, run.runId, 1);
  const text = await bare.text();
  for (const line of reference.lines) assert.ok(text.includes(`data: ${line}\n`));
  assert.equal(tokenOf(run.streamUrl()), run.link.token);
  assert.equal(new URL(run.streamUrl()).pathname, `/agent/runs/${run.runId}/stream`);
});

test("[RL2-c] the link is refreshed at 4/5 of its life on the injected clock; the resumption carries the new one", async () => {
  const log = [];
  const clock = fakeClock();
  const gate = deferred();
  const hold = (answer, entry) => {
    if (entry.method !== "POST" || !entry.url.endsWith("/agent/run")) return answer;
    const reader = answer.body.getReader();
    const body = new ReadableStream({
      async pull(controller) {
        await gate.promise; // the body is held until the test has moved the clock
        const { value, done } = await reader.read().catch((err) => controller.error(err) ?? { done: true });
        if (done) controller.close();
        else controller.enqueue(value);
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: answer.status, headers: answer.headers });
  };
  const run = connect(`${base}/agent/run`, { body: { prompt: CALC }, headers: auth, fetch: loggingFetch(log, hold), clock, backoff: { initialMs: 1 } });
  const first = await run.started;
  await clock.armed(1);
  const due = clock.dueIn();
  assert.ok(due >= 240_000 && due <= 241_000, `due in ${due} ms: 4/5 of 300 s, measured on the server's clock`);
  clock.advance(239_000);
  assert.equal(log.filter((e) => e.url.endsWith("/link")).length, 0, "nothing refreshed before 4/5 of the life");
  clock.advance(2_000);
  await clock.armed(2); // the refresh answered and the next one is timed
  const refreshes = log.filter((e) => e.url.endsWith("/link"));
  assert.equal(refreshes.length, 1);
  assert.equal(refreshes[0].method, "POST");
  assert.equal(refreshes[0].headers.authorization, auth.Authorization);
  assert.deepEqual(run.link, { token: refreshes[0].answer.token, expiresAt: refreshes[0].answer.expires_at });
  assert.equal(refreshes[0].answer.stream, `/agent/runs/${run.runId}/stream?token=${run.link.token}`);
  assert.ok(first.headers.get("X-Resume-Token"));
  assert.ok(clock.dueIn() >= 240_000, "the next refresh is 4/5 of the new link's life away");
  gate.resolve();
  await readWhole(run);
  assert.ok(run.reconnects >= 1);
  for (const entry of streams(log)) assert.equal(tokenOf(entry.url), run.link.token);
});

test("[RL2-b] a resumption refused 401 token_expired refreshes the link, then resumes", async () => {
  const log = [];
  const stale = (answer, entry) => {
    if (entry.method !== "POST" || !entry.url.endsWith("/agent/run")) return answer;
    const headers = new Headers(answer.headers);
    // a link of this very run, signed by the server's key, that expired ten minutes ago
    headers.set("X-Resume-Token", mint(answer.headers.get("X-Run-Id"), "expired")); // the client's clock still says it lives
    return new Response(answer.body, { status: answer.status, headers });
  };
  const run = connect(`${base}/agent/run`, { body: { prompt: CALC }, headers: auth, fetch: loggingFetch(log, stale), backoff: { initialMs: 1 } });
  await readWhole(run);
  const [refused, ...resumed] = streams(log);
  assert.equal(refused.status, 401);
  const refresh = log.find((e) => e.url.endsWith("/link"));
  assert.ok(log.indexOf(refresh) > log.indexOf(refused), "refreshed after the refusal");
  assert.ok(resumed.length >= 1);
  for (const entry of resumed) {
    assert.equal(entry.status, 200);
    assert.equal(tokenOf(entry.url), run.link.token);
  }
  assert.notEqual(tokenOf(refused.url), run.link.token);
});

test("[RL2-b] a link the server calls forged is an HTTPError, not refreshed", async () => {
  const log = [];
  const forged = (answer, entry) => {
    if (entry.method !== "POST" || !entry.url.endsWith("/agent/run")) return answer;
    const headers = new Headers(answer.headers);
    headers.set("X-Resume-Token", mint(answer.headers.get("X-Run-Id"), "forged")); // a key the server does not hold
    return new Response(answer.body, { status: answer.status, headers });
  };
  const run = connect(`${base}/agent/run`, { body: { prompt: CALC }, headers: auth, fetch: loggingFetch(log, forged), backoff: { initialMs: 1 } });
  await assert.rejects(run.finished, (err) => err instanceof HTTPError && err.status === 401 && err.type === "token_bad_signature" && !err.message.includes("token="));
  report(run);
  assert.equal(log.filter((e) => e.url.endsWith("/link")).length, 0);
});

test("[RL2-a] with no link header the resumption goes with the caller's headers, as before links", async () => {
  const log = [];
  const strip = (answer) => {
    const headers = new Headers(answer.headers);
    headers.delete("X-Resume-Token");
    headers.delete("X-Resume-Expires");
    return new Response(answer.body, { status: answer.status, headers });
  };
  const run = connect(`${base}/agent/run`, { body: { prompt: CALC }, headers: auth, fetch: loggingFetch(log, strip), backoff: { initialMs: 1 } });
  await readWhole(run);
  assert.equal(run.link, null);
  assert.equal(run.streamUrl(), null);
  const resumed = streams(log);
  assert.ok(resumed.length >= 1);
  for (const entry of resumed) {
    assert.equal(tokenOf(entry.url), null);
    assert.equal(entry.headers.authorization, auth.Authorization);
  }
});

// What the live client tests share: the server they run against (a real `agent-ref serve`
// started by tests/js/test_js_client.py, its URL and token in the environment), a fetch
// that re-chunks bodies and cuts connections, and an undisturbed read of a run.
import { appendFileSync } from "node:fs";
import { SSEReader, Reconstructor } from "../../../js/envelope-decoder.mjs";

/** The server's base URL and token, or a failure: these tests never run without their server. */
export function server() {
  const base = process.env.ENVELOPE_TEST_SERVER;
  const token = process.env.ENVELOPE_TEST_TOKEN;
  if (!base || !token) throw new Error("ENVELOPE_TEST_SERVER and ENVELOPE_TEST_TOKEN are not set: run these tests through tests/js/test_js_client.py");
  return { base, token, auth: { Authorization: `Bearer ${token}` } };
}

/**
 * A fetch that re-chunks every 2xx body into `sizes` (cyclically) and cuts the i-th
 * connection after `cuts[i]` body bytes (null: never): the real request is aborted (the
 * server sees its client go) and the body errors as a browser's does on a reset.
 */
export function disturbedFetch({ cuts = [], sizes = [65536] } = {}, log = []) {
  let connection = 0;
  return async (url, init = {}) => {
    const cut = connection < cuts.length ? cuts[connection] : null;
    connection++;
    const inner = new AbortController();
    const outer = init.signal;
    if (outer) {
      if (outer.aborted) inner.abort(outer.reason);
      else outer.addEventListener("abort", () => inner.abort(outer.reason), { once: true });
    }
    log.push({ url, lastEventId: (init.headers || {})["Last-Event-ID"] ?? null, cut });
    const real = await fetch(url, { ...init, signal: inner.signal });
    if (!real.ok || !real.body || real.status === 204) return real;
    const reader = real.body.getReader();
    let sent = 0;
    let k = 0;
    const body = new ReadableStream({
      async pull(controller) {
        const { value, done } = await reader.read();
        if (done) return controller.close();
        let chunk = value;
        while (chunk.length) {
          let piece = chunk.subarray(0, sizes[k++ % sizes.length]);
          if (cut !== null && sent + piece.length >= cut) {
            piece = piece.subarray(0, cut - sent);
            if (piece.length) controller.enqueue(piece);
            inner.abort(); // the real connection goes
            controller.error(new TypeError("network error (test: the connection was cut)"));
            return;
          }
          controller.enqueue(piece);
          sent += piece.length;
          chunk = chunk.subarray(piece.length);
        }
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    });
    return new Response(body, { status: real.status, statusText: real.statusText, headers: real.headers });
  };
}

/** Each response of a finished run read whole, without the client: its event data (`[DONE]` included) and one transcript of all. */
export async function undisturbed(base, auth, runId, responses) {
  const rebuilt = new Reconstructor();
  const lines = [];
  for (let i = 0; i < responses; i++) {
    const answer = await fetch(`${base}/agent/runs/${encodeURIComponent(runId)}/stream?response=${i}`, { headers: auth });
    if (answer.status !== 200) throw new Error(`response ${i} of ${runId}: HTTP ${answer.status}`);
    const reader = new SSEReader();
    const bytes = new Uint8Array(await answer.arrayBuffer());
    for (const event of [...reader.feed(bytes), ...reader.close()]) {
      lines.push(event.data);
      rebuilt.feed(event.data);
    }
  }
  return { lines, transcript: rebuilt.transcript() };
}

/** Answer every pending frontend call "yes". */
export const yes = (pending) => pending.map((call) => ({ tool_use_id: call.tool_use_id, content: "yes" }));

/**
 * Note a run for the Python side (ENVELOPE_TEST_REPORT): its responses are read back there
 * through the strict validator, and a finished run's transcript is compared with Python's.
 */
export function report(run) {
  const path = process.env.ENVELOPE_TEST_REPORT;
  if (!path) throw new Error("ENVELOPE_TEST_REPORT is not set: run these tests through tests/js/test_js_client.py");
  const entry = { run_id: run.runId, responses: run.response + 1, transcript: run.done ? run.transcript() : null };
  appendFileSync(path, JSON.stringify(entry) + "\n");
}

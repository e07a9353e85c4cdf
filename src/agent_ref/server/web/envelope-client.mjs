// envelope-client.mjs: a client of an envelope-streaming agent server (spec/server.md §1-§2,
// the JS side in §7), for browsers and node. No dependencies but envelope-decoder.mjs.
//
// Owns: starting a run (or opening one), reading each SSE response with fetch streaming,
// resuming a broken response with Last-Event-ID and a bounded backoff, checking that the
// event ids neither skip nor repeat, the frontend-tool round trip (answer()), and
// offering the run as envelopes, raw events and the growing transcript. Does not own:
// rendering, asking the user, retrying a request that never got an answer (that is the
// caller's `fetch` option). stop() asks the server to stop the run (spec server §1.4).
// Resume links (spec server §RL, [RL2-a]..): a response that carries `X-Resume-Token` makes
// the run's own GETs of its stream (resumptions, continuations) go with `?token=` and none
// of the caller's headers; the link is refreshed with the caller's headers at 4/5 of its
// life and when a resumption is refused `401 token_expired`.
//
//   import { connect } from "./envelope-client.mjs";
//   const run = connect("/agent/run", { body: { prompt: "hi" }, headers: { Authorization: `Bearer ${token}` } });
//   for await (const transcript of run.transcripts()) render(transcript);
//   // at a pause (run.pending is the list of frontend calls): await run.answer([{ tool_use_id, content }])
//   // a Stop button: await run.stop() (the stream then ends with its closing lines)
import { DONE, DecodeError, Reconstructor, SSEReader } from "./envelope-decoder.mjs";

/** An answer other than 2xx (or a 204 where events were due): its status and the server's error, if JSON. */
export class HTTPError extends Error {
  constructor(status, body, url) {
    const error = body && typeof body === "object" && body.error && typeof body.error === "object" ? body.error : null;
    super(error ? `${error.type}: ${error.message}` : `HTTP ${status} from ${url}`);
    this.name = "HTTPError";
    this.status = status;
    this.body = body;
    this.type = error ? String(error.type) : null;
  }
}

/** A response that cannot be resumed: ids that skip or repeat, no id to resume from, retries spent. */
export class ResumeError extends Error {
  constructor(message, { cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "ResumeError";
  }
}

const EVENT_ID = /^([A-Za-z0-9_-]{1,128}):(\d+):(\d+)$/;

/** `{run, response, seq}` of an id of the form `run:response:seq` (spec server §2.1-a), or null. */
export function parseEventId(id) {
  const m = typeof id === "string" ? EVENT_ID.exec(id) : null;
  return m ? { run: m[1], response: Number(m[2]), seq: Number(m[3]) } : null;
}

function abortError(signal) {
  if (signal.reason !== undefined) return signal.reason;
  const err = new Error("the run's signal was aborted");
  err.name = "AbortError";
  return err;
}

/** The clock of link lifetimes and refresh timers (spec server [RL2-c]): wall-clock ms and its timers. */
const REAL_CLOCK = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (id) => clearTimeout(id),
};
/** The part of a link's life after which it is refreshed (spec server [RL1-b], [RL2-c]). */
const REFRESH_AT = 4 / 5;

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(abortError(signal));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

async function readError(response) {
  try {
    return await response.json();
  } catch {
    return null;
  }
}

/** The pending frontend calls when the root agent's last block is awaiting_frontend_tools, else null. */
function pendingOf(transcript) {
  const root = Object.keys(transcript.agents)[0];
  if (root === undefined) return null;
  const blocks = transcript.agents[root].blocks;
  const last = blocks[blocks.length - 1];
  return last && last.type === "awaiting_frontend_tools" && Array.isArray(last.data) ? last.data : null;
}

/**
 * Whether the response just read was closed dead and its run continues in the next one
 * (spec server [CN2-a]): the run's main agent ends with an `error` of type `lost` and no
 * `meta_final` after it (a server in checkpoint mode continued the run, agent-ref [CK1.4-b]).
 */
function continuedOf(transcript) {
  const root = Object.keys(transcript.agents)[0];
  if (root === undefined) return false;
  const blocks = transcript.agents[root].blocks;
  const last = blocks[blocks.length - 1];
  return Boolean(last && last.type === "error" && last.data && last.data.type === "lost");
}

/**
 * One run of an agent, over as many HTTP responses as it takes (spec server §2): the
 * first (a POST or GET of `url`), the continuations after each answer() or after a
 * response closed dead whose run went on (spec server [CN2-b]), and the
 * resumptions of any of them that broke. Made by connect(); reading starts at once.
 */
export class Run {
  constructor(url, options = {}) {
    const base = typeof location === "object" && location ? location.href : undefined;
    this.url = new URL(String(url), base);
    const path = this.url.pathname;
    const at = path.lastIndexOf("/runs/");
    /** The agent API's root: `…/agent/` of `…/agent/run` or of `…/agent/runs/ID/stream`. */
    this.api = new URL(options.api ?? (at >= 0 ? path.slice(0, at + 1) : "."), this.url);
    this._options = {
      body: options.body,
      method: options.method ?? (options.body === undefined ? "GET" : "POST"),
      headers: options.headers ?? {},
      fetch: options.fetch ?? ((...args) => globalThis.fetch(...args)),
      retries: options.retries ?? 5,
      initialMs: options.backoff?.initialMs ?? 250,
      maxMs: options.backoff?.maxMs ?? 4000,
      factor: options.backoff?.factor ?? 2,
      onReconnect: options.onReconnect ?? null,
      clock: options.clock ?? REAL_CLOCK,
    };
    this._abort = new AbortController();
    this.signal = this._abort.signal;
    if (options.signal) {
      const outer = options.signal;
      if (outer.aborted) this._abort.abort(outer.reason);
      else outer.addEventListener("abort", () => this._abort.abort(outer.reason), { once: true });
    }
    /** The run id, from `X-Run-Id`, the event ids or meta_init's `run_id` (spec server §2.2-a). */
    this.runId = null;
    /** The agent to answer for (`X-Agent-Uuid`, else the first agent of the stream). */
    this.agentUuid = null;
    /** Index of the response being read (spec server §2.1-a). */
    this.response = null;
    /** Id of the last event applied: what a resumption sends as Last-Event-ID. */
    this.lastEventId = null;
    /** Resumptions so far (all responses). */
    this.reconnects = 0;
    /** The frontend calls the run waits for (an `awaiting_frontend_tools` payload) while paused, else null. */
    this.pending = null;
    /** True once a response ended with `[DONE]` and no pause: the run is over. */
    this.done = false;
    /** The resume link held (spec server [RL2-a]): `{token, expiresAt}` (Unix seconds), or null. */
    this.link = null;
    /** Why the last timed refresh of the link failed (the next resumption refreshes again), or null. */
    this.linkError = null;
    this._linkDue = null; // the clock's ms at which the link is refreshed
    this._linkTimer = null;
    this._refreshing = null;
    this._reading = false;
    this._rebuilt = new Reconstructor();
    this._events = [];
    this._error = null;
    this._wake = [];
    this._responseDone = null;
    this._nextResponse = null;
    this._answering = false;
    /** Resolves with the first HTTP response once it answered 2xx; rejects as the run does before that. */
    this.started = new Promise((resolve, reject) => {
      this._started = { resolve, reject };
    });
    /** Resolves when the run is over; rejects with what ended it otherwise. */
    this.finished = this._pump();
    this.started.catch(() => {});
    this.finished.catch(() => {});
  }

  /** The transcript of every response so far, as one recording (spec envelope §8.5): `{done, agents}`. */
  transcript() {
    return this._rebuilt.transcript();
  }

  /** Every envelope (a parsed object; `[DONE]` left out), from the run's first, until the run is over. */
  async *[Symbol.asyncIterator]() {
    for await (const event of this.events()) {
      if (event.data !== DONE) yield JSON.parse(event.data);
    }
  }

  /** Every SSE event `{data, id, response}` (`[DONE]` included), from the run's first, until the run is over. */
  async *events() {
    for (let i = 0; ; ) {
      if (i < this._events.length) {
        yield this._events[i++];
        continue;
      }
      if (this._error !== null) throw this._error;
      if (this.done) return;
      await this._changed();
    }
  }

  /** The growing transcript: the current one, then again after each batch of new events, the last when the run is over. */
  async *transcripts() {
    let seen = -1;
    for (;;) {
      if (this._events.length !== seen) {
        seen = this._events.length;
        yield this.transcript();
        continue;
      }
      if (this._error !== null) throw this._error;
      if (this.done) return;
      await this._changed();
    }
  }

  /**
   * Send the frontend tools' results (spec server §1.2-a): `POST {api}tool_results`.
   * Waits for the current response's `[DONE]`; resolves once the continuation answered
   * 2xx (the iterations then go on with it); rejects with HTTPError (422, 409…) and the
   * run stays paused.
   */
  async answer(toolResults) {
    if (this._responseDone !== null) await this._responseDone.catch(() => {});
    if (this._error !== null) throw this._error;
    if (this.pending === null || this._answering) throw new Error("the run is not waiting for tool results");
    this._answering = true;
    try {
      const url = new URL("tool_results", this.api);
      const response = await this._fetch(url, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ agent_uuid: this.agentUuid, tool_results: toolResults }),
      });
      if (!response.ok) throw new HTTPError(response.status, await readError(response), url.href);
      this.pending = null;
      this._nextResponse(response);
    } finally {
      this._answering = false;
    }
  }

  /**
   * Ask the server to stop the run (spec server §1.4): `POST {api}runs/{runId}/stop`,
   * with the run's headers but not its signal (a run no longer read can still be
   * stopped). A streaming run ends on its own stream with its closing lines (`error`
   * aborted, `meta_final`, `[DONE]`); a paused run is abandoned, and its closing response
   * is read as the run's next one. Resolves with the server's answer (`{run_id,
   * agent_uuid, stopped, stop_reason, status}`; `stopped: false` when it answered 202,
   * the run not ended within its bound); rejects with HTTPError (409 `run_finished`
   * when the run had already ended, with its `stop_reason`).
   */
  async stop() {
    if (this.runId === null) await this.started.catch(() => {});
    if (this.runId === null) throw new Error("the run's id is not known yet: nothing to stop");
    const url = new URL(`runs/${encodeURIComponent(this.runId)}/stop`, this.api);
    const response = await this._options.fetch(url.href, {
      method: "POST",
      headers: await this._headers({ "Content-Type": "application/json" }),
      body: "{}",
    });
    const answer = await readError(response);
    if (!response.ok) throw new HTTPError(response.status, answer, url.href);
    if (answer && answer.stop_reason === "abandoned" && this.pending !== null && !this._answering) {
      // The closing response of the pause (spec server §1.4-b): follow it like a continuation.
      const next = new URL(`runs/${encodeURIComponent(this.runId)}/stream`, this.api);
      next.searchParams.set("response", String((this.response ?? 0) + 1));
      const closing = await this._getStream(next);
      if (!closing.ok) throw new HTTPError(closing.status, await readError(closing), next.href);
      this.pending = null;
      this._nextResponse(closing);
    }
    return answer;
  }

  /**
   * The URL of the run's stream with the current link (spec server [RL2-d]), for code
   * that reads it with `EventSource` (which cannot send `Authorization`); `response`
   * picks a response (`?response=N`). Null while no link is held.
   */
  streamUrl({ response } = {}) {
    if (this.link === null || this.runId === null) return null;
    const url = new URL(`runs/${encodeURIComponent(this.runId)}/stream`, this.api);
    if (response !== undefined) url.searchParams.set("response", String(response));
    url.searchParams.set("token", this.link.token);
    return url.href;
  }

  /**
   * A fresh link now (spec server [RL1-e]): `POST {api}runs/{runId}/link` with the run's
   * headers. Resolves with the new `link`; rejects with HTTPError (404 `links_off` when
   * the server mints none) and the link held stays as it was.
   */
  refreshLink() {
    if (this._refreshing !== null) return this._refreshing;
    this._refreshing = (async () => {
      if (this.runId === null) throw new Error("the run's id is not known yet: no link to refresh");
      const url = new URL(`runs/${encodeURIComponent(this.runId)}/link`, this.api);
      const response = await this._options.fetch(url.href, { method: "POST", headers: await this._headers({}), signal: this.signal });
      const answer = await readError(response);
      if (!response.ok) throw new HTTPError(response.status, answer, url.href);
      if (!answer || typeof answer.token !== "string" || !Number.isInteger(answer.expires_at)) {
        throw new HTTPError(response.status, answer, url.href);
      }
      this.linkError = null;
      this._setLink(answer.token, answer.expires_at, response.headers.get("Date"));
      return this.link;
    })().finally(() => {
      this._refreshing = null;
    });
    return this._refreshing;
  }

  /**
   * Hold a link: its life is measured on the server's clock (`X-Resume-Expires` minus the
   * answer's `Date`) and counted on the client's from now, so a client whose clock is off
   * still refreshes at 4/5 of it (spec server [RL2-c]).
   */
  _setLink(token, expiresAt, date) {
    const clock = this._options.clock;
    const served = date ? Date.parse(date) : NaN;
    const lifeMs = Math.max(0, expiresAt * 1000 - (Number.isFinite(served) ? served : clock.now()));
    this.link = { token, expiresAt };
    this._linkDue = clock.now() + lifeMs * REFRESH_AT;
    this._armLink();
  }

  /** While a response is read, a timer refreshes the link at its due time; a failure is kept in linkError. */
  _armLink() {
    const clock = this._options.clock;
    if (this._linkTimer !== null) clock.clearTimeout(this._linkTimer);
    this._linkTimer = null;
    if (!this._reading || this.link === null || this.signal.aborted) return;
    this._linkTimer = clock.setTimeout(() => {
      this._linkTimer = null;
      this.refreshLink().catch((err) => {
        this.linkError = err;
      });
    }, Math.max(0, this._linkDue - clock.now()));
  }

  _disarmLink() {
    this._reading = false;
    this._armLink();
  }

  /**
   * GET a stream of this run the client asks for by itself (a resumption, a continuation):
   * with a link, `?token=` and only `headers` (none of the caller's: the link is the whole
   * right, spec server [RL2-a]), refreshed first when due, and once more when the server
   * says `401 token_expired` ([RL2-b]); without one, as any request of the run.
   */
  async _getStream(url, headers = {}) {
    if (this.link === null) return this._fetch(url, { headers });
    if (this._options.clock.now() >= this._linkDue) await this.refreshLink();
    for (let refreshed = false; ; refreshed = true) {
      if (this.signal.aborted) throw abortError(this.signal);
      const linked = new URL(url);
      linked.searchParams.set("token", this.link.token);
      const response = await this._options.fetch(linked.href, { method: "GET", headers: { ...headers }, signal: this.signal });
      if (response.status !== 401) return response;
      const body = await readError(response);
      const error = new HTTPError(401, body, url.href); // the link stays out of the error's text
      if (refreshed || error.type !== "token_expired") throw error;
      await this.refreshLink();
    }
  }

  _changed() {
    return new Promise((resolve) => this._wake.push(resolve));
  }

  _notify() {
    const wake = this._wake;
    this._wake = [];
    for (const resolve of wake) resolve();
  }

  async _headers(extra) {
    const given = typeof this._options.headers === "function" ? await this._options.headers() : this._options.headers;
    const out = {};
    if (given) new Headers(given).forEach((value, name) => (out[name] = value));
    return { ...out, ...extra };
  }

  async _fetch(url, { method = "GET", headers = {}, body } = {}) {
    if (this.signal.aborted) throw abortError(this.signal);
    const init = { method, headers: await this._headers(headers), signal: this.signal };
    if (body !== undefined) init.body = body;
    return this._options.fetch(url.href, init);
  }

  async _pump() {
    try {
      const first = this._options;
      const body = first.body === undefined ? undefined : JSON.stringify(first.body);
      const headers = body === undefined ? {} : { "Content-Type": "application/json" };
      let response = await this._fetch(this.url, { method: first.method, headers, body });
      if (!response.ok) throw new HTTPError(response.status, await readError(response), this.url.href);
      this._started.resolve(response);
      for (;;) {
        let finish;
        this._responseDone = new Promise((resolve, reject) => (finish = { resolve, reject }));
        this._responseDone.catch(() => {});
        try {
          await this._follow(response);
          finish.resolve();
        } catch (err) {
          finish.reject(err);
          throw err;
        }
        if (this.pending === null && continuedOf(this.transcript())) {
          response = await this._continuation(); // spec server [CN2-b]: read on into the next response
          continue;
        }
        if (this.pending === null) {
          this.done = true;
          this._notify();
          return;
        }
        this._notify();
        response = await new Promise((resolve, reject) => {
          this._nextResponse = resolve;
          if (this.signal.aborted) reject(abortError(this.signal));
          else this.signal.addEventListener("abort", () => reject(abortError(this.signal)), { once: true });
        });
      }
    } catch (err) {
      this._error = err;
      this._started.reject(err);
      this._notify();
      throw err;
    }
  }

  /**
   * The response a dead one continues in (spec server [CN2-a]): `GET runs/{id}/stream?response=N+1`,
   * asked again with the backoff while it answers 404 (the continuing process may not have
   * journaled its first line yet); any other refusal is an HTTPError.
   */
  async _continuation() {
    const url = new URL(`runs/${encodeURIComponent(this.runId)}/stream`, this.api);
    url.searchParams.set("response", String((this.response ?? 0) + 1));
    for (let failures = 0; ; failures++) {
      const response = await this._getStream(url);
      if (response.ok) return response;
      const error = new HTTPError(response.status, await readError(response), url.href);
      if (response.status !== 404 || failures >= this._options.retries) throw error;
      await sleep(Math.min(this._options.maxMs, this._options.initialMs * this._options.factor ** failures), this.signal);
    }
  }

  /** Read one response to its `[DONE]`, resuming it while it breaks (spec server §2.3-a, §7.4). */
  async _follow(response) {
    this._reading = true;
    try {
      this._take(response, true);
      return await this._following(response);
    } finally {
      this._disarmLink();
    }
  }

  async _following(response) {
    const state = { seq: -1, applied: 0 };
    let failures = 0;
    for (;;) {
      const before = state.applied;
      let broke = response.failed; // a resumption that got no answer
      if (broke === undefined) {
        try {
          if (await this._read(response, state)) return;
          broke = new Error("the response ended before [DONE]");
        } catch (err) {
          if (this.signal.aborted || !err || err.name !== "Broken") throw this.signal.aborted ? abortError(this.signal) : err;
          broke = err.cause;
        }
      }
      if (state.applied > before) failures = 0; // it got somewhere: the backoff starts again
      if (failures >= this._options.retries) {
        throw new ResumeError(`the response broke ${failures + 1} times in a row without progress; giving up`, { cause: broke });
      }
      if (this.runId === null) throw new ResumeError("the response broke before its run id was known", { cause: broke });
      if (state.applied > 0 && this.lastEventId === null) {
        throw new ResumeError("the response broke and its events carry no id to resume from", { cause: broke });
      }
      const delayMs = Math.min(this._options.maxMs, this._options.initialMs * this._options.factor ** failures);
      failures++;
      this.reconnects++;
      this._options.onReconnect?.({ attempt: failures, retries: this._options.retries, delayMs, lastEventId: this.lastEventId, response: this.response, error: broke });
      await sleep(delayMs, this.signal);
      response = await this._resume(state, broke);
    }
  }

  async _resume(state, broke) {
    const url = new URL(`runs/${encodeURIComponent(this.runId)}/stream`, this.api);
    const headers = {};
    if (state.applied > 0) headers["Last-Event-ID"] = this.lastEventId;
    else url.searchParams.set("response", String(this.response ?? 0));
    let response;
    try {
      response = await this._getStream(url, headers);
    } catch (err) {
      // only "nothing answered" is retried (the resumption or the link's refresh)
      if (this.signal.aborted || !(err instanceof TypeError)) throw err;
      return { failed: err };
    }
    if (response.status === 204) {
      throw new ResumeError("the server says this response is complete, but its [DONE] never arrived", { cause: broke });
    }
    if (response.status >= 500) {
      await response.body?.cancel().catch(() => {});
      return { failed: new HTTPError(response.status, null, url.href) };
    }
    if (!response.ok) throw new HTTPError(response.status, await readError(response), url.href);
    this._take(response);
    return response;
  }

  /** What an answer's headers say about the run (spec server §1.1-a); `fresh`: a new response, not a resumption. */
  _take(response, fresh = false) {
    const runId = response.headers.get("X-Run-Id");
    const agent = response.headers.get("X-Agent-Uuid");
    const index = response.headers.get("X-Response-Index");
    if (runId && this.runId === null) this.runId = runId;
    if (agent && this.agentUuid === null) this.agentUuid = agent;
    const token = response.headers.get("X-Resume-Token");
    const expires = response.headers.get("X-Resume-Expires");
    if (token && expires !== null && /^\d+$/.test(expires) && (runId === null || runId === this.runId)) {
      this._setLink(token, Number(expires), response.headers.get("Date")); // spec server [RL2-a]
    }
    if (index !== null && /^\d+$/.test(index)) this.response = Number(index);
    else if (fresh) this.response = null; // learnt from the event ids, if any
  }

  /** Read one HTTP body; true at `[DONE]`. A broken body throws {name: "Broken", cause}. */
  async _read(response, state) {
    if (!response.body) return false;
    const reader = response.body.getReader();
    const sse = new SSEReader();
    try {
      for (;;) {
        let chunk;
        try {
          chunk = await reader.read();
        } catch (err) {
          throw Object.assign(new Error("the connection broke"), { name: "Broken", cause: err });
        }
        if (chunk.done) return false;
        const events = sse.feed(chunk.value);
        for (const event of events) {
          this._apply(event, state);
          if (event.data === DONE) return true;
        }
        if (events.length) this._notify();
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  _apply(event, state) {
    const id = parseEventId(event.id);
    if (id !== null) {
      if (this.runId !== null && id.run !== this.runId) throw new ResumeError(`event id ${event.id} is not of run ${this.runId}`);
      if (this.response !== null && id.response !== this.response) {
        throw new ResumeError(`event id ${event.id} is not of response ${this.response}`);
      }
      if (id.seq !== state.seq + 1) {
        throw new ResumeError(`event id ${event.id} after ${this.lastEventId ?? "the start"}: an event is ${id.seq > state.seq ? "missing" : "repeated"}`);
      }
      this.runId ??= id.run;
      this.response ??= id.response;
      state.seq = id.seq;
    }
    this._rebuilt.feed(event.data);
    if (event.data === DONE) this.pending = pendingOf(this.transcript()); // known when [DONE] is yielded
    if (event.data !== DONE && (this.runId === null || this.agentUuid === null)) {
      const env = JSON.parse(event.data);
      if (this.agentUuid === null) this.agentUuid = env.agent;
      if (this.runId === null && env.type === "meta_init" && env.final) {
        const blocks = this._rebuilt.transcript().agents[env.agent].blocks;
        const meta = blocks[blocks.length - 1].data;
        if (meta && typeof meta.run_id === "string") this.runId = meta.run_id;
      }
    }
    this.lastEventId = event.id || null;
    state.applied++;
    this._events.push({ data: event.data, id: event.id, response: this.response ?? 0 });
    if (event.data === DONE) this._notify();
  }
}

/**
 * Start a run (`body` given: `POST url` with it as JSON, e.g. `connect("/agent/run", {body: {prompt}})`)
 * or follow one (`GET url`, e.g. `connect("/agent/runs/ID/stream")`), and read it to its end.
 */
export function connect(url, options = {}) {
  return new Run(url, options);
}

export { DecodeError };

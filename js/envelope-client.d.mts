// Types of envelope-client.mjs (spec/server.md §7.3-§7.6).
import { DecodeError } from "./envelope-decoder.mjs";
import type { Envelope, Transcript } from "./envelope-decoder.mjs";

/** The decoder's error, re-exported: the client throws it for content that would be corrupted. */
export { DecodeError };

/** Headers for every request of the run (the token goes here); a function is asked before each request. */
export type HeadersSource = HeadersInit | (() => HeadersInit | Promise<HeadersInit>);

export interface Backoff {
  /** Delay before the first resumption, ms (250). */
  initialMs?: number;
  /** Longest delay, ms (4000). */
  maxMs?: number;
  /** Growth per attempt without progress (2). */
  factor?: number;
}

export interface ReconnectInfo {
  /** 1 for the first attempt since the last progress. */
  attempt: number;
  retries: number;
  delayMs: number;
  lastEventId: string | null;
  response: number | null;
  /** Why: the read error, or an Error saying the body ended before `[DONE]`. */
  error: unknown;
}

/** The clock of resume links (spec server [RL2-c]): wall-clock ms and timers; tests pass a fake one. */
export interface LinkClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(id: unknown): void;
}

/** A resume link the run holds (spec server [RL2-a]). */
export interface ResumeLink {
  token: string;
  /** Unix seconds (`X-Resume-Expires`, or the refresh's `expires_at`). */
  expiresAt: number;
}

export interface ConnectOptions {
  /** A JSON body: the request is a POST of it (`{prompt}` for `/agent/run`). Without it, a GET. */
  body?: unknown;
  method?: string;
  headers?: HeadersSource;
  /** Aborts the reading (and the waits between resumptions); the run goes on on the server (spec server §4.1). */
  signal?: AbortSignal;
  /** The fetch to use (globalThis.fetch); a caller's wrapper may add retries or ask for a token. */
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
  /** Resumptions in a row without a new event before giving up (5). */
  retries?: number;
  backoff?: Backoff;
  /** The agent API's root (`…/agent/`); by default taken from `url`. */
  api?: string | URL;
  /** Called before each resumption's wait. */
  onReconnect?: (info: ReconnectInfo) => void;
  /** The clock of link lifetimes and refresh timers (Date.now and the global timers); not of the backoff. */
  clock?: LinkClock;
}

/** One SSE event of the run: its data (an envelope line or `[DONE]`), its id, the response it belongs to. */
export interface RunEvent {
  data: string;
  id: string;
  response: number;
}

/** A frontend tool's result, as `POST /agent/tool_results` takes it (spec server §5.1-c). */
export interface ToolResult {
  tool_use_id: string;
  content: string | unknown[];
  is_error?: boolean;
}

/** A call the paused run waits for (an entry of `awaiting_frontend_tools`, spec agent-ref §3). */
export interface PendingCall {
  tool_use_id: string;
  name: string;
  input: unknown;
  agent?: string;
  [member: string]: unknown;
}

/** An answer other than 2xx: the status and the server's JSON error when it sent one. */
export class HTTPError extends Error {
  constructor(status: number, body: unknown, url: string);
  readonly name: "HTTPError";
  readonly status: number;
  readonly body: unknown;
  /** The server's `error.type` (`invalid_tool_results`, `agent_state`…), or null. */
  readonly type: string | null;
}

/** A response that cannot be resumed: ids that skip or repeat, no id to resume from, retries spent. */
export class ResumeError extends Error {
  constructor(message: string, options?: { cause?: unknown });
  readonly name: "ResumeError";
}

/** One run of an agent over all its HTTP responses (made by connect()). */
export class Run implements AsyncIterable<Envelope> {
  constructor(url: string | URL, options?: ConnectOptions);
  readonly url: URL;
  readonly api: URL;
  readonly signal: AbortSignal;
  readonly runId: string | null;
  readonly agentUuid: string | null;
  readonly response: number | null;
  readonly lastEventId: string | null;
  readonly reconnects: number;
  /** The calls the run waits for while paused, else null. */
  readonly pending: PendingCall[] | null;
  /** True once the run is over (a response ended with `[DONE]` and no pause). */
  readonly done: boolean;
  /** The resume link held (from `X-Resume-Token` or a refresh), or null: resumptions then use the headers. */
  readonly link: ResumeLink | null;
  /** Why the last timed refresh failed (the next resumption refreshes again), or null. */
  readonly linkError: unknown;
  /** The first HTTP response, once it answered 2xx. */
  readonly started: Promise<Response>;
  /** Settles when the run is over (or rejects with what ended it). */
  readonly finished: Promise<void>;
  /** Every response so far as one recording. */
  transcript(): Transcript;
  [Symbol.asyncIterator](): AsyncIterator<Envelope>;
  events(): AsyncIterableIterator<RunEvent>;
  transcripts(): AsyncIterableIterator<Transcript>;
  /** Send the frontend tools' results; resolves once the continuation answered 2xx. */
  answer(toolResults: ToolResult[]): Promise<void>;
  /**
   * Ask the server to stop the run (`POST …/runs/{id}/stop`); its stream then ends with
   * its closing lines. Rejects with HTTPError (409 `run_finished` if it had ended).
   */
  stop(): Promise<StopAnswer>;
  /** The run's stream URL with `?token=` of the current link (for `EventSource`), or null without a link. */
  streamUrl(options?: { response?: number }): string | null;
  /** `POST …/runs/{id}/link` with the run's headers: a fresh link; rejects with HTTPError (404 `links_off`). */
  refreshLink(): Promise<ResumeLink>;
}

/** The server's answer to a stop (spec server §1.4-a). */
export interface StopAnswer {
  run_id: string;
  agent_uuid: string;
  /** False on a 202: the stop was sent, the run had not ended within the server's bound. */
  stopped: boolean;
  /** How the run ended (`aborted`, `abandoned` for a paused run…), when it has. */
  stop_reason?: string | null;
  /** The agent's status after the stop (`idle`). */
  status?: string | null;
  message?: string;
}

/** `{run, response, seq}` of an event id `run:response:seq`, or null. */
export function parseEventId(id: string): { run: string; response: number; seq: number } | null;

/** Start a run (`body`: POST) or follow one (GET) and read it to its end. */
export function connect(url: string | URL, options?: ConnectOptions): Run;

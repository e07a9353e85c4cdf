// envelope-decoder.mjs: a standalone, dependency-free decoder of the JSON envelope
// streaming protocol (spec/envelope-v1.md), for browsers and node.
//
// Owns: reading an SSE byte stream into events (SSEReader) and rebuilding blocks per
// (agent, type) from envelope lines (Reconstructor), giving the same transcript as the
// Python `envelope.Reconstructor` (`Transcript.to_dict()`, spec §7.6) for every valid
// stream (spec/server.md §7). Does not own: networking, rendering, validation (the
// Python validator judges conformance; this file only refuses what would corrupt the
// content shown).
//
// Copy this one file into your project; it has no imports. MIT licence, as the repo.
//
//   import { SSEReader, Reconstructor } from "./envelope-decoder.mjs";
//   const reader = new SSEReader(), rebuilt = new Reconstructor();
//   for await (const chunk of response.body) {
//     for (const event of reader.feed(chunk)) rebuilt.feed(event.data);
//   }
//   rebuilt.transcript();  // {done, agents: {id: {blocks: [...]}}}
//   tree(rebuilt.transcript());  // subagents under their spawning call (spec §8.3.1)

/** The error every refusal throws: where (line index, field, spec section) and what. */
export class DecodeError extends Error {
  constructor(message, { index = null, line = null, field = null, section = null } = {}) {
    const where = [];
    if (line !== null) where.push(`line ${line}`);
    if (index !== null) where.push(`envelope ${index}`);
    const tail = [field ? ` at ${field}` : "", section ? ` (spec §${section})` : ""].join("");
    super(`${where.length ? where.join(", ") + ": " : ""}${message}${tail}`);
    this.name = "DecodeError";
    this.index = index;
    this.line = line;
    this.field = field;
    this.section = section;
  }
}

export const DONE = "[DONE]";
export const ENVELOPE_TYPES = Object.freeze([
  "meta_init", "thinking", "text", "citation", "tool_call", "server_tool_call", "tool_result",
  "tool_result_image", "server_tool_result", "awaiting_frontend_tools", "meta_files", "error", "meta_final",
  "meta_compaction", // spec §4.15: the 14th type; a control block like meta_files (its JSON in `data`)
  "meta_status", // spec §4.16: the 15th type; a routine status signal, a control block like meta_compaction
]);
const KNOWN = new Set(ENVELOPE_TYPES);
const CITATION_FIELDS = [
  "citation_type", "document_index", "document_title", "start_char_index", "end_char_index",
  "start_page_number", "end_page_number", "url", "title",
];
const CALL_TYPES = new Set(["tool_call", "server_tool_call"]);

/**
 * Incremental SSE reader (WHATWG "interpreting an event stream", spec §2.3): feed bytes
 * or text split anywhere; get {data, event, id} per dispatched event. Invalid UTF-8, a
 * line over maxLineBytes and input ending inside an event throw DecodeError.
 */
export class SSEReader {
  constructor({ maxLineBytes = 16 * 1024 * 1024 } = {}) {
    this.maxLineBytes = maxLineBytes;
    this._decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
    this._buf = "";
    this._afterCR = false;
    this._start = true;
    this._data = null; // null: no data line yet in this event
    this._event = "";
    this._lastId = "";
    this._line = 0;
    this._bytes = 0;
  }

  /** Feed a Uint8Array (or a string); returns the events completed by it. */
  feed(chunk) {
    let text;
    if (typeof chunk === "string") {
      text = chunk;
    } else {
      try {
        text = this._decoder.decode(chunk, { stream: true });
      } catch {
        throw new DecodeError(`invalid UTF-8 after byte ${this._bytes}`, { line: this._line + 1, section: "2.3-c" });
      }
      this._bytes += chunk.length;
    }
    return this._text(text);
  }

  /** End of input: throws if it stopped inside a line or an event (spec §2.3-e). */
  close() {
    let rest = "";
    try {
      rest = this._decoder.decode();
    } catch {
      throw new DecodeError("input ends inside a UTF-8 character", { line: this._line + 1, section: "2.3-c" });
    }
    const events = this._text(rest);
    if (this._buf.length > 0 || this._data !== null) {
      throw new DecodeError("input ends inside an event (no blank line after it)", { line: this._line + 1, section: "2.3-e" });
    }
    return events;
  }

  _text(text) {
    const events = [];
    if (this._start && text.length) {
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      this._start = false;
    }
    let i = 0;
    if (this._afterCR && text.length) {
      if (text[0] === "\n") i = 1; // the LF of a CRLF split across feeds
      this._afterCR = false;
    }
    let from = i;
    // The next LF and the next CR, each found by indexOf (native) and looked for again only
    // once passed: one pass over the text, not a JS loop over its characters (issue 26 §5).
    let lf = text.indexOf("\n", i);
    let cr = text.indexOf("\r", i);
    while (lf >= 0 || cr >= 0) {
      const c = cr < 0 || (lf >= 0 && lf < cr) ? 10 : 13;
      i = c === 10 ? lf : cr;
      this._lineDone(this._buf + text.slice(from, i), events);
      this._buf = "";
      if (c === 13) {
        if (i + 1 < text.length) {
          if (text.charCodeAt(i + 1) === 10) i++;
        } else {
          this._afterCR = true;
        }
      }
      from = i + 1;
      if (lf >= 0 && lf < from) lf = text.indexOf("\n", from);
      if (cr >= 0 && cr < from) cr = text.indexOf("\r", from);
    }
    this._buf += text.slice(from);
    if (this._buf.length > this.maxLineBytes) {
      throw new DecodeError(`line longer than ${this.maxLineBytes}`, { line: this._line + 1, section: "2.3-d" });
    }
    return events;
  }

  _lineDone(line, events) {
    this._line++;
    if (line === "") {
      if (this._data !== null) events.push({ data: this._data, event: this._event || "message", id: this._lastId });
      this._data = null;
      this._event = "";
      return;
    }
    if (line.startsWith("data: ")) {
      // the field of nearly every line of an envelope stream, read without slicing its name
      const value = line.slice(6);
      this._data = this._data === null ? value : this._data + "\n" + value;
      if (this._data.length > this.maxLineBytes) {
        throw new DecodeError(`event data longer than ${this.maxLineBytes}`, { line: this._line, section: "2.3-d" });
      }
      return;
    }
    if (line[0] === ":") return; // a comment (keep-alive)
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value[0] === " ") value = value.slice(1);
    if (name === "data") {
      this._data = this._data === null ? value : this._data + "\n" + value;
      if (this._data.length > this.maxLineBytes) {
        throw new DecodeError(`event data longer than ${this.maxLineBytes}`, { line: this._line, section: "2.3-d" });
      }
    } else if (name === "event") {
      this._event = value;
    } else if (name === "id") {
      if (!value.includes("\0")) this._lastId = value;
    } // retry and unknown fields: nothing to do for a reader of envelopes
  }
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether a string holds no lone surrogate (String.prototype.isWellFormed where the engine has it). */
const isWellFormed =
  typeof String.prototype.isWellFormed === "function" ? (s) => s.isWellFormed() : (s) => !LONE_SURROGATE.test(s);

function faithful(value) {
  if (typeof value === "number") return Number.isFinite(value);
  if (typeof value === "string") return isWellFormed(value);
  if (Array.isArray(value)) return value.every(faithful);
  if (value !== null && typeof value === "object") {
    return Object.entries(value).every(([k, v]) => isWellFormed(k) && faithful(v));
  }
  return true;
}

/** Whether every string of a parsed value, keys included, is well formed (no lone surrogate). */
function wellFormedStrings(value) {
  if (typeof value === "string") return isWellFormed(value);
  if (Array.isArray(value)) return value.every(wellFormedStrings);
  if (value !== null && typeof value === "object") {
    return Object.entries(value).every(([k, v]) => isWellFormed(k) && wellFormedStrings(v));
  }
  return true;
}

/**
 * Whether the strings of a parsed envelope whose members are all strings, numbers, booleans or
 * null are well formed, keys included: true or false; null when a member holds an object or an
 * array (then the line's text decides whether the whole value is walked, as below). A flat
 * envelope's strings are checked one by one (issue 26 §5: cheaper than scanning the line's text
 * for surrogates); a key equal to one of the members every envelope has is ASCII, so well formed,
 * and is not checked.
 */
function flatWellFormed(env) {
  for (const key in env) {
    switch (key) {
      case "type":
      case "agent":
      case "final":
      case "delta":
      case "id":
      case "name":
        break;
      default:
        if (!isWellFormed(key)) return false;
    }
    const value = env[key];
    if (typeof value === "string") {
      if (!isWellFormed(value)) return false;
    } else if (typeof value === "object" && value !== null) {
      return null;
    }
  }
  return true;
}

/**
 * Whether a line's text can hold a lone surrogate once parsed: a surrogate escape (\uD800-\uDFFF)
 * or a raw lone surrogate. A line with neither parses to well-formed strings, so the walk over the
 * parsed envelope is skipped (issue 26 §5: the walk was most of the decoder's cost over JSON.parse).
 * A paired escape is a false positive and costs only the walk.
 */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

function mayHoldLoneSurrogate(line) {
  return SURROGATE_ESCAPE.test(line) || !isWellFormed(line);
}

/** Deepest JSON nesting the codec reads (spec/limits.md L2); deeper payloads are given raw. */
export const MAX_NESTING_DEPTH = 256;

/** Index of the bracket that opens level limit + 1 outside strings, or -1 (one linear pass, no parsing). */
export function tooDeep(text, limit = MAX_NESTING_DEPTH) {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92) i++; // backslash: skip the escaped character
      else if (c === 34) inString = false;
    } else if (c === 34) {
      inString = true;
    } else if (c === 91 || c === 123) {
      if (++depth > limit) return i;
    } else if (c === 93 || c === 125) {
      depth--;
    }
  }
  return -1;
}

/** The JSON value of text, or text itself when it is not JSON or not representable (spec §7.5, limits L2-b). */
export function parsePayload(text) {
  if (tooDeep(text) >= 0) return text;
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    return text;
  }
  return faithful(value) ? value : text;
}

function snapshot(block) {
  const content = block.parts.join("");
  const out = { type: block.type, complete: block.complete };
  const kind = block.type;
  if (kind === "text" || kind === "thinking") {
    out.content = content;
    if (kind === "text") out.citations = block.citations.map((c) => ({ ...c }));
  } else if (CALL_TYPES.has(kind)) {
    Object.assign(out, { id: block.id, name: block.name, input: parsePayload(content) });
  } else if (kind === "tool_result") {
    Object.assign(out, { id: block.id, name: block.name, content, images: block.images.map((i) => ({ ...i })) });
  } else if (kind === "server_tool_result") {
    Object.assign(out, { id: block.id, name: block.name, content });
  } else {
    out.data = parsePayload(content);
  }
  return out;
}

/** The DecodeError of envelope `index`: `message`, with where (field, spec section) in `extra`. */
function failAt(index, message, extra = {}) {
  return new DecodeError(message, { index, ...extra });
}

const REQUIRED = [["type", "string"], ["agent", "string"], ["final", "boolean"], ["delta", "string"]];
const OPTIONAL_STRINGS = ["id", "name", "src", "media_type"];

/** The error of the first required member that is missing or of the wrong kind (spec §3.1-a). */
function requiredError(env, index) {
  for (const [field, kind] of REQUIRED) {
    if (!(field in env)) return failAt(index, `missing ${field}`, { field: `$.${field}`, section: "3.1-a" });
    if (typeof env[field] !== kind) return failAt(index, `expected ${kind}`, { field: `$.${field}`, section: "3.1-a" });
  }
  return null;
}

/** The error of the first optional string member that is present with another kind, or null. */
function optionalError(env, index) {
  for (const field of OPTIONAL_STRINGS) {
    if (field in env && typeof env[field] !== "string") return failAt(index, "expected string", { field: `$.${field}` });
  }
  return null;
}

/**
 * Rebuilds blocks per (agent, type) (spec §7): feed each envelope line (a string, or an
 * already parsed object) and "[DONE]"; transcript() any time. One small machine per key:
 * IDLE --chunk--> OPEN --final--> IDLE; a final on IDLE opens and closes in one line.
 */
export class Reconstructor {
  constructor({ maxBlockBytes = 256 * 1024 * 1024, maxOpenBlocks = 65536 } = {}) {
    this.maxBlockBytes = maxBlockBytes;
    this.maxOpenBlocks = maxOpenBlocks;
    this._agents = new Map(); // agent -> [block]
    this._open = new Map(); // "agent\u0000type" -> block, in the order the blocks opened
    this._route = new Map(); // agent -> Map(type -> block): the same open blocks, found per line without building a key
    this._lastText = new Map();
    this._citing = new Map();
    this._count = 0;
    this.done = false;
  }

  _setOpen(agent, kind, block) {
    this._open.set(agent + "\u0000" + kind, block);
    let kinds = this._route.get(agent);
    if (kinds === undefined) this._route.set(agent, (kinds = new Map()));
    kinds.set(kind, block);
  }

  _closeOpen(agent, kind) {
    this._open.delete(agent + "\u0000" + kind);
    this._route.get(agent)?.delete(kind);
  }

  _openBlock(agent, kind) {
    const kinds = this._route.get(agent);
    return kinds === undefined ? undefined : kinds.get(kind);
  }

  // A measured hot loop (issue 26 §5, benchmarks/delivery.py): one call per line, kept in one
  // function so that the per-line path allocates nothing beyond JSON.parse's own objects.
  /** Apply one line. Returns the agent it was routed to (null for [DONE]). */
  feed(line) {
    const index = this._count++;
    const afterDone = this.done;
    if (afterDone && line === DONE) throw failAt(index, "content after [DONE]", { section: "8.2-a" });
    if (line === DONE) {
      this.done = true;
      return null;
    }
    const text = typeof line === "string";
    let env = line;
    if (text) {
      try {
        env = JSON.parse(line);
      } catch (exc) {
        throw failAt(index, `not JSON: ${exc.message}`, { section: "3.1-a" });
      }
    }
    if (env === null || typeof env !== "object" || Array.isArray(env)) throw failAt(index, "an envelope must be a JSON object", { field: "$" });
    if (text) {
      const flat = flatWellFormed(env);
      if (flat === false || (flat === null && mayHoldLoneSurrogate(line) && !wellFormedStrings(env))) {
        throw failAt(index, "not JSON this library reads: an escaped lone surrogate in a string", { section: "6.4" });
      }
    }
    const kind = env.type;
    const agent = env.agent;
    const final = env.final;
    const delta = env.delta;
    if (typeof kind !== "string" || typeof agent !== "string" || typeof final !== "boolean" || typeof delta !== "string") {
      // a member missing, or of another kind, or (an object fed in) a getter: the first in the spec's order
      const error = requiredError(env, index);
      if (error !== null) throw error;
    }
    const id = env.id;
    if (
      (typeof id !== "string" && "id" in env) ||
      (typeof env.name !== "string" && "name" in env) ||
      (typeof env.src !== "string" && "src" in env) ||
      (typeof env.media_type !== "string" && "media_type" in env)
    ) {
      const error = optionalError(env, index);
      if (error !== null) throw error;
    }
    if (afterDone) {
      // spec §8.5-a: in a recording, a meta_init after [DONE] starts the next response;
      // the agents go on, no block stays open across it. Anything else stays an error.
      if (kind !== "meta_init") throw failAt(index, "content after [DONE] (only a meta_init may follow it, to start the next response)", { section: "8.2-a" });
      this._open.clear();
      this._route.clear();
      this._citing.clear();
      this.done = false;
    }
    if (!KNOWN.has(kind)) throw failAt(index, `unknown envelope type ${JSON.stringify(kind)}`, { field: "$.type", section: "4.1" });
    if (kind === "tool_result_image") {
      this._image(env, index);
      return agent;
    }
    if (kind === "citation") {
      if (text && tooDeep(line) >= 0) {
        throw failAt(index, `nested deeper than MAX_NESTING_DEPTH=${MAX_NESTING_DEPTH}`, { section: "L2-a" });
      }
      this._citation(env, index);
      return agent;
    }
    const blockId = typeof id === "string" ? id : null;
    let block = this._openBlock(agent, kind);
    if (block === undefined) {
      block = { type: kind, agent, id: blockId, name: typeof env.name === "string" ? env.name : null, complete: false, parts: [], size: 0, citations: [], images: [] };
      if (!final) {
        if (this._open.size >= this.maxOpenBlocks) throw failAt(index, `more than ${this.maxOpenBlocks} blocks open at once`);
        this._setOpen(agent, kind, block);
      }
      const blocks = this._agents.get(agent);
      if (blocks === undefined) this._agents.set(agent, [block]);
      else blocks.push(block);
    } else if (blockId !== null && block.id !== null && blockId !== block.id) {
      throw failAt(index, `id ${JSON.stringify(blockId)} differs from the open block's id ${JSON.stringify(block.id)}`, { field: "$.id", section: "7.2-d" });
    }
    if (delta) {
      block.size += delta.length;
      if (block.size > this.maxBlockBytes) throw failAt(index, `block larger than ${this.maxBlockBytes}`);
      block.parts.push(delta);
    }
    if (final) {
      block.complete = true;
      this._closeOpen(agent, kind);
      if (kind === "text") this._lastText.set(agent, block);
      else if (kind === "error") this._maybeDiscard(block, (message, extra) => failAt(index, message, extra));
    }
    return agent;
  }

  _image(env, index) {
    const block = this._openBlock(env.agent, "tool_result");
    if (block === undefined) throw failAt(index, "tool_result_image with no open tool_result of its agent", { section: "7.3-a" });
    if ("id" in env && block.id !== null && env.id !== block.id) {
      throw failAt(index, `tool_result_image id ${JSON.stringify(env.id)} differs from the open tool_result's id`, { field: "$.id", section: "7.3-b" });
    }
    if (!("src" in env) || !("media_type" in env)) {
      throw failAt(index, "tool_result_image needs src and media_type", { field: "src" in env ? "$.media_type" : "$.src", section: "4.9" });
    }
    block.images.push({ src: env.src, media_type: env.media_type });
  }

  _citation(env, index) {
    const agent = env.agent;
    let target = this._citing.get(agent);
    if (target === undefined) {
      target = this._lastText.get(agent);
      if (target === undefined) throw failAt(index, "citation with no completed text block of its agent before it", { section: "7.4-a" });
      this._citing.set(agent, target);
      this._setOpen(agent, "citation", target);
    }
    if (!("citation_type" in env)) throw failAt(index, "citation needs citation_type", { field: "$.citation_type", section: "4.5" });
    const citation = { cited_text: env.delta };
    for (const name of CITATION_FIELDS) if (name in env) citation[name] = env[name];
    target.citations.push(citation);
    if (env.final) {
      this._citing.delete(agent);
      this._closeOpen(agent, "citation");
    }
  }

  _maybeDiscard(block, fail) {
    const data = parsePayload(block.parts.join(""));
    if (data === null || typeof data !== "object" || Array.isArray(data) || data.type !== "attempt_discarded") return;
    const count = data.discard_blocks;
    if (typeof count !== "number" || !Number.isInteger(count) || count < 0) {
      throw fail(`discard_blocks must be a non-negative integer, got ${JSON.stringify(count)}`, { section: "7.7-b" });
    }
    const blocks = this._agents.get(block.agent);
    const at = blocks.lastIndexOf(block);
    if (count > at) throw fail(`attempt_discarded asks to drop ${count} blocks, but only ${at} precede it`, { section: "7.7-b" });
    const dropped = blocks.slice(at - count, at);
    if (dropped.some((b) => !b.complete)) throw fail("attempt_discarded would drop a block that is still open", { section: "7.7-b" });
    blocks.splice(at - count, count); // spec §7.7-a: the n blocks before the signal go, the signal stays
    if (dropped.includes(this._lastText.get(block.agent))) {
      const remaining = blocks.filter((b) => b.type === "text" && b.complete);
      if (remaining.length) this._lastText.set(block.agent, remaining[remaining.length - 1]);
      else this._lastText.delete(block.agent);
    }
  }

  /** Keys ("agent", "type") of the blocks open now. */
  openBlocks() {
    return [...this._open.keys()].map((k) => k.split("\u0000"));
  }

  /**
   * {done, agents: {agent: {blocks: [...]}}}: the same JSON as Python's Transcript.to_dict().
   * A tool_call whose id an earlier tool_call of its agent has is that call's edit, the input
   * it ran with (spec §4.6-a), marked `edit: true`.
   */
  transcript() {
    const agents = {};
    for (const [agent, blocks] of this._agents) {
      const seen = new Set();
      agents[agent] = {
        blocks: blocks.map((block) => {
          const out = snapshot(block);
          if (block.type === "tool_call") {
            if (seen.has(block.id)) out.edit = true;
            seen.add(block.id);
          }
          return out;
        }),
      };
    }
    return { done: this.done, agents };
  }
}

/** Rebuild a whole SSE body (Uint8Array or string) at once. */
export function reconstructSSE(body) {
  const reader = new SSEReader();
  const rebuilt = new Reconstructor();
  for (const event of [...reader.feed(body), ...reader.close()]) rebuilt.feed(event.data);
  return rebuilt.transcript();
}

/** Subagents nested deeper than this are refused (spec §8.3.1-c: bounds the work and the recursion). */
export const MAX_AGENT_DEPTH = 64;

function parentOf(agent, blocks) {
  for (const block of blocks) {
    if (block.type !== "meta_init" || !block.complete) continue;
    const data = block.data;
    if (data === null || typeof data !== "object" || Array.isArray(data) || !Object.hasOwn(data, "parent_agent")) return null;
    for (const key of ["parent_agent", "parent_tool_use_id"]) {
      const value = data[key];
      if (typeof value !== "string" || value === "") {
        throw new DecodeError(`agent ${JSON.stringify(agent)}: meta_init ${key} must be a non-empty string, got ${JSON.stringify(value ?? null)}`, { field: `$.delta.${key}`, section: "8.3.1" });
      }
    }
    return [data.parent_agent, data.parent_tool_use_id];
  }
  return null;
}

/**
 * Nest each agent under the tool_call that spawned it (spec §8.3.1), from its meta_init's
 * `parent_agent` and `parent_tool_use_id`: the same JSON as Python's
 * `envelope.tree(transcript).to_dict()`, `{done, agents: [node]}`, each node
 * `{agent, parent_agent?, parent_tool_use_id?, orphan?, blocks}` with its children under
 * their call's block as `agents`. An agent whose parent or call is not in the transcript,
 * that names itself or is part of a cycle stays a root marked `orphan` (nothing dropped);
 * a link key that is not a non-empty string, or a chain deeper than MAX_AGENT_DEPTH,
 * throws DecodeError (§8.3.1-c).
 */
export function tree(transcript) {
  const agents = new Map(Object.entries(transcript.agents).map(([id, entry]) => [id, entry.blocks]));
  const parents = new Map();
  const orphans = new Set();
  for (const [agent, blocks] of agents) {
    const link = parentOf(agent, blocks);
    if (link === null) continue;
    const [parent, call] = link;
    const calls = new Set((agents.get(parent) || []).filter((b) => b.type === "tool_call").map((b) => b.id));
    if (parent === agent || !agents.has(parent) || !calls.has(call)) orphans.add(agent);
    else parents.set(agent, link);
  }
  for (const agent of [...parents.keys()]) {
    // a cycle has no root: break it at each of its agents
    const seen = new Set([agent]);
    let up = parents.get(agent);
    while (up !== undefined) {
      if (seen.has(up[0])) {
        for (const a of seen) orphans.add(a);
        break;
      }
      seen.add(up[0]);
      if (seen.size > MAX_AGENT_DEPTH) {
        throw new DecodeError(`agent ${JSON.stringify(agent)} is nested more than ${MAX_AGENT_DEPTH} subagents deep`, { field: "$.delta.parent_agent", section: "8.3.1" });
      }
      up = parents.get(up[0]);
    }
  }
  for (const agent of orphans) parents.delete(agent);
  const kids = new Map();
  for (const agent of agents.keys()) {
    if (parents.has(agent)) {
      const parent = parents.get(agent)[0];
      if (!kids.has(parent)) kids.set(parent, []);
      kids.get(parent).push(agent);
    }
  }
  const build = (agent) => {
    const declared = orphans.has(agent) ? parentOf(agent, agents.get(agent)) : parents.get(agent) || null;
    const byCall = new Map();
    for (const child of kids.get(agent) || []) {
      const call = parents.get(child)[1];
      if (!byCall.has(call)) byCall.set(call, []);
      byCall.get(call).push(build(child));
    }
    const blocks = agents.get(agent).map((block) => {
      if (block.type !== "tool_call" || !byCall.has(block.id)) return block;
      const out = { ...block, agents: byCall.get(block.id) };
      byCall.delete(block.id);
      return out;
    });
    const node = { agent };
    if (declared !== null) Object.assign(node, { parent_agent: declared[0], parent_tool_use_id: declared[1] });
    if (orphans.has(agent)) node.orphan = true;
    node.blocks = blocks;
    return node;
  };
  return { done: transcript.done, agents: [...agents.keys()].filter((a) => !parents.has(a)).map(build) };
}

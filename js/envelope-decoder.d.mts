// Types of envelope-decoder.mjs (spec/server.md §7.1-§7.2; the JSON shapes are envelope-v1 §7.6).

/** One envelope line, parsed: the base fields (envelope-v1 §3.1) and the optional ones. */
export interface Envelope {
  type: EnvelopeType;
  agent: string;
  final: boolean;
  delta: string;
  id?: string;
  name?: string;
  src?: string;
  media_type?: string;
  [member: string]: unknown;
}

export type EnvelopeType =
  | "meta_init"
  | "thinking"
  | "text"
  | "citation"
  | "tool_call"
  | "server_tool_call"
  | "tool_result"
  | "tool_result_image"
  | "server_tool_result"
  | "awaiting_frontend_tools"
  | "meta_files"
  | "error"
  | "meta_final"
  | "meta_compaction"
  | "meta_status";

/** A JSON payload, or its raw text when it is not strict JSON (envelope-v1 §7.5). */
export type Payload = unknown;

export interface Citation {
  cited_text: string;
  citation_type: string;
  document_index?: unknown;
  document_title?: unknown;
  start_char_index?: unknown;
  end_char_index?: unknown;
  start_page_number?: unknown;
  end_page_number?: unknown;
  url?: unknown;
  title?: unknown;
}

export interface Image {
  src: string;
  media_type: string;
}

export interface TextBlock {
  type: "text";
  complete: boolean;
  content: string;
  citations: Citation[];
}

export interface ThinkingBlock {
  type: "thinking";
  complete: boolean;
  content: string;
}

export interface CallBlock {
  type: "tool_call" | "server_tool_call";
  complete: boolean;
  id: string | null;
  name: string | null;
  input: Payload;
  /** A tool_call repeating an earlier one's id: the input the call ran with (spec §4.6-a). Absent otherwise. */
  edit?: true;
}

export interface ToolResultBlock {
  type: "tool_result";
  complete: boolean;
  id: string | null;
  name: string | null;
  content: string;
  images: Image[];
}

export interface ServerToolResultBlock {
  type: "server_tool_result";
  complete: boolean;
  id: string | null;
  name: string | null;
  content: string;
}

/** meta_init, meta_final, meta_files, meta_compaction, meta_status, error, awaiting_frontend_tools: their JSON in `data`. */
export interface DataBlock {
  type:
    | "meta_init"
    | "meta_final"
    | "meta_files"
    | "meta_compaction"
    | "meta_status"
    | "error"
    | "awaiting_frontend_tools";
  complete: boolean;
  data: Payload;
}

export type Block = TextBlock | ThinkingBlock | CallBlock | ToolResultBlock | ServerToolResultBlock | DataBlock;

/** The same JSON as Python's `Transcript.to_dict()`. */
export interface Transcript {
  done: boolean;
  agents: Record<string, { blocks: Block[] }>;
}

/** A block of a tree node: a spawning tool_call carries the agents it spawned. */
export type TreeBlock = Block | (CallBlock & { agents: TreeNode[] });

export interface TreeNode {
  agent: string;
  parent_agent?: string;
  parent_tool_use_id?: string;
  orphan?: true;
  blocks: TreeBlock[];
}

/** The same JSON as Python's `envelope.tree(transcript).to_dict()` (envelope-v1 §8.3.1). */
export interface AgentTree {
  done: boolean;
  agents: TreeNode[];
}

/** One dispatched SSE event: its data, its event name ("message" by default) and the last id seen. */
export interface SSEEvent {
  data: string;
  event: string;
  id: string;
}

export interface DecodeErrorDetails {
  index?: number | null;
  line?: number | null;
  field?: string | null;
  section?: string | null;
}

/** What every refusal throws: where (envelope index, line, field, spec section) and what. */
export class DecodeError extends Error {
  constructor(message: string, details?: DecodeErrorDetails);
  readonly name: "DecodeError";
  readonly index: number | null;
  readonly line: number | null;
  readonly field: string | null;
  readonly section: string | null;
}

export const DONE: "[DONE]";
export const ENVELOPE_TYPES: readonly EnvelopeType[];
export const MAX_NESTING_DEPTH: number;
export const MAX_AGENT_DEPTH: number;

/** Incremental SSE reader (WHATWG rules): feed bytes or text split anywhere. */
export class SSEReader {
  constructor(options?: { maxLineBytes?: number });
  readonly maxLineBytes: number;
  /** The events completed by this chunk. */
  feed(chunk: Uint8Array | string): SSEEvent[];
  /** End of input; throws DecodeError when it stopped inside a line or an event. */
  close(): SSEEvent[];
}

/** Rebuilds blocks per (agent, type) from envelope lines (envelope-v1 §7). */
export class Reconstructor {
  constructor(options?: { maxBlockBytes?: number; maxOpenBlocks?: number });
  readonly maxBlockBytes: number;
  readonly maxOpenBlocks: number;
  /** True after `[DONE]` (until a next response's meta_init). */
  readonly done: boolean;
  /** Apply one line (a string, or an already parsed envelope); the agent it was routed to, null for `[DONE]`. */
  feed(line: string | Envelope): string | null;
  /** Keys [agent, type] of the blocks open now. */
  openBlocks(): [string, string][];
  transcript(): Transcript;
}

/** Index of the bracket that opens nesting level `limit + 1` outside strings, or -1. */
export function tooDeep(text: string, limit?: number): number;
/** The JSON value of `text`, or `text` itself when it is not strict JSON or too deep. */
export function parsePayload(text: string): Payload;
/** Rebuild a whole SSE body at once. */
export function reconstructSSE(body: Uint8Array | string): Transcript;
/** Nest each agent under the tool_call that spawned it (envelope-v1 §8.3.1). */
export function tree(transcript: Transcript): AgentTree;

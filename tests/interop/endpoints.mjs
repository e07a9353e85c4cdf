// The other protocols' own clients against a real `agent-ref serve` (issue 27 item 5).
//
//   node endpoints.mjs agui BASE TOKEN THREAD [PROMPT] -> HttpAgent: a prompt, then the confirm calls answered
//   node endpoints.mjs chat BASE TOKEN CHAT     -> useChat's logic (AbstractChat + DefaultChatTransport),
//                                                  onToolCall answering confirm, sent again automatically
//   node endpoints.mjs resume BASE CHAT GATE    -> a response cut by the client, picked up again with
//                                                  the chat's resumeStream (the transport's reconnect)
//
// Each prints one JSON object on stdout: what the client ended with, and what it saw.
// Every wait is bounded: the whole script gives up after 90 s.

import { writeFileSync } from "node:fs";
import { HttpAgent } from "@ag-ui/client";
import { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls } from "ai";

const PROMPT = "What is 2 + 3? Please confirm";
setTimeout(() => {
  process.stderr.write("endpoints.mjs: gave up after 90 s\n");
  process.exit(3);
}, 90_000).unref();

// The state useChat keeps in React, kept in plain fields (what @ai-sdk/react's ChatState does).
class State {
  constructor(messages = []) {
    this.messages = messages;
    this.status = "ready";
    this.error = undefined;
  }
  pushMessage = (m) => {
    this.messages = this.messages.concat(m);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (i, m) => {
    this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)];
  };
  snapshot = (value) => structuredClone(value);
}

class Chat extends AbstractChat {
  constructor({ messages, ...init }) {
    super({ ...init, state: new State(messages) });
  }
}

// fetch, recorded: every request the client made and the status it got
const requests = [];
const realFetch = globalThis.fetch;
async function recordingFetch(url, init = {}) {
  const response = await realFetch(url, init);
  requests.push({
    method: init.method ?? "GET",
    url: String(url),
    body: init.body ? JSON.parse(init.body) : null,
    status: response.status,
    vercelHeader: response.headers.get("x-vercel-ai-ui-message-stream"),
    runId: response.headers.get("x-run-id"),
  });
  return response;
}

async function agui(base, token, thread, prompt = PROMPT) {
  globalThis.fetch = recordingFetch;
  const agent = new HttpAgent({ url: `${base}/agui`, threadId: thread, headers: { Authorization: `Bearer ${token}` } });
  const tools = [
    {
      name: "confirm",
      description: "Ask the user to confirm",
      parameters: { type: "object", properties: { question: { type: "string" } } },
    },
  ];
  const runs = [];
  agent.subscribe({ onEvent: ({ event }) => runs[runs.length - 1].push(event) });
  agent.addMessage({ id: "u1", role: "user", content: prompt });
  runs.push([]);
  const first = await agent.runAgent({ tools });
  // the client's part of AG-UI's client-tool flow: answer the calls the run left pending
  const answered = new Set(agent.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
  const pending = agent.messages
    .flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []) : []))
    .filter((c) => !answered.has(c.id));
  for (const call of pending) {
    if (call.function.name !== "confirm") throw new Error(`a pending call of ${call.function.name}`);
    agent.addMessage({ id: `t-${call.id}`, role: "tool", toolCallId: call.id, content: "yes" });
  }
  runs.push([]);
  const second = await agent.runAgent({ tools });
  return { runs, messages: agent.messages, pending: pending.map((c) => c.id), results: [first.result, second.result], requests };
}

async function chat(base, token, id) {
  globalThis.fetch = recordingFetch;
  const calls = [];
  const errors = [];
  const c = new Chat({
    id,
    transport: new DefaultChatTransport({ api: `${base}/api/chat`, headers: { Authorization: `Bearer ${token}` } }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onError: (e) => errors.push(String(e)),
    onToolCall: ({ toolCall }) => {
      calls.push({ name: toolCall.toolName, id: toolCall.toolCallId, dynamic: toolCall.dynamic ?? false });
      // useChat's frontend tool: answered in the browser, not awaited (the AI SDK's own advice)
      if (toolCall.toolName === "confirm") c.addToolOutput({ tool: "confirm", toolCallId: toolCall.toolCallId, output: "yes" });
    },
  });
  await c.sendMessage({ text: PROMPT });
  return { messages: c.messages, status: c.status, errors, calls, requests };
}

async function resume(base, id, gate) {
  globalThis.fetch = recordingFetch;
  const transport = new DefaultChatTransport({ api: `${base}/api/chat` });
  const before = await transport.reconnectToStream({ chatId: id });
  const user = { id: "u1", role: "user", parts: [{ type: "text", text: "What is 6 * 7?" }] };
  // the first tab: reads until the (gated) calculator call is out, then goes away
  const abort = new AbortController();
  const stream = await transport.sendMessages({ chatId: id, messages: [user], trigger: "submit-message", abortSignal: abort.signal });
  const seen = [];
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) throw new Error("the stream ended before the calculator call");
    seen.push(value.type);
    if (value.type === "tool-input-available") break;
  }
  abort.abort();
  await reader.cancel().catch(() => {});
  // the second tab: the same chat, picked up with useChat's resumeStream; the gate opens once it is connected
  let opened = false;
  const c = new Chat({
    id,
    messages: [user],
    transport,
    onData: () => {
      if (!opened) writeFileSync(gate, "open");
      opened = true;
    },
  });
  await c.resumeStream();
  const after = await transport.reconnectToStream({ chatId: id });
  return { before: before === null, seen, messages: c.messages, status: c.status, opened, after: after === null, requests };
}

const [mode, ...args] = process.argv.slice(2);
const run = { agui, chat, resume }[mode];
if (run === undefined) {
  process.stderr.write("usage: node endpoints.mjs agui|chat BASE TOKEN ID | resume BASE CHAT GATE\n");
  process.exit(2);
}
process.stdout.write(JSON.stringify(await run(...args)));
process.exit(0);

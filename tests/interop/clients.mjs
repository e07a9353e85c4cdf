// The other protocols' own client code, judging our converters' output (issue 27 item 4).
//
//   node clients.mjs check CASES.json   -> one JSON result per case on stdout
//   node clients.mjs produce OUTDIR     -> agui.sse and vercel.sse, written by their own encoders
//
// check: every AG-UI event parses with @ag-ui/core's EventSchema, the sequence passes
// @ag-ui/client's verifyEvents, and defaultApplyEvents (its message reducer) rebuilds the
// messages; every UI message chunk parses with the ai package's uiMessageChunkSchema, and
// readUIMessageStream rebuilds each response's message. The result is a projection of
// those messages per agent (texts, reasoning, tool calls, results, data parts), which the
// Python side compares with the envelope transcript.
//
// produce: an AG-UI run through @ag-ui/encoder's EventEncoder, and a UI message stream
// from the AI SDK's own streamText pipeline (a mock model; no network) through
// JsonToSseTransformStream: recordings made by their code, for our reverse converters.

import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { from, lastValueFrom, toArray } from "rxjs";
import { EventSchema } from "@ag-ui/core/schemas";
import { defaultApplyEvents, verifyEvents } from "@ag-ui/client";
import { EventEncoder } from "@ag-ui/encoder";
import {
  JsonToSseTransformStream,
  readUIMessageStream,
  streamText,
  tool,
  jsonSchema,
  uiMessageChunkSchema,
} from "ai";
import { MockLanguageModelV3, convertArrayToReadableStream } from "ai/test";

const MAIN = "<main>";

function slot(out, agent) {
  out[agent] ??= { text: [], thinking: [], calls: [], edits: [], results: [], data: [] };
  return out[agent];
}

async function checkAgui(events) {
  for (const [i, event] of events.entries()) {
    const parsed = EventSchema.safeParse(event);
    if (!parsed.success) return { error: `event ${i} (${event.type}) fails EventSchema: ${parsed.error.message}` };
  }
  try {
    await lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
  } catch (e) {
    return { error: `verifyEvents: ${e.message}` };
  }
  const input = { threadId: "thread", runId: "run", messages: [], tools: [], context: [], state: {} };
  const agent = { messages: [] };
  const mutations = await lastValueFrom(defaultApplyEvents(input, from(events), agent, []).pipe(toArray()));
  let messages = [];
  for (const m of mutations) if (m.messages !== undefined) messages = m.messages;
  const out = {};
  for (const m of messages) {
    const s = slot(out, m.subagentRunId ?? MAIN);
    if (m.role === "assistant") {
      if (typeof m.content === "string") s.text.push(m.content);
      for (const c of m.toolCalls ?? []) {
        // an edited call: the reducer keeps the model's arguments and merges our metadata,
        // which holds the input that ran (spec/interop.md I4-e)
        const edit = c.metadata?.envelope?.edit === true;
        s.calls.push([c.id, c.function.name, edit ? c.metadata.envelope.input : c.function.arguments]);
        if (edit) s.edits.push([c.id, c.function.arguments]);
      }
    } else if (m.role === "reasoning") {
      s.thinking.push(m.content);
    } else if (m.role === "tool") {
      if (typeof m.content === "string") s.results.push([m.toolCallId, m.content, []]);
      else {
        const text = m.content.filter((p) => p.type === "text").map((p) => p.text).join("");
        const images = m.content
          .filter((p) => p.type === "image")
          .map((p) => (p.source.type === "data" ? `data:${p.source.mimeType};base64,${p.source.value}` : p.source.value));
        s.results.push([m.toolCallId, text, images]);
      }
    } else {
      return { error: `unexpected message role ${m.role}` };
    }
  }
  for (const e of events) {
    if (e.type === "CUSTOM") slot(out, e.subagentRunId ?? MAIN).data.push([e.name, e.value]);
  }
  return { agents: out };
}

async function checkVercel(responses) {
  const schema = uiMessageChunkSchema();
  const out = {};
  for (const chunks of responses) {
    for (const [i, chunk] of chunks.entries()) {
      const r = await schema.validate(chunk);
      if (!r.success) return { error: `chunk ${i} (${chunk.type}) fails uiMessageChunkSchema: ${r.error.message}` };
    }
    let message;
    try {
      for await (const m of readUIMessageStream({ stream: convertArrayToReadableStream(chunks), terminateOnError: true }))
        message = m;
    } catch (e) {
      return { error: `readUIMessageStream: ${e.message}` };
    }
    const images = {};
    for (const p of message?.parts ?? []) {
      const tid = p.providerMetadata?.envelope?.toolCallId;
      if (p.type === "file" && tid !== undefined) (images[tid] ??= []).push(p.url);
    }
    for (const p of message?.parts ?? []) {
      const who = (meta) => meta?.envelope?.agent ?? MAIN;
      if (p.type === "text") slot(out, who(p.providerMetadata)).text.push(p.text);
      else if (p.type === "reasoning") slot(out, who(p.providerMetadata)).thinking.push(p.text);
      else if (p.type === "dynamic-tool") {
        const s = slot(out, who(p.callProviderMetadata));
        s.calls.push([p.toolCallId, p.toolName, p.input ?? null]);
        // an edited call: the part holds the input that ran, the model's in our metadata (I5-e)
        const call = p.callProviderMetadata?.envelope;
        if (call?.edit === true && "original" in call) s.edits.push([p.toolCallId, call.original]);
        if (p.state === "output-available") s.results.push([p.toolCallId, p.output, images[p.toolCallId] ?? []]);
      } else if (p.type.startsWith("data-")) slot(out, p.data?.agent ?? MAIN).data.push([p.type, p.data]);
      else if (p.type === "source-url" || p.type === "source-document") {
        const m = p.providerMetadata.envelope;
        slot(out, m.agent).data.push([p.type, m.citation]);
      } else if (p.type !== "file" && p.type !== "step-start") return { error: `unexpected part ${p.type}` };
    }
  }
  return { agents: out };
}

async function check(file) {
  const cases = JSON.parse(readFileSync(file, "utf8"));
  const results = {};
  for (const c of cases) {
    results[c.name] = c.protocol === "agui" ? await checkAgui(c.events) : await checkVercel(c.responses);
  }
  process.stdout.write(JSON.stringify(results));
}

async function produce(dir) {
  // AG-UI: a run with reasoning, text, a backend tool and its result, a frontend tool left pending
  const encoder = new EventEncoder();
  const run = [
    { type: "RUN_STARTED", threadId: "t1", runId: "r1" },
    { type: "REASONING_START", messageId: "rs1" },
    { type: "REASONING_MESSAGE_START", messageId: "rm1", role: "reasoning" },
    { type: "REASONING_MESSAGE_CONTENT", messageId: "rm1", delta: "The user wants the weather." },
    { type: "REASONING_MESSAGE_END", messageId: "rm1" },
    { type: "REASONING_END", messageId: "rs1" },
    { type: "TEXT_MESSAGE_START", messageId: "m1", role: "assistant" },
    { type: "TEXT_MESSAGE_CONTENT", messageId: "m1", delta: "Let me check " },
    { type: "TEXT_MESSAGE_CONTENT", messageId: "m1", delta: "the weather." },
    { type: "TEXT_MESSAGE_END", messageId: "m1" },
    { type: "TOOL_CALL_START", toolCallId: "c1", toolCallName: "get_weather", parentMessageId: "m1" },
    { type: "TOOL_CALL_ARGS", toolCallId: "c1", delta: '{"city":' },
    { type: "TOOL_CALL_ARGS", toolCallId: "c1", delta: '"Paris"}' },
    { type: "TOOL_CALL_END", toolCallId: "c1" },
    { type: "TOOL_CALL_RESULT", messageId: "tr1", toolCallId: "c1", content: "18 C, clear", role: "tool" },
    { type: "TOOL_CALL_START", toolCallId: "c2", toolCallName: "confirm_booking" },
    { type: "TOOL_CALL_ARGS", toolCallId: "c2", delta: '{"ok":true}' },
    { type: "TOOL_CALL_END", toolCallId: "c2" },
    { type: "RUN_FINISHED", threadId: "t1", runId: "r1", outcome: { type: "success", pendingToolCallIds: ["c2"] } },
  ];
  await lastValueFrom(from(run).pipe(verifyEvents(false), toArray()));
  writeFileSync(join(dir, "agui.sse"), run.map((e) => encoder.encode(e)).join(""));

  // Vercel: the AI SDK's own streamText pipeline over a mock model: reasoning, text, a tool call
  // the SDK executes, its result
  const model = new MockLanguageModelV3({
    doStream: async () => ({
      stream: convertArrayToReadableStream([
        { type: "stream-start", warnings: [] },
        { type: "reasoning-start", id: "r1" },
        { type: "reasoning-delta", id: "r1", delta: "Weather first." },
        { type: "reasoning-end", id: "r1" },
        { type: "text-start", id: "t1" },
        { type: "text-delta", id: "t1", delta: "Checking " },
        { type: "text-delta", id: "t1", delta: "Paris." },
        { type: "text-end", id: "t1" },
        { type: "tool-input-start", id: "call-1", toolName: "get_weather" },
        { type: "tool-input-delta", id: "call-1", delta: '{"city":"Paris"}' },
        { type: "tool-input-end", id: "call-1" },
        { type: "tool-call", toolCallId: "call-1", toolName: "get_weather", input: '{"city":"Paris"}' },
        {
          type: "finish",
          finishReason: { unified: "tool-calls", raw: undefined },
          usage: {
            inputTokens: { total: 3, noCache: 3, cacheRead: undefined, cacheWrite: undefined },
            outputTokens: { total: 5, text: 5, reasoning: undefined },
          },
        },
      ]),
    }),
  });
  const result = streamText({
    model,
    prompt: "weather in Paris?",
    tools: {
      get_weather: tool({
        inputSchema: jsonSchema({ type: "object", properties: { city: { type: "string" } } }),
        execute: async ({ city }) => `18 C in ${city}`,
      }),
    },
  });
  const sse = result.toUIMessageStream().pipeThrough(new JsonToSseTransformStream());
  let text = "";
  for await (const piece of sse) text += piece;
  writeFileSync(join(dir, "vercel.sse"), text);
}

// requests: the bodies their clients post. HttpAgent runs against our converted paused
// run (fetch answered with our events), then answers the pending call with a tool message;
// the AI SDK's DefaultChatTransport posts the message readUIMessageStream rebuilt from our
// chunks, with the paused call's part given its output as addToolResult does.
async function requests(file) {
  const { aguiEvents, vercelChunks, toolCallId } = JSON.parse(readFileSync(file, "utf8"));
  const { HttpAgent } = await import("@ag-ui/client");
  const { DefaultChatTransport } = await import("ai");
  const bodies = { agui: [], vercel: [] };
  let answer = aguiEvents;
  globalThis.fetch = async (url, init) => {
    (String(url).includes("agui") ? bodies.agui : bodies.vercel).push(JSON.parse(init.body));
    const sse = answer.map((e) => `data: ${typeof e === "string" ? e : JSON.stringify(e)}\n\n`).join("");
    return new Response(sse, { headers: { "content-type": "text/event-stream" } });
  };
  const agent = new HttpAgent({ url: "http://agui.invalid/agui", threadId: "abc-123" });
  agent.addMessage({ id: "u1", role: "user", content: "Plan my trip" });
  await agent.runAgent();
  answer = [
    { type: "RUN_STARTED", threadId: "abc-123", runId: "r2" },
    { type: "RUN_FINISHED", threadId: "abc-123", runId: "r2" },
  ];
  agent.addMessage({ id: "t1", role: "tool", toolCallId, content: "yes" });
  await agent.runAgent();

  let message;
  const chunks = vercelChunks.filter((c) => c !== "[DONE]");
  for await (const m of readUIMessageStream({ stream: convertArrayToReadableStream(chunks), terminateOnError: true }))
    message = m;
  const part = message.parts.find((p) => p.toolCallId === toolCallId);
  Object.assign(part, { state: "output-available", output: "yes" });
  answer = ["[DONE]"];
  const transport = new DefaultChatTransport({ api: "/api/chat" });
  const user = { id: "u1", role: "user", parts: [{ type: "text", text: "Plan my trip" }] };
  await transport.sendMessages({ chatId: "abc-123", messages: [user], trigger: "submit-message" });
  await transport.sendMessages({ chatId: "abc-123", messages: [user, message], trigger: "submit-message" });
  process.stdout.write(JSON.stringify(bodies));
}

const [mode, arg] = process.argv.slice(2);
if (mode === "check") await check(arg);
else if (mode === "produce") await produce(arg);
else if (mode === "requests") await requests(arg);
else {
  process.stderr.write("usage: node clients.mjs check CASES.json | produce OUTDIR\n");
  process.exit(2);
}

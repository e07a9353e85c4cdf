// A typed use of the envelope-stream package, as a TypeScript project writes it: compiled
// with tsc (strict) by tests/js/test_js_package.py, once against js/ and once inside a
// scratch project that installed the packed tarball, then run there on a golden stream
// served by a real server. Prints {transcript, tree, whole} as JSON.
import { connect, HTTPError, ResumeError, tree, type ConnectOptions, type Run, type StopAnswer, type Transcript } from "envelope-stream";
import { reconstructSSE, SSEReader, type Block, type Envelope } from "envelope-stream/decoder";
import { parseEventId } from "envelope-stream/client";

declare const process: { argv: string[]; stdout: { write(text: string): void }; exitCode?: number };

/** The blocks' types, per agent: narrowing on `type` reaches each block's own fields. */
function summary(transcript: Transcript): string[] {
  const out: string[] = [];
  for (const [agent, { blocks }] of Object.entries(transcript.agents)) {
    for (const block of blocks) out.push(`${agent.slice(0, 4)} ${describe(block)}`);
  }
  return out;
}

function describe(block: Block): string {
  switch (block.type) {
    case "text":
      return `text ${block.content.length} chars, ${block.citations.length} citations`;
    case "tool_call":
    case "server_tool_call":
      return `${block.type} ${block.name ?? "?"}`;
    case "tool_result":
      return `tool_result ${block.images.length} images`;
    default:
      return block.type;
  }
}

/** Never called: what the declarations must refuse. */
function refused(run: Run, envelope: Envelope): void {
  // @ts-expect-error: answers are tool results, not strings
  void run.answer(["yes"]);
  // @ts-expect-error: retries is a number
  connect("/agent/run", { retries: "5" });
  // @ts-expect-error: no such envelope type
  const kind: Envelope["type"] = "texts";
  // @ts-expect-error: a run id may be unknown yet
  const id: string = run.runId;
  // @ts-expect-error: feed takes a line or an envelope
  new SSEReader().feed(42);
  // @ts-expect-error: stop takes no argument
  void run.stop("now");
  void kind, id, envelope;
}
void refused;

/** Never called (it would stop a real run): a Stop button's handler, typed. */
async function stopButton(run: Run): Promise<string> {
  try {
    const answer: StopAnswer = await run.stop();
    return answer.stopped ? `stopped: ${answer.stop_reason ?? "?"}` : "stop sent; the run goes on ending";
  } catch (err) {
    if (err instanceof HTTPError && err.type === "run_finished") return "it had already ended";
    throw err;
  }
}
void stopButton;

async function main(streamUrl: string): Promise<void> {
  const controller = new AbortController();
  const options: ConnectOptions = {
    headers: () => ({ Authorization: "Bearer not-needed-here" }),
    signal: controller.signal,
    retries: 3,
    backoff: { initialMs: 50, maxMs: 1000, factor: 2 },
    onReconnect: ({ attempt, delayMs }) => process.stdout.write(`reconnect ${attempt} in ${delayMs} ms\n`),
  };
  const run: Run = connect(streamUrl, options);
  let last: Transcript | null = null;
  try {
    for await (const transcript of run.transcripts()) {
      last = transcript;
      if (run.pending) break; // a paused run waits for answer(); this example only reads
    }
  } catch (err) {
    if (err instanceof HTTPError) throw new Error(`refused: ${err.status} ${err.type ?? ""}`);
    if (err instanceof ResumeError) throw new Error(`broken: ${err.message}`);
    throw err;
  }
  if (last === null) throw new Error("no transcript");
  const id = run.lastEventId === null ? null : parseEventId(run.lastEventId);
  const raw = await fetch(streamUrl);
  const whole = reconstructSSE(new Uint8Array(await raw.arrayBuffer()));
  process.stdout.write(
    JSON.stringify({ transcript: last, tree: tree(last), whole, summary: summary(last), run: id?.run ?? null }),
  );
}

await main(process.argv[2]);

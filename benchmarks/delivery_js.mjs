// The JavaScript decoder against a bare JSON.parse loop over the same lines (issue 26 §5, issue 43 §3).
// Run by benchmarks/delivery.py: node --expose-gc delivery_js.mjs LINES_FILE ROUNDS [REPEAT [MIN_MS [WARMUP]]],
// LINES_FILE holding one envelope line per line ([DONE] last). What a round does (spec JD2-a, JD2-b):
// PASSES turns, each one pass over the lines by every candidate, in an order rotated turn by turn,
// so that the bare loop and the decoder alternate pass by pass; a candidate's figure for the round
// is the sum of its PASSES passes, and its ratio that sum over the bare loop's in the same round.
// PASSES is chosen once, after the first compile, so that the bare loop's passes of one round add
// up to at least MIN_MS (default 300 ms), and never below REPEAT (default 3). *Why pass by pass:*
// on this machine kind the speed of an allocating loop drifts by half within seconds (other
// processes share the caches and memory), while a spinning loop's does not; runs of 300 ms of one
// candidate, then of the other, measured different machines (quartiles 1.12-1.36), passes of 40 ms
// alternated measure the same one (1.22-1.24). *Why the sum, not the least:* the sum counts every
// pass, its collections included; the least of three single passes was the one no collection fell
// in. WARMUP rounds (default 2), run like the others, come first and are thrown away: the code is
// compiled by then and the heap at its working size. Before each pass the heap is collected (when
// gc is exposed) with gc({ type: "major" }), so that no candidate pays for the garbage another left;
// called with no argument, gc() also made V8 throw the compiled code away (js_decoder_ab.mjs). Each
// candidate is a function literal of its own: one shared by all would share its type feedback.
// Prints {node, lines, repeat, passes, one_pass_ms, warmup, gc, times: {candidate: [ms per pass, per round]},
// cpu: {candidate: [CPU ms per pass, per round]}}: judged on wall-clock time (throughput); the
// process's CPU time (process.cpuUsage) is given beside it: it counts V8's garbage collector
// threads too, which the Reconstructor keeps busier (it keeps every line's text), and it is not
// inflated by waiting for a core on a busy machine.
import { readFileSync } from "node:fs";
import { Reconstructor, SSEReader } from "../js/envelope-decoder.mjs";

const [file, roundsArg, repeatArg, minMsArg, warmupArg] = process.argv.slice(2);
const count = (arg, fallback, name) => {
  const value = Number(arg ?? fallback);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a whole number, not ${JSON.stringify(arg)}`);
  return value;
};
if (!file) throw new Error("usage: delivery_js.mjs LINES_FILE ROUNDS [REPEAT [MIN_MS [WARMUP]]]");
const rounds = count(roundsArg, 9, "ROUNDS");
const repeat = Math.max(1, count(repeatArg, 3, "REPEAT"));
const minMs = count(minMsArg, 300, "MIN_MS");
const warmup = count(warmupArg, 2, "WARMUP");
const collect = typeof globalThis.gc === "function" ? () => globalThis.gc({ type: "major" }) : () => {};
const lines = readFileSync(file, "utf8").split("\n").slice(0, -1);
const body = new TextEncoder().encode(lines.map((line) => `data: ${line}\n\n`).join(""));

let sink = 0; // keeps the work observable
const candidates = {
  "JSON.parse loop": () => {
    for (const line of lines) if (line !== "[DONE]") sink += JSON.parse(line).type.length;
  },
  "Reconstructor.feed per line": () => {
    const rebuilt = new Reconstructor();
    for (const line of lines) rebuilt.feed(line);
    if (!rebuilt.done) throw new Error("the stream did not end");
    sink += rebuilt.transcript ? 1 : 0;
  },
  "SSEReader + Reconstructor, SSE body in 64 KiB reads": () => {
    const reader = new SSEReader();
    const rebuilt = new Reconstructor();
    for (let at = 0; at < body.length; at += 65536) {
      for (const event of reader.feed(body.subarray(at, at + 65536))) rebuilt.feed(event.data);
    }
    for (const event of reader.close()) rebuilt.feed(event.data);
    if (!rebuilt.done) throw new Error("the stream did not end");
  },
};
const names = Object.keys(candidates);

/** One pass of a candidate, the heap collected first: its wall and CPU ms. */
function timed(name) {
  collect();
  const start = process.hrtime.bigint();
  const cpuStart = process.cpuUsage();
  candidates[name]();
  const used = process.cpuUsage(cpuStart);
  return [Number(process.hrtime.bigint() - start) / 1e6, (used.user + used.system) / 1000];
}

/** One round: `passes` turns of one pass per candidate, rotated turn by turn; each one's summed wall and CPU ms. */
function round(first, passes) {
  const wall = Object.fromEntries(names.map((name) => [name, 0]));
  const cpu = { ...wall };
  for (let turn = 0; turn < passes; turn++) {
    const at = (first + turn) % names.length;
    for (const name of [...names.slice(at), ...names.slice(0, at)]) {
      const [ms, cpuMs] = timed(name);
      wall[name] += ms;
      cpu[name] += cpuMs;
    }
  }
  return [wall, cpu];
}

for (const name of names) candidates[name](); // every candidate compiled before the choice of passes
let onePass = Infinity; // the bare loop's least time of three passes
for (let run = 0; run < 3; run++) onePass = Math.min(onePass, Math.max(timed("JSON.parse loop")[0], 0.001));
const passes = Math.max(repeat, Math.ceil(minMs / onePass));
for (let turn = 0; turn < warmup; turn++) round(turn * passes, passes); // thrown away
const times = Object.fromEntries(names.map((name) => [name, []]));
const cpu = Object.fromEntries(names.map((name) => [name, []]));
for (let turn = 0; turn < rounds; turn++) {
  const [wall, used] = round((warmup + turn) * passes, passes);
  for (const name of names) {
    times[name].push(wall[name] / passes);
    cpu[name].push(used[name] / passes);
  }
}
const gc = typeof globalThis.gc === "function";
process.stdout.write(
  JSON.stringify({ node: process.version, lines: lines.length, repeat, passes, one_pass_ms: onePass, warmup, gc, times, cpu, sink: sink > 0 }),
);

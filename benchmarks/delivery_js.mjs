// The JavaScript decoder against a bare JSON.parse loop over the same lines (issue 26 §5).
// Run by benchmarks/delivery.py: node --expose-gc delivery_js.mjs LINES_FILE ROUNDS [REPEAT],
// LINES_FILE holding one envelope line per line ([DONE] last). Each round times every
// candidate REPEAT times (default 3), in an order rotated run by run, and keeps each one's
// least time (on a shared machine other processes only ever add time); before each timed
// run the heap is collected (when gc is exposed), so that no candidate pays for the garbage
// another left (the Reconstructor keeps every line's text until its round ends). Prints
// {node, lines, repeat, gc, times: {candidate: [ms per round]}, cpu: {candidate: [CPU ms per round]}}:
// judged on wall-clock time (throughput); the process's CPU time (process.cpuUsage) is given
// beside it: it counts V8's garbage collector threads too, which the Reconstructor keeps busier
// (it keeps every line's text), and it is not inflated by waiting for a core on a busy machine.
import { readFileSync } from "node:fs";
import { Reconstructor, SSEReader } from "../js/envelope-decoder.mjs";

const [file, roundsArg, repeatArg] = process.argv.slice(2);
const rounds = Number(roundsArg ?? 9);
const repeat = Number(repeatArg ?? 3);
// A major collection, not gc(): called with no argument, gc() also makes V8 throw away the
// compiled code, so every timed run paid for compiling the decoder again (js_decoder_ab.mjs).
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
for (const name of names) candidates[name](); // warm-up: every candidate compiled before timing
const times = Object.fromEntries(names.map((name) => [name, []]));
const cpu = Object.fromEntries(names.map((name) => [name, []]));
for (let round = 0; round < rounds; round++) {
  const best = {};
  const bestCpu = {};
  for (let run = 0; run < repeat; run++) {
    const turn = round * repeat + run;
    const order = [...names.slice(turn % names.length), ...names.slice(0, turn % names.length)];
    for (const name of order) {
      collect();
      const start = process.hrtime.bigint();
      const cpuStart = process.cpuUsage();
      candidates[name]();
      const used = process.cpuUsage(cpuStart);
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      best[name] = Math.min(best[name] ?? Infinity, ms);
      bestCpu[name] = Math.min(bestCpu[name] ?? Infinity, (used.user + used.system) / 1000);
    }
  }
  for (const name of names) {
    times[name].push(best[name]);
    cpu[name].push(bestCpu[name]);
  }
}
const gc = typeof globalThis.gc === "function";
process.stdout.write(JSON.stringify({ node: process.version, lines: lines.length, repeat, gc, times, cpu, sink: sink > 0 }));

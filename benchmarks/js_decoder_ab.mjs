// The JavaScript decoder's Reconstructor.feed against a bare JSON.parse loop, and builds of the
// decoder against each other, alternated in one node process (issue 43 §3).
// Run: node --expose-gc benchmarks/js_decoder_ab.mjs LINES_FILE ROUNDS DECODER.mjs [OTHER.mjs ...]
// LINES_FILE holds one envelope line per line ([DONE] last), as benchmarks/delivery.py writes it
// (bench_lines(50000, agents=4)). Every round runs every candidate REPEAT (3) times, in an order
// rotated run by run, the heap collected before each; each candidate's time in a round is its
// least CPU time (process.cpuUsage) of those runs (on a shared machine other processes only ever
// add to it), and its per-round ratio that time over the JSON.parse loop's in the same round,
// printed as the median and quartiles. Pass a copy of the decoder with one change to see that change's cost beside
// the original, on the same load. A second reference, the JSON.parse loop keeping each line's
// delta in one array, is the least any decoder that keeps the content pays: V8's collector then
// copies every delta out of the young generation, which the bare loop never makes it do.
// Two things keep the runs from timing V8's compiler instead of the code (issue 43 §3): the heap
// is collected with gc({ type: "major" }), not gc(): called with no argument, gc() made V8 throw
// the compiled code away, so every timed run compiled the decoder again, on a compiler thread
// whose CPU time (20 to 90 ms on runs of about 100 ms, more for more code) the run was charged;
// and each decoder's loop is a function of its own: closures of one literal share their type
// feedback, so one decoder's runs deoptimized the loop of another's.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";

const [file, roundsArg, ...paths] = process.argv.slice(2);
if (!file || !paths.length) throw new Error("usage: js_decoder_ab.mjs LINES_FILE ROUNDS DECODER.mjs [OTHER.mjs ...]");
const mods = await Promise.all(paths.map((p) => import(pathToFileURL(resolve(p)).href)));
const lines = readFileSync(file, "utf8").split("\n").slice(0, -1);
let sink = 0; // keeps the work observable
const cands = [
  ["JSON.parse loop", () => { for (const line of lines) if (line !== "[DONE]") sink += JSON.parse(line).type.length; }],
  ["JSON.parse loop, deltas kept", () => {
    const kept = [];
    for (const line of lines) if (line !== "[DONE]") kept.push(JSON.parse(line).delta);
    sink += kept.length;
  }],
];
const loop = `const rebuilt = new mod.Reconstructor();
for (const line of lines) rebuilt.feed(line);
if (!rebuilt.done) throw new Error("the stream did not end");
return 1;`;
mods.forEach((mod, i) => {
  const run = new Function("mod", "lines", `// decoder ${i}\n${loop}`); // its own function: its own feedback
  cands.push([paths[i], () => (sink += run(mod, lines))]);
});
for (let i = 0; i < 3; i++) for (const [, run] of cands) run(); // warm-up: every candidate compiled first
const rounds = Number(roundsArg ?? 15);
const REPEAT = 3;
const ratios = cands.map(() => []);
for (let round = 0; round < rounds; round++) {
  const spent = cands.map(() => Infinity);
  for (let run = 0; run < REPEAT; run++) {
    for (let j = 0; j < cands.length; j++) {
      const k = (round * REPEAT + run + j) % cands.length;
      globalThis.gc?.({ type: "major" }); // not gc(): see the top
      const start = process.cpuUsage();
      cands[k][1]();
      const used = process.cpuUsage(start);
      spent[k] = Math.min(spent[k], used.user + used.system);
    }
  }
  cands.forEach((_, k) => ratios[k].push(spent[k] / spent[0]));
}
console.log(`node ${process.version}, ${lines.length} lines, ${rounds} rounds; least CPU time of ${REPEAT} runs / JSON.parse loop's`);
const quartiles = (values) => {
  const r = [...values].sort((x, y) => x - y);
  const q = (p) => r[Math.round(p * (r.length - 1))].toFixed(2);
  return `${q(0.5)}x (q ${q(0.25)}-${q(0.75)})`;
};
for (const [k, [name]] of cands.entries()) {
  const kept = ratios[k].map((x, round) => x / ratios[1][round]); // per round, as the ratios above
  console.log(`  ${name}: ${quartiles(ratios[k])}; over the deltas-kept loop ${quartiles(kept)}`);
}
if (!sink) throw new Error("nothing ran");

// Prints the JS decoder's transcript of one recorded stream (.sse or .jsonl) as JSON
// (with --tree, its agent tree, spec §8.3.1), or {"error": message} when the decoder
// refuses it. Used by tests/js/test_js_decoder.py to compare both sides of the language
// border on the same files.
import { readFileSync } from "node:fs";
import { Reconstructor, SSEReader, tree } from "../../js/envelope-decoder.mjs";

const asTree = process.argv[2] === "--tree";
const path = process.argv[asTree ? 3 : 2];
const body = readFileSync(path);
const rebuilt = new Reconstructor();
try {
  if (path.endsWith(".jsonl")) {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(body);
    for (const line of text.split("\n")) if (line.trim() !== "") rebuilt.feed(line.replace(/\r$/, ""));
  } else {
    const reader = new SSEReader();
    // byte-at-a-time for small files: the split must not matter (spec §2.3-a)
    const step = body.length < 20000 ? 1 : 4096;
    const events = [];
    for (let i = 0; i < body.length; i += step) events.push(...reader.feed(body.subarray(i, i + step)));
    events.push(...reader.close());
    for (const event of events) rebuilt.feed(event.data);
  }
  process.stdout.write(JSON.stringify(asTree ? tree(rebuilt.transcript()) : rebuilt.transcript()));
} catch (exc) {
  process.stdout.write(JSON.stringify({ error: String(exc.message) }));
}

// node --test tests/js/: the JS decoder against the golden fixtures (blocks.json) and on
// its own rules. Run from tests/js/test_js_decoder.py so pytest's summary stays last.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { DecodeError, ENVELOPE_TYPES, Reconstructor, SSEReader, parsePayload, reconstructSSE } from "../../js/envelope-decoder.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const GOLDEN = join(ROOT, "fixtures", "golden");
const cases = readdirSync(GOLDEN).filter((name) => existsSync(join(GOLDEN, name, "input.sse")));

test("there are golden SSE cases to compare against", () => {
  assert.ok(cases.length >= 10, `only ${cases.length} golden cases found in ${GOLDEN}`);
});

for (const name of cases) {
  test(`[S7.1-a] golden ${name}: same blocks as blocks.json, whole and byte by byte`, () => {
    const body = readFileSync(join(GOLDEN, name, "input.sse"));
    const expected = JSON.parse(readFileSync(join(GOLDEN, name, "blocks.json"), "utf8"));
    assert.deepEqual(reconstructSSE(body), expected);
    const reader = new SSEReader();
    const rebuilt = new Reconstructor();
    for (let i = 0; i < body.length; i++) for (const e of reader.feed(body.subarray(i, i + 1))) rebuilt.feed(e.data);
    for (const e of reader.close()) rebuilt.feed(e.data);
    assert.deepEqual(rebuilt.transcript(), expected);
  });
}

const line = (o) => JSON.stringify({ agent: "a", final: false, delta: "", ...o });

test("[S7.2-a] refusals name the envelope index and the spec section", () => {
  const cases = [
    [[line({ type: "nope" })], /unknown envelope type.*§4\.1/],
    [["{not json"], /not JSON/],
    [[JSON.stringify({ type: "text", agent: "a", final: "no", delta: "" })], /expected boolean at \$\.final/],
    [[JSON.stringify({ type: "text", agent: "a", final: true })], /missing delta/],
    [["[DONE]", line({ type: "text" })], /content after \[DONE\]/],
    [[line({ type: "tool_result_image", id: "t", name: "n", src: "x", media_type: "image/png" })], /§7\.3-a/],
    [[line({ type: "citation", citation_type: "char_location" })], /§7\.4-a/],
    [[line({ type: "tool_call", id: "t1", name: "n" }), line({ type: "tool_call", id: "t2", name: "n" })], /§7\.2-d/],
    [[line({ type: "error", final: true, delta: '{"type":"attempt_discarded","discard_blocks":3}' })], /only 0 precede/],
  ];
  for (const [lines, pattern] of cases) {
    const rebuilt = new Reconstructor();
    assert.throws(() => lines.forEach((l) => rebuilt.feed(l)), (err) => err instanceof DecodeError && pattern.test(err.message) && err.index === lines.length - 1);
  }
});

test("[S7.1-a] a discarded attempt drops its blocks, as spec §7.7 says", () => {
  const rebuilt = new Reconstructor();
  rebuilt.feed(line({ type: "text", delta: "keep", final: true }));
  rebuilt.feed(line({ type: "text", delta: "drop" }));
  rebuilt.feed(line({ type: "text", final: true }));
  rebuilt.feed(line({ type: "error", final: true, delta: JSON.stringify({ type: "attempt_discarded", discard_blocks: 1 }) }));
  rebuilt.feed(line({ type: "citation", citation_type: "char_location", delta: "k", final: true }));
  const blocks = rebuilt.transcript().agents.a.blocks;
  assert.deepEqual(blocks.map((b) => b.type), ["text", "error"]);
  assert.deepEqual(blocks[0].citations, [{ cited_text: "k", citation_type: "char_location" }]);
});

test("[S7.1-a] payloads: strict JSON, else the raw text (spec §7.5)", () => {
  assert.deepEqual(parsePayload('{"a": [1, 2.5]}'), { a: [1, 2.5] });
  for (const raw of ["NaN", "[1e400]", '"\\ud800"', '{"\\udc00": 1}', "{", ""]) assert.equal(parsePayload(raw), raw);
});

test("[S7.1-a] SSE reader: line ends CR, LF, CRLF split across feeds; comments; ids; BOM; bad UTF-8", () => {
  const reader = new SSEReader();
  const got = [
    ...reader.feed(new Uint8Array([0xef, 0xbb, 0xbf])),
    ...reader.feed(": keep-alive\r"),
    ...reader.feed("\nid: r:0:1\rdata: x\r"),
    ...reader.feed("\ndata:  y\n\ndata: \u00e9"),
    ...reader.feed("\n\n"),
  ];
  assert.deepEqual(got, [
    { data: "x\n y", event: "message", id: "r:0:1" },
    { data: "\u00e9", event: "message", id: "r:0:1" },
  ]);
  assert.deepEqual(reader.close(), []);
  const bad = new SSEReader();
  assert.throws(() => bad.feed(new Uint8Array([0x64, 0x61, 0xff])), /invalid UTF-8.*§2\.3-c/);
  const cut = new SSEReader();
  cut.feed("data: x\n");
  assert.throws(() => cut.close(), /§2\.3-e/);
  const split = new SSEReader();
  assert.deepEqual(split.feed(new Uint8Array([0x64, 0x61, 0x74, 0x61, 0x3a, 0xc3])), []);
  assert.deepEqual(split.feed(new Uint8Array([0xa9, 0x0a, 0x0a])), [{ data: "\u00e9", event: "message", id: "" }]);
});

test("[S7.1-a] a recording of several responses: a meta_init after [DONE] starts the next one (spec §8.5)", () => {
  const rebuilt = new Reconstructor();
  rebuilt.feed(line({ type: "meta_init", final: true, delta: "{}" }));
  rebuilt.feed(line({ type: "text", delta: "open" })); // left open by the first response
  rebuilt.feed("[DONE]");
  rebuilt.feed(line({ type: "meta_init", final: true, delta: "{}" }));
  rebuilt.feed(line({ type: "text", delta: "next", final: false }));
  rebuilt.feed(line({ type: "text", final: true }));
  rebuilt.feed("[DONE]");
  const t = rebuilt.transcript();
  assert.equal(t.done, true);
  assert.deepEqual(t.agents.a.blocks.map((b) => [b.type, b.complete, b.content ?? null]), [
    ["meta_init", true, null], ["text", false, "open"], ["meta_init", true, null], ["text", true, "next"],
  ]);
});

test("[S7.2-a] limits: a payload nested past 256 is given raw; a line with an escaped lone surrogate is refused", () => {
  const deep = "[".repeat(300) + "]".repeat(300);
  const rebuilt = new Reconstructor();
  rebuilt.feed(line({ type: "tool_call", id: "t", name: "n", final: true, delta: deep }));
  assert.equal(rebuilt.transcript().agents.a.blocks[0].input, deep);
  assert.deepEqual(parsePayload("[".repeat(256) + "]".repeat(256)).length, 1);
  const lone = '{"type":"text","agent":"a","final":false,"delta":"\\ud83d"}';
  assert.throws(() => new Reconstructor().feed(lone), /lone surrogate.*§6\.4/);
  assert.doesNotThrow(() => new Reconstructor().feed('{"type":"text","agent":"a","final":false,"delta":"\\ud83d\\ude00"}'));
});

test("[S7.1-a] meta_compaction, the 14th type (spec §4.15): a control block with its JSON as data, chunked or not", () => {
  const payload = JSON.stringify({ trigger: "auto", pre_tokens: 160000, post_tokens: 12000 });
  const rebuilt = new Reconstructor();
  rebuilt.feed(line({ type: "text", delta: "hi" }));
  rebuilt.feed(line({ type: "text", final: true }));
  rebuilt.feed(line({ type: "meta_compaction", delta: payload.slice(0, 10) }));
  rebuilt.feed(line({ type: "meta_compaction", final: true, delta: payload.slice(10) }));
  rebuilt.feed(line({ type: "meta_compaction", final: true, delta: '{"trigger":"manual","pre_tokens":0}' }));
  const blocks = rebuilt.transcript().agents.a.blocks;
  assert.deepEqual(blocks.map((b) => b.type), ["text", "meta_compaction", "meta_compaction"]);
  assert.deepEqual(blocks[1], { type: "meta_compaction", complete: true, data: JSON.parse(payload) });
  assert.deepEqual(blocks[2].data, { trigger: "manual", pre_tokens: 0 });
});

test("[4.16-a] meta_status, the 15th type (spec §4.16): a control block with its JSON as data, not an error", () => {
  const payload = JSON.stringify({ kind: "tool_progress", message: "1 of 3", tool_use_id: "t", name: "count", fraction: 0.5 });
  const rebuilt = new Reconstructor();
  rebuilt.feed(line({ type: "tool_call", id: "t", name: "count", final: true, delta: "{}" }));
  rebuilt.feed(line({ type: "meta_status", delta: payload.slice(0, 12) }));
  rebuilt.feed(line({ type: "meta_status", final: true, delta: payload.slice(12) }));
  rebuilt.feed(line({ type: "meta_status", final: true, delta: '{"kind":"step_finish","step":1,"usage":{}}' }));
  const blocks = rebuilt.transcript().agents.a.blocks;
  assert.deepEqual(blocks.map((b) => b.type), ["tool_call", "meta_status", "meta_status"]);
  assert.deepEqual(blocks[1], { type: "meta_status", complete: true, data: JSON.parse(payload) });
  assert.deepEqual(blocks[2].data, { kind: "step_finish", step: 1, usage: {} });
  assert.ok(ENVELOPE_TYPES.includes("meta_status"));
});

test("[S7.2-a] a lone surrogate anywhere in a line given as a string is refused, raw or escaped, flat or nested", () => {
  const head = '{"type":"text","agent":"a","final":false,"delta":';
  const refused = {
    "raw in the delta": head + '"x\ud800y"}',
    "raw low half in the delta": head + '"\udc00"}',
    "raw in an unknown key": head + '"x","\udbff":1}',
    "raw in an id": '{"type":"tool_call","agent":"a","final":false,"delta":"","id":"\ud800","name":"n"}',
    "raw in a nested key": head + '"x","meta":{"k\udc00":1}}',
    "escaped after an object member": head + '"x","meta":{"a":1},"z":"\\ud800"}',
    "escaped before an object member": head + '"x","z":"\\udfff","meta":{"a":1}}',
    "escaped in an array member": head + '"x","z":[1,{"q":"\\ud800"}]}',
    "escaped in a __proto__ member": head + '"x","__proto__":"\\ud800"}',
    "escaped in the agent": '{"type":"text","agent":"\\ud800","final":false,"delta":"x"}',
  };
  for (const [what, text] of Object.entries(refused)) {
    assert.throws(() => new Reconstructor().feed(text), /lone surrogate.*§6\.4/, what);
  }
  const accepted = {
    "raw pair in the delta": head + '"a \ud83d\ude42 b"}',
    "raw pair in an unknown key and nested": head + '"x","\ud83d\ude42":{"\ud83d\ude42":["\ud83d\ude42"]}}',
    "escaped pair in an unknown member": head + '"x","z":"\\ud83d\\ude42"}',
    "an escaped backslash, then u d800 as text": head + '"\\\\ud800"}',
  };
  for (const [what, text] of Object.entries(accepted)) {
    const rebuilt = new Reconstructor();
    assert.doesNotThrow(() => rebuilt.feed(text), what);
    assert.equal(rebuilt.transcript().agents.a.blocks[0].content, JSON.parse(text).delta, what);
  }
  // an envelope given already parsed is not walked (as before): its strings are the caller's
  assert.doesNotThrow(() => new Reconstructor().feed({ type: "text", agent: "a", final: false, delta: "\ud800" }));
});

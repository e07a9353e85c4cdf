// [JD1-a] [JD1-b] The decoder against the build before its fast path (reference/, a copy kept
// as it was), on random streams: both must return, throw (the same message) and leave open the
// same things line by line, and give the same transcript. The streams mix agents and types,
// lines with extra members, nested members, spaces, escapes, escaped and raw lone surrogates,
// broken JSON, values of the wrong kind, [DONE] anywhere, envelopes given already parsed; the
// same lines read as an SSE body cut at random places. fast-check, fixed seeds.
// Run by tests/js/test_js_decoder.py (it needs `npm ci` in tests/js for fast-check).
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import * as now from "../../js/envelope-decoder.mjs";
import * as before from "./reference/envelope-decoder-before.mjs";

const SEEDS = [20261203, 43, 7];
const RUNS = 250;

// characters that matter: quotes and backslashes (escaped by JSON), non-ASCII, a pair, lone halves
const piece = fc.constantFrom("a", "x", " ", '"', "\\", "\n", "é", "\u{1F642}", "\ud800", "\udc00", "\udbff", "ab", "{", "}");
const text = fc.array(piece, { maxLength: 6 }).map((parts) => parts.join(""));
const agent = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom("a", "b", "\ud800") }, // few agents, so that lines meet open blocks
  { weight: 1, arbitrary: fc.constantFrom("agent-0", "11111111-1111-1111-1111-111111111111", "é", "") },
);
const kind = fc.oneof(
  { weight: 12, arbitrary: fc.constantFrom("text", "text", "thinking", "tool_call", "tool_result", "tool_result_image") },
  { weight: 3, arbitrary: fc.constantFrom(...now.ENVELOPE_TYPES) },
  { weight: 1, arbitrary: fc.constantFrom("nope", "Text", "") },
);
const extra = fc.oneof(
  fc.record({ id: fc.constantFrom("t1", "t2", "\ud800") }),
  fc.record({ id: fc.constantFrom("t1", "t2"), name: fc.constantFrom("f", "\udc00") }),
  fc.record({ id: fc.constant(7) }),
  fc.record({ src: fc.constantFrom("data:x", "\ud800"), media_type: fc.constant("image/png") }),
  fc.record({ citation_type: fc.constant("char_location"), start_char_index: fc.nat(9) }),
  fc.record({ meta: fc.oneof(fc.record({ k: text }), fc.array(text, { maxLength: 2 })) }),
  fc.dictionary(text, text, { maxKeys: 2 }),
);
const envelope = fc.record(
  {
    type: kind,
    agent,
    final: fc.oneof({ weight: 9, arbitrary: fc.boolean() }, { weight: 1, arbitrary: fc.constantFrom("no", 0, null) }),
    delta: fc.oneof({ weight: 9, arbitrary: text }, { weight: 1, arbitrary: fc.constantFrom(5, null, "{\"type\":\"attempt_discarded\",\"discard_blocks\":1}") }),
    more: fc.option(extra, { freq: 3 }),
  },
  { requiredKeys: ["type", "agent", "final"] },
);
// how the envelope becomes a line: as JSON.stringify writes it, or bent so that the decoder's
// text tests are exercised (spaces, an escaped letter, raw surrogates, cut short), or not an envelope
const bend = fc.constantFrom("plain", "plain", "plain", "plain", "spaces", "escape", "raw", "cut", "given parsed", "given parsed");
const line = fc.oneof(
  { weight: 20, arbitrary: fc.tuple(envelope, bend, fc.nat()) },
  { weight: 1, arbitrary: fc.constantFrom("[DONE]", "5", "[]", "null", '"text"', "{", "") },
);

function asLine(item) {
  if (typeof item === "string") return item;
  const [{ more, ...env }, how, at] = item;
  const json = JSON.stringify({ ...env, ...more });
  switch (how) {
    case "spaces":
      return json.replaceAll('":', '": ');
    case "escape":
      return json.replace("a", "\\u0061"); // inside a string: JSON outside strings has no "a"
    case "raw":
      return json.replace(/\\u(d[89a-f][0-9a-f]{2})/, (_, hex) => String.fromCharCode(parseInt(hex, 16)));
    case "cut":
      return json.slice(0, at % json.length);
    case "given parsed":
      return JSON.parse(json);
    default:
      return json;
  }
}

/** What feeding `lines` one by one does: each line's result or error, the open blocks after it, the transcript. */
function run(mod, lines) {
  const rebuilt = new mod.Reconstructor({ maxBlockBytes: 40, maxOpenBlocks: 6 });
  const steps = lines.map((l) => {
    let got;
    try {
      got = { routed: rebuilt.feed(l) };
    } catch (exc) {
      assert.ok(exc instanceof mod.DecodeError, String(exc));
      got = { error: exc.message, index: exc.index };
    }
    return { ...got, open: rebuilt.openBlocks(), done: rebuilt.done };
  });
  let transcript;
  try {
    transcript = rebuilt.transcript();
  } catch (exc) {
    transcript = { error: exc.message };
  }
  return { steps, transcript };
}

/** The SSE body of the lines given as text, read whole by one module and in `cuts` pieces by the other. */
function sse(mod, body, cuts) {
  const reader = new mod.SSEReader();
  const rebuilt = new mod.Reconstructor();
  const out = [];
  const feed = (events) => {
    for (const event of events) {
      try {
        out.push(rebuilt.feed(event.data));
      } catch (exc) {
        out.push({ error: exc.message });
      }
    }
  };
  const ends = [...new Set(cuts.map((c) => c % (body.length + 1)))].sort((x, y) => x - y);
  let from = 0;
  for (const end of [...ends, body.length]) {
    feed(reader.feed(body.subarray(from, end)));
    from = end;
  }
  feed(reader.close());
  return { out, transcript: rebuilt.transcript() };
}

for (const seed of SEEDS) {
  test(`[JD1-a] [JD1-b] random streams, seed ${seed}: the same results, errors, open blocks and transcript as before`, () => {
    const seen = { fast: 0, errors: 0, lone: 0 };
    fc.assert(
      fc.property(fc.array(line, { minLength: 4, maxLength: 60, size: "large" }), (items) => {
        const lines = items.map(asLine);
        const a = run(now, lines);
        assert.deepEqual(a, run(before, lines));
        for (const step of a.steps) {
          if ("error" in step) seen.errors++;
          if (step.error?.includes("lone surrogate")) seen.lone++;
        }
        seen.fast += a.steps.filter((s) => "routed" in s && s.routed !== null).length;
      }),
      { seed, numRuns: RUNS },
    );
    // the streams reached both the accepting and the refusing paths, lone surrogates included
    assert.ok(seen.fast > RUNS && seen.errors > RUNS && seen.lone > RUNS / 10, JSON.stringify(seen));
  });

  test(`[JD1-a] an SSE body cut anywhere, seed ${seed}: the same as the build before reading it whole`, () => {
    fc.assert(
      fc.property(fc.array(line, { minLength: 4, maxLength: 40, size: "large" }), fc.array(fc.nat(), { maxLength: 12 }), (items, cuts) => {
        const lines = items.map(asLine).filter((l) => typeof l === "string" && !/[\r\n]/.test(l));
        const body = new TextEncoder().encode(lines.map((l) => `data: ${l}\n\n`).join(""));
        assert.deepEqual(sse(now, body, cuts), sse(before, body, []));
      }),
      { seed, numRuns: RUNS },
    );
  });
}

// app.js: the agent-ref page (spec/server.md §6). One module, no build step, no framework.
//
// Owns: posting prompts and frontend-tool answers, reading each SSE response with fetch
// streaming, reconnecting with Last-Event-ID, and drawing the rebuilt blocks: one subtree
// per agent, thinking collapsed, tool calls with their results and images, citations
// under their text. Does not own: the protocol (envelope-decoder.mjs rebuilds the blocks;
// this file only draws transcripts).
import { Reconstructor, SSEReader } from "./envelope-decoder.mjs";

const $ = (sel) => document.querySelector(sel);
const RETRY_DELAYS_MS = [250, 500, 1000, 2000, 4000];
const state = { agentUuid: null, turns: [], busy: false };
window.agentRef = state; // for the browser tests and the curious

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c);
  return el;
}

function setState(name, label) {
  document.body.dataset.state = name;
  $("#status").textContent = label;
}

function authHeaders() {
  const token = sessionStorage.getItem("agent-ref-token");
  return token ? { Authorization: `Bearer ${token}` } : {};
}

async function askToken() {
  const dialog = $("#token-dialog");
  dialog.showModal();
  await new Promise((resolve) => dialog.addEventListener("close", resolve, { once: true }));
  const token = $("#token-input").value.trim();
  if (token) sessionStorage.setItem("agent-ref-token", token);
  return Boolean(token);
}

/** fetch with the token; asks for one once on 401. */
async function api(path, init = {}) {
  for (let attempt = 0; ; attempt++) {
    const response = await fetch(path, { ...init, headers: { ...(init.headers || {}), ...authHeaders() } });
    if (response.status === 401 && attempt === 0 && (await askToken())) continue;
    return response;
  }
}

async function errorText(response) {
  try {
    const body = await response.json();
    return body.error ? `${body.error.type}: ${body.error.message}` : `HTTP ${response.status}`;
  } catch {
    return `HTTP ${response.status}`;
  }
}

// ------------------------------------------------------------------ a response

class Stream {
  constructor(turn) {
    this.turn = turn;
    this.rebuilt = new Reconstructor();
    this.runId = null;
    this.lastId = null;
    this.index = null;
    this.reconnects = 0;
  }

  apply(event) {
    this.rebuilt.feed(event.data);
    if (event.id) this.lastId = event.id;
    if (this.runId === null && event.data !== "[DONE]") {
      const env = JSON.parse(event.data);
      if (env.type === "meta_init" && env.final) {
        const meta = this.rebuilt.transcript().agents[env.agent].blocks[0].data;
        if (meta && meta.run_id) this.setRun(meta.run_id); // spec server §2.2-a: from the stream itself
      }
    }
  }

  setRun(runId) {
    this.runId = runId;
    history.replaceState(null, "", `#run=${encodeURIComponent(runId)}`);
  }

  /** Read one HTTP answer into this response; true when [DONE] was reached. */
  async read(httpResponse) {
    if (this.runId === null && httpResponse.headers.get("X-Run-Id")) this.setRun(httpResponse.headers.get("X-Run-Id"));
    if (this.index === null) this.index = Number(httpResponse.headers.get("X-Response-Index") || 0);
    const reader = httpResponse.body.getReader();
    const sse = new SSEReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        for (const event of sse.feed(value)) {
          this.apply(event);
          this.turn.schedule();
        }
      }
    } catch (err) {
      if (err.name === "DecodeError" && this.rebuilt.done) throw err;
      console.warn("stream broken:", err.message); // a dropped connection: reconnect below
    }
    return this.rebuilt.done;
  }

  /** spec server §6.4-a: resume a broken response with Last-Event-ID until [DONE]. */
  async follow(httpResponse) {
    let done = await this.read(httpResponse);
    while (!done) {
      if (this.runId === null || this.reconnects >= RETRY_DELAYS_MS.length) {
        throw new Error("the connection broke and could not be resumed");
      }
      setState("streaming", "reconnecting…");
      await new Promise((r) => setTimeout(r, RETRY_DELAYS_MS[this.reconnects++]));
      const headers = this.lastId ? { "Last-Event-ID": this.lastId } : {};
      const query = this.lastId ? "" : `?response=${this.index ?? 0}`;
      let answer;
      try {
        answer = await api(`/agent/runs/${encodeURIComponent(this.runId)}/stream${query}`, { headers });
      } catch {
        continue; // the server is not back yet
      }
      if (answer.status === 204) break;
      if (!answer.ok) throw new Error(await errorText(answer));
      setState("streaming", "streaming");
      done = await this.read(answer);
    }
    this.turn.schedule();
  }
}

// ------------------------------------------------------------------ a turn (prompt + its responses)

class Turn {
  constructor(prompt) {
    this.responses = [];
    this.open = new Map(); // thinking blocks the user opened, by key
    this.answered = new Map(); // tool_use_id -> what the user answered
    this.el = h("section", { class: "turn" }, h("div", { class: "user", text: prompt }), h("div", { class: "agents" }));
    this.pending = false;
    $("#transcript").append(this.el);
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.render();
    });
  }

  /** Every agent's blocks across the responses of the run, in order (resumed meta_init left out). */
  merged() {
    const agents = new Map();
    for (const response of this.responses) {
      const transcript = response.rebuilt.transcript();
      for (const [agent, { blocks }] of Object.entries(transcript.agents)) {
        if (!agents.has(agent)) agents.set(agent, { blocks: [], meta: null, final: null });
        const entry = agents.get(agent);
        for (const block of blocks) {
          if (block.type === "meta_init") {
            if (entry.meta === null) entry.meta = block.data;
            continue;
          }
          if (block.type === "meta_final") entry.final = block;
          entry.blocks.push(block);
        }
      }
    }
    return agents;
  }

  render() {
    const agents = this.merged();
    const host = this.el.querySelector(".agents");
    const scrolled = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    const views = new Map();
    for (const [agent, entry] of agents) views.set(agent, this.agentView(agent, entry));
    host.replaceChildren();
    for (const [agent, entry] of agents) {
      const parent = entry.meta && typeof entry.meta === "object" ? entry.meta.parent : null;
      const slot = parent && views.has(parent.agent)
        ? views.get(parent.agent).querySelector(`[data-tool-use-id="${CSS.escape(String(parent.tool_use_id))}"] .children`)
        : null;
      (slot || host).append(views.get(agent)); // spec server §6.2-a: children under the spawning call
    }
    if (scrolled) window.scrollTo(0, document.body.scrollHeight);
  }

  agentView(agent, entry) {
    const { blocks, meta, final } = entry;
    const last = blocks[blocks.length - 1];
    let badge = ["running", "running"];
    if (final) {
      const reason = final.data && final.data.stop_reason;
      badge = [reason === "error" || reason === "aborted" ? "error" : "done", String(reason || "done")];
    } else if (last && last.type === "awaiting_frontend_tools") {
      badge = ["waiting", "waiting for you"];
    }
    const results = new Map();
    for (const b of blocks) if ((b.type === "tool_result" || b.type === "server_tool_result") && b.id) results.set(b.id, b);
    const calls = new Set(blocks.filter((b) => b.type === "tool_call" || b.type === "server_tool_call").map((b) => b.id));
    const waiting = new Set();
    if (last && last.type === "awaiting_frontend_tools" && Array.isArray(last.data)) {
      for (const p of last.data) waiting.add(p.tool_use_id);
    }
    const body = h("div", { class: "blocks" });
    blocks.forEach((block, i) => {
      const view = this.blockView(agent, block, i, { results, calls, waiting });
      if (view) body.append(view);
    });
    const model = meta && typeof meta === "object" ? meta.model : "";
    const isChild = meta && typeof meta === "object" && meta.parent;
    return h(
      "section",
      { class: "agent", "data-agent": agent },
      h(
        "div",
        { class: "agent-head" },
        h("span", { class: "name", text: isChild ? "subagent" : "agent" }),
        h("span", { class: "id", text: agent.slice(0, 8) }),
        model ? h("span", { text: `· ${model}` }) : null,
        h("span", { class: `badge ${badge[0]}`, text: badge[1] }),
      ),
      body,
    );
  }

  blockView(agent, block, i, { results, calls, waiting }) {
    const key = `${agent}:${i}`;
    const cls = (name) => `block ${name}${block.complete ? "" : " incomplete"}`;
    switch (block.type) {
      case "thinking": {
        const details = h("details", { class: cls("thinking"), open: this.open.get(key) || false },
          h("summary", { text: block.complete ? "Thinking" : "Thinking…" }), h("div", { class: "body", text: block.content }));
        details.addEventListener("toggle", () => this.open.set(key, details.open));
        return details;
      }
      case "text": {
        const text = h("div", { class: cls("text") }, block.content, h("span", { class: "caret" }));
        if (!block.citations.length) return text;
        const list = h("ol", { class: "citations" }, block.citations.map((c) => h("li", {},
          h("q", { text: c.cited_text }), " ", /^https?:\/\//i.test(String(c.url)) ? h("a", { href: c.url, target: "_blank", rel: "noopener noreferrer", text: c.title || c.url })
            : h("span", { text: c.document_title || c.title || c.citation_type }))));
        return h("div", { class: "block" }, text, list);
      }
      case "tool_call":
      case "server_tool_call": {
        const input = typeof block.input === "string" ? block.input : JSON.stringify(block.input);
        const card = h("div", { class: cls("tool"), "data-tool-use-id": block.id },
          h("div", { class: "tool-head" }, h("span", { class: "kind", text: block.type === "tool_call" ? "tool" : "server tool" }),
            h("span", { class: "tool-name", text: block.name }), h("code", { text: input })),
          h("div", { class: "children" }));
        const result = results.get(block.id);
        if (result) card.append(resultView(result));
        else if (waiting.has(block.id)) {
          const answer = this.answered.get(block.id);
          card.append(h("div", { class: "tool-result pending", text: answer ? `you answered: ${answer}` : "waiting for your answer" }));
        }
        return card;
      }
      case "tool_result":
      case "server_tool_result":
        if (calls.has(block.id)) return null; // drawn inside its call
        return h("div", { class: cls("tool"), "data-tool-use-id": block.id },
          h("div", { class: "tool-head" }, h("span", { class: "kind", text: "result" }), h("span", { class: "tool-name", text: block.name })),
          resultView(block));
      case "error": {
        const data = block.data && typeof block.data === "object" ? block.data : { message: String(block.data) };
        if (data.type === "attempt_discarded") return h("div", { class: "block note", text: "A model call failed part-way; its output was withdrawn and retried." });
        return h("div", { class: "block error", role: "alert", text: `${data.type || "error"}: ${data.message || ""}` });
      }
      case "meta_files": {
        const files = (block.data && block.data.files) || [];
        return h("div", { class: "block files" }, "Files: ", files.map((f) => h("code", { text: ` ${f.filename} ` })));
      }
      case "meta_compaction": {
        // spec envelope-v1 §4.15: a marker between the agent's blocks, never content or an error
        const d = block.data && typeof block.data === "object" ? block.data : {};
        const tokens = Number.isInteger(d.pre_tokens) ? d.pre_tokens : "?";
        const after = Number.isInteger(d.post_tokens) ? ` → ${d.post_tokens}` : "";
        return h("div", { class: "block compaction", "data-trigger": String(d.trigger || ""),
          text: `context compacted (${tokens} tokens${after})` });
      }
      case "meta_final": {
        const d = block.data && typeof block.data === "object" ? block.data : {};
        const usage = d.cumulative_usage || {};
        const tokens = (usage.input_tokens || 0) + (usage.output_tokens || 0);
        const cost = d.cost && typeof d.cost.total_usd === "number" ? ` · $${d.cost.total_usd.toFixed(4)}` : "";
        return h("div", { class: "final", text: `${d.stop_reason} · ${d.total_steps} step(s) · ${tokens} tokens${cost}` });
      }
      case "awaiting_frontend_tools":
        return null; // shown on the calls themselves
      default:
        return null;
    }
  }
}

function resultView(block) {
  const view = h("div", { class: "tool-result" }, block.content);
  for (const image of block.images || []) {
    if (/^(data:image\/|https?:)/.test(image.src)) view.append(h("img", { src: image.src, alt: image.media_type }));
  }
  return view;
}

// ------------------------------------------------------------------ flows

async function frontendAnswers(pending) {
  const dialog = $("#confirm-dialog");
  const results = [];
  for (const call of pending) {
    const input = call.input || {};
    const isConfirm = call.name === "confirm" && typeof input.question === "string";
    $("#confirm-question").textContent = isConfirm ? input.question : `The agent wants to run “${call.name}” in your browser.`;
    $("#confirm-input").hidden = isConfirm;
    $("#confirm-input").textContent = JSON.stringify(input, null, 2);
    $("#confirm-answer").hidden = isConfirm;
    $("#confirm-answer").value = "";
    dialog.showModal();
    await new Promise((resolve) => dialog.addEventListener("close", resolve, { once: true }));
    const yes = dialog.returnValue === "yes";
    if (isConfirm) results.push({ tool_use_id: call.tool_use_id, content: yes ? "yes" : "no" });
    else if (yes) results.push({ tool_use_id: call.tool_use_id, content: $("#confirm-answer").value });
    else results.push({ tool_use_id: call.tool_use_id, content: "declined by the user", is_error: true });
  }
  return results;
}

/** Follow a response to its end; answer frontend tools and follow the continuations (spec server §6.3-a). */
async function drive(turn, httpResponse, afterFirst = () => {}) {
  for (;;) {
    const response = new Stream(turn);
    turn.responses.push(response);
    setState("streaming", "streaming");
    await response.follow(httpResponse);
    if (turn.responses.length === 1) afterFirst();
    const transcript = response.rebuilt.transcript();
    const main = Object.keys(transcript.agents)[0];
    const blocks = main ? transcript.agents[main].blocks : [];
    const last = blocks[blocks.length - 1];
    if (main) state.agentUuid = main;
    if (!last || last.type !== "awaiting_frontend_tools" || !Array.isArray(last.data)) return;
    setState("waiting", "waiting for you");
    const results = await frontendAnswers(last.data);
    for (const r of results) turn.answered.set(r.tool_use_id, r.content);
    turn.schedule();
    httpResponse = await api("/agent/tool_results", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ agent_uuid: main, tool_results: results }),
    });
    if (!httpResponse.ok) throw new Error(await errorText(httpResponse));
  }
}

async function send(prompt) {
  if (state.busy) return;
  state.busy = true;
  $("#send").disabled = true;
  $("#empty")?.remove();
  const turn = new Turn(prompt);
  state.turns.push(turn);
  try {
    const body = { prompt };
    if (state.agentUuid) body.agent_uuid = state.agentUuid;
    const first = await api("/agent/run", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!first.ok) throw new Error(await errorText(first));
    await drive(turn, first);
    setState("idle", "ready");
  } catch (err) {
    turn.el.append(h("div", { class: "block error", role: "alert", text: String(err.message || err) }));
    setState("error", "error");
  } finally {
    state.busy = false;
    $("#send").disabled = false;
    document.body.dataset.done = String(state.turns.length);
  }
}

/** A page opened (or reloaded) on #run=ID shows that run's latest response, live if it still runs,
 * and asks again for the frontend tools it is waiting for (spec server §2.2-a). */
async function openRun(runId) {
  $("#empty")?.remove();
  const turn = new Turn("…");
  state.turns.push(turn);
  state.busy = true;
  $("#send").disabled = true;
  const showQuery = () => {
    const transcript = turn.responses[0]?.rebuilt.transcript();
    const main = transcript && Object.keys(transcript.agents)[0];
    const meta = main && transcript.agents[main].blocks[0];
    if (meta && meta.type === "meta_init" && meta.data && meta.data.user_query) {
      turn.el.querySelector(".user").textContent = meta.data.user_query;
    }
  };
  try {
    const first = await api(`/agent/runs/${encodeURIComponent(runId)}/stream`);
    if (!first.ok) throw new Error(await errorText(first));
    await drive(turn, first, showQuery);
    setState("idle", "ready");
  } catch (err) {
    turn.el.append(h("div", { class: "block error", role: "alert", text: String(err.message || err) }));
    setState("error", "error");
  } finally {
    state.busy = false;
    $("#send").disabled = false;
    document.body.dataset.done = String(state.turns.length);
  }
}

function init() {
  const prompt = $("#prompt");
  $("#composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = prompt.value.trim();
    if (!text) return;
    prompt.value = "";
    send(text);
  });
  prompt.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      $("#composer").requestSubmit();
    }
  });
  for (const button of document.querySelectorAll(".example")) {
    button.addEventListener("click", () => send(button.textContent));
  }
  const match = /^#run=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (match) openRun(match[1]);
  document.body.dataset.ready = "true";
}

init();

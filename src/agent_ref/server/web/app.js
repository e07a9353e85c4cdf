// app.js: the agent-ref page (spec/server.md §6). One module, no build step, no framework.
//
// Owns: what the user sees and answers: the prompt, the frontend-tool questions, retrying
// a server that does not answer, asking for the token (never for a resume link's refusal,
// spec server [RL2-e]), the list of one's runs (§PL1), keeping the newest output in view,
// and drawing the rebuilt blocks: one subtree per agent, each subagent inside the call
// that spawned it, thinking collapsed, tool calls with their results and images,
// citations under their text.
// Does not own: the protocol (envelope-decoder.mjs rebuilds the blocks and the agent
// tree) nor the connection (envelope-client.mjs reads each response with fetch
// streaming, resumes it with Last-Event-ID and posts the answers, spec server §7).
import { DONE, Reconstructor, tree } from "./envelope-decoder.mjs";
import { connect } from "./envelope-client.mjs";

const $ = (sel) => document.querySelector(sel);
/** Reconnections of a broken response and their delays (spec server §6.4-a): 0.25 s doubling to 4 s, 5 in a row. */
const RECONNECT = { retries: 5, backoff: { initialMs: 250, maxMs: 4000, factor: 2 } };
/** Delays between attempts to reach a server that does not answer at all (spec server §6.6-a). */
const OFFLINE_DELAYS_MS = [1000, 2000, 4000, 8000, 15000, 15000, 15000, 15000];
/** How close to the bottom (px) still counts as "at the end" (spec server §6.5-a). */
const NEAR_BOTTOM_PX = 48;
const TOKEN_KEY = "agent-ref-token";
/** The most runs the list shows (spec server [PL1-c]); the server answers at most 100 conversations. */
const RUNS_SHOWN = 20;
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

// ------------------------------------------------------------------ keeping the newest output in view

/** spec server §6.5-a: follow the end of the page unless the user scrolled up to read. */
const scroller = {
  follow: true,
  distance() {
    const el = document.scrollingElement;
    return el.scrollHeight - el.clientHeight - el.scrollTop;
  },
  /** After new content: back to the end if following; otherwise offer the jump button. */
  keep() {
    if (this.follow) {
      window.scrollTo({ top: document.scrollingElement.scrollHeight, behavior: "instant" });
    } else if (this.distance() > NEAR_BOTTOM_PX) {
      $("#jump").hidden = false;
    }
  },
  /** The user acted at the end of the page (sent, answered, jumped): follow again. */
  resume() {
    this.follow = true;
    $("#jump").hidden = true;
    this.keep();
  },
};

function watchScrolling() {
  window.addEventListener(
    "scroll",
    () => {
      scroller.follow = scroller.distance() <= NEAR_BOTTOM_PX;
      if (scroller.follow) $("#jump").hidden = true;
    },
    { passive: true },
  );
  $("#jump").addEventListener("click", () => scroller.resume());
  // the docked question panel changes how much of the page the footer covers
  new ResizeObserver(() => {
    document.body.style.setProperty("--footer", `${$("#footer").offsetHeight}px`);
    scroller.keep();
  }).observe($("#footer"));
}

// ------------------------------------------------------------------ the server: token, outages

/** The user gave up (cancelled the token dialog or the retries): nothing was sent. */
class NotSent extends Error {}

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/** spec server §6.7-a: ask for the token; `refused` says the last one was wrong. False when cancelled. */
async function askToken(refused) {
  const dialog = $("#token-dialog");
  $("#token-refused").hidden = !refused;
  $("#token-input").value = "";
  dialog.returnValue = "";
  dialog.showModal();
  await new Promise((resolve) => dialog.addEventListener("close", resolve, { once: true }));
  const token = $("#token-input").value.trim();
  if (dialog.returnValue !== "ok" || !token) return false;
  sessionStorage.setItem(TOKEN_KEY, token);
  return true;
}

/**
 * spec server §6.6-a: while the server does not answer at all (the fetch itself fails),
 * show it, count down to the next attempt, and let the user retry now or cancel.
 * Resolves when it is time to try again; throws NotSent when the user cancels or the
 * attempts are spent.
 */
async function waitForServer(attempt) {
  const banner = $("#offline");
  const where = location.host;
  if (attempt >= OFFLINE_DELAYS_MS.length) {
    banner.hidden = true;
    throw new NotSent(`The agent server at ${where} did not answer after ${attempt} attempts.`);
  }
  const delay = OFFLINE_DELAYS_MS[attempt];
  const until = Date.now() + delay;
  banner.hidden = false;
  banner.dataset.attempt = String(attempt + 1);
  const previous = { state: document.body.dataset.state, label: $("#status").textContent };
  setState("offline", "server unreachable");
  try {
    await new Promise((resolve, reject) => {
      const tick = () => {
        const left = Math.max(0, Math.ceil((until - Date.now()) / 1000));
        $("#offline-text").textContent = `Cannot reach the agent server at ${where}. Retrying in ${left} s (attempt ${attempt + 2} of ${OFFLINE_DELAYS_MS.length + 1}).`;
      };
      tick();
      const timer = setInterval(tick, 250);
      const done = (fn, value) => {
        clearInterval(timer);
        clearTimeout(timeout);
        $("#offline-retry").onclick = null;
        $("#offline-cancel").onclick = null;
        fn(value);
      };
      const timeout = setTimeout(() => done(resolve), delay);
      $("#offline-retry").onclick = () => done(resolve);
      $("#offline-cancel").onclick = () => done(reject, new NotSent(`Cancelled: the agent server at ${where} did not answer.`));
    });
    $("#offline-text").textContent = `Trying the agent server at ${where} again…`;
  } catch (err) {
    banner.hidden = true;
    throw err;
  } finally {
    setState(previous.state, previous.label);
  }
}

/** A URL that carries a resume link (`?token=`, spec server [RL1-a]): the client's own GETs of a run's stream. */
function linked(path) {
  return new URL(path, location.href).searchParams.has("token");
}

/**
 * fetch with the token: retries while the server cannot be reached, asks for the token on 401.
 * A linked URL (spec server [RL2-e]) goes without the bearer, and its 401 is the client's
 * (it refreshes an expired link once, [RL2-b]): the token is kept and no dialog opens.
 */
async function api(path, init = {}) {
  const link = linked(path);
  let refused = false;
  for (let offline = 0; ; ) {
    let response;
    const headers = link ? { ...(init.headers || {}) } : { ...(init.headers || {}), ...authHeaders() };
    try {
      response = await fetch(path, { ...init, headers });
    } catch {
      await waitForServer(offline++); // a TypeError: nothing answered (refused, reset, no network)
      continue;
    }
    $("#offline").hidden = true;
    offline = 0;
    if (response.status !== 401 || link) return response;
    refused = refused || Boolean(sessionStorage.getItem(TOKEN_KEY));
    sessionStorage.removeItem(TOKEN_KEY); // a refused token is never sent again
    if (!(await askToken(refused))) throw new NotSent("Not sent: this server needs an access token.");
    refused = true;
  }
}

// ------------------------------------------------------------------ the list of one's runs

/** A run's status as the list's badge: [class, label] (spec server [PL1-a]). */
function runBadge(run) {
  if (run.status === "finished") {
    const reason = String(run.stop_reason || "done");
    return [reason === "error" || reason === "aborted" ? "error" : "done", reason];
  }
  if (run.status === "awaiting_frontend_tools") return ["waiting", "waiting for you"];
  return ["running", String(run.status)];
}

/** A run's time in the list: "just now", "N min ago", "N h ago", "N d ago", else its date (spec server [PL1-f]). */
function shortTime(seconds, nowMs = Date.now()) {
  if (typeof seconds !== "number" || !Number.isFinite(seconds)) return "";
  const ago = Math.max(0, nowMs / 1000 - seconds);
  if (ago < 60) return "just now";
  if (ago < 3600) return `${Math.floor(ago / 60)} min ago`;
  if (ago < 86400) return `${Math.floor(ago / 3600)} h ago`;
  if (ago < 7 * 86400) return `${Math.floor(ago / 86400)} d ago`;
  const date = new Date(seconds * 1000);
  const year = date.getFullYear() === new Date(nowMs).getFullYear() ? undefined : "numeric";
  return date.toLocaleDateString(undefined, { day: "numeric", month: "short", year });
}

/** ``seconds`` as an ISO date-time for a ``<time>``'s datetime, or ``null`` when it is not a time. */
const isoTime = (seconds) => (typeof seconds === "number" && Number.isFinite(seconds) ? new Date(seconds * 1000).toISOString() : null);

/** A run line's title: the whole listed query, its ids, when it started and finished (spec server [PL1-f]). */
function runTitle(run) {
  const at = (seconds) => new Date(seconds * 1000).toLocaleString();
  const when = typeof run.finished_at === "number"
    ? `started ${at(run.started_at)} · finished ${at(run.finished_at)}`
    : typeof run.updated_at === "number" ? `last saved ${at(run.updated_at)}` : "";
  return [run.user_query || "", `run ${run.run_id} · conversation ${run.agent_uuid}`, when].filter(Boolean).join("\n");
}

/** Draw the list, or a line saying why there is none (spec server [PL1-d]). */
function showRuns(runs, why = "", cls = "") {
  const list = $("#runs-list");
  const note = $("#runs-note");
  const current = /^#run=([A-Za-z0-9_-]+)$/.exec(location.hash)?.[1];
  list.replaceChildren();
  note.className = `runs-note ${cls}`.trim();
  $("#runs-count").textContent = runs ? `(${runs.length})` : "";
  if (!runs) {
    note.hidden = false;
    note.textContent = why;
    return;
  }
  const shown = runs.slice(0, RUNS_SHOWN); // the server's order: newest first across conversations ([OW2-b])
  for (const run of shown) {
    const [kind, label] = runBadge(run);
    const query = String(run.user_query || "");
    const link = h(
      "a",
      { href: `#run=${encodeURIComponent(run.run_id)}`, title: runTitle(run), "aria-current": run.run_id === current ? "true" : null },
      h("span", { class: query ? "run-query" : "run-query none", text: query || "(no prompt)" }),
      h("time", { class: "run-time", datetime: isoTime(run.updated_at), text: shortTime(run.updated_at) }),
      h("span", { class: "run-id", text: run.run_id.slice(0, 8) }),
      h("span", { class: `run-status ${kind}`, text: label }), // not `.badge`: that is an agent's, in the transcript
    );
    list.append(h("li", { "data-run-id": run.run_id, "data-status": run.status }, link));
  }
  note.hidden = shown.length === runs.length && runs.length > 0;
  if (runs.length === 0) note.textContent = "No runs yet: a prompt you send starts one, and it is listed here.";
  else note.textContent = `${runs.length - shown.length} older not shown (the list keeps the newest ${RUNS_SHOWN}).`;
}

/** The principal's runs (spec server [PL1-a], [OW2-a]); a newer refresh wins over an older one's late answer. */
const runsList = { asked: 0 };
async function refreshRuns() {
  const asked = ++runsList.asked;
  const latest = () => asked === runsList.asked;
  let answer = null;
  try {
    const response = await fetch("/agent/runs", { headers: authHeaders() }); // no dialog, no retries: [PL1-d]
    if (response.status === 401) {
      if (latest()) showRuns(null, "Your runs are listed once the page has a token the server accepts.", "refused");
      return;
    }
    if (!response.ok) throw new Error(`the server answered ${response.status}`);
    answer = await response.json();
    if (!answer || !Array.isArray(answer.runs)) throw new Error("the server's answer has no list of runs");
  } catch (err) {
    if (latest()) showRuns(null, `The runs cannot be listed: ${err instanceof TypeError ? "the server did not answer" : err.message}.`, "refused");
    return;
  }
  if (latest()) showRuns(answer.runs);
}

/** spec server [PL1-e]: a run's link opens it in place of what the page shows; not while a run is read. */
function watchRunLinks() {
  $("#runs-list").addEventListener("click", (e) => {
    if (!e.target.closest("a") || !state.busy) return;
    e.preventDefault();
    const note = $("#runs-note");
    note.className = "runs-note refused";
    note.hidden = false;
    note.textContent = "A run is being read: wait for its end (or stop it) to open another.";
  });
  window.addEventListener("hashchange", () => {
    const match = /^#run=([A-Za-z0-9_-]+)$/.exec(location.hash);
    if (!match || state.busy) return;
    $("#runs").open = false;
    $("#transcript").replaceChildren();
    state.turns = [];
    state.agentUuid = null; // the next prompt continues the opened run's conversation (learnt as it is read)
    delete document.body.dataset.done;
    openRun(match[1]);
  });
  $("#runs").addEventListener("toggle", () => $("#runs").open && refreshRuns());
}

// ------------------------------------------------------------------ a response

/** One response of a run as the page holds it: its own rebuilt blocks (the client reads and resumes it). */
class Stream {
  constructor(index) {
    this.rebuilt = new Reconstructor();
    this.index = index;
    this.runId = null;
    this.reconnects = 0;
  }
}

function setRun(runId) {
  history.replaceState(null, "", `#run=${encodeURIComponent(runId)}`);
}

/** A run read through the client (spec server §7): the page's fetch (token, outages), its status line. */
function readRun(url, turn, options = {}) {
  return connect(url, {
    ...options,
    ...RECONNECT,
    fetch: api,
    onReconnect: ({ attempt, retries }) => {
      turn.current().reconnects++;
      setState("streaming", `reconnecting (${attempt} of ${retries})…`);
    },
  });
}

// ------------------------------------------------------------------ a turn (prompt + its responses)

const SPAWN_TOOL = "spawn_subagent";
// [SA1-b]: a spawning call names its child and task in the SDK's shape (subagent_type, description,
// prompt) or the older one (agent, task); the card shows either.
const spawnName = (block) => {
  const named = block.input.subagent_type ?? block.input.agent;
  return typeof named === "string" ? named : block.name;
};
const spawnTask = (input) => String(input.description ?? input.prompt ?? input.task ?? "");

class Turn {
  constructor(prompt) {
    this.responses = [];
    this.open = new Map(); // thinking blocks the user opened, by key
    this.answered = new Map(); // tool_use_id -> what the user answered
    this.denied = new Map(); // tool_use_id -> the message of an approval the user denied
    this.sent = []; // messages sent while the run worked: { text, at } (at: the main agent's blocks then)
    this.el = h("section", { class: "turn" }, h("div", { class: "user", text: prompt }), h("div", { class: "agents" }));
    this.pending = false;
    $("#transcript").append(this.el);
    scroller.resume();
  }

  /** The response being read: the last one, or a new one once the last has its [DONE]. */
  current(run) {
    const last = this.responses[this.responses.length - 1];
    if (last && !last.rebuilt.done) return last;
    const next = new Stream(this.responses.length);
    this.responses.push(next);
    if (run && run.runId) next.runId = run.runId;
    return next;
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.render();
    });
  }

  /** A note under the turn (an error, or why nothing was sent). */
  note(text, cls = "block error") {
    this.el.append(h("div", { class: cls, role: "alert", text }));
    scroller.keep();
  }

  /** Every agent's blocks across the responses of the run, in order (meta_init of a resumed response left out). */
  merged() {
    const agents = new Map();
    for (const response of this.responses) {
      const transcript = response.rebuilt.transcript();
      for (const [agent, { blocks }] of Object.entries(transcript.agents)) {
        if (!agents.has(agent)) agents.set(agent, { blocks: [] });
        const entry = agents.get(agent);
        for (const block of blocks) {
          if (block.type === "meta_init" && entry.blocks.some((b) => b.type === "meta_init")) continue;
          entry.blocks.push(block);
        }
      }
    }
    return agents;
  }

  /**
   * What the run waits for: the frontend calls (tool_use_id -> the agent whose call it is: a
   * child's carry its `agent`, spec agent-ref §13.5) and the agents waiting (those calls'
   * agents and the agent that announced the pause).
   */
  static waiting(agents) {
    const pending = new Map();
    const waitingAgents = new Set();
    for (const [agent, { blocks }] of agents) {
      const last = blocks[blocks.length - 1];
      if (!last || last.type !== "awaiting_frontend_tools" || !Array.isArray(last.data)) continue;
      waitingAgents.add(agent);
      for (const p of last.data) {
        if (p === null || typeof p !== "object") continue;
        const owner = typeof p.agent === "string" ? p.agent : agent;
        pending.set(String(p.tool_use_id), owner);
        waitingAgents.add(owner);
      }
    }
    return { pending, waitingAgents };
  }

  render() {
    const agents = this.merged();
    const transcript = { done: false, agents: Object.fromEntries(agents) };
    let roots;
    let broken = null;
    try {
      roots = tree(transcript).agents; // spec server §6.2-a: envelope-v1 §8.3.1's parent link
    } catch (err) {
      broken = `The subagents cannot be nested: ${err.message}`; // shown flat, nothing dropped
      roots = [...agents].map(([agent, { blocks }]) => ({ agent, blocks }));
    }
    const waiting = Turn.waiting(agents);
    const host = this.el.querySelector(".agents");
    host.replaceChildren(...roots.map((node) => this.agentView(node, waiting)));
    if (broken) host.append(h("div", { class: "block error", role: "alert", text: broken }));
    scroller.keep();
  }

  agentView(node, context) {
    const { agent, blocks } = node;
    const meta = blocks.find((b) => b.type === "meta_init");
    const data = meta && meta.data && typeof meta.data === "object" ? meta.data : {};
    const final = blocks.findLast((b) => b.type === "meta_final");
    let badge = ["running", "running"];
    if (final) {
      const reason = final.data && final.data.stop_reason;
      badge = [reason === "error" || reason === "aborted" ? "error" : "done", String(reason || "done")];
    } else if (context.waitingAgents.has(agent)) {
      badge = ["waiting", "waiting for you"]; // spec server §6.3-b: its own frontend call, or a child's
    }
    const results = new Map();
    for (const b of blocks) if ((b.type === "tool_result" || b.type === "server_tool_result") && b.id) results.set(b.id, b);
    const calls = new Set(blocks.filter((b) => b.type === "tool_call" || b.type === "server_tool_call").map((b) => b.id));
    // envelope-v1 §4.6-a: a tool_call repeating an earlier one's id is the input the call ran with;
    // it is drawn in the first call's card (the responses of a turn are merged, so count here)
    const edits = new Map();
    const seenCalls = new Set();
    for (const b of blocks) {
      if (b.type !== "tool_call") continue;
      if (seenCalls.has(b.id)) edits.set(b.id, b);
      else seenCalls.add(b.id);
    }
    const progress = runningProgress(blocks, calls); // spec server [PW1-c]: drawn in the running call's card
    const body = h("div", { class: "blocks" });
    const child = Boolean(node.parent_agent) && !node.orphan; // its task is on the spawning call's head
    const sent = child ? [] : this.sent.filter((m) => m.agent === undefined || m.agent === agent);
    const said = (m) => h("div", { class: "user sent", "data-sent": "true", text: m.text });
    blocks.forEach((block, i) => {
      for (const m of sent) if (m.at === i) body.append(said(m)); // where it was sent
      const view = this.blockView(agent, block, i, { ...context, results, calls, edits, progress });
      if (view) body.append(view);
    });
    for (const m of sent) if (m.at >= blocks.length) body.append(said(m));
    return h(
      "section",
      { class: `agent${child ? " child" : ""}`, "data-agent": agent, "data-state": badge[0] },
      h(
        "div",
        { class: "agent-head" },
        h("span", { class: "name", text: child ? "subagent" : "agent" }),
        h("span", { class: "id", text: agent.slice(0, 8) }),
        data.model ? h("span", { class: "model", text: `· ${data.model}` }) : null,
        node.orphan ? h("span", { class: "orphan", title: "its parent or spawning call is not in this stream", text: "· parent not shown" }) : null,
        h("span", { class: `badge ${badge[0]}`, text: badge[1] }),
      ),
      body,
    );
  }

  blockView(agent, block, i, { results, calls, pending, waitingAgents, edits = new Map(), progress = new Map() }) {
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
        const edit = block.type === "tool_call" ? edits.get(block.id) : undefined;
        if (edit === block) return null; // drawn in the card of the call it edits
        const shown = (value) => (typeof value === "string" ? value : JSON.stringify(value));
        const input = shown(edit ? edit.input : block.input);
        const spawn = block.name === SPAWN_TOOL && block.input && typeof block.input === "object";
        const head = spawn
          ? h("div", { class: "tool-head" }, h("span", { class: "kind", text: "subagent" }),
            h("span", { class: "tool-name", text: spawnName(block) }), h("span", { class: "task-text", text: spawnTask(block.input) }))
          : h("div", { class: "tool-head" }, h("span", { class: "kind", text: block.type === "tool_call" ? "tool" : "server tool" }),
            h("span", { class: "tool-name", text: block.name }), h("code", { text: input }));
        const children = h("div", { class: "children" });
        const states = { pending, waitingAgents };
        for (const child of block.agents || []) children.append(this.agentView(child, states));
        const card = h("div", { class: cls(spawn ? "tool spawn" : "tool"), "data-tool-use-id": block.id }, head, children);
        const change = editDiff(block.name, edit ? edit.input : block.input); // spec server [PW1-b]
        if (change) card.insertBefore(change, children);
        const news = progress.get(block.id);
        if (news) card.insertBefore(h("div", { class: "tool-progress" }, news.map(statusLine)), children);
        if (edit) {
          card.dataset.edited = "true";
          card.insertBefore(h("div", { class: "tool-edit", text: `edited before it ran · the model asked: ${shown(block.input)}` }), children);
        }
        const result = results.get(block.id);
        const denied = this.denied.get(block.id);
        if (result && spawn && block.agents) {
          // the child's answer is drawn above, in the child; what went back to the parent stays one click away
          card.append(h("details", { class: "spawn-result" }, h("summary", { text: "answer returned to the agent" }), resultView(result)));
        } else if (result && denied !== undefined) {
          card.dataset.denied = "true"; // the person said no: not a result the tool gave
          card.append(h("div", { class: "tool-result denied", text: `denied: ${result.content}` }));
        } else if (result) card.append(resultView(result, block.name));
        else if (pending.has(block.id)) {
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
        // spec R2.6-b: a tool's progress line travels as an error payload; it is news, not a failure
        if (data.type === "tool_progress") return h("div", { class: "block note progress", text: `${data.name || data.tool || "tool"}: ${data.message || ""}` });
        return h("div", { class: "block error", role: "alert", text: `${data.type || "error"}: ${data.message || ""}` });
      }
      case "meta_status": {
        // envelope-v1 §4.16: a routine signal, drawn as a status line (role status), never as an error
        const d = block.data && typeof block.data === "object" ? block.data : {};
        if (d.kind === "step_start") return null; // its step_finish says what the step did
        if (d.kind === "tool_progress" && [...progress.values()].some((news) => news.includes(block))) return null; // in its call
        return statusLine(block);
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
      case "meta_init":
      case "awaiting_frontend_tools":
        return null; // meta_init heads the agent; a pause is shown on the calls themselves
      default:
        return null;
    }
  }
}

/** A meta_status block as its status line (envelope-v1 §4.16): role status, never an error. */
function statusLine(block) {
  const d = block.data && typeof block.data === "object" ? block.data : {};
  let text = `${d.kind || "status"}: ${d.message || d.phase || d.state || d.outcome || ""}`;
  if (d.kind === "tool_progress") text = `${d.name || "tool"}: ${d.message || ""}`;
  if (d.kind === "step_finish") {
    const u = d.usage && typeof d.usage === "object" ? d.usage : {};
    const usd = d.cost && typeof d.cost.usd === "number" ? ` · $${d.cost.usd.toFixed(4)}` : "";
    text = `step ${d.step}: ${u.input_tokens ?? 0} in / ${u.output_tokens ?? 0} out${usd}`;
  }
  return h("div", { class: "block note status", role: "status", "data-kind": String(d.kind || ""), text });
}

/** spec server [PW1-c]: call id -> the tool_progress blocks that came while that call ran (before its result). */
function runningProgress(blocks, calls) {
  const progress = new Map();
  const answered = new Set();
  for (const b of blocks) {
    if (b.type === "tool_result" && b.id) answered.add(b.id);
    const d = b.type === "meta_status" && b.data && typeof b.data === "object" ? b.data : null;
    if (!d || d.kind !== "tool_progress" || !calls.has(d.tool_use_id) || answered.has(d.tool_use_id)) continue;
    if (!progress.has(d.tool_use_id)) progress.set(d.tool_use_id, []);
    progress.get(d.tool_use_id).push(b);
  }
  return progress;
}

const SHELL_TOOLS = new Set(["Bash", "BashOutput"]);
/** How a shell result says it ended (spec agent-ref [SB4-c], [SB5-a]); what follows it are notes. */
const SHELL_END = /^\[(?:exit code (-?\d+)|killed by \S+|exited: (?:exit code (-?\d+)|killed by \S+)|running|killed)\]$/;
const TIMED_OUT = /^\[timed out after \d+ ms: .*\]$/;
const CUT_NOTE = /^\[agent-ref: output cut: .*\]$/;

function resultView(block, callName) {
  const name = callName || block.name;
  const text = typeof block.content === "string" ? block.content : "";
  const shell = SHELL_TOOLS.has(name) && !block.is_error ? shellView(text) : null;
  const view = shell || diffOf(text) || h("div", { class: "tool-result" }, block.content);
  for (const image of block.images || []) {
    if (/^(data:image\/|https?:)/.test(image.src)) view.append(h("img", { src: image.src, alt: image.media_type }));
  }
  return view;
}

/** spec server [PW1-a]: a shell result as a monospace block, its cut note and its end (the exit code) set apart; null if it has no end line. */
function shellView(text) {
  const lines = text.split("\n");
  let end = lines.length - 1;
  while (end >= 0 && !SHELL_END.test(lines[end])) end--;
  if (end < 0) return null;
  const from = end > 0 && TIMED_OUT.test(lines[end - 1]) ? end - 1 : end;
  const output = lines.slice(0, from);
  const foot = h("div", { class: "shell-foot" }, lines.slice(from).map((line) => {
    const match = SHELL_END.exec(line);
    const code = match && (match[1] ?? match[2]);
    if (code === undefined || code === null) return h("span", { class: "shell-note", text: line.slice(1, -1) });
    return h("span", { class: `exit-code ${code === "0" ? "ok" : "fail"}`, "data-exit-code": code, text: `exit code ${code}` });
  }));
  const shown = output.length
    ? h("pre", { class: "shell-output" }, output.map((line) => (CUT_NOTE.test(line) ? h("span", { class: "cut-note", text: `${line}\n` }) : `${line}\n`)))
    : h("div", { class: "shell-empty", text: "(no output)" });
  return h("div", { class: "tool-result shell" }, shown, foot);
}

/** One line of a diff, its class by its first character (spec server [PW1-b]). */
function diffLine(line) {
  let kind = "ctx";
  if (line.startsWith("+++ ") || line.startsWith("--- ") || line.startsWith("diff ")) kind = "file";
  else if (line.startsWith("@@")) kind = "hunk";
  else if (line.startsWith("+")) kind = "add";
  else if (line.startsWith("-")) kind = "del";
  else if (line.startsWith("\\")) kind = "meta";
  return h("span", { class: `diff-line ${kind}`, text: line }); // a block: one line each
}

/** A text that holds a unified diff (a `--- `/`+++ ` pair and a hunk), drawn as one with the text before it kept; else null. */
function diffOf(text, cls = "tool-result") {
  const lines = String(text).split("\n");
  const start = lines.findIndex((line, i) => line.startsWith("--- ") && (lines[i + 1] || "").startsWith("+++ ") && (lines[i + 2] || "").startsWith("@@"));
  if (start < 0) return null;
  const before = lines.slice(0, start).join("\n");
  const body = lines.slice(start);
  while (body.length && body[body.length - 1] === "") body.pop();
  return h("div", { class: `${cls} diff-view` }, before ? h("div", { class: "diff-said", text: before }) : null,
    h("pre", { class: "diff" }, body.map(diffLine)));
}

/** spec server [PW1-b]: an Edit's input as the lines it takes out and puts in; a Write's content as added lines. */
function editDiff(name, input) {
  if (!input || typeof input !== "object" || typeof input.file_path !== "string") return null;
  const split = (text) => (text.endsWith("\n") ? text.slice(0, -1) : text).split("\n");
  let lines;
  if (name === "Edit" && typeof input.old_string === "string" && typeof input.new_string === "string") {
    const all = input.replace_all === true ? " (every occurrence)" : "";
    lines = [`--- ${input.file_path}`, `+++ ${input.file_path}`, `@@ replace${all} @@`,
      ...split(input.old_string).map((l) => `-${l}`), ...split(input.new_string).map((l) => `+${l}`)];
  } else if (name === "Write" && typeof input.content === "string") {
    lines = [`+++ ${input.file_path}`, `@@ the whole file @@`, ...split(input.content).map((l) => `+${l}`)];
  } else return null;
  return h("div", { class: "tool-change diff-view" }, h("pre", { class: "diff" }, lines.map(diffLine)));
}

// ------------------------------------------------------------------ flows

/** spec server §6.3-a: the docked question panel, one pending call at a time. */
async function frontendAnswers(pending, root) {
  const dialog = $("#confirm-dialog");
  const results = [];
  document.body.dataset.asking = "true";
  try {
    for (const call of pending) {
      if (call.approval && typeof call.approval === "object") {
        results.push(await approvalAnswer(call, root));
        continue;
      }
      const input = call.input || {};
      const isConfirm = call.name === "confirm" && typeof input.question === "string";
      const child = typeof call.agent === "string" && call.agent !== root;
      $("#confirm-who").textContent = child ? `A subagent (${call.agent.slice(0, 8)}) asks you` : "The agent asks you";
      $("#confirm-question").textContent = isConfirm ? input.question : `The agent wants to run “${call.name}” in your browser.`;
      $("#confirm-input").hidden = isConfirm;
      $("#confirm-input").textContent = JSON.stringify(input, null, 2);
      $("#confirm-answer").hidden = isConfirm;
      $("#confirm-answer").value = "";
      dialog.returnValue = "";
      dialog.show(); // not modal: the user may scroll up and read what the question is about
      scroller.keep();
      dialog.querySelector(".confirm").focus({ preventScroll: true });
      await new Promise((resolve) => dialog.addEventListener("close", resolve, { once: true }));
      const yes = dialog.returnValue === "yes";
      if (isConfirm) results.push({ tool_use_id: call.tool_use_id, content: yes ? "yes" : "no" });
      else if (yes) results.push({ tool_use_id: call.tool_use_id, content: $("#confirm-answer").value });
      else results.push({ tool_use_id: call.tool_use_id, content: "declined by the user", is_error: true });
    }
  } finally {
    delete document.body.dataset.asking;
  }
  return results;
}

/** spec §12.6 / server S1.2-d: a call waiting for approval: approve (the input as edited) or deny with a message. */
async function approvalAnswer(call, root) {
  const dialog = $("#approval-dialog");
  const child = typeof call.agent === "string" && call.agent !== root;
  const original = JSON.stringify(call.input || {}, null, 2);
  $("#approval-title").textContent = child ? `A subagent (${call.agent.slice(0, 8)}) wants to run a tool` : "Approve this tool call?";
  $("#approval-name").textContent = call.name;
  const reason = String(call.approval.reason || ""); // spec server [PW1-b]: a reason carrying a diff shows it as one
  const drawn = diffOf(reason, "approval-diff");
  if (drawn) $("#approval-reason").replaceChildren(drawn);
  else $("#approval-reason").textContent = reason;
  $("#approval-input").value = original;
  $("#approval-message").value = "";
  $("#approval-error").hidden = true;
  for (;;) {
    dialog.returnValue = "";
    dialog.show();
    scroller.keep();
    dialog.querySelector(".confirm").focus({ preventScroll: true });
    await new Promise((resolve) => dialog.addEventListener("close", resolve, { once: true }));
    if (dialog.returnValue !== "approve") {
      const message = $("#approval-message").value.trim();
      return { tool_use_id: call.tool_use_id, decision: "deny", ...(message ? { message } : {}) };
    }
    const text = $("#approval-input").value;
    if (text.trim() === original.trim()) return { tool_use_id: call.tool_use_id, decision: "approve" };
    try {
      const edited = JSON.parse(text);
      if (edited && typeof edited === "object" && !Array.isArray(edited)) {
        return { tool_use_id: call.tool_use_id, decision: "approve", updated_input: edited };
      }
    } catch (_) { /* shown below */ }
    $("#approval-error").textContent = "The input must be a JSON object; fix it, or deny.";
    $("#approval-error").hidden = false;
  }
}

/** The Stop button while a run streams (spec server §6.8-a): asks the server to stop it; the stream then ends with its closing lines. */
function offerStop(turn, run) {
  const button = $("#stop");
  button.hidden = false;
  button.disabled = false;
  button.onclick = async () => {
    button.disabled = true;
    setState("streaming", "stopping…");
    try {
      await run.stop();
    } catch (err) {
      if (err.type !== "run_finished") turn.note(`Could not stop the run: ${err.message || err}`); // it ended meanwhile: nothing to say
    }
  };
  return () => {
    button.hidden = true;
    button.onclick = null;
  };
}

/** The send box while a run streams (spec server [IN5-a]): a message for the working run, given to the
 * model at its next step boundary; shown in the conversation where it was sent. A 409 (the run is past
 * its last step) is a note, and the text stays in the box; when the run ends it moves to the prompt box. */
function offerInbox(turn, run) {
  const form = $("#inbox");
  const input = $("#inbox-text");
  const button = $("#inbox-send");
  form.hidden = false;
  button.disabled = true;
  run.started.then(() => (button.disabled = !run.runId), () => {});
  form.onsubmit = async (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text || !run.runId) return;
    button.disabled = true;
    const main = state.agentUuid && turn.merged().has(state.agentUuid) ? state.agentUuid : turn.merged().keys().next().value;
    const at = main ? turn.merged().get(main).blocks.length : 0;
    try {
      const response = await api(`/agent/runs/${encodeURIComponent(run.runId)}/messages`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ text }),
      });
      if (response.status === 202) {
        input.value = "";
        turn.sent.push({ text, at, agent: main });
        turn.schedule();
      } else if (response.status === 409) {
        turn.note("The run has finished; send it as a new prompt.", "block note inbox-refused");
      } else if (response.status === 429 || response.status === 413) {
        // spec server [IB1-e]: a bound of the run's inbox; the text stays in the box for another try
        let why = "";
        try {
          why = (await response.json()).error.message || "";
        } catch (_) { /* the status says it */ }
        const wait = response.headers.get("Retry-After");
        const head = response.status === 429
          ? `Not sent yet: the run's inbox is full; the text is still in the box, send it again${wait ? ` in ${wait} s` : " later"}.`
          : "Not sent: the message is too long for the run's inbox; shorten it and send again.";
        turn.note(why ? `${head} (${why})` : head, "block note inbox-refused inbox-full");
      } else {
        let why = `the server answered ${response.status}`;
        try {
          why = (await response.json()).error.message || why;
        } catch (_) { /* the status says it */ }
        turn.note(`Not sent: ${why}`, "block note inbox-refused");
      }
    } catch (err) {
      turn.note(`Not sent: ${err.message || err}`, "block note inbox-refused");
    } finally {
      button.disabled = !run.runId || form.hidden;
    }
  };
  return () => {
    const left = input.value.trim();
    if (left && !$("#prompt").value.trim()) {
      $("#prompt").value = left; // not delivered: it goes where the next prompt is typed
      input.value = "";
    }
    form.hidden = true;
    button.disabled = true;
    form.onsubmit = null;
  };
}

/** Follow the run to its end: each response into its own Stream; answer frontend tools (spec server §6.3-a). */
async function drive(turn, run, afterFirst = () => {}) {
  const hideStop = offerStop(turn, run);
  const hideInbox = offerInbox(turn, run);
  run.started.then(() => refreshRuns(), () => {}); // spec server [PL1-b]: a run started is listed
  try {
    await follow(turn, run, afterFirst);
  } finally {
    hideStop();
    hideInbox();
    refreshRuns(); // ... and its end (or its error) is
  }
}

async function follow(turn, run, afterFirst) {
  setState("streaming", "streaming");
  run.started.then(() => run.runId && setRun(run.runId), () => {});
  for await (const event of run.events()) {
    const response = turn.current(run);
    if (response.runId === null && run.runId !== null) {
      response.runId = run.runId; // spec server §2.2-a: from X-Run-Id or the stream itself
      setRun(run.runId);
    }
    response.rebuilt.feed(event.data);
    if (document.body.dataset.state !== "streaming") setState("streaming", "streaming");
    turn.schedule();
    if (event.data !== DONE) continue;
    if (turn.responses.length === 1) afterFirst();
    const transcript = response.rebuilt.transcript();
    const main = Object.keys(transcript.agents)[0];
    if (main) state.agentUuid = main;
    if (!run.pending) continue; // the iteration ends with the run
    setState("waiting", "waiting for you");
    const results = await frontendAnswers(run.pending, main);
    for (const r of results) {
      if (r.decision === "deny") turn.denied.set(r.tool_use_id, r.message || "not approved");
      else turn.answered.set(r.tool_use_id, r.decision === "approve" ? "approved" : r.content);
    }
    turn.schedule();
    scroller.resume();
    await run.answer(results);
    setState("streaming", "streaming");
  }
  turn.schedule();
}

function busy(on) {
  state.busy = on;
  $("#send").disabled = on;
  if (!on) document.body.dataset.done = String(state.turns.length);
}

async function send(prompt) {
  if (state.busy) return;
  busy(true);
  $("#empty")?.remove();
  const turn = new Turn(prompt);
  state.turns.push(turn);
  let started = false;
  try {
    const body = { prompt };
    if (state.agentUuid) body.agent_uuid = state.agentUuid;
    const run = readRun("/agent/run", turn, { body });
    run.started.then(() => (started = true), () => {});
    await drive(turn, run);
    setState("idle", "ready");
  } catch (err) {
    const message = String(err.message || err);
    if (!started && !$("#prompt").value.trim()) {
      // spec server §6.7-a: nothing ran, so the prompt goes back where the user typed it
      $("#prompt").value = prompt;
      turn.el.classList.add("not-sent");
      turn.note(`${message} Your message is back in the box below.`);
    } else {
      turn.note(message);
    }
    setState("error", err instanceof NotSent ? "not sent" : "error");
  } finally {
    busy(false);
  }
}

/** A page opened (or reloaded) on #run=ID shows that run's latest response, live if it still runs,
 * and asks again for the frontend tools it is waiting for (spec server §2.2-a). */
async function openRun(runId) {
  $("#empty")?.remove();
  const turn = new Turn("…");
  state.turns.push(turn);
  busy(true);
  const showQuery = () => {
    const transcript = turn.responses[0]?.rebuilt.transcript();
    const main = transcript && Object.keys(transcript.agents)[0];
    const meta = main && transcript.agents[main].blocks[0];
    if (meta && meta.type === "meta_init" && meta.data && meta.data.user_query) {
      turn.el.querySelector(".user").textContent = meta.data.user_query;
    }
  };
  try {
    await drive(turn, readRun(`/agent/runs/${encodeURIComponent(runId)}/stream`, turn), showQuery);
    setState("idle", "ready");
  } catch (err) {
    turn.note(String(err.message || err));
    setState("error", "error");
  } finally {
    busy(false);
  }
}

function init() {
  const prompt = $("#prompt");
  $("#composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = prompt.value.trim();
    if (!text || state.busy) return;
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
  // Enter in the token field means "use it" (the form's first button is Cancel)
  $("#token-input").addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      e.preventDefault();
      $("#token-dialog").close("ok");
    }
  });
  watchScrolling();
  watchRunLinks();
  refreshRuns();
  const match = /^#run=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (match) openRun(match[1]);
  document.body.dataset.ready = "true";
}

init();

// The chat view's page (bundled to dist/chat.js, run in the webview under a strict content
// security policy): the sessions, the selected conversation as it streams, the prompt box with
// `@` completion, the mode, apply-mode and model pickers, the context meter and the cost. It
// keeps no state of its own beyond what it shows: the extension holds each conversation and
// sends it whole when the view (re)loads or another session is picked.

/// <reference lib="dom" />
/// <reference lib="dom.iterable" />

import type * as proto from "../protocol";
import type { ChatItem, Completion, FromWebview, Settings, ToWebview } from "../chatMessages";
import { escapeHtml, renderMarkdown } from "./markdown";

declare function acquireVsCodeApi(): { postMessage(message: FromWebview): void };

const vscode = acquireVsCodeApi();
const post = (message: FromWebview) => vscode.postMessage(message);

function element<T extends HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) {
    throw new Error(`the chat page has no #${id}`);
  }
  return found as T;
}

const sessionPicker = element<HTMLSelectElement>("session");
const newButton = element<HTMLButtonElement>("new");
const log = element<HTMLDivElement>("log");
const prompt = element<HTMLTextAreaElement>("prompt");
const sendButton = element<HTMLButtonElement>("send");
const stopButton = element<HTMLButtonElement>("stop");
const modePicker = element<HTMLSelectElement>("mode");
const applyPicker = element<HTMLSelectElement>("apply");
const modelInput = element<HTMLInputElement>("model");
const models = element<HTMLDataListElement>("models");
const meter = element<HTMLMeterElement>("context");
const contextText = element<HTMLSpanElement>("context-text");
const costText = element<HTMLSpanElement>("cost");
const completions = element<HTMLUListElement>("completions");
const attachment = element<HTMLSpanElement>("attachment");

let selected: string | undefined;
let sessions: proto.SessionInfo[] = [];
let running = false;

/** What the conversation shows, rebuilt from its items. */
class Conversation {
  /** The answer block text is appended to, with its step, and its text so far. */
  private answer: { step: number; text: string; element: HTMLElement } | undefined;
  private step = 0;
  private readonly tools = new Map<string, HTMLDetailsElement>();
  private readonly proposals = new Map<string, HTMLElement>();

  reset(): void {
    log.replaceChildren();
    this.answer = undefined;
    this.step = 0;
    this.tools.clear();
    this.proposals.clear();
    meter.value = 0;
    contextText.textContent = "";
    costText.textContent = "";
  }

  add(item: ChatItem): void {
    if (item.type === "steer") {
      this.userMessage(item.message, `joined turn ${item.turn}`);
      return;
    }
    if (item.type === "decided") {
      for (const row of log.querySelectorAll<HTMLElement>(".hunk")) {
        if (row.dataset.hunk && item.hunks.includes(row.dataset.hunk)) {
          row.classList.add(item.accepted ? "accepted" : "rejected");
          row.querySelector(".hunk-actions")?.replaceChildren(item.accepted ? "accepted" : "rejected");
        }
      }
      return;
    }
    if (item.type === "error") {
      this.note(item.message, "error");
      return;
    }
    if (item.type === "approval") {
      this.approval(item.id, item.request);
      return;
    }
    if (item.type === "approved") {
      const card = log.querySelector<HTMLElement>(`.card.approval[data-approval="${item.id}"]`);
      card?.classList.add("answered", item.decision === "deny" ? "denied" : "allowed");
      card?.querySelector(".approval-actions")?.replaceChildren(
        APPROVAL_ANSWERS[item.decision as keyof typeof APPROVAL_ANSWERS] ?? item.decision,
      );
      return;
    }
    this.event(item.event);
  }

  private event(event: proto.AgentEventParams): void {
    switch (event.kind) {
      case "turn":
        this.userMessage(event.message, `turn ${event.turn}`);
        return;
      case "stepStarted":
        this.step = event.step;
        this.answer = undefined;
        return;
      case "textDelta": {
        if (!this.answer || this.answer.step !== this.step) {
          const block = document.createElement("div");
          block.className = "message answer markdown";
          block.dataset.step = String(this.step);
          this.append(block);
          this.answer = { step: this.step, text: "", element: block };
        }
        this.answer.text += event.text;
        this.answer.element.innerHTML = renderMarkdown(this.answer.text);
        this.scroll();
        return;
      }
      case "stepRetried":
        // Nothing of the cut answer was acted on: it goes, and the step starts over.
        for (const block of log.querySelectorAll(`.answer[data-step="${event.step}"]`)) {
          block.remove();
        }
        this.answer = undefined;
        this.note(`step ${event.step} was cut (${event.reason}); asking again`);
        return;
      case "toolCall": {
        this.answer = undefined;
        const card = document.createElement("details");
        card.className = "card tool";
        const summary = document.createElement("summary");
        summary.innerHTML = `<span class="tool-name">${escapeHtml(event.name)}</span> <span class="tool-args">${escapeHtml(shortArguments(event.arguments))}</span>`;
        const output = document.createElement("pre");
        output.className = "tool-output";
        output.textContent = "running…";
        card.append(summary, output);
        this.tools.set(event.id, card);
        this.append(card);
        return;
      }
      case "toolResult": {
        const card = this.tools.get(event.id);
        const output = card?.querySelector(".tool-output");
        if (card && output) {
          output.textContent = event.output;
          card.classList.toggle("failed", event.isError);
          card.dataset.done = "true";
        }
        return;
      }
      case "editProposed":
        this.proposal(event.sessionId, event.path, event.hunks, event.before === null, event.after === null);
        return;
      case "filesChanged":
        if (event.paths.length > 0) {
          const line = this.note("changed ");
          for (const path of event.paths) {
            const link = document.createElement("button");
            link.className = "link-button";
            link.textContent = path;
            link.title = `Open ${path}`;
            link.addEventListener("click", () => post({ type: "openFile", path }));
            line.append(link, " ");
          }
        }
        return;
      case "plan": {
        const card = document.createElement("div");
        card.className = "card plan";
        card.innerHTML =
          "<strong>Plan</strong><ul>" +
          event.steps
            .map((step) => `<li class="plan-${step.status}">${step.status === "done" ? "✓" : step.status === "in_progress" ? "▸" : "○"} ${escapeHtml(step.title)}</li>`)
            .join("") +
          "</ul>";
        this.append(card);
        return;
      }
      case "usage": {
        meter.max = Math.max(event.contextWindow, 1);
        meter.value = event.contextTokens;
        contextText.textContent = `context ${tokens(event.contextTokens)} / ${tokens(event.contextWindow)}`;
        meter.title = contextText.textContent;
        costText.textContent = event.costUsd == null ? "" : `$${event.costUsd.toFixed(4)}`;
        return;
      }
      case "mode":
        this.note(`mode: ${event.mode}`);
        return;
      case "model":
        this.note(`model ${event.model}${event.tier ? ` (${event.tier})` : ""}`);
        return;
      case "approval":
        this.note(`approval for ${event.command ?? "a command"}: ${event.decision}`);
        return;
      case "compacted":
        this.note(`history compacted: ${tokens(event.tokensBefore)} → ${tokens(event.tokensAfter)} tokens`);
        return;
      case "error":
        this.note(event.message, "error");
        return;
      case "finished": {
        const outcome = event.outcome;
        this.answer = undefined;
        this.note(
          `turn ${event.turn} ${outcome.status} after ${outcome.steps} steps${outcome.reason ? `: ${outcome.reason}` : ""}`,
          outcome.status === "failed" ? "error" : "finished",
        );
        return;
      }
      default:
        return;
    }
  }

  /** The card of a review-mode proposal, one per file: a later proposal replaces it. */
  private proposal(sessionId: string, path: string, hunks: proto.Hunk[], created: boolean, deleted: boolean): void {
    this.proposals.get(path)?.remove();
    const card = document.createElement("div");
    card.className = "card proposal";
    card.dataset.path = path;
    const head = document.createElement("div");
    head.className = "proposal-head";
    const title = document.createElement("span");
    title.textContent = `Proposed: ${path}${created ? " (new)" : deleted ? " (deleted)" : ""}`;
    const open = document.createElement("button");
    open.textContent = "Open Diff";
    open.addEventListener("click", () => post({ type: "openDiff", sessionId, path }));
    head.append(title, open);
    card.append(head);
    for (const hunk of hunks) {
      const row = document.createElement("div");
      row.className = "hunk";
      row.dataset.hunk = hunk.id;
      const lines = hunk.endLine < hunk.startLine ? `before line ${hunk.startLine}` : `lines ${hunk.startLine}–${hunk.endLine}`;
      row.innerHTML =
        `<div class="hunk-head">${escapeHtml(lines)}</div>` +
        `<pre class="diff">${diffLines(hunk.oldText, "-")}${diffLines(hunk.newText, "+")}</pre>`;
      const accept = document.createElement("button");
      accept.textContent = "Accept";
      accept.title = `Accept this change to ${path}`;
      accept.addEventListener("click", () => post({ type: "hunk", sessionId, hunkId: hunk.id, accept: true }));
      const reject = document.createElement("button");
      reject.textContent = "Reject";
      reject.className = "secondary";
      reject.title = `Reject this change to ${path}`;
      reject.addEventListener("click", () => post({ type: "hunk", sessionId, hunkId: hunk.id, accept: false }));
      const actions = document.createElement("div");
      actions.className = "hunk-actions";
      actions.append(accept, reject);
      row.append(actions);
      card.append(row);
    }
    this.proposals.set(path, card);
    this.append(card);
  }

  /** A command asks for more than the sandbox allows: the answer goes back to the server. */
  private approval(id: string, request: proto.RequestApprovalParams): void {
    const card = document.createElement("div");
    card.className = "card approval";
    card.dataset.approval = id;
    card.setAttribute("role", "group");
    card.setAttribute("aria-label", "Approval needed");
    const what = request.command ? `<code>${escapeHtml(request.command)}</code>` : "A command";
    card.innerHTML =
      `<div class="approval-head">${what} needs more than the sandbox allows (${escapeHtml(request.kind)}).</div>` +
      `<div class="approval-reason">${escapeHtml(request.reason)}</div>`;
    const actions = document.createElement("div");
    actions.className = "approval-actions";
    for (const decision of ["allow", "allowAlways", "deny"] as const) {
      const button = document.createElement("button");
      button.textContent = APPROVAL_CHOICES[decision];
      button.dataset.decision = decision;
      if (decision === "deny") {
        button.className = "secondary";
      }
      button.addEventListener("click", () => post({ type: "approve", id, decision }));
      actions.append(button);
    }
    card.append(actions);
    this.append(card);
    // Answerable from the keyboard at once (Enter allows), unless the user is typing a message.
    if (document.activeElement !== prompt || prompt.value === "") {
      actions.querySelector("button")?.focus();
    }
  }

  private userMessage(text: string, label: string): void {
    this.answer = undefined;
    const block = document.createElement("div");
    block.className = "message user";
    block.innerHTML = `<div class="who">${escapeHtml(label)}</div><div class="markdown">${renderMarkdown(text)}</div>`;
    this.append(block);
  }

  private note(text: string, kind = ""): HTMLElement {
    const line = document.createElement("div");
    line.className = `note ${kind}`.trim();
    line.textContent = text;
    this.append(line);
    return line;
  }

  private append(node: HTMLElement): void {
    log.append(node);
    this.scroll();
  }

  private scroll(): void {
    log.scrollTop = log.scrollHeight;
  }
}

const APPROVAL_CHOICES = { allow: "Allow", allowAlways: "Allow for This Session", deny: "Deny" } as const;
const APPROVAL_ANSWERS = { allow: "allowed", allowAlways: "allowed for this session", deny: "denied" } as const;

function diffLines(text: string, mark: "-" | "+"): string {
  if (text === "") {
    return "";
  }
  const cls = mark === "-" ? "removed" : "added";
  return text
    .replace(/\n$/, "")
    .split("\n")
    .map((line) => `<span class="${cls}">${mark} ${escapeHtml(line)}</span>\n`)
    .join("");
}

function tokens(count: number): string {
  return count >= 1000 ? `${(count / 1000).toFixed(count >= 10000 ? 0 : 1)}k` : String(count);
}

/** The tool's arguments on one line: the values of a JSON object, shortened. */
function shortArguments(text: string): string {
  let short = text;
  try {
    const value: unknown = JSON.parse(text);
    if (value && typeof value === "object" && !Array.isArray(value)) {
      short = Object.values(value as Record<string, unknown>)
        .map((v) => (typeof v === "string" ? v : JSON.stringify(v)))
        .join(" ");
    }
  } catch {
    // Not JSON yet (or never): shown as written.
  }
  short = short.replace(/\s+/g, " ").trim();
  return short.length > 80 ? `${short.slice(0, 80)}…` : short;
}

const conversation = new Conversation();

function settings(): Settings {
  return {
    mode: modePicker.value === "plan" ? "plan" : "code",
    applyMode: applyPicker.value === "review" ? "review" : "auto",
    model: modelInput.value.trim(),
  };
}

function showSessions(): void {
  const options = [new Option("New conversation", "")];
  for (const session of sessions.slice().reverse()) {
    const cost = session.costUsd == null ? "" : ` · $${session.costUsd.toFixed(4)}`;
    const label = `${session.title ?? session.task} · ${session.status}${cost}`;
    options.push(new Option(label, session.sessionId));
  }
  sessionPicker.replaceChildren(...options);
  sessionPicker.value = selected ?? "";
}

function setRunning(value: boolean): void {
  running = value;
  stopButton.disabled = !running;
  document.body.classList.toggle("running", running);
  sendButton.textContent = running ? "Steer" : "Send";
  sendButton.title = running
    ? "Send: the message joins the running turn at its next step (Enter)"
    : "Send the message (Enter; Shift+Enter for a new line)";
}

window.addEventListener("message", (event: MessageEvent<ToWebview>) => {
  const message = event.data;
  switch (message.type) {
    case "state":
      sessions = message.sessions;
      selected = message.selected;
      showSessions();
      conversation.reset();
      for (const item of message.items) {
        conversation.add(item);
      }
      modePicker.value = message.settings.mode;
      applyPicker.value = message.settings.applyMode;
      modelInput.value = message.settings.model;
      models.replaceChildren(...message.models.map((model) => new Option(model, model)));
      setRunning(message.running);
      return;
    case "item":
      conversation.add(message.item);
      setRunning(message.running);
      return;
    case "sessions":
      sessions = message.sessions;
      showSessions();
      return;
    case "completions":
      showCompletions(message.query, message.items);
      return;
    case "attachment":
      attachment.textContent = message.label ? `with ${message.label}` : "";
      return;
    case "focus":
      prompt.focus();
      return;
    case "stats":
      showStats(message.stats);
      return;
  }
});

const SVG = "http://www.w3.org/2000/svg";

/** The stats card: the counts in all and per model, and a bar per day of kept and undone edits. */
function showStats(stats: proto.StatsResult): void {
  document.getElementById("stats")?.remove();
  const card = document.createElement("section");
  card.id = "stats";
  card.className = "stats";
  const title = document.createElement("h3");
  title.textContent = `Stats of the last ${stats.sinceDays} days (from this machine's journals)`;
  card.append(title);
  const row = (name: string, c: proto.StatsCounts) => {
    const line = document.createElement("div");
    const first = c.firstEditSecs == null ? "-" : `${c.firstEditSecs}s`;
    line.textContent =
      `${name}: ${c.sessions} sessions, ${c.turns} turns · edits ${c.edits.proposed} proposed, ` +
      `${c.edits.applied} applied, ${c.edits.rejected} rejected, ${c.edits.undone} undone, ` +
      `${c.edits.kept} kept · ${c.commands.run} commands (${c.commands.refused} refused) · ` +
      `${c.usage.input + c.usage.output} tokens, $${c.costUsd.toFixed(4)} · first edit ${first}`;
    return line;
  };
  card.append(row("All", stats));
  for (const model of Object.keys(stats.models).sort()) {
    const counts = stats.models[model];
    if (counts) {
      card.append(row(model, counts));
    }
  }
  card.append(chart(stats.days));
  log.append(card);
  card.scrollIntoView({ block: "nearest" });
}

/** Stacked bars, one per day: kept below, undone above. */
function chart(days: proto.StatsDay[]): Element {
  if (days.length === 0) {
    const none = document.createElement("div");
    none.textContent = "No edits landed in these days.";
    return none;
  }
  const width = 12;
  const height = 60;
  const most = Math.max(1, ...days.map((d) => d.kept + d.undone));
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "stats-chart");
  svg.setAttribute("viewBox", `0 0 ${days.length * width} ${height}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "Kept and undone edits per day");
  days.forEach((day, at) => {
    const kept = (day.kept / most) * height;
    const undone = (day.undone / most) * height;
    const bar = (className: string, y: number, h: number) => {
      const rect = document.createElementNS(SVG, "rect");
      rect.setAttribute("class", className);
      rect.setAttribute("x", String(at * width + 1));
      rect.setAttribute("y", String(y));
      rect.setAttribute("width", String(width - 2));
      rect.setAttribute("height", String(h));
      const tip = document.createElementNS(SVG, "title");
      tip.textContent = `${day.day}: ${day.kept} kept, ${day.undone} undone`;
      rect.append(tip);
      svg.append(rect);
    };
    bar("stats-kept", height - kept, kept);
    bar("stats-undone", height - kept - undone, undone);
  });
  const legend = document.createElement("div");
  legend.className = "stats-legend";
  legend.textContent = `${days[0]?.day} – ${days[days.length - 1]?.day} · kept (lower) and undone (upper) edits per day`;
  const figure = document.createElement("figure");
  figure.append(svg, legend);
  return figure;
}

// The prompt box: Enter sends, Shift+Enter is a new line, `@` completes files and symbols.

let offered: Completion[] = [];
let active = 0;
let asked: string | undefined;

/** The `@word` the caret is at the end of, if any. */
function mention(): { start: number; query: string } | undefined {
  const before = prompt.value.slice(0, prompt.selectionStart);
  const match = /(^|\s)@([\w./-]*)$/.exec(before);
  return match ? { start: before.length - match[2].length, query: match[2] } : undefined;
}

function closeCompletions(): void {
  offered = [];
  asked = undefined;
  completions.hidden = true;
  completions.replaceChildren();
  prompt.removeAttribute("aria-activedescendant");
}

function showCompletions(query: string, items: Completion[]): void {
  if (query !== asked) {
    return;
  }
  offered = items;
  active = 0;
  completions.replaceChildren(
    ...items.map((item, index) => {
      const row = document.createElement("li");
      row.id = `completion-${index}`;
      row.setAttribute("role", "option");
      row.innerHTML = `<span class="label">${escapeHtml(item.label)}</span> <span class="detail">${escapeHtml(item.detail)}</span>`;
      row.addEventListener("mousedown", (event) => {
        event.preventDefault();
        accept(index);
      });
      return row;
    }),
  );
  completions.hidden = items.length === 0;
  highlightCompletion();
}

function highlightCompletion(): void {
  completions.querySelectorAll("li").forEach((row, index) => {
    row.setAttribute("aria-selected", String(index === active));
  });
  if (offered.length > 0) {
    prompt.setAttribute("aria-activedescendant", `completion-${active}`);
  }
}

function accept(index: number): void {
  const at = mention();
  const item = offered[index];
  if (!at || !item) {
    closeCompletions();
    return;
  }
  const end = prompt.selectionStart;
  prompt.value = `${prompt.value.slice(0, at.start)}${item.insert} ${prompt.value.slice(end)}`;
  const caret = at.start + item.insert.length + 1;
  prompt.setSelectionRange(caret, caret);
  closeCompletions();
}

prompt.addEventListener("input", () => {
  const at = mention();
  if (!at) {
    closeCompletions();
    return;
  }
  asked = at.query;
  post({ type: "complete", query: at.query });
});

function send(): void {
  const message = prompt.value.trim();
  if (!message) {
    return;
  }
  post({ type: "send", message, settings: settings() });
  prompt.value = "";
  closeCompletions();
}

prompt.addEventListener("keydown", (event) => {
  if (!completions.hidden && offered.length > 0) {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      active = (active + (event.key === "ArrowDown" ? 1 : offered.length - 1)) % offered.length;
      highlightCompletion();
      return;
    }
    if (event.key === "Enter" || event.key === "Tab") {
      event.preventDefault();
      accept(active);
      return;
    }
    if (event.key === "Escape") {
      event.preventDefault();
      closeCompletions();
      return;
    }
  }
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  }
});

sendButton.addEventListener("click", send);
stopButton.addEventListener("click", () => post({ type: "cancel" }));
newButton.addEventListener("click", () => {
  post({ type: "select", sessionId: undefined });
  prompt.focus();
});
sessionPicker.addEventListener("change", () => post({ type: "select", sessionId: sessionPicker.value || undefined }));
for (const picker of [modePicker, applyPicker, modelInput]) {
  picker.addEventListener("change", () => {
    if (selected) {
      post({ type: "configure", settings: settings() });
    }
  });
}

closeCompletions();
setRunning(false);
post({ type: "ready" });

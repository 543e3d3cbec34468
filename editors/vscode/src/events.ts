// The "Wright" output channel: every `wright/agentEvent` as it arrives, one line each (model
// text streamed as it comes), and the server's status on request.

import * as vscode from "vscode";
import * as proto from "./protocol";

/** Longest tool output or argument text shown; the rest is elided. */
const PREVIEW = 400;

export class EventLog implements vscode.Disposable {
  /** The session whose model text is mid-line in the channel, if any. */
  private streaming: string | undefined;

  constructor(private readonly channel: vscode.OutputChannel) {}

  started(sessionId: string, task: string, applyMode: string): void {
    this.line(`[${sessionId}] task (${applyMode}): ${task}`);
  }

  line(text: string): void {
    this.endStream();
    this.channel.appendLine(text);
  }

  event(event: proto.AgentEventParams): void {
    const tag = `[${event.sessionId} #${event.seq}]`;
    switch (event.kind) {
      case "textDelta":
        if (this.streaming !== event.sessionId) {
          this.endStream();
          this.channel.append(`${tag} `);
          this.streaming = event.sessionId;
        }
        this.channel.append(event.text);
        return;
      case "model":
        this.line(`${tag} model ${event.model}${event.tier ? ` (${event.tier})` : ""}: ${event.reason}`);
        return;
      case "stepStarted":
        this.line(`${tag} step ${event.step}`);
        return;
      case "stepRetried":
        // An output channel cannot take text back: say that the partial answer above is void.
        this.line(`${tag} step ${event.step}: the answer was cut (${event.reason}); the text above is dropped, asking again`);
        return;
      case "toolCall":
        this.line(`${tag} → ${event.name} ${preview(event.arguments)}`);
        return;
      case "toolResult":
        this.line(`${tag} ← ${event.name}${event.isError ? " (error)" : ""}: ${preview(event.output)}`);
        return;
      case "filesChanged":
        this.line(`${tag} files changed: ${event.paths.join(", ")}`);
        return;
      case "editProposed":
        this.line(`${tag} edit proposed: ${event.path}${event.after === null ? " (deleted)" : event.before === null ? " (new)" : ""}`);
        return;
      case "plan":
        this.line(`${tag} plan:`);
        for (const step of event.steps) {
          const mark = step.status === "done" ? "x" : step.status === "in_progress" ? ">" : " ";
          this.channel.appendLine(`    [${mark}] ${step.title}`);
        }
        return;
      case "usage": {
        const cost = event.costUsd == null ? "" : `, $${event.costUsd.toFixed(4)}`;
        this.line(`${tag} tokens: ${event.input} in (${event.cachedInput} cached), ${event.output} out; context ${event.contextTokens}/${event.contextWindow}${cost}`);
        return;
      }
      case "turn":
        this.line(`${tag} turn ${event.turn}: ${preview(event.message)}`);
        return;
      case "title":
        this.line(`${tag} title: ${event.title}`);
        return;
      case "mode":
        this.line(`${tag} mode: ${event.mode}`);
        return;
      case "compacted":
        this.line(`${tag} compacted: ${event.tokensBefore} → ${event.tokensAfter} tokens${event.summarized ? " (summarized)" : `, ${event.masked} outputs masked`}`);
        return;
      case "error":
        this.line(`${tag} error: ${event.message}`);
        return;
      case "finished": {
        const outcome = event.outcome;
        this.line(`${tag} ${outcome.status} after ${outcome.steps} steps${outcome.reason ? `: ${outcome.reason}` : ""}`);
        if (outcome.message) {
          this.channel.appendLine(`    ${outcome.message}`);
        }
        return;
      }
    }
  }

  status(status: proto.StatusResult): void {
    this.line(`wright ${status.server.version}: positions in ${status.positionEncoding}, log to ${status.log}`);
    this.channel.appendLine(`  workspace folders: ${status.workspaceFolders.join(", ") || "none"}`);
    this.channel.appendLine(`  open documents: ${status.documents.length}`);
    this.channel.appendLine("  settings:");
    for (const setting of status.settings) {
      const value = setting.value ?? "(unset)";
      this.channel.appendLine(`    ${setting.key} = ${value}${setting.source ? `  [${setting.source}]` : ""}`);
    }
    for (const problem of status.problems) {
      this.channel.appendLine(`  problem: ${problem}`);
    }
  }

  show(): void {
    this.channel.show(true);
  }

  private endStream(): void {
    if (this.streaming !== undefined) {
      this.channel.appendLine("");
      this.streaming = undefined;
    }
  }

  dispose(): void {
    this.channel.dispose();
  }
}

function preview(text: string): string {
  const oneLine = text.replace(/\s+/g, " ").trim();
  return oneLine.length > PREVIEW ? `${oneLine.slice(0, PREVIEW)}…` : oneLine;
}

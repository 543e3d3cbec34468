// The status bar item: idle, running (with the step), or an error; a click does what the
// state calls for.

import * as vscode from "vscode";

export class StatusItem implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private connected = false;
  private error: string | undefined;
  private lastOutcome: string | undefined;

  constructor() {
    this.item = vscode.window.createStatusBarItem("wright.status", vscode.StatusBarAlignment.Left, 10);
    this.item.name = "Wright";
    this.setIdle();
    this.item.show();
  }

  setConnected(connected: boolean): void {
    this.connected = connected;
    if (!connected) {
      this.show("$(debug-disconnect) wright: stopped", "The wright server is not running.", "wright.showStatus");
    } else {
      this.setIdle();
    }
  }

  setIdle(): void {
    if (this.error) {
      this.show(`$(error) wright: error`, this.error, "wright.showStatus");
      this.item.backgroundColor = new vscode.ThemeColor("statusBarItem.errorBackground");
      return;
    }
    this.item.backgroundColor = undefined;
    const tooltip = this.lastOutcome
      ? `Last run: ${this.lastOutcome}. Click to run an agent task.`
      : "Click to run an agent task.";
    this.show(this.connected ? "$(sparkle) wright: idle" : "$(sync~spin) wright: starting", tooltip, "wright.runTask");
  }

  setRunning(step: number, sessions: number): void {
    this.error = undefined;
    this.item.backgroundColor = undefined;
    const steps = step > 0 ? `step ${step}` : "starting";
    const more = sessions > 1 ? ` (+${sessions - 1})` : "";
    this.show(`$(sync~spin) wright: ${steps}${more}`, "The agent is at work. Click to cancel.", "wright.cancel");
  }

  setError(error: string): void {
    this.error = error;
    this.setIdle();
  }

  setLastOutcome(outcome: string): void {
    this.error = undefined;
    this.lastOutcome = outcome;
  }

  private show(text: string, tooltip: string, command: string): void {
    this.item.text = text;
    this.item.tooltip = tooltip;
    this.item.command = command;
  }

  dispose(): void {
    this.item.dispose();
  }
}

// Review mode's proposals: the whole texts `editProposed` carries, served under the
// `wright-proposal:` scheme so VS Code's diff editor can show each file's buffer (left) against
// what the agent proposes (right), with an "Accept Hunk" and a "Reject Hunk" CodeLens over each
// of the proposal's hunks (and the hunk at the cursor for the editor title's commands).

import * as vscode from "vscode";
import type * as proto from "./protocol";

export const PROPOSAL_SCHEME = "wright-proposal";
const SCHEME = PROPOSAL_SCHEME;

interface Proposal {
  /** The file in the workspace. */
  file: vscode.Uri;
  before: string | null;
  after: string | null;
  /** The hunks not decided yet, in 1-based lines of the proposal's `before`. */
  hunks: proto.Hunk[];
}

/** A hunk where the diff's right side (the proposal) shows it. */
export interface PlacedHunk {
  sessionId: string;
  path: string;
  hunk: proto.Hunk;
  /** 0-based lines of the proposal's text, first and last (last below first: nothing added). */
  first: number;
  last: number;
}

export class ProposalStore
  implements vscode.TextDocumentContentProvider, vscode.CodeLensProvider, vscode.Disposable
{
  /** Session → workspace-relative path → the latest proposal for it. */
  private readonly sessions = new Map<string, Map<string, Proposal>>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly lensesChanged = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.lensesChanged.event;
  private readonly registrations: vscode.Disposable[];

  constructor() {
    this.registrations = [
      vscode.workspace.registerTextDocumentContentProvider(SCHEME, this),
      vscode.languages.registerCodeLensProvider({ scheme: SCHEME }, this),
    ];
  }

  propose(
    sessionId: string,
    root: vscode.Uri,
    path: string,
    before: string | null,
    after: string | null,
    hunks: proto.Hunk[],
  ): void {
    let files = this.sessions.get(sessionId);
    if (!files) {
      files = new Map();
      this.sessions.set(sessionId, files);
    }
    const earlier = files.get(path);
    // The first proposal's `before` is the file as it was; later ones build on the proposal.
    files.set(path, {
      file: vscode.Uri.joinPath(root, path),
      before: earlier ? earlier.before : before,
      after,
      hunks,
    });
    this.changed.fire(this.uri(sessionId, path, "after"));
    this.lensesChanged.fire();
  }

  /** The hunks `ids` were accepted or rejected: a file with none left is no longer proposed
   * (the server announces a new proposal only for a file with hunks left). */
  async decided(sessionId: string, ids: string[]): Promise<void> {
    const files = this.sessions.get(sessionId);
    if (!files) {
      return;
    }
    const done: string[] = [];
    for (const [path, proposal] of files) {
      const had = proposal.hunks.length;
      proposal.hunks = proposal.hunks.filter((hunk) => !ids.includes(hunk.id));
      if (had > 0 && proposal.hunks.length === 0) {
        files.delete(path);
        done.push(this.uri(sessionId, path, "after").toString());
      }
    }
    if (files.size === 0) {
      this.sessions.delete(sessionId);
    }
    this.lensesChanged.fire();
    // A diff with nothing left to decide would only show a stale proposal: it closes.
    const stale = vscode.window.tabGroups.all
      .flatMap((group) => group.tabs)
      .filter((tab) => tab.input instanceof vscode.TabInputTextDiff && done.includes(tab.input.modified.toString()));
    if (stale.length > 0) {
      await vscode.window.tabGroups.close(stale);
    }
  }

  /** Where each hunk of the proposal `uri` shows, in its text. */
  placed(uri: vscode.Uri): PlacedHunk[] {
    const [sessionId, ...rest] = uri.path.replace(/^\//, "").split("/");
    const path = rest.join("/");
    const proposal = this.sessions.get(sessionId)?.get(path);
    if (!proposal || uri.query !== "after") {
      return [];
    }
    // The hunks are in lines of `before`: each earlier hunk shifts the later ones by what it
    // adds or removes.
    let shift = 0;
    return proposal.hunks.map((hunk) => {
      const oldLines = Math.max(hunk.endLine - hunk.startLine + 1, 0);
      const newLines = lineCount(hunk.newText);
      const first = hunk.startLine - 1 + shift;
      shift += newLines - oldLines;
      return { sessionId, path, hunk, first, last: first + newLines - 1 };
    });
  }

  /** The hunk of the proposal `uri` at 0-based `line` (or the nearest after it). */
  hunkAt(uri: vscode.Uri, line: number): PlacedHunk | undefined {
    const placed = this.placed(uri);
    return (
      placed.find((p) => line >= p.first && line <= Math.max(p.last, p.first)) ??
      placed.find((p) => p.first >= line) ??
      placed[placed.length - 1]
    );
  }

  provideCodeLenses(document: vscode.TextDocument): vscode.CodeLens[] {
    return this.placed(document.uri).flatMap((placed) => {
      const line = Math.min(Math.max(placed.first, 0), Math.max(document.lineCount - 1, 0));
      const range = new vscode.Range(line, 0, line, 0);
      const args = [placed.sessionId, placed.hunk.id];
      return [
        new vscode.CodeLens(range, { title: "Accept Hunk", command: "wright.acceptHunk", arguments: args }),
        new vscode.CodeLens(range, { title: "Reject Hunk", command: "wright.rejectHunk", arguments: args }),
      ];
    });
  }

  has(sessionId: string): boolean {
    return (this.sessions.get(sessionId)?.size ?? 0) > 0;
  }

  paths(sessionId: string): string[] {
    return [...(this.sessions.get(sessionId)?.keys() ?? [])];
  }

  drop(sessionId: string): void {
    this.sessions.delete(sessionId);
  }

  /** Opens one diff per proposed file: the buffer (or nothing, for a new file) against the proposal. */
  async showDiffs(sessionId: string): Promise<void> {
    for (const path of this.paths(sessionId)) {
      await this.showDiff(sessionId, path);
    }
  }

  async showDiff(sessionId: string, path: string): Promise<void> {
    const proposal = this.sessions.get(sessionId)?.get(path);
    if (!proposal) {
      void vscode.window.showInformationMessage(`Wright: nothing is proposed for ${path} any more.`);
      return;
    }
    const left = proposal.before === null ? this.uri(sessionId, path, "before") : proposal.file;
    const right = this.uri(sessionId, path, "after");
    await vscode.commands.executeCommand("vscode.diff", left, right, `${path} ↔ Wright's proposal`, {
      preview: false,
    });
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    const [sessionId, ...rest] = uri.path.replace(/^\//, "").split("/");
    const proposal = this.sessions.get(sessionId)?.get(rest.join("/"));
    if (!proposal) {
      return "";
    }
    return (uri.query === "before" ? proposal.before : proposal.after) ?? "";
  }

  private uri(sessionId: string, path: string, side: "before" | "after"): vscode.Uri {
    return vscode.Uri.from({ scheme: SCHEME, path: `/${sessionId}/${path}`, query: side });
  }

  dispose(): void {
    for (const registration of this.registrations) {
      registration.dispose();
    }
    this.changed.dispose();
    this.lensesChanged.dispose();
  }
}

function lineCount(text: string): number {
  if (text === "") {
    return 0;
  }
  return text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
}

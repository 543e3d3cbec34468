// Review mode's proposals: the whole texts `editProposed` carries, served under the
// `wright-proposal:` scheme so VS Code's diff editor can show each file's buffer (left) against
// what the agent proposes (right).

import * as vscode from "vscode";

const SCHEME = "wright-proposal";

interface Proposal {
  /** The file in the workspace. */
  file: vscode.Uri;
  before: string | null;
  after: string | null;
}

export class ProposalStore implements vscode.TextDocumentContentProvider, vscode.Disposable {
  /** Session → workspace-relative path → the latest proposal for it. */
  private readonly sessions = new Map<string, Map<string, Proposal>>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly registration: vscode.Disposable;

  constructor() {
    this.registration = vscode.workspace.registerTextDocumentContentProvider(SCHEME, this);
  }

  propose(sessionId: string, root: vscode.Uri, path: string, before: string | null, after: string | null): void {
    let files = this.sessions.get(sessionId);
    if (!files) {
      files = new Map();
      this.sessions.set(sessionId, files);
    }
    const earlier = files.get(path);
    // The first proposal's `before` is the file as it was; later ones build on the proposal.
    files.set(path, { file: vscode.Uri.joinPath(root, path), before: earlier ? earlier.before : before, after });
    this.changed.fire(this.uri(sessionId, path, "after"));
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
    for (const [path, proposal] of this.sessions.get(sessionId) ?? []) {
      const left = proposal.before === null ? this.uri(sessionId, path, "before") : proposal.file;
      const right = this.uri(sessionId, path, "after");
      await vscode.commands.executeCommand("vscode.diff", left, right, `${path} ↔ Wright's proposal`, {
        preview: false,
      });
    }
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
    this.registration.dispose();
    this.changed.dispose();
  }
}

// The chat view (`wright.chat`, in wright's activity-bar container): a webview showing the
// server's sessions and one conversation at a time. This side holds every conversation's
// entries (the `wright/agentEvent`s of its session, and the messages that steered a running
// turn), sends the page what to show, and turns the page's requests into protocol requests:
// `wright/agentRun` for a new conversation, `wright/agentPrompt` for the next message (it steers
// a running turn), `wright/sessionConfigure` when a picker changes, `wright/agentCancel`, and the
// review of single hunks.

import { randomBytes } from "crypto";
import * as vscode from "vscode";
import type { LanguageClient } from "vscode-languageclient/node";
import * as proto from "./protocol";
import type { ApplyMode, ChatItem, Completion, FromWebview, Settings, ToWebview } from "./chatMessages";

export const CHAT_VIEW = "wright.chat";

/** What the chat needs of the rest of the extension. */
export interface ChatHost {
  client(): LanguageClient | undefined;
  request<M extends keyof proto.Requests>(
    method: proto.RequestMethod<M>,
    params: proto.ParamsOf<M>,
  ): Promise<proto.ResultOf<M>>;
  /** Starts a session as the palette's task does; its id, or undefined when it failed. */
  startSession(params: proto.AgentRunParams, root: vscode.Uri | undefined): Promise<string | undefined>;
  /** The session's apply mode changed (a resume goes on with it). */
  applyModeChanged(sessionId: string, applyMode: ApplyMode): void;
  showDiff(sessionId: string, path: string): Promise<void>;
  pickHunks(sessionId: string, hunks: string[], accept: boolean): Promise<void>;
  /** The modal approval prompt, for a request the view can no longer show. */
  askApprovalInModal(params: proto.RequestApprovalParams): Promise<proto.RequestApprovalResult>;
}

type Decision = proto.RequestApprovalResult["decision"];

interface PendingApproval {
  sessionId: string;
  request: proto.RequestApprovalParams;
  answer: (decision: Decision) => void;
}

interface Conversation {
  items: ChatItem[];
  running: boolean;
  settings: Settings;
}

/** The most completions offered for one `@word`, files and symbols each. */
const MAX_COMPLETIONS = 12;

export class ChatView implements vscode.WebviewViewProvider, vscode.Disposable {
  private view: vscode.WebviewView | undefined;
  private readonly conversations = new Map<string, Conversation>();
  private selected: string | undefined;
  /** The pickers of a conversation not started yet. */
  private draft: Settings;
  private sessions: proto.SessionInfo[] = [];
  private models: string[] = [];
  /** The last text editor on a file: the webview takes the focus, the editor's selection stays. */
  private editor: vscode.TextEditor | undefined;
  private refreshTimer: ReturnType<typeof setTimeout> | undefined;
  /** "Wright: Open Chat" asked for the prompt box before the page was ready. */
  private focusWhenReady = false;
  /** The last `wright/stats` shown, for a view that (re)loads. */
  private stats: proto.StatsResult | undefined;
  /** Approvals shown in the view and not answered yet, by the view's id. */
  private readonly approvals = new Map<string, PendingApproval>();
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly host: ChatHost,
  ) {
    this.draft = { mode: "code", applyMode: configuredApplyMode(), model: "" };
    this.trackEditor(vscode.window.activeTextEditor);
    this.disposables.push(
      vscode.window.onDidChangeActiveTextEditor((editor) => this.trackEditor(editor)),
      vscode.window.onDidChangeTextEditorSelection((event) => {
        if (event.textEditor === this.editor) {
          this.postAttachment();
        }
      }),
    );
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const webview = view.webview;
    webview.options = {
      enableScripts: true,
      localResourceRoots: [vscode.Uri.joinPath(this.extensionUri, "dist"), vscode.Uri.joinPath(this.extensionUri, "media")],
    };
    webview.html = this.html(webview);
    webview.onDidReceiveMessage((message: FromWebview) => this.onMessage(message), undefined, this.disposables);
    view.onDidDispose(() => {
      this.view = undefined;
      // The server still waits for these: the modal asks instead.
      for (const [id, pending] of [...this.approvals]) {
        void this.host.askApprovalInModal(pending.request).then((result) => this.answer(id, result.decision));
      }
    });
  }

  /** Shows `stats` in the view (kept for a view that loads later). */
  async showStats(stats: proto.StatsResult): Promise<void> {
    this.stats = stats;
    await vscode.commands.executeCommand(`${CHAT_VIEW}.focus`);
    this.post({ type: "stats", stats });
  }

  /** Shows the view and puts the caret in its prompt box. */
  async open(): Promise<void> {
    this.focusWhenReady = true;
    await vscode.commands.executeCommand(`${CHAT_VIEW}.focus`);
    this.post({ type: "focus" });
  }

  /** Every event of every session: the conversations keep them, the page shows the selected. */
  onEvent(event: proto.AgentEventParams): void {
    const conversation = this.conversation(event.sessionId);
    if (event.kind === "turn") {
      conversation.running = true;
    } else if (event.kind === "finished") {
      conversation.running = false;
    } else if (event.kind === "mode") {
      conversation.settings.mode = event.mode === "plan" ? "plan" : "code";
    }
    // A session started elsewhere (the palette) shows here when nothing else is shown.
    if (this.selected === undefined && event.kind === "turn" && event.turn === 1) {
      this.selected = event.sessionId;
      this.conversation(event.sessionId).items.push({ type: "event", event });
      this.postState();
      this.refreshSessions();
      return;
    }
    this.add(event.sessionId, { type: "event", event });
    if (event.kind === "turn" || event.kind === "title" || event.kind === "finished") {
      this.refreshSessions();
    }
  }

  /** Whether the user sees this session's conversation now: its approvals can ask inline. */
  shows(sessionId: string): boolean {
    return this.view?.visible === true && this.selected === sessionId;
  }

  /** Asks in the conversation, with Allow / Allow for This Session / Deny on a card. */
  askApproval(request: proto.RequestApprovalParams): Promise<proto.RequestApprovalResult> {
    const id = randomBytes(8).toString("hex");
    return new Promise((resolve) => {
      this.approvals.set(id, {
        sessionId: request.sessionId,
        request,
        answer: (decision) => resolve({ decision }),
      });
      this.add(request.sessionId, { type: "approval", id, request });
    });
  }

  private answer(id: string, decision: Decision): void {
    const pending = this.approvals.get(id);
    if (!pending) {
      return; // answered already (a second click, or the modal after the view came back)
    }
    this.approvals.delete(id);
    pending.answer(decision);
    this.add(pending.sessionId, { type: "approved", id, decision });
  }

  /** Hunks were accepted or rejected (from the chat's card, the diff's CodeLens or its title). */
  decided(sessionId: string, hunks: string[], accepted: boolean): void {
    this.add(sessionId, { type: "decided", hunks, accepted });
  }

  private add(sessionId: string, item: ChatItem): void {
    const conversation = this.conversation(sessionId);
    conversation.items.push(item);
    if (sessionId === this.selected) {
      this.post({ type: "item", item, running: conversation.running });
    }
  }

  private conversation(sessionId: string): Conversation {
    let conversation = this.conversations.get(sessionId);
    if (!conversation) {
      conversation = { items: [], running: false, settings: { ...this.draft } };
      this.conversations.set(sessionId, conversation);
    }
    return conversation;
  }

  private async onMessage(message: FromWebview): Promise<void> {
    try {
      switch (message.type) {
        case "ready":
          this.postState();
          this.postAttachment();
          if (this.stats) {
            this.post({ type: "stats", stats: this.stats });
          }
          this.refreshSessions();
          if (this.focusWhenReady) {
            this.focusWhenReady = false;
            this.post({ type: "focus" });
          }
          void this.loadModels();
          return;
        case "send":
          await this.send(message.message, message.settings);
          return;
        case "configure":
          await this.configure(message.settings);
          return;
        case "select":
          this.selected = message.sessionId;
          this.postState();
          this.postAttachment();
          return;
        case "cancel":
          if (this.selected) {
            await this.host.request(proto.AgentCancel, { sessionId: this.selected });
          }
          return;
        case "complete":
          this.post({ type: "completions", query: message.query, items: await this.complete(message.query) });
          return;
        case "openDiff":
          await this.host.showDiff(message.sessionId, message.path);
          return;
        case "openFile": {
          const root = vscode.workspace.workspaceFolders?.[0]?.uri;
          if (root) {
            await vscode.window.showTextDocument(vscode.Uri.joinPath(root, message.path), { preview: false });
          }
          return;
        }
        case "hunk":
          await this.host.pickHunks(message.sessionId, [message.hunkId], message.accept);
          return;
        case "approve":
          this.answer(message.id, message.decision);
          return;
      }
    } catch (err) {
      const text = err instanceof Error ? err.message : String(err);
      if (this.selected) {
        this.add(this.selected, { type: "error", message: text });
      } else {
        void vscode.window.showErrorMessage(`Wright: ${text}`);
      }
    }
  }

  /** The user's message: a new session, the next turn, or steering of the running one. */
  private async send(message: string, settings: Settings): Promise<void> {
    const client = this.host.client();
    const editor = this.editor;
    const document =
      client && editor ? { uri: client.code2ProtocolConverter.asUri(editor.document.uri) } : undefined;
    const range =
      client && editor && !editor.selection.isEmpty
        ? client.code2ProtocolConverter.asRange(editor.selection)
        : undefined;
    const model = settings.model || undefined;
    const sessionId = this.selected;
    if (sessionId === undefined) {
      this.draft = { ...settings };
      const params: proto.AgentRunParams = { task: message, mode: settings.mode, applyMode: settings.applyMode };
      if (model) {
        params.model = model;
      }
      if (document) {
        params.textDocument = document;
      }
      if (range) {
        params.range = range;
      }
      const root = editor ? vscode.workspace.getWorkspaceFolder(editor.document.uri)?.uri : undefined;
      const id = await this.host.startSession(params, root ?? vscode.workspace.workspaceFolders?.[0]?.uri);
      if (id) {
        this.conversation(id).settings = { ...settings };
        if (this.selected === undefined) {
          this.selected = id;
          this.postState();
        }
      }
      this.refreshSessions();
      return;
    }
    const conversation = this.conversation(sessionId);
    const steering = conversation.running;
    const params: proto.AgentPromptParams = { sessionId, message, mode: settings.mode };
    if (model) {
      params.model = model;
    }
    if (range && document) {
      params.textDocument = document;
      params.range = range;
    }
    const { turn } = await this.host.request(proto.AgentPrompt, params);
    conversation.settings = { ...settings };
    if (steering) {
      this.add(sessionId, { type: "steer", message, turn });
    }
  }

  /** A picker changed: the selected session goes on with it from its next step. */
  private async configure(settings: Settings): Promise<void> {
    const sessionId = this.selected;
    if (!sessionId) {
      this.draft = { ...settings };
      return;
    }
    const params: proto.SessionConfigureParams = {
      sessionId,
      mode: settings.mode,
      applyMode: settings.applyMode,
    };
    if (settings.model) {
      params.model = settings.model;
    }
    await this.host.request(proto.SessionConfigure, params);
    this.conversation(sessionId).settings = { ...settings };
    this.host.applyModeChanged(sessionId, settings.applyMode);
  }

  /** Workspace files whose path holds `query`, then the index's symbols of that name. */
  private async complete(query: string): Promise<Completion[]> {
    const glob = query.replace(/[[\]{}*?!]/g, "");
    const files = await vscode.workspace.findFiles(
      `**/*${glob}*`,
      "**/{node_modules,target,.git}/**",
      MAX_COMPLETIONS,
    );
    const items: Completion[] = files
      .map((file) => vscode.workspace.asRelativePath(file, false))
      .sort()
      .map((path) => ({ insert: path, label: path, detail: "file" }));
    const client = this.host.client();
    if (client?.isRunning() && query.length >= 2) {
      const symbols = await client
        .sendRequest<{ name: string; kind: number; location: { uri: string } }[] | null>("workspace/symbol", { query })
        .catch(() => null);
      for (const symbol of (symbols ?? []).slice(0, MAX_COMPLETIONS)) {
        const file = vscode.workspace.asRelativePath(vscode.Uri.parse(symbol.location.uri), false);
        items.push({ insert: symbol.name, label: symbol.name, detail: `symbol in ${file}` });
      }
    }
    return items;
  }

  /** The models to offer: the configured one and the tiers the server's settings name. */
  private async loadModels(): Promise<void> {
    const models = new Set<string>();
    const setting = vscode.workspace.getConfiguration("wright").get<string>("model", "").trim();
    if (setting) {
      models.add(setting);
    }
    try {
      const status = await this.host.request(proto.Status, null);
      for (const entry of status.settings) {
        if ((entry.key === "model" || /^tiers?\./.test(entry.key)) && typeof entry.value === "string" && entry.value.includes("/")) {
          models.add(entry.value);
        }
      }
    } catch {
      // The server is not up yet: the setting alone.
    }
    models.add("auto");
    this.models = [...models];
    this.postState();
  }

  refreshSessions(): void {
    if (this.refreshTimer) {
      return;
    }
    // Events come in bursts: one request for the burst.
    this.refreshTimer = setTimeout(async () => {
      this.refreshTimer = undefined;
      try {
        this.sessions = (await this.host.request(proto.Sessions, null)).sessions;
        this.post({ type: "sessions", sessions: this.sessions });
      } catch {
        // The server is not running: the list stays as it was.
      }
    }, 150);
  }

  private trackEditor(editor: vscode.TextEditor | undefined): void {
    if (editor && editor.document.uri.scheme === "file") {
      this.editor = editor;
      this.postAttachment();
    }
  }

  private postAttachment(): void {
    const editor = this.editor;
    let label: string | undefined;
    if (editor && !editor.document.isClosed) {
      const path = vscode.workspace.asRelativePath(editor.document.uri, false);
      const selection = editor.selection;
      if (!selection.isEmpty) {
        label = `${path}:${selection.start.line + 1}-${selection.end.line + 1}`;
      } else if (this.selected === undefined) {
        label = path;
      }
    }
    this.post({ type: "attachment", label });
  }

  private postState(): void {
    const conversation = this.selected ? this.conversation(this.selected) : undefined;
    this.post({
      type: "state",
      sessions: this.sessions,
      selected: this.selected,
      items: conversation?.items ?? [],
      running: conversation?.running ?? false,
      settings: conversation?.settings ?? this.draft,
      models: this.models,
    });
  }

  private post(message: ToWebview): void {
    void this.view?.webview.postMessage(message);
  }

  private html(webview: vscode.Webview): string {
    const nonce = makeNonce();
    const script = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "dist", "chat.js"));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "media", "chat.css"));
    const csp = [
      "default-src 'none'",
      `style-src ${webview.cspSource}`,
      `script-src 'nonce-${nonce}'`,
    ].join("; ");
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style}">
<title>Wright Chat</title>
</head>
<body>
<header class="sessions">
  <label for="session" class="visually-hidden">Conversation</label>
  <select id="session" title="The sessions of this server: pick one to show its conversation"></select>
  <button id="new" class="secondary" title="Start a new conversation">New</button>
</header>
<div id="log" role="log" aria-live="polite" aria-label="Conversation" tabindex="0"></div>
<footer>
  <div class="usage">
    <meter id="context" min="0" max="1" value="0" aria-label="Context window used"></meter>
    <span id="context-text"></span>
    <span id="cost" title="Estimated cost so far"></span>
  </div>
  <div class="pickers">
    <label>Mode <select id="mode" title="plan: the model reads and plans, changes nothing"><option value="code">code</option><option value="plan">plan</option></select></label>
    <label>Edits <select id="apply" title="review: edits are held as diffs until you accept them"><option value="auto">auto</option><option value="review">review</option></select></label>
    <label class="model">Model <input id="model" list="models" placeholder="configured" spellcheck="false"></label>
    <datalist id="models"></datalist>
  </div>
  <div class="prompt-box">
    <ul id="completions" role="listbox" aria-label="Mentions" hidden></ul>
    <textarea id="prompt" rows="3" aria-label="Message" aria-controls="completions" aria-autocomplete="list"
      placeholder="Ask wright… (Enter sends, Shift+Enter: new line, @ mentions a file or symbol)"></textarea>
  </div>
  <div class="actions">
    <span id="attachment" class="attachment"></span>
    <button id="stop" class="secondary" disabled title="Stop the running turn">Stop</button>
    <button id="send">Send</button>
  </div>
</footer>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
  }

  dispose(): void {
    if (this.refreshTimer) {
      clearTimeout(this.refreshTimer);
    }
    for (const disposable of this.disposables) {
      disposable.dispose();
    }
  }
}

function configuredApplyMode(): ApplyMode {
  return vscode.workspace.getConfiguration("wright").get<string>("applyMode", "auto") === "review" ? "review" : "auto";
}

function makeNonce(): string {
  return randomBytes(18).toString("base64").replace(/[^A-Za-z0-9]/g, "");
}

// The messages between the chat view's webview and the extension. Protocol data (events,
// sessions, modes) travels in the generated protocol types; the rest is the view's own.

import type * as proto from "./protocol";

export type Mode = "code" | "plan";
export type ApplyMode = "auto" | "review";

/** One entry of a conversation as the view shows it. */
export type ChatItem =
  | { type: "event"; event: proto.AgentEventParams }
  /** A message the user sent while a turn ran: it joined that turn (no `turn` event says so). */
  | { type: "steer"; message: string; turn: number }
  /** Hunks of a proposal the user accepted or rejected (the server announces only what is left). */
  | { type: "decided"; hunks: string[]; accepted: boolean }
  /** The server asks to let a command do more than the sandbox allows; `id` is the view's own. */
  | { type: "approval"; id: string; request: proto.RequestApprovalParams }
  /** The user's answer to the approval `id` (or the modal's, when the view went away). */
  | { type: "approved"; id: string; decision: proto.RequestApprovalResult["decision"] }
  | { type: "error"; message: string };

/** What the view's pickers say, sent with every message. */
export interface Settings {
  mode: Mode;
  applyMode: ApplyMode;
  /** Empty: the configuration's model. */
  model: string;
}

export type ToWebview =
  /** Everything to show: the sessions, the selected one's conversation, the pickers. */
  | {
      type: "state";
      sessions: proto.SessionInfo[];
      selected: string | undefined;
      items: ChatItem[];
      running: boolean;
      settings: Settings;
      models: string[];
    }
  /** One more entry of the selected conversation. */
  | { type: "item"; item: ChatItem; running: boolean }
  | { type: "sessions"; sessions: proto.SessionInfo[] }
  | { type: "completions"; query: string; items: Completion[] }
  /** What goes with the next message: the active editor's file and selection, if any. */
  | { type: "attachment"; label: string | undefined }
  | { type: "focus" }
  /** `wright/stats`, shown as a card with a chart of the kept and undone edits per day. */
  | { type: "stats"; stats: proto.StatsResult };

export interface Completion {
  /** What replaces the `@word`, without the `@`. */
  insert: string;
  label: string;
  detail: string;
}

export type FromWebview =
  | { type: "ready" }
  | { type: "send"; message: string; settings: Settings }
  | { type: "configure"; settings: Settings }
  | { type: "select"; sessionId: string | undefined }
  | { type: "cancel" }
  | { type: "complete"; query: string }
  | { type: "openDiff"; sessionId: string; path: string }
  | { type: "openFile"; path: string }
  | { type: "hunk"; sessionId: string; hunkId: string; accept: boolean }
  | { type: "approve"; id: string; decision: proto.RequestApprovalResult["decision"] };

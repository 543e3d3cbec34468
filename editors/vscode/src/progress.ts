// Work-done progress as VS Code shows it, and the client capabilities wright needs declared.
//
// vscode-languageclient shows every server-created progress in the status bar only
// (`ProgressLocation.Window`). An agent run deserves a notification the user sees and can
// cancel, so this feature, registered after the client's own, takes over
// `window/workDoneProgress/create`: the server names a run's token `wright/agent/<session>`
// (docs/protocol.md), which becomes a cancellable notification; indexing keeps the status bar.

import * as vscode from "vscode";
import {
  BaseLanguageClient,
  ClientCapabilities,
  FeatureState,
  ProgressToken,
  StaticFeature,
  WorkDoneProgress,
  WorkDoneProgressBegin,
  WorkDoneProgressCreateParams,
  WorkDoneProgressCreateRequest,
  WorkDoneProgressReport,
  WorkDoneProgressEnd,
} from "vscode-languageclient/node";

const AGENT_TOKEN = "wright/agent/";

export class AgentProgressFeature implements StaticFeature {
  private readonly active = new Set<vscode.Disposable>();

  constructor(
    private readonly client: BaseLanguageClient,
    private readonly cancel: (sessionId: string) => Promise<void>,
  ) {}

  fillClientCapabilities(capabilities: ClientCapabilities): void {
    // `wright/requestApproval` (see docs/protocol.md): answered with a modal prompt. The
    // extension shows `wright/agentEvent`s itself, so sessions started by a command (a code
    // action) need no outcome message from the server.
    capabilities.experimental = {
      ...(capabilities.experimental as object | undefined),
      wrightRequestApproval: true,
      wrightAgentEvents: true,
    };
  }

  initialize(): void {
    this.client.onRequest(WorkDoneProgressCreateRequest.type, (params: WorkDoneProgressCreateParams) => {
      this.track(params.token);
    });
  }

  getState(): FeatureState {
    return { kind: "static" };
  }

  clear(): void {
    for (const part of this.active) {
      part.dispose();
    }
    this.active.clear();
  }

  private track(token: ProgressToken): void {
    const session =
      typeof token === "string" && token.startsWith(AGENT_TOKEN) ? token.slice(AGENT_TOKEN.length) : undefined;
    let report: ((value: WorkDoneProgressReport) => void) | undefined;
    let end: (() => void) | undefined;
    let ended = false;
    const part: vscode.Disposable = {
      dispose: () => {
        ended = true;
        subscription.dispose();
        end?.();
        this.active.delete(part);
      },
    };
    const subscription = this.client.onProgress(
      WorkDoneProgress.type,
      token,
      (value: WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd) => {
        if (value.kind === "begin") {
          void vscode.window.withProgress(
            {
              location: session ? vscode.ProgressLocation.Notification : vscode.ProgressLocation.Window,
              title: value.title,
              cancellable: session !== undefined,
            },
            (progress, cancellation) =>
              new Promise<void>((resolve) => {
                end = resolve;
                if (ended) {
                  resolve();
                  return;
                }
                report = (update) => progress.report({ message: update.message });
                if (value.message) {
                  progress.report({ message: value.message });
                }
                cancellation.onCancellationRequested(() => {
                  if (session) {
                    void this.cancel(session);
                  }
                });
              }),
          );
        } else if (value.kind === "report") {
          report?.(value);
        } else {
          part.dispose();
        }
      },
    );
    this.active.add(part);
  }
}

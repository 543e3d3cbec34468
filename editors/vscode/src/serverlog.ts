// The server's log in the "Wright Server" output channel, each line at its own level.
//
// vscode-languageclient writes every line a server prints on stderr into the channel as an
// error, so wright's INFO records read `[error] … INFO wright::…`. This feature asks the server
// for its log as `window/logMessage` instead (`experimental.wrightLogMessages`, see
// docs/protocol.md), which leaves stderr to panics, and writes each message at the level its
// type gives: error, warning, info, and debug for the server's debug and trace records (shown
// once the channel's log level is Debug).

import * as vscode from "vscode";
import {
  BaseLanguageClient,
  ClientCapabilities,
  FeatureState,
  LogMessageNotification,
  LogMessageParams,
  MessageType,
  StaticFeature,
} from "vscode-languageclient/node";

export class ServerLogFeature implements StaticFeature {
  constructor(
    private readonly client: BaseLanguageClient,
    private readonly channel: vscode.LogOutputChannel,
  ) {}

  fillClientCapabilities(capabilities: ClientCapabilities): void {
    capabilities.experimental = {
      ...(capabilities.experimental as object | undefined),
      wrightLogMessages: true,
    };
  }

  initialize(): void {
    // Replaces the client's own handler, which writes a Log (4) message without a level.
    this.client.onNotification(LogMessageNotification.type, (params: LogMessageParams) =>
      this.write(params),
    );
  }

  private write(params: LogMessageParams): void {
    switch (params.type) {
      case MessageType.Error:
        this.channel.error(params.message);
        break;
      case MessageType.Warning:
        this.channel.warn(params.message);
        break;
      case MessageType.Info:
        this.channel.info(params.message);
        break;
      default:
        this.channel.debug(params.message);
    }
  }

  getState(): FeatureState {
    return { kind: "static" };
  }

  clear(): void {}
}

// The extension's settings as the server's configuration layer: the server's own key names
// (docs: the README's configuration section), and only the settings the user set, so an unset
// one leaves the configuration files and the environment in charge.

import * as vscode from "vscode";

/** The value the user set for `wright.<name>`, in any scope; `undefined` when none did. */
function explicit<T>(config: vscode.WorkspaceConfiguration, name: string): T | undefined {
  const inspected = config.inspect<T>(name);
  if (!inspected) {
    return undefined;
  }
  return (
    inspected.workspaceFolderValue ?? inspected.workspaceValue ?? inspected.globalValue ?? undefined
  );
}

/** Non-empty text the user set, trimmed. */
function text(config: vscode.WorkspaceConfiguration, name: string): string | undefined {
  const value = explicit<string>(config, name);
  return typeof value === "string" && value.trim() ? value.trim() : undefined;
}

/** `initializationOptions` and `workspace/didChangeConfiguration` settings for `wright lsp`. */
export function serverSettings(): Record<string, unknown> {
  const config = vscode.workspace.getConfiguration("wright");
  const settings: Record<string, unknown> = {};
  const model = text(config, "model");
  if (model) {
    settings.model = model;
  }
  const providers: Record<string, unknown> = {};
  const openai = text(config, "openaiBaseUrl");
  if (openai) {
    providers.openai = { baseUrl: openai };
  }
  const anthropic = text(config, "anthropicBaseUrl");
  if (anthropic) {
    providers.anthropic = { baseUrl: anthropic };
  }
  if (Object.keys(providers).length > 0) {
    settings.providers = providers;
  }
  const network = text(config, "sandboxNetwork");
  if (network) {
    settings.sandbox = { network };
  }
  return settings;
}

/** The dotted keys of a settings table. */
function keys(table: Record<string, unknown>, prefix = ""): string[] {
  return Object.entries(table).flatMap(([name, value]) =>
    value !== null && typeof value === "object"
      ? keys(value as Record<string, unknown>, `${prefix}${name}.`)
      : [`${prefix}${name}`],
  );
}

/** Whether `next` lacks a key `previous` set: the server cannot unset a key it was given. */
export function dropsAKey(
  previous: Record<string, unknown>,
  next: Record<string, unknown>,
): boolean {
  const kept = new Set(keys(next));
  return keys(previous).some((key) => !kept.has(key));
}

/**
 * convo for VS Code: the sessions view, the transcripts, the commands, and the API other
 * extensions use, `exports.client()` — the Node client of `clients/node`, connected to this
 * window's one convo process, so that every AI extension of the window shares one store.
 */
import type { ConvoClient } from "convo";
import * as vscode from "vscode";
import { registerCommands } from "./commands.js";
import { Connection } from "./connection.js";
import { Transcripts } from "./transcript.js";
import { SessionsProvider } from "./tree.js";

/** What `vscode.extensions.getExtension("convo.convo").exports` is. */
export interface ConvoApi {
  /** The Node client connected to the extension's convo (one per window, the store of
   * `convo.store`); started on first use. Do not dispose it: the extension does. */
  client(): Promise<ConvoClient>;
}

export function activate(context: vscode.ExtensionContext): ConvoApi {
  const log = vscode.window.createOutputChannel("Convo", { log: true });
  const connection = new Connection(context.extensionPath, log);
  const tree = new SessionsProvider(connection);
  const view = vscode.window.createTreeView("convo.sessions", { treeDataProvider: tree, showCollapseAll: true });
  const transcripts = new Transcripts(context.extensionUri, connection);
  context.subscriptions.push(
    log,
    connection,
    tree,
    view,
    transcripts,
    ...registerCommands(connection, tree, view, transcripts),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("convo")) void connection.restart();
    }),
  );
  return { client: () => connection.client() };
}

export function deactivate(): void {
  // context.subscriptions dispose the connection, which ends convo.
}

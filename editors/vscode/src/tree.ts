/**
 * The "Sessions" view (`convo.sessions`): a TreeDataProvider over `SessionsModel`, as
 * tree-view-sample's providers are — items made from the model, a "Load more" item while
 * `session/list` has pages left, and one refresh (debounced) for a burst of changes.
 */
import type { SessionInfo } from "convo";
import * as vscode from "vscode";
import type { Connection } from "./connection.js";
import { SessionsModel, firstMessages, sessionDescription, sessionLabel, sessionTooltip } from "./view/sessions.js";

/** An item: a session, or the "Load more" row. */
export type Node = { kind: "session"; info: SessionInfo } | { kind: "more" };

const MORE: Node = { kind: "more" };

export class SessionsProvider implements vscode.TreeDataProvider<Node>, vscode.Disposable {
  readonly #changed = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.#changed.event;
  model: SessionsModel;
  #timer: NodeJS.Timeout | undefined;
  readonly #subscriptions: vscode.Disposable[] = [];

  constructor(
    private readonly connection: Connection,
    pageSize = 100,
  ) {
    this.model = this.#newModel(pageSize);
    this.#subscriptions.push(
      connection.onDidChange((change) => {
        if (change.change === "draft") return; // a stream's text so far: nothing the view shows
        this.model.invalidate(change.session_id);
        this.refreshSoon();
      }),
      connection.onDidRestart(() => {
        this.model = this.#newModel(this.model.pageSize);
        this.#changed.fire(undefined);
      }),
    );
  }

  #newModel(pageSize: number): SessionsModel {
    return new SessionsModel(
      async (params) => (await this.connection.client()).listSessions(params),
      pageSize,
      async (id) => firstMessages(await this.connection.client(), id),
    );
  }

  /** Reloads the pages shown, then redraws: within 150 ms of the first of a burst of calls. */
  refreshSoon(): void {
    if (this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.refresh();
    }, 150);
  }

  async refresh(): Promise<void> {
    try {
      await this.model.reload();
    } catch {
      // shown by getChildren on the redraw
    }
    this.#changed.fire(undefined);
  }

  async loadMore(): Promise<void> {
    await this.model.loadMore();
    this.#changed.fire(undefined);
  }

  async getChildren(node?: Node): Promise<Node[]> {
    if (node?.kind === "more") return [];
    if (node) return this.model.children(node.info.session_id).map((info) => ({ kind: "session", info }));
    try {
      await this.model.ensureLoaded();
    } catch (e) {
      void vscode.window.showErrorMessage(`Convo: cannot list the sessions: ${e instanceof Error ? e.message : e}`);
      return [];
    }
    const roots: Node[] = this.model.roots().map((info) => ({ kind: "session", info }));
    return this.model.hasMore ? [...roots, MORE] : roots;
  }

  getParent(node: Node): Node | undefined {
    if (node.kind !== "session") return undefined;
    const parent = this.model.parentOf(node.info);
    const info = parent ? this.model.get(parent) : undefined;
    return info ? { kind: "session", info } : undefined;
  }

  /** The node of a loaded session (for `reveal`). */
  nodeOf(id: string): Node | undefined {
    const info = this.model.get(id);
    return info ? { kind: "session", info } : undefined;
  }

  async getTreeItem(node: Node): Promise<vscode.TreeItem> {
    if (node.kind === "more") {
      const item = new vscode.TreeItem("Load more…", vscode.TreeItemCollapsibleState.None);
      item.id = "convo/load-more";
      item.iconPath = new vscode.ThemeIcon("ellipsis");
      item.command = { command: "convo.loadMore", title: "Load More Sessions" };
      return item;
    }
    const info = this.model.get(node.info.session_id) ?? node.info;
    const firstLine = info.title ? undefined : await this.model.firstLine(info.session_id);
    const label = sessionLabel(info, firstLine);
    const forks = this.model.children(info.session_id).length;
    const item = new vscode.TreeItem(label, forks ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None);
    item.id = info.session_id;
    item.description = sessionDescription(info);
    item.tooltip = sessionTooltip(info, label);
    item.contextValue = "session";
    item.iconPath = new vscode.ThemeIcon(info.forked_from ? "repo-forked" : "comment-discussion");
    item.command = { command: "convo.openSession", title: "Open Session", arguments: [info.session_id] };
    item.accessibilityInformation = { label: `${label}, ${item.description}` };
    return item;
  }

  dispose(): void {
    clearTimeout(this.#timer);
    this.#subscriptions.forEach((d) => d.dispose());
    this.#changed.dispose();
  }
}

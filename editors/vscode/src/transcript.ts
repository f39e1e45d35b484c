/**
 * Transcript webviews, one per session, as webview-sample's panels are made: the page is
 * fixed HTML (a Content-Security-Policy that allows only the extension's own nonce'd
 * script and style sheet and `data:` images; nothing remote, no inline code), and the
 * session reaches it as data through `postMessage`; the page's script
 * (`webview/main.ts`) draws it with `renderTranscript`, text as text nodes. Images come
 * through `session/image`. A change to the session (`session/subscribe`, any process)
 * redraws it; a link opens through VS Code's opener after the user clicked it.
 */
import { randomBytes } from "node:crypto";
import type { ConvoClient, Message } from "convo";
import * as vscode from "vscode";
import type { Connection } from "./connection.js";
import { imageDataUrl, isSafeLink, type TranscriptModel } from "./view/render.js";
import { firstUserLine, labelOf, sessionLabel } from "./view/sessions.js";

export const VIEW_TYPE = "convo.transcript";

/** What the page sends: ready to draw, a button, a link clicked. */
type FromPage = { type: "ready" } | { type: "action"; action: "fork" | "rewind"; messageId: string } | { type: "openLink"; href: string };

export class Transcripts implements vscode.Disposable {
  readonly #panels = new Map<string, TranscriptPanel>();
  readonly #subscriptions: vscode.Disposable[] = [];

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly connection: Connection,
  ) {
    this.#subscriptions.push(
      connection.onDidChange((change) => this.#panels.get(change.session_id)?.changed(change.change)),
      connection.onDidRestart(() => this.#panels.forEach((p) => p.changed("updated"))),
    );
  }

  /** Opens (or shows) a session's transcript, scrolled to `messageId` when given. */
  async open(sessionId: string, messageId?: string): Promise<void> {
    const client = await this.connection.client();
    const info = await client.getSession({ session_id: sessionId });
    let panel = this.#panels.get(sessionId);
    if (!panel) {
      panel = new TranscriptPanel(this.extensionUri, this.connection, sessionId, info.title, () => this.#panels.delete(sessionId));
      this.#panels.set(sessionId, panel);
    } else panel.reveal();
    panel.highlight = messageId ?? null;
    await panel.draw();
  }

  /** The session of the transcript in front, if one is. */
  get active(): string | undefined {
    for (const [id, p] of this.#panels) if (p.active) return id;
    return undefined;
  }

  dispose(): void {
    this.#subscriptions.forEach((d) => d.dispose());
    this.#panels.forEach((p) => p.dispose());
  }
}

class TranscriptPanel {
  readonly panel: vscode.WebviewPanel;
  highlight: string | null = null;
  #ready: Promise<void>;
  #timer: NodeJS.Timeout | undefined;
  #drawing: Promise<void> = Promise.resolve();
  #deleted = false;
  readonly #images = new Map<string, string>();

  constructor(
    extensionUri: vscode.Uri,
    private readonly connection: Connection,
    readonly sessionId: string,
    title: string | null,
    onDispose: () => void,
  ) {
    const dist = vscode.Uri.joinPath(extensionUri, "dist");
    const media = vscode.Uri.joinPath(extensionUri, "media");
    this.panel = vscode.window.createWebviewPanel(VIEW_TYPE, panelTitle(sessionId, title), vscode.ViewColumn.Active, {
      enableScripts: true,
      enableFindWidget: true,
      localResourceRoots: [dist, media],
    });
    this.panel.iconPath = vscode.Uri.joinPath(media, "convo.svg");
    const webview = this.panel.webview;
    let ready!: () => void;
    this.#ready = new Promise((resolve) => (ready = resolve));
    let loaded = false;
    webview.onDidReceiveMessage((message: FromPage) => {
      if (message.type === "ready") {
        // The page is loaded again each time the panel comes back from hiding (its
        // context is not retained): draw it again then.
        if (loaded) void this.draw();
        loaded = true;
        ready();
      }
      else if (message.type === "openLink") void this.#openLink(message.href);
      else if (message.type === "action" && typeof message.messageId === "string") {
        void vscode.commands.executeCommand(message.action === "fork" ? "convo.fork" : "convo.rewind", this.sessionId, message.messageId);
      }
    });
    webview.html = page(webview, vscode.Uri.joinPath(dist, "webview.js"), vscode.Uri.joinPath(media, "transcript.css"));
    this.panel.onDidDispose(() => {
      clearTimeout(this.#timer);
      onDispose();
    });
  }

  get active(): boolean {
    return this.panel.active;
  }

  reveal(): void {
    this.panel.reveal();
  }

  /** The session changed: redraw within a second (100 ms after the first of a burst). */
  changed(change: string): void {
    if (change === "deleted") this.#deleted = true;
    if (this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.draw();
    }, 100);
  }

  /** Reads the session and sends it to the page (one draw at a time, in order). */
  draw(): Promise<void> {
    this.#drawing = this.#drawing.then(() => this.#draw()).catch((e) => {
      void vscode.window.showErrorMessage(`Convo: cannot show ${this.sessionId}: ${e instanceof Error ? e.message : e}`);
    });
    return this.#drawing;
  }

  async #draw(): Promise<void> {
    const client = await this.connection.client();
    let model: TranscriptModel;
    try {
      const [session, history] = await Promise.all([
        client.getSession({ session_id: this.sessionId }),
        client.history({ session_id: this.sessionId, repair: false, images: "ref", include_draft: true }),
      ]);
      this.#deleted = false;
      const draft = history.draft?.messages ?? null;
      const images = await this.#loadImages(client, [...history.messages, ...(draft ?? [])]);
      // Named as the sessions view names it: an untitled session by its first user line.
      const label = sessionLabel(session, session.title ? undefined : firstUserLine(history.messages));
      const parentLabel = session.forked_from ? await labelOf(client, session.forked_from.session_id) : undefined;
      model = { session, messages: history.messages, images, highlight: this.highlight, draft, label, parentLabel };
      this.panel.title = panelTitle(session.session_id, label);
    } catch (e) {
      if (!(e instanceof Error && "kind" in e && e.kind === "session_not_found")) throw e;
      this.#deleted = true;
    }
    await this.#ready;
    if (this.#deleted) await this.panel.webview.postMessage({ type: "deleted", sessionId: this.sessionId });
    else await this.panel.webview.postMessage({ type: "render", model: model! });
  }

  /** `data:` URLs of every image ref the messages hold, through `session/image` (kept). */
  async #loadImages(client: ConvoClient, messages: Message[]): Promise<Record<string, string>> {
    const refs = new Set<string>();
    for (const m of messages) for (const image of m.images ?? []) if (typeof image !== "string") refs.add(image.ref);
    await Promise.all(
      [...refs].filter((ref) => !this.#images.has(ref)).map(async (ref) => {
        try {
          const { data, media_type } = await client.image({ ref });
          const url = imageDataUrl(media_type, data);
          if (url) this.#images.set(ref, url);
        } catch {
          // not shown; the page names the ref
        }
      }),
    );
    return Object.fromEntries([...refs].filter((r) => this.#images.has(r)).map((r) => [r, this.#images.get(r)!]));
  }

  async #openLink(href: string): Promise<void> {
    if (!isSafeLink(href)) {
      void vscode.window.showWarningMessage(`Convo: not opened (only http, https and mailto links are): ${href.slice(0, 200)}`);
      return;
    }
    await vscode.env.openExternal(vscode.Uri.parse(href.trim(), true));
  }

  dispose(): void {
    this.panel.dispose();
  }
}

export function panelTitle(sessionId: string, title: string | null | undefined): string {
  return `Convo: ${title?.trim() || sessionId}`;
}

/** The page: a strict policy, the style sheet, a root, the nonce'd script. */
function page(webview: vscode.Webview, script: vscode.Uri, style: vscode.Uri): string {
  const nonce = randomBytes(18).toString("base64");
  const csp = [
    "default-src 'none'",
    "img-src data:",
    `style-src ${webview.cspSource}`,
    `font-src ${webview.cspSource}`,
    `script-src 'nonce-${nonce}'`,
    "base-uri 'none'",
    "form-action 'none'",
  ].join("; ");
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${webview.asWebviewUri(style).toString()}">
<title>Convo transcript</title>
</head>
<body>
<main id="root" aria-live="polite"><p class="loading">Loading…</p></main>
<script nonce="${nonce}" src="${webview.asWebviewUri(script).toString()}"></script>
</body>
</html>`;
}

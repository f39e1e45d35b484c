/**
 * The transcript page's script (the one the page's policy lets run, by its nonce): draws
 * what the extension sends with `renderTranscript` (text only ever as text nodes), keeps
 * open what the reader opened and the scroll position across redraws, and hands button
 * and link clicks to the extension, which alone acts on them.
 */
import { renderTranscript, type TranscriptModel } from "../src/view/render.js";

declare function acquireVsCodeApi(): { postMessage(message: unknown): void };

const vscode = acquireVsCodeApi();
const root = document.getElementById("root")!;
let lastHighlight: string | null | undefined;

/** A key for each open `<details>`: its message and its kind or call. */
function detailsKey(d: Element): string {
  const message = d.closest("[data-message-id]")?.getAttribute("data-message-id") ?? "";
  return `${message}|${d.getAttribute("data-tool-call-id") ?? d.getAttribute("data-kind") ?? ""}`;
}

function draw(model: TranscriptModel): void {
  const open = new Set(Array.from(root.querySelectorAll("details[open]"), detailsKey));
  const scrolled = document.scrollingElement ?? document.documentElement;
  const atBottom = scrolled.scrollTop + scrolled.clientHeight >= scrolled.scrollHeight - 8;
  const top = scrolled.scrollTop;
  const first = root.querySelector(".transcript") === null;
  root.replaceChildren(renderTranscript(document, model));
  for (const d of root.querySelectorAll("details")) if (open.has(detailsKey(d))) d.setAttribute("open", "");
  const target = model.highlight ? root.querySelector(`[data-message-id="${CSS.escape(model.highlight)}"]`) : null;
  if (target && model.highlight !== lastHighlight) {
    for (let d = target.closest("details"); d; d = d.parentElement?.closest("details") ?? null) d.setAttribute("open", "");
    target.scrollIntoView({ block: "center" });
  } else if (first || atBottom) {
    scrolled.scrollTop = scrolled.scrollHeight; // follow the conversation as it grows
  } else {
    scrolled.scrollTop = top;
  }
  lastHighlight = model.highlight;
}

window.addEventListener("message", (event: MessageEvent) => {
  const message = event.data as { type: string; model?: TranscriptModel; sessionId?: string };
  if (message.type === "render" && message.model) draw(message.model);
  else if (message.type === "deleted") {
    const note = document.createElement("p");
    note.className = "deleted";
    note.textContent = `This session (${message.sessionId}) has been deleted.`;
    root.replaceChildren(note);
  }
});

document.addEventListener("click", (event) => {
  const target = event.target instanceof Element ? event.target : null;
  const link = target?.closest("a[data-href]");
  if (link) {
    event.preventDefault();
    vscode.postMessage({ type: "openLink", href: link.getAttribute("data-href") });
    return;
  }
  const button = target?.closest("button[data-action]");
  const messageId = button?.closest("[data-message-id]")?.getAttribute("data-message-id");
  if (button && messageId) vscode.postMessage({ type: "action", action: button.getAttribute("data-action"), messageId });
});

vscode.postMessage({ type: "ready" });

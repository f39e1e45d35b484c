/**
 * The transcript as DOM: a pure function from a session and its messages to elements,
 * run in the webview (and in the unit tests, on a small DOM of their own). Only
 * `createElement`, `createTextNode`, `setAttribute` and `appendChild` are used, so every
 * piece of message text — content, names, tool arguments and results, reasoning, titles —
 * becomes a text node, never markup; attributes hold ids and fixed words only, and a
 * link's target sits in `data-href`, opened by the extension after a click.
 *
 * The page's hooks (fixed by the protocol's section 19): one element per message with
 * `data-message-id` and `data-role`; a tool call's element has `data-tool-call-id`, and the
 * result message answering it is nested inside it; reasoning is a collapsed
 * `<details data-kind="reasoning">`; images are `<img>` with `data:` URLs.
 */
import type { Message, SessionInfo, ToolCall } from "convo";
import { parseMarkdown, type MdNode } from "./markdown.js";

/** The part of the DOM the renderer uses: a browser's `document` is one. */
export interface MiniNode {
  appendChild(child: MiniNode): unknown;
}
export interface MiniElement extends MiniNode {
  setAttribute(name: string, value: string): void;
}
export interface MiniDocument<E extends MiniElement = MiniElement> {
  createElement(tag: string): E;
  createTextNode(text: string): MiniNode;
}

/** What the webview is sent to draw. */
export interface TranscriptModel {
  session: SessionInfo;
  /** The stored history (`repair: false`), images as refs. */
  messages: Message[];
  /** `data:` URLs of the images, by ref (from `session/image`). */
  images: Record<string, string>;
  /** A message to scroll to and mark (a search hit). */
  highlight?: string | null;
  /** A stream in progress (`include_draft`): its user message and partial answer. */
  draft?: Message[] | null;
  /** The session's label (`sessionLabel`: its title, else its first user line), the
   * heading; its title or id when not given. */
  label?: string;
  /** A fork's parent's label (`labelOf`), shown beside its id; none when it is gone. */
  parentLabel?: string | null;
}

/** The image media types shown; anything else is named, not shown. */
const IMAGE_TYPES = /^image\/(png|jpeg|gif|webp|bmp)$/;
const DATA_URL = /^data:image\/(png|jpeg|gif|webp|bmp);base64,[A-Za-z0-9+/]*={0,2}$/;

/** A `data:` URL for an image, or undefined when the type or the base64 is not one to show. */
export function imageDataUrl(mediaType: string, base64: string): string | undefined {
  const url = `data:${mediaType};base64,${base64.replace(/\s+/g, "")}`;
  return IMAGE_TYPES.test(mediaType) && DATA_URL.test(url) ? url : undefined;
}

/** Whether a link's target may be opened (on a click, by the extension). */
export function isSafeLink(href: string): boolean {
  return /^(https?:|mailto:)/i.test(href.trim());
}

type Build<E extends MiniElement> = {
  doc: MiniDocument<E>;
  el(tag: string, attrs?: Record<string, string | undefined>, ...children: Array<MiniNode | string | undefined>): E;
};

function builder<E extends MiniElement>(doc: MiniDocument<E>): Build<E> {
  return {
    doc,
    el(tag, attrs = {}, ...children) {
      const e = doc.createElement(tag);
      for (const [name, value] of Object.entries(attrs)) if (value !== undefined) e.setAttribute(name, value);
      for (const child of children) {
        if (child === undefined) continue;
        e.appendChild(typeof child === "string" ? doc.createTextNode(child) : child);
      }
      return e;
    },
  };
}

/** Markdown nodes → DOM. */
function markdown<E extends MiniElement>(b: Build<E>, nodes: MdNode[], parent: E): void {
  for (const node of nodes) {
    if (typeof node === "string") {
      parent.appendChild(b.doc.createTextNode(node));
      continue;
    }
    const attrs: Record<string, string | undefined> = {};
    if (node.tag === "a") {
      attrs["data-href"] = node.href;
      attrs.href = "#";
      attrs.title = node.href;
      if (!isSafeLink(node.href ?? "")) attrs["data-unsafe"] = "";
    }
    if (node.lang) attrs["data-lang"] = node.lang;
    const e = b.el(node.tag, attrs);
    markdown(b, node.children, e);
    parent.appendChild(e);
  }
}

const fmt = (n: number) => n.toLocaleString("en-US");

/** "12 in · 30 out · 8 cached · 20 reasoning": the members that are set. */
export function usageText(usage: Partial<Record<string, number | null>> | null | undefined): string {
  if (!usage) return "";
  const parts: string[] = [];
  const add = (key: string, label: string) => {
    const v = usage[key];
    if (typeof v === "number" && (v > 0 || key === "input_tokens" || key === "output_tokens")) parts.push(`${fmt(v)} ${label}`);
  };
  add("input_tokens", "in");
  add("output_tokens", "out");
  add("cache_read_tokens", "cache read");
  add("cache_write_tokens", "cache write");
  add("reasoning_tokens", "reasoning");
  return parts.join(" · ");
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The reasoning a native body holds, in order: Anthropic thinking blocks, Responses
 * reasoning items (summaries, then their text), Chat's `reasoning_content`, Gemini's
 * thought parts. `null` stands for a redacted or encrypted block. */
export function reasoningOf(message: Message): Array<string | null> {
  const native = message.native;
  if (!native) return [];
  const body = native.body as unknown;
  const out: Array<string | null> = [];
  const text = (v: unknown) => (typeof v === "string" ? v : undefined);
  switch (native.format) {
    case "anthropic_messages":
      for (const block of Array.isArray(body) ? body : []) {
        if (!isObject(block)) continue;
        if (block.type === "thinking") out.push(text(block.thinking) ?? "");
        else if (block.type === "redacted_thinking") out.push(null);
      }
      break;
    case "openai_responses":
      for (const item of Array.isArray(body) ? body : []) {
        if (!isObject(item) || item.type !== "reasoning") continue;
        const parts = [...(Array.isArray(item.summary) ? item.summary : []), ...(Array.isArray(item.content) ? item.content : [])];
        const texts = parts.map((p) => (isObject(p) ? text(p.text) : undefined)).filter((t): t is string => t !== undefined);
        out.push(texts.length ? texts.join("\n\n") : item.encrypted_content ? null : "");
      }
      break;
    case "openai_chat":
      if (isObject(body)) {
        const r = text(body.reasoning_content) ?? text(body.reasoning);
        if (r) out.push(r);
      }
      break;
    case "gemini_contents":
      if (isObject(body) && Array.isArray(body.parts)) {
        for (const part of body.parts) if (isObject(part) && part.thought === true) out.push(text(part.text) ?? "");
      }
      break;
    case "gemini_interactions":
      // A thought step: its summary's text blocks, or (signed, no summary) hidden.
      for (const step of Array.isArray(body) ? body : []) {
        if (!isObject(step) || step.type !== "thought") continue;
        const summary = Array.isArray(step.summary) ? step.summary : [];
        const texts = summary.map((b) => (isObject(b) ? text(b.text) : undefined)).filter((t): t is string => t !== undefined);
        out.push(texts.length ? texts.join("\n\n") : step.signature ? null : "");
      }
      break;
  }
  return out;
}

/** A tool call's name and arguments, whatever its shape ({name, arguments}, OpenAI's
 * {function: {name, arguments}}, Anthropic's {name, input}). */
export function callParts(call: ToolCall): { name: string; args: unknown } {
  const fn = isObject(call.function) ? call.function : undefined;
  const name = typeof call.name === "string" ? call.name : typeof fn?.name === "string" ? fn.name : "(unnamed tool)";
  let args: unknown = call.arguments ?? fn?.arguments ?? call.input ?? null;
  if (typeof args === "string") {
    try {
      args = JSON.parse(args);
    } catch {
      // not JSON: shown as the string it is
    }
  }
  return { name, args };
}

/** The text of a message's content: a string, or its text parts joined. */
export function contentText(content: Message["content"]): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) => (typeof part.text === "string" ? part.text : ""))
    .filter((t) => t !== "")
    .join("\n\n");
}

/** The image sources of a message: its `images` (refs or base64) and image content parts,
 * each a `data:` URL or, when it cannot be shown, why. */
export function imagesOf(message: Message, images: Record<string, string>): Array<{ src?: string; note: string }> {
  const out: Array<{ src?: string; note: string }> = [];
  for (const image of message.images ?? []) {
    if (typeof image === "string") {
      const src = imageDataUrl(sniff(image), image);
      out.push(src ? { src, note: "image" } : { note: "image (not shown: unknown format)" });
    } else {
      const src = images[image.ref];
      out.push(src ? { src, note: `${image.media_type}, ${fmt(image.bytes)} bytes` } : { note: `image ${image.ref} (not loaded)` });
    }
  }
  for (const part of Array.isArray(message.content) ? message.content : []) {
    let url: string | undefined;
    if (part.type === "image_url" || part.type === "input_image") {
      const u = isObject(part.image_url) ? part.image_url.url : part.image_url;
      url = typeof u === "string" ? u : undefined;
    } else if (part.type === "image" && isObject(part.source) && part.source.type === "base64") {
      url = `data:${String(part.source.media_type)};base64,${String(part.source.data)}`;
    } else if (isObject(part.inlineData) && typeof part.inlineData.data === "string") {
      url = `data:${String(part.inlineData.mimeType)};base64,${part.inlineData.data}`;
    } else continue;
    const m = url ? /^data:([^;,]+);base64,(.*)$/s.exec(url) : null;
    const src = m ? imageDataUrl(m[1], m[2]) : undefined;
    out.push(src ? { src, note: "image" } : { note: "image (not shown: only data: images are)" });
  }
  return out;
}

/** The media type of base64 image data, from its first bytes. */
function sniff(base64: string): string {
  const head = base64.slice(0, 16);
  if (head.startsWith("iVBORw0KGgo")) return "image/png";
  if (head.startsWith("/9j/")) return "image/jpeg";
  if (head.startsWith("R0lGOD")) return "image/gif";
  if (head.startsWith("UklGR")) return "image/webp";
  return "application/octet-stream";
}

/** What marks a message: a synthetic (cancelled) result, a partial answer, a compaction summary. */
export function marks(message: Message): string[] {
  const m = message.metadata ?? {};
  const out: string[] = [];
  if (m.synthetic === true) out.push("cancelled");
  if (m.partial === true) out.push(typeof m.reason === "string" ? `partial (${m.reason})` : "partial");
  if (isObject(m.compaction)) out.push("summary of earlier turns");
  return out;
}

function context(sessionId: string, messageId: string | null): string | undefined {
  if (!messageId) return undefined;
  return JSON.stringify({ webviewSection: "message", sessionId, messageId, preventDefaultContextMenuItems: true });
}

/** One message's element (a tool result's is nested in its call's element by `renderTranscript`). */
function messageElement<E extends MiniElement>(b: Build<E>, model: TranscriptModel, message: Message, tag: string, cls: string, draft = false): E {
  const sid = model.session.session_id;
  // A draft is not a stored message yet: no id to act on, none to collide with its own.
  const id = draft ? undefined : (message.id ?? undefined);
  const flags = draft ? ["streaming…"] : marks(message);
  const root = b.el(tag, {
    class: [cls, `role-${message.role}`, ...flags.map((f) => `mark-${f.split(" ")[0]}`), model.highlight && id === model.highlight ? "highlight" : ""].filter(Boolean).join(" "),
    "data-message-id": id,
    "data-draft": draft ? "" : undefined,
    "data-role": message.role,
    "data-vscode-context": id ? context(sid, id) : undefined,
  });
  const header = b.el("header", {}, b.el("span", { class: "role" }, message.role));
  if (message.name) header.appendChild(b.el("span", { class: "name" }, message.name));
  for (const flag of flags) header.appendChild(b.el("span", { class: "badge", "data-mark": flag.split(" ")[0] }, flag));
  const usage = usageText(message.usage);
  if (usage) header.appendChild(b.el("span", { class: "usage", title: "tokens" }, usage));
  if (message.native?.model) header.appendChild(b.el("span", { class: "model" }, message.native.model));
  if (message.created_at) header.appendChild(b.el("time", { datetime: message.created_at }, message.created_at.replace("T", " ").replace(/\.\d+Z$/, "Z")));
  if (id && message.role !== "tool") {
    header.appendChild(b.el("button", { class: "action", "data-action": "fork", title: "Fork a new session here" }, "Fork here"));
    header.appendChild(b.el("button", { class: "action", "data-action": "rewind", title: "Drop every message after this one" }, "Rewind to here"));
  }
  root.appendChild(header);

  const reasoning = reasoningOf(message);
  if (reasoning.length) {
    const tokens = message.usage?.reasoning_tokens;
    const details = b.el(
      "details",
      { "data-kind": "reasoning" },
      b.el("summary", {}, `Reasoning${typeof tokens === "number" ? ` · ${fmt(tokens)} tokens` : ""}`),
    );
    for (const r of reasoning) details.appendChild(b.el("div", { class: "reasoning-text" }, r ?? "(redacted)"));
    root.appendChild(details);
  }

  const text = contentText(message.content);
  if (text) {
    const body = b.el("div", { class: message.role === "tool" ? "content tool-output" : "content" });
    if (message.role === "tool") body.appendChild(b.el("pre", {}, text));
    else markdown(b, parseMarkdown(text), body);
    root.appendChild(body);
  }
  const others = Array.isArray(message.content) ? message.content.filter((p) => typeof p.text !== "string" && !/image/.test(p.type) && !isObject(p.inlineData)) : [];
  for (const part of others) root.appendChild(b.el("pre", { class: "part", "data-part-type": part.type }, JSON.stringify(part, null, 2)));

  const images = imagesOf(message, model.images);
  if (images.length) {
    const strip = b.el("div", { class: "images" });
    for (const image of images) {
      strip.appendChild(image.src ? b.el("img", { src: image.src, alt: image.note, title: image.note, class: "thumb" }) : b.el("span", { class: "missing-image" }, image.note));
    }
    root.appendChild(strip);
  }
  return root;
}

/**
 * The transcript of `model` under one `<main>`-ready container: a summary of the session
 * (title, id, fork origin, usage in total) and an element per message.
 */
export function renderTranscript<E extends MiniElement>(doc: MiniDocument<E>, model: TranscriptModel): E {
  const b = builder(doc);
  const { session } = model;
  const root = b.el("div", { class: "transcript", "data-session-id": session.session_id, "data-revision": String(session.revision) });
  const head = b.el("section", { class: "session" }, b.el("h1", {}, model.label || session.title || session.session_id));
  const facts = b.el("dl", { class: "facts" });
  const fact = (label: string, value: string) => {
    facts.appendChild(b.el("dt", {}, label));
    facts.appendChild(b.el("dd", {}, value));
  };
  fact("session", session.session_id);
  if (session.forked_from) {
    const { session_id: parent, message_id: at } = session.forked_from;
    const named = model.parentLabel && model.parentLabel !== parent ? `${model.parentLabel} (${parent})` : parent;
    fact("forked from", `${named}${at ? ` at ${at}` : ""}`);
  }
  fact("messages", String(session.message_count));
  fact("usage", usageText(session.usage) || "none");
  if (session.cwd) fact("cwd", session.cwd);
  head.appendChild(facts);
  if (session.system) head.appendChild(b.el("details", { class: "system", "data-kind": "system" }, b.el("summary", {}, "System prompt"), b.el("pre", {}, session.system)));
  root.appendChild(head);

  const list = b.el("div", { class: "messages" });
  // The calls of the latest tool-call group, by id: where their results go.
  let calls = new Map<string, E>();
  for (const message of model.messages) {
    if (message.role === "tool" && message.tool_call_id && calls.has(message.tool_call_id)) {
      calls.get(message.tool_call_id)!.appendChild(messageElement(b, model, message, "div", "message tool-result"));
      calls.delete(message.tool_call_id);
      continue;
    }
    const element = messageElement(b, model, message, "article", "message");
    if (message.role !== "tool") calls = new Map();
    for (const call of message.tool_calls ?? []) {
      const { name, args } = callParts(call);
      const callElement = b.el(
        "details",
        { class: "tool-call", "data-tool-call-id": call.id },
        b.el("summary", {}, b.el("span", { class: "tool-name" }, name), b.el("span", { class: "tool-id" }, call.id)),
        b.el("pre", { class: "arguments" }, typeof args === "string" ? args : JSON.stringify(args, null, 2)),
      );
      element.appendChild(callElement);
      calls.set(call.id, callElement);
    }
    list.appendChild(element);
  }
  // A call of the last group with no result: still running, or left so by a crash (the
  // next message will cancel it).
  for (const [, callElement] of calls) {
    callElement.setAttribute("data-open-call", "");
    callElement.appendChild(b.el("p", { class: "no-result" }, "no result yet"));
  }
  for (const message of model.draft ?? []) list.appendChild(messageElement(b, model, message, "article", "message draft", true));
  root.appendChild(list);
  if (model.messages.length === 0 && !model.draft?.length) root.appendChild(b.el("p", { class: "empty" }, "No messages."));
  return root;
}

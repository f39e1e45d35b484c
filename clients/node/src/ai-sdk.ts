/**
 * `convo/ai-sdk`: the Vercel AI SDK (`ai` 7) history kept in convo. The AI SDK has no
 * storage interface of its own: an app keeps `ModelMessage[]`, passes it as `messages`,
 * and appends what the call added. With convo:
 *
 *   const history = await ConvoChatHistory.open({ sessionId: "user-42", store: "sqlite:./sessions.db" });
 *   const input: ModelMessage = { role: "user", content: "What should I pack?" };
 *   const result = await generateText({ model, tools, messages: [...(await history.load()), input], stopWhen: stepCountIs(5) });
 *   await history.append([input, ...result.responseMessages]);
 *
 * Append `result.responseMessages` (every step's messages). In v7
 * `result.response.messages` holds the LAST STEP only: appending it loses the tool calls
 * and results of the earlier steps.
 *
 * How messages map to convo's:
 * - a system or user message is one convo message;
 * - an assistant message is ONE convo assistant message: its text, and its tool calls
 *   (those the app runs; not provider-executed ones) as `tool_calls`, so parallel calls
 *   stay one group. One whose reasoning carries Anthropic signatures
 *   (`providerOptions.anthropic.signature` / `redactedData`) is stored with `native`
 *   (`anthropic_messages`: thinking, text and tool_use blocks), so convo's Anthropic
 *   export replays the thinking; one whose reasoning carries the signatures of Google's
 *   Interactions provider (`google.interactions()`: `providerOptions.google.signature`)
 *   likewise, as that API's steps (`gemini_interactions`: thought, model_output and
 *   function_call steps);
 * - a tool message is one convo tool message per tool result: its text, and the images
 *   of a `content` output (a screenshot) as the message's `images`, which convo's
 *   exports put inside the result; a tool message of approval responses only is kept
 *   with the message before it.
 * Each convo message keeps the AI SDK message it came from in `metadata.ai_sdk` (bytes
 * and URLs included), so `load()` gives back what `append()` was given, equal, from any
 * process on the store. `load()` reads convo's repaired history: a call left without its
 * result by a crash comes back answered by a `tool-result` part (`output: {type:
 * "error-text", value: <convo's cancellation text>}`), unless its assistant message asks
 * for an approval of it (a call the AI SDK itself records as pending).
 */
import type { AssistantModelMessage, ModelMessage, ToolModelMessage } from "ai";
import { Connection, SessionHandle, asInput, callsOf, contentText, decodeValue, encodeValue, isCancellation, parseDataUrl, textContent, type AdapterOptions } from "./adapters.js";
import type { ConvoClient } from "./client.js";
import "./dispose-symbol.js";
import type { Message, MessageInput } from "./protocol.js";

export type { AdapterOptions } from "./adapters.js";

/** The options of `ConvoChatHistory.open`. */
export interface ConvoChatHistoryOptions extends AdapterOptions {
  /** The convo session id (1–128 of `A-Z a-z 0-9 . _ : -`); created when it does not exist. */
  sessionId: string;
}

/** The member of a convo message's `metadata` that keeps the AI SDK message. */
export const METADATA_KEY = "ai_sdk";

/** What a convo message of this adapter keeps in `metadata.ai_sdk`. */
interface Kept {
  /** The AI SDK message (encoded); on a tool message, on the first of its results. */
  message?: unknown;
  /** On the second and later results of a tool message: the result's index in it. */
  part?: number;
  /** Messages that follow this one but make no convo message (tool approval responses). */
  after?: unknown[];
}

type Part = Record<string, unknown> & { type: string };

/**
 * A conversation of `ModelMessage`s kept in a convo session. `close()` ends the convo
 * process it started (none when given a `client`).
 */
export class ConvoChatHistory {
  readonly sessionId: string;
  readonly #connection: Connection;
  readonly #session: SessionHandle;

  private constructor(options: ConvoChatHistoryOptions) {
    this.sessionId = options.sessionId;
    this.#connection = new Connection(options);
    this.#session = new SessionHandle(options.sessionId, this.#connection);
  }

  /** Starts convo (unless `client` is given) and creates the session unless it exists. */
  static async open(options: ConvoChatHistoryOptions): Promise<ConvoChatHistory> {
    if (typeof options?.sessionId !== "string") throw new TypeError("ConvoChatHistory.open needs a sessionId");
    const history = new ConvoChatHistory(options);
    try {
      await history.#session.ensure();
    } catch (e) {
      await history.close();
      throw e;
    }
    return history;
  }

  /** The client this history talks through. */
  client(): Promise<ConvoClient> {
    return this.#connection.client();
  }

  /** The conversation, oldest first: what `append` was given, and convo's answer to any
   * call left without its result (see the module's documentation). */
  async load(): Promise<ModelMessage[]> {
    const read = await this.#session.read();
    return read ? toModelMessages(read.messages) : [];
  }

  /** Appends messages (typically `[userMessage, ...result.responseMessages]`), all or
   * nothing, as one `session/add_messages`. */
  async append(messages: readonly ModelMessage[]): Promise<void> {
    if (messages.length === 0) return;
    const convo: MessageInput[] = [];
    const head: unknown[] = []; // approval responses that follow the stored history
    for (const message of messages) {
      const converted = toConvo(message);
      if (converted.length > 0) convo.push(...converted);
      else if (convo.length === 0) head.push(encodeValue(message));
      else {
        const kept = convo.at(-1)!.metadata![METADATA_KEY] as Kept;
        kept.after = [...(kept.after ?? []), encodeValue(message)];
      }
    }
    const session_id = this.sessionId;
    const rest = await this.#session.write(async (client) => {
      if (head.length === 0) {
        await client.addMessages({ session_id, messages: convo });
        return [];
      }
      // Kept with the last stored message: re-stored in its place with them.
      const last = await this.#session.read({ repair: false, last: 1 });
      const stored = last?.messages.at(-1);
      if (!last || !stored) throw new TypeError("a tool message of approval responses only cannot start a conversation");
      const input = asInput(stored);
      const kept = (input.metadata?.[METADATA_KEY] ?? {}) as Kept;
      input.metadata = { ...input.metadata, [METADATA_KEY]: { ...kept, after: [...(kept.after ?? []), ...head] } };
      await client.pop({ session_id, expected_revision: last.revision, replace_with: input });
      return convo;
    });
    if (rest.length > 0) await (await this.client()).addMessages({ session_id, messages: rest });
  }

  /** Ends the convo process this history started (not a `client` it was given). */
  close(): Promise<void> {
    return this.#connection.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

// ModelMessage → convo messages.

function kept(message: ModelMessage, extra: Kept = {}): Record<string, unknown> {
  return { [METADATA_KEY]: { message: encodeValue(message), ...extra } };
}

function toConvo(message: ModelMessage): MessageInput[] {
  switch (message.role) {
    case "system":
      return [{ role: "system", content: message.content, metadata: kept(message) }];
    case "user": {
      const { content, images } = userContent(message.content as unknown);
      return [{ role: "user", content, ...(images.length > 0 ? { images } : {}), metadata: kept(message) }];
    }
    case "assistant":
      return [assistantMessage(message)];
    case "tool": {
      const results = (message.content as Part[]).filter((part) => part.type === "tool-result");
      return results.map((part, i) => {
        const images = resultImages(part["output"]);
        return {
          role: "tool",
          tool_call_id: String(part["toolCallId"]),
          content: resultText(part["output"]),
          ...(images.length > 0 ? { images } : {}),
          metadata: i === 0 ? kept(message) : { [METADATA_KEY]: { part: i } },
        };
      });
    }
    default:
      throw new TypeError(`not a ModelMessage role: ${JSON.stringify((message as { role?: unknown }).role)}`);
  }
}

function assistantMessage(message: AssistantModelMessage): MessageInput {
  if (typeof message.content === "string") {
    return { role: "assistant", content: message.content || null, ...(message.content ? {} : { allow_empty: true }), metadata: kept(message) };
  }
  const parts = message.content as Part[];
  const body = anthropicBody(parts);
  if (body) return { role: "assistant", native: { format: "anthropic_messages", model: null, body }, metadata: kept(message) };
  const steps = interactionsSteps(parts);
  if (steps) return { role: "assistant", native: { format: "gemini_interactions", model: null, body: steps }, metadata: kept(message) };
  const texts = parts.filter((p) => p.type === "text").map((p) => String(p["text"]));
  const tool_calls = parts
    .filter((p) => p.type === "tool-call" && p["providerExecuted"] !== true)
    // A string input as its JSON text: convo sends a string argument on as the JSON text itself.
    .map((p) => ({ id: String(p["toolCallId"]), name: String(p["toolName"]), arguments: typeof p["input"] === "string" ? JSON.stringify(p["input"]) : (p["input"] ?? {}) }));
  const content = textContent(texts);
  return {
    role: "assistant",
    content,
    ...(tool_calls.length > 0 ? { tool_calls } : {}),
    ...(content === null && tool_calls.length === 0 ? { allow_empty: true } : {}),
    metadata: kept(message),
  };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && Object.getPrototypeOf(value) === Object.prototype;
}

/**
 * An assistant turn whose reasoning Anthropic signed, as Anthropic's `content` blocks:
 * null unless it has reasoning, every reasoning part is signed (`signature`) or redacted
 * (`redactedData`), the other parts are text and tool calls the app runs (object inputs),
 * and it does not end in thinking.
 */
function anthropicBody(parts: Part[]): object[] | null {
  if (!parts.some((p) => p.type === "reasoning")) return null;
  const body: Array<Record<string, unknown>> = [];
  for (const part of parts) {
    const anthropic = (part["providerOptions"] as { anthropic?: Record<string, unknown> } | undefined)?.anthropic;
    if (part.type === "reasoning") {
      if (typeof anthropic?.["signature"] === "string") body.push({ type: "thinking", thinking: part["text"], signature: anthropic["signature"] });
      else if (typeof anthropic?.["redactedData"] === "string") body.push({ type: "redacted_thinking", data: anthropic["redactedData"] });
      else return null;
    } else if (part.type === "text") {
      if (part["text"] !== "") body.push({ type: "text", text: part["text"] });
    } else if (part.type === "tool-call" && part["providerExecuted"] !== true && isPlainObject(part["input"])) {
      body.push({ type: "tool_use", id: part["toolCallId"], name: part["toolName"], input: part["input"] });
    } else return null;
  }
  const last = body.at(-1)?.["type"];
  return last === "thinking" || last === "redacted_thinking" ? null : body;
}

/** What Google's Interactions provider keeps in a part's `providerOptions.google` (and
 * gives in its `providerMetadata.google`): the step's `signature`, and the `interactionId`
 * of the Interaction it came from (absent when not stored, `store: false`). */
interface GoogleInteractionsOptions {
  signature?: unknown;
  interactionId?: unknown;
}

function googleOptions(part: Part): GoogleInteractionsOptions | undefined {
  return (part["providerOptions"] as { google?: GoogleInteractionsOptions } | undefined)?.google;
}

/**
 * An assistant turn whose reasoning Google's Interactions provider signed, as the steps
 * that provider sends back for it (a thought per reasoning part, with its `signature` and
 * its text as the summary; adjacent texts one `model_output`; a `function_call` per call):
 * null unless it has reasoning, every reasoning part carries
 * `providerOptions.google.signature`, the other parts are text and tool calls the app runs
 * (object inputs), and it does not end in a thought.
 */
function interactionsSteps(parts: Part[]): object[] | null {
  if (!parts.some((p) => p.type === "reasoning")) return null;
  const steps: Array<Record<string, unknown>> = [];
  for (const part of parts) {
    const signature = googleOptions(part)?.signature;
    if (part.type === "reasoning") {
      if (typeof signature !== "string") return null;
      const text = String(part["text"] ?? "");
      steps.push({ type: "thought", signature, ...(text !== "" ? { summary: [{ type: "text", text }] } : {}) });
    } else if (part.type === "text") {
      if (part["text"] === "") continue;
      const block = { type: "text", text: part["text"] };
      const last = steps.at(-1);
      if (last?.["type"] === "model_output") (last["content"] as object[]).push(block);
      else steps.push({ type: "model_output", content: [block] });
    } else if (part.type === "tool-call" && part["providerExecuted"] !== true && isPlainObject(part["input"])) {
      steps.push({ type: "function_call", id: part["toolCallId"], name: part["toolName"], arguments: part["input"], ...(typeof signature === "string" ? { signature } : {}) });
    } else return null;
  }
  return steps.at(-1)?.["type"] === "thought" ? null : steps;
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** A user message's content in convo's common form: its texts, and its images as base64. */
function userContent(content: unknown): { content: MessageInput["content"]; images: string[] } {
  if (typeof content === "string") return { content, images: [] };
  const texts: string[] = [];
  const images: string[] = [];
  for (const part of (Array.isArray(content) ? content : []) as Part[]) {
    if (part.type === "text") texts.push(String(part["text"]));
    else if (part.type === "image" || (part.type === "file" && String(part["mediaType"]).startsWith("image"))) {
      const image = imageBase64(part.type === "image" ? part["image"] : part["data"]);
      if (image) images.push(image);
    }
  }
  const text = textContent(texts);
  return { content: text ?? (images.length > 0 ? null : ""), images };
}

function imageBase64(data: unknown): string | null {
  if (isPlainObject(data) && data["type"] === "data") data = data["data"];
  if (data instanceof Uint8Array) return data.byteLength > 0 ? Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("base64") : null;
  if (data instanceof ArrayBuffer) return data.byteLength > 0 ? Buffer.from(data).toString("base64") : null;
  if (typeof data === "string") {
    const url = parseDataUrl(data);
    if (url) return url.base64 || null;
    return BASE64.test(data) ? data : null;
  }
  return null; // a URL or a provider reference: nothing to keep in convo's common form
}

/** A tool result's output as the text of a convo tool message. */
function resultText(output: unknown): string {
  const o = (output ?? {}) as Record<string, unknown>;
  switch (o["type"]) {
    case "text":
    case "error-text":
      return String(o["value"]);
    case "json":
    case "error-json":
      return JSON.stringify(o["value"]) ?? "null";
    case "execution-denied":
      return typeof o["reason"] === "string" ? o["reason"] : "Tool execution denied.";
    case "content":
      return (o["value"] as Part[])
        .filter((p) => p.type === "text")
        .map((p) => String(p["text"]))
        .join("\n");
    default:
      return JSON.stringify(output) ?? "";
  }
}

/**
 * The images of a tool result's output, as base64, for convo's `images` (which convo's
 * exports put inside the result: a screenshot, a plot). Only a `content` output has
 * them: its `file` parts of an image media type with their bytes or base64 (`{type:
 * "data", data}`), `image-data` parts, and `file-data` and `media` (`ai` 5) parts of an
 * image media type. A URL or a provider reference is not an image convo can keep.
 */
function resultImages(output: unknown): string[] {
  const o = (output ?? {}) as Record<string, unknown>;
  if (o["type"] !== "content" || !Array.isArray(o["value"])) return [];
  const images: string[] = [];
  for (const part of o["value"] as Part[]) {
    const isImage = part.type === "image-data" || (["file", "file-data", "media"].includes(part.type) && String(part["mediaType"]).startsWith("image"));
    const image = isImage ? imageBase64(part["data"]) : null;
    if (image) images.push(image);
  }
  return images;
}

// convo messages → ModelMessage.

interface CallInfo {
  toolName: string;
  /** Its assistant message asks for an approval of it: pending in the AI SDK itself. */
  awaitingApproval: boolean;
}

function toModelMessages(messages: Message[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  const calls = new Map<string, CallInfo>();
  // A tool message this function made (of cancellations or another client's results),
  // which the next such result joins.
  let open: ToolModelMessage | null = null;
  const emit = (message: ModelMessage) => {
    out.push(message);
    open = null;
    if (message.role === "assistant" && Array.isArray(message.content)) {
      const parts = message.content as Part[];
      const approvals = new Set(parts.filter((p) => p.type === "tool-approval-request").map((p) => String(p["toolCallId"])));
      for (const p of parts) {
        if (p.type === "tool-call") {
          const id = String(p["toolCallId"]);
          calls.set(id, { toolName: String(p["toolName"]), awaitingApproval: approvals.has(id) });
        }
      }
    }
  };
  const result = (part: Part) => {
    if (open) (open.content as Part[]).push(part);
    else {
      const message: ToolModelMessage = { role: "tool", content: [part as never] };
      emit(message);
      open = message;
    }
  };
  for (const message of messages) {
    const meta = message.metadata?.[METADATA_KEY] as Kept | undefined;
    if (isCancellation(message)) {
      const callId = message.tool_call_id ?? "";
      const call = calls.get(callId);
      // Not repaired: a call the AI SDK holds for an approval.
      if (message.id === null && call?.awaitingApproval) continue;
      result({ type: "tool-result", toolCallId: callId, toolName: call?.toolName ?? "", output: { type: "error-text", value: contentText(message.content) } });
    } else if (meta?.message !== undefined) {
      emit(decodeValue(meta.message) as ModelMessage);
    } else if (typeof meta?.part === "number") {
      // The second or later result of a tool message, emitted whole with the first.
    } else if (message.role === "tool") {
      const callId = message.tool_call_id ?? "";
      result({ type: "tool-result", toolCallId: callId, toolName: calls.get(callId)?.toolName ?? message.name ?? "", output: { type: "text", value: contentText(message.content) } });
    } else {
      emit(foreign(message));
    }
    for (const after of meta?.after ?? []) emit(decodeValue(after) as ModelMessage);
  }
  return out;
}

/** The ModelMessage of a message another client stored (its common form). */
function foreign(message: Message): ModelMessage {
  const images = (message.images ?? []).filter((i): i is string => typeof i === "string");
  switch (message.role) {
    case "system":
      return { role: "system", content: contentText(message.content) };
    case "user": {
      if (typeof message.content === "string" && images.length === 0) return { role: "user", content: message.content };
      const text = contentText(message.content);
      return {
        role: "user",
        content: [...(text !== "" ? [{ type: "text" as const, text }] : []), ...images.map((data) => ({ type: "file" as const, mediaType: "image", data }))],
      };
    }
    default: {
      // An Anthropic turn stored as it came (session/add_response): its thinking kept as
      // reasoning parts with their signatures, as the AI SDK's Anthropic provider gives them.
      if (message.native?.format === "anthropic_messages" && Array.isArray(message.native.body)) {
        const blocks = message.native.body as Part[];
        if (blocks.every((b) => ["thinking", "redacted_thinking", "text", "tool_use"].includes(b.type))) {
          const parts = blocks.map((b) =>
            b.type === "thinking"
              ? { type: "reasoning", text: b["thinking"], providerOptions: { anthropic: { signature: b["signature"] } } }
              : b.type === "redacted_thinking"
                ? { type: "reasoning", text: "", providerOptions: { anthropic: { redactedData: b["data"] } } }
                : b.type === "text"
                  ? { type: "text", text: b["text"] }
                  : { type: "tool-call", toolCallId: b["id"], toolName: b["name"], input: b["input"] },
          );
          return { role: "assistant", content: parts as never };
        }
      }
      if (message.native?.format === "gemini_interactions" && Array.isArray(message.native.body)) {
        const parts = interactionsParts(message.native.body as Part[], message.metadata?.["response_id"]);
        if (parts) return { role: "assistant", content: parts as never };
      }
      const text = contentText(message.content);
      const parts: Part[] = text !== "" ? [{ type: "text", text }] : [];
      for (const call of callsOf(message)) {
        let input = call.arguments;
        if (typeof input === "string") {
          try {
            input = JSON.parse(input);
          } catch {
            // kept as the string it is
          }
        }
        parts.push({ type: "tool-call", toolCallId: call.id, toolName: call.name, input });
      }
      return { role: "assistant", content: parts as never };
    }
  }
}

/**
 * A Gemini Interactions turn stored as it came (session/add_response), as the AI SDK's
 * Interactions provider gives it: each thought a reasoning part (its summary's texts),
 * each model_output text a text part, each function_call a tool-call part, every part
 * with `providerOptions.google` holding its step's `signature` and the Interaction's id
 * (`interactionId`, from `metadata.response_id`), which that provider reads back. Null
 * when a step is of another kind (built-in tools, media output): read in the common form.
 */
function interactionsParts(steps: Part[], responseId: unknown): Part[] | null {
  const google = (signature: unknown) => {
    const options = {
      ...(typeof signature === "string" ? { signature } : {}),
      ...(typeof responseId === "string" && responseId !== "" ? { interactionId: responseId } : {}),
    };
    return Object.keys(options).length > 0 ? { providerOptions: { google: options } } : {};
  };
  const parts: Part[] = [];
  for (const step of steps) {
    if (step.type === "thought") {
      const summary = Array.isArray(step["summary"]) ? (step["summary"] as Part[]) : [];
      const text = summary.filter((b) => b.type === "text").map((b) => String(b["text"]));
      parts.push({ type: "reasoning", text: text.join("\n"), ...google(step["signature"]) });
    } else if (step.type === "model_output") {
      const blocks = Array.isArray(step["content"]) ? (step["content"] as Part[]) : [];
      if (!blocks.every((b) => b.type === "text")) return null;
      for (const b of blocks) parts.push({ type: "text", text: String(b["text"]), ...google(undefined) });
    } else if (step.type === "function_call") {
      parts.push({ type: "tool-call", toolCallId: step["id"], toolName: step["name"], input: step["arguments"] ?? {}, ...google(step["signature"]) });
    } else return null;
  }
  return parts;
}

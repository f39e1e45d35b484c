/**
 * `convo/openai-agents`: a `Session` of the OpenAI Agents SDK (`@openai/agents-core`
 * 0.20) kept in convo. Change one constructor:
 *
 *   const session = new ConvoSession({ sessionId: "user-42", store: "sqlite:./sessions.db" });
 *   const result = await run(agent, "What should I pack?", { session });
 *
 * How the SDK's items map to convo's messages:
 * - a user (or system) message item is one convo user (system) message;
 * - each run of assistant-side items (reasoning, assistant messages, function calls, and
 *   any other item that is not a message or a function call result) is ONE convo
 *   assistant message: its function calls are that message's `tool_calls`, so parallel
 *   calls stay one group (one message per call would cancel the first when the second is
 *   stored). A run of reasoning, messages and function calls is stored with `native` in
 *   the Responses API's wire form (`openai_responses`), so convo's exports replay it,
 *   reasoning and `encrypted_content` included; a run holding other items is stored in
 *   convo's common form (its text and function calls);
 * - each function call result is one convo tool message.
 * Every convo message keeps the SDK's own items in `metadata.openai_agents.items`, so
 * `getItems()` gives back what `addItems()` was given, from any process on the store.
 * `getItems()` reads convo's repaired history: a call left without its result by a crash
 * comes back answered by a `function_call_result` item carrying convo's cancellation
 * text, so the runner never sends the model a dangling call.
 */
import { randomUUID } from "node:crypto";
import type { AgentInputItem, RunContext, RunContextAwareSession } from "@openai/agents-core";
import { Connection, SessionHandle, callsOf, contentText, decodeValue, encodeValue, isCancellation, parseDataUrl, textContent, type AdapterOptions } from "./adapters.js";
import type { ConvoClient } from "./client.js";
import { RevisionConflictError, SessionNotFoundError } from "./errors.js";
import "./dispose-symbol.js";
import type { Message, MessageInput } from "./protocol.js";

export type { AdapterOptions } from "./adapters.js";

/** The options of `ConvoSession`. */
export interface ConvoSessionOptions extends AdapterOptions {
  /** The convo session id (1–128 of `A-Z a-z 0-9 . _ : -`); a new UUID by default. The
   * session is created on the first write, so a new id reads as an empty history. */
  sessionId?: string;
}

/** The member of a convo message's `metadata` that keeps the SDK's items. */
export const METADATA_KEY = "openai_agents";

type Item = AgentInputItem;
type AnyItem = Record<string, unknown> & { type?: string };
type Kind = "user" | "system" | "result" | "assistant";

/**
 * A `Session` of `@openai/agents-core` whose history is a convo session. Pass it as the
 * runner's `session`. `close()` ends the convo process it started (none when given a
 * `client`).
 */
export class ConvoSession implements RunContextAwareSession {
  /** The runner passes its `RunContext` to every history call, so that calls waiting for
   * an approval in that run come back as stored (not answered as cancelled). */
  readonly acceptsRunContext = true as const;
  readonly sessionId: string;
  readonly #connection: Connection;
  readonly #session: SessionHandle;

  constructor(options: ConvoSessionOptions = {}) {
    this.sessionId = options.sessionId ?? randomUUID();
    this.#connection = new Connection(options);
    this.#session = new SessionHandle(this.sessionId, this.#connection);
  }

  /** The client this session talks through (started on first use unless one was given). */
  client(): Promise<ConvoClient> {
    return this.#connection.client();
  }

  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /**
   * The history as the SDK's items, oldest first (the last `limit` with a limit): the
   * repaired view, so a call left without its result comes back answered with convo's
   * cancellation text, unless the run (`runContext`) holds an approval decision for it.
   */
  async getItems(limit?: number, runContext?: RunContext<any>): Promise<Item[]> {
    if (limit !== undefined && limit <= 0) return [];
    let read = await this.#session.read(limit === undefined ? {} : { last: limit });
    if (!read) return [];
    let items = toItems(read.messages, runContext);
    // A cancellation whose call is before the page, or a page of fewer items: read all.
    if (read.offset > 0 && (items === null || items.length < limit!)) {
      read = await this.#session.read();
      if (!read) return [];
      items = toItems(read.messages, runContext);
    }
    const all = items ?? toItems(read.messages, runContext, true)!;
    return limit === undefined ? all : all.slice(-limit);
  }

  /**
   * Appends items, as the runner does with a whole turn: one `session/add_messages`
   * (all or nothing). When they start with assistant-side items and the last stored
   * message is an assistant run of this adapter, that run is continued (re-stored with
   * the new items through `session/pop`'s `replace_with`), so a run never splits in two.
   */
  async addItems(items: Item[], _runContext?: RunContext<any>): Promise<void> {
    if (items.length === 0) return;
    const groups = group(items);
    const session_id = this.sessionId;
    const rest = await this.#session.write(async (client) => {
      if (groups[0]!.kind === "assistant") {
        const last = await this.#session.read({ repair: false, last: 1 });
        const message = last?.messages.at(-1);
        const stored = message ? ownItems(message) : null;
        if (last && message?.role === "assistant" && stored) {
          const merged = toMessage({ kind: "assistant", items: [...stored, ...groups[0]!.items] });
          await client.pop({ session_id, expected_revision: last.revision, replace_with: merged });
          return groups.slice(1);
        }
      }
      await client.addMessages({ session_id, messages: groups.map(toMessage) });
      return [];
    });
    // After a continued run: the items after it (the run is stored whatever happens next).
    if (rest.length > 0) await (await this.client()).addMessages({ session_id, messages: rest.map(toMessage) });
  }

  /**
   * Removes the last item and returns it (undefined when there is none). When it is one
   * of several items of a stored message (one call of a parallel group), the rest of
   * that message is stored again in its place in the same step (`replace_with`). Never a
   * repaired item: a call without its result is itself the last item.
   */
  async popItem(_runContext?: RunContext<any>): Promise<Item | undefined> {
    const client = await this.#session.client();
    for (let attempt = 0; ; attempt++) {
      let read = await this.#session.read({ repair: false, last: 1 });
      let message = read?.messages.at(-1);
      if (!read || !message) return undefined;
      // A result another client stored, or a stored cancellation: its call names it.
      if (message.role === "tool" && !ownItems(message)) {
        read = await this.#session.read({ repair: false });
        message = read?.messages.at(-1);
        if (!read || !message) return undefined;
      }
      const items =
        ownItems(message) ?? (message.role === "tool" ? [toItems(read.messages, undefined, true)!.at(-1)!] : foreignItems(message, new Map()));
      const popped = items.at(-1);
      const rest = items.slice(0, -1);
      try {
        await client.pop({
          session_id: this.sessionId,
          expected_revision: read.revision,
          ...(rest.length > 0 ? { replace_with: toMessage({ kind: kindOf(rest[0]!), items: rest }) } : {}),
        });
        return popped;
      } catch (e) {
        if (attempt >= 4 || !(e instanceof RevisionConflictError)) throw e;
      }
    }
  }

  /** Drops every item (`session/clear`: the session, its metadata and usage stay). */
  async clearSession(_runContext?: RunContext<any>): Promise<void> {
    const client = await this.#session.client();
    try {
      await client.clear({ session_id: this.sessionId });
    } catch (e) {
      if (!(e instanceof SessionNotFoundError)) throw e;
    }
  }

  /** Ends the convo process this session started (not a `client` it was given). */
  close(): Promise<void> {
    return this.#connection.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

// Items → convo messages.

function isMessageItem(item: object): boolean {
  const { type, role } = item as { type?: unknown; role?: unknown };
  return (type === "message" || type === undefined) && typeof role === "string";
}

function kindOf(item: Item): Kind {
  if (isMessageItem(item)) {
    const role = (item as { role: string }).role;
    if (role === "user") return "user";
    if (role === "system") return "system";
    return "assistant";
  }
  return item.type === "function_call_result" ? "result" : "assistant";
}

/** Consecutive assistant-side items together; every other item alone. */
function group(items: Item[]): Array<{ kind: Kind; items: Item[] }> {
  const groups: Array<{ kind: Kind; items: Item[] }> = [];
  for (const item of items) {
    const kind = kindOf(item);
    const last = groups.at(-1);
    if (kind === "assistant" && last?.kind === "assistant") last.items.push(item);
    else groups.push({ kind, items: [item] });
  }
  return groups;
}

function metadata(items: Item[]): Record<string, unknown> {
  return { [METADATA_KEY]: { items: items.map(encodeValue) } };
}

function toMessage({ kind, items }: { kind: Kind; items: Item[] }): MessageInput {
  const item = items[0] as unknown as AnyItem;
  switch (kind) {
    case "user": {
      const { content, images } = userContent(item["content"]);
      return { role: "user", content, ...(images.length > 0 ? { images } : {}), metadata: metadata(items) };
    }
    case "system":
      return { role: "system", content: typeof item["content"] === "string" ? item["content"] : userContent(item["content"]).content, metadata: metadata(items) };
    case "result":
      return { role: "tool", tool_call_id: String(item["callId"]), content: outputText(item["output"]), metadata: metadata(items) };
    case "assistant": {
      const body = wireForm(items);
      if (body) return { role: "assistant", native: { format: "openai_responses", model: null, body }, metadata: metadata(items) };
      const texts: string[] = [];
      const tool_calls: Array<{ id: string; name: string; arguments: unknown }> = [];
      for (const it of items as unknown as AnyItem[]) {
        if (isMessageItem(it) && Array.isArray(it["content"])) {
          for (const part of it["content"] as Array<Record<string, unknown>>) if (part["type"] === "output_text") texts.push(String(part["text"]));
        } else if (it.type === "function_call") {
          tool_calls.push({ id: String(it["callId"]), name: String(it["name"]), arguments: parseArguments(it["arguments"]) });
        }
      }
      const content = textContent(texts);
      return {
        role: "assistant",
        content,
        ...(tool_calls.length > 0 ? { tool_calls } : {}),
        ...(content === null && tool_calls.length === 0 ? { allow_empty: true } : {}),
        metadata: metadata(items),
      };
    }
  }
}

/** A user message's content in convo's common form: its texts, and its base64 images. */
function userContent(content: unknown): { content: MessageInput["content"]; images: string[] } {
  if (typeof content === "string") return { content, images: [] };
  const texts: string[] = [];
  const images: string[] = [];
  for (const part of Array.isArray(content) ? (content as Array<Record<string, unknown>>) : []) {
    if (part["type"] === "input_text" && typeof part["text"] === "string") texts.push(part["text"]);
    else if (part["type"] === "input_image" && typeof part["image"] === "string") {
      const data = parseDataUrl(part["image"]);
      if (data && data.mediaType.startsWith("image/")) images.push(data.base64);
    }
  }
  return { content: textContent(texts) ?? "", images };
}

/** A function call result's output as the text of a convo tool message. */
function outputText(output: unknown): string {
  if (typeof output === "string") return output;
  const parts = Array.isArray(output) ? output : [output];
  return parts
    .map((p) => {
      const part = (p ?? {}) as Record<string, unknown>;
      return (part["type"] === "text" || part["type"] === "input_text") && typeof part["text"] === "string" ? part["text"] : "";
    })
    .filter((t) => t !== "")
    .join("\n");
}

/**
 * Arguments for convo's common form: the object a JSON string holds, else the string as
 * it is (a JSON string value parsed would be sent back unquoted: not JSON any more).
 */
function parseArguments(args: unknown): unknown {
  if (typeof args !== "string") return args ?? {};
  try {
    const value: unknown = JSON.parse(args);
    return typeof value === "object" && value !== null ? value : args;
  } catch {
    return args;
  }
}

const FAKE_ID = "FAKE_ID"; // the SDK's placeholder for an item without a provider id

function itemId(item: AnyItem): { id?: string } {
  return typeof item["id"] === "string" && item["id"] !== FAKE_ID ? { id: item["id"] } : {};
}

/**
 * A run of assistant-side items in the Responses API's wire form (as
 * `@openai/agents-openai` sends them), or null when it holds an item other than
 * reasoning, assistant messages (text and refusals) and function calls.
 */
function wireForm(items: Item[]): object[] | null {
  const body: object[] = [];
  for (const item of items as unknown as AnyItem[]) {
    const providerData = (item["providerData"] ?? {}) as Record<string, unknown>;
    if (item.type === "reasoning") {
      const encrypted = providerData["encryptedContent"] ?? providerData["encrypted_content"];
      const raw = item["rawContent"] as Array<{ text: string }> | undefined;
      body.push({
        ...itemId(item),
        type: "reasoning",
        summary: (item["content"] as Array<{ text: string }>).map((c) => ({ type: "summary_text", text: c.text })),
        ...(raw ? { content: raw.map((c) => ({ type: "reasoning_text", text: c.text })) } : {}),
        ...(typeof encrypted === "string" ? { encrypted_content: encrypted } : {}),
      });
    } else if (isMessageItem(item) && item["role"] === "assistant") {
      const content: object[] = [];
      for (const part of (item["content"] ?? []) as Array<Record<string, unknown>>) {
        const pd = (part["providerData"] ?? {}) as Record<string, unknown>;
        if (part["type"] === "output_text") {
          content.push({ type: "output_text", text: part["text"], annotations: Array.isArray(pd["annotations"]) ? pd["annotations"] : [] });
        } else if (part["type"] === "refusal") content.push({ type: "refusal", refusal: part["refusal"] });
        else return null;
      }
      const phase = item["phase"];
      body.push({
        type: "message",
        ...itemId(item),
        role: "assistant",
        status: item["status"] ?? "completed",
        content,
        ...(phase === "commentary" || phase === "final_answer" ? { phase } : {}),
      });
    } else if (item.type === "function_call") {
      body.push({
        ...itemId(item),
        type: "function_call",
        call_id: item["callId"],
        name: item["name"],
        arguments: item["arguments"],
        ...(typeof item["status"] === "string" ? { status: item["status"] } : {}),
        ...(typeof item["namespace"] === "string" ? { namespace: item["namespace"] } : {}),
      });
    } else return null;
  }
  return body;
}

// Convo messages → items.

/** The SDK items a message of this adapter keeps, or null for any other message. */
function ownItems(message: Message): Item[] | null {
  if (isCancellation(message)) return null;
  const kept = (message.metadata?.[METADATA_KEY] as { items?: unknown } | undefined)?.items;
  return Array.isArray(kept) && kept.length > 0 ? (kept.map(decodeValue) as Item[]) : null;
}

/**
 * The items of a history. A cancellation (convo's result for a call that never got one)
 * becomes the `function_call_result` the runner makes, with the call's name. Returns null
 * when a result that needs its call's name (a cancellation, another client's result) has
 * its call before the page (unless `lenient`: then the name is empty).
 */
function toItems(messages: Message[], runContext?: RunContext<any>, lenient = false): Item[] | null {
  const items: Item[] = [];
  const calls = new Map<string, AnyItem>();
  for (const message of messages) {
    let produced = ownItems(message);
    if (!produced && isCancellation(message)) {
      const callId = message.tool_call_id ?? "";
      const call = calls.get(callId);
      if (!call && !lenient) return null;
      const name = typeof call?.["name"] === "string" ? call["name"] : "";
      // A call the run holds an approval decision for is waiting in the framework: as stored.
      if (message.id === null && call && runContext?.isToolApproved({ toolName: name, callId }) !== undefined) continue;
      produced = [
        {
          type: "function_call_result",
          name,
          ...(typeof call?.["namespace"] === "string" ? { namespace: call["namespace"] } : {}),
          callId,
          status: "completed",
          output: { type: "text", text: contentText(message.content) },
          ...(call?.["caller"] ? { caller: call["caller"] } : {}),
        } as Item,
      ];
    }
    if (!produced && message.role === "tool" && !calls.has(message.tool_call_id ?? "") && !lenient) return null;
    produced ??= foreignItems(message, calls);
    for (const item of produced) {
      if (item.type === "function_call") calls.set(item.callId, item as unknown as AnyItem);
      items.push(item);
    }
  }
  return items;
}

/** The items of a message another client stored (its common form). */
function foreignItems(message: Message, calls: Map<string, AnyItem>): Item[] {
  switch (message.role) {
    case "user": {
      const content = message.content;
      if (typeof content === "string" || content === null) return [{ role: "user", content: content ?? "" } as Item];
      const parts = content.filter((p) => typeof p["text"] === "string").map((p) => ({ type: "input_text", text: p["text"] as string }));
      return [{ role: "user", content: parts } as Item];
    }
    case "system":
      return [{ role: "system", content: contentText(message.content) } as Item];
    case "tool": {
      const call = calls.get(message.tool_call_id ?? "");
      return [
        {
          type: "function_call_result",
          name: typeof call?.["name"] === "string" ? call["name"] : (message.name ?? ""),
          callId: message.tool_call_id ?? "",
          status: "completed",
          output: { type: "text", text: contentText(message.content) },
        } as Item,
      ];
    }
    case "assistant": {
      if (message.native?.format === "openai_responses" && Array.isArray(message.native.body)) {
        return (message.native.body as AnyItem[]).map(fromWire);
      }
      const items: Item[] = [];
      const text = contentText(message.content);
      const calls = callsOf(message);
      if (text !== "" || calls.length === 0) {
        items.push({ type: "message", role: "assistant", status: "completed", content: text === "" ? [] : [{ type: "output_text", text }] } as Item);
      }
      for (const call of calls) {
        items.push({
          type: "function_call",
          callId: call.id,
          name: call.name,
          status: "completed",
          arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments),
        } as Item);
      }
      return items;
    }
  }
}

/**
 * A Responses API output item (a turn another client stored natively: the Python adapter,
 * `session/add_response`) as the SDK's item, as `@openai/agents-openai` reads one; an
 * item of another type is kept whole as an `unknown` item's `providerData`.
 */
function fromWire(item: AnyItem): Item {
  const id = typeof item["id"] === "string" ? { id: item["id"] } : {};
  if (item.type === "reasoning") {
    const summary = (item["summary"] ?? []) as Array<{ text: string }>;
    const raw = item["content"] as Array<{ text: string }> | undefined;
    return {
      type: "reasoning",
      ...id,
      content: summary.map((s) => ({ type: "input_text", text: s.text })),
      ...(Array.isArray(raw) ? { rawContent: raw.map((c) => ({ type: "reasoning_text", text: c.text })) } : {}),
      ...(typeof item["encrypted_content"] === "string" ? { providerData: { encrypted_content: item["encrypted_content"] } } : {}),
    } as Item;
  }
  if (item.type === "message" && item["role"] === "assistant") {
    const content = ((item["content"] ?? []) as AnyItem[]).map((part) =>
      part.type === "refusal"
        ? { type: "refusal", refusal: part["refusal"] }
        : {
            type: "output_text",
            text: part["text"],
            ...(Array.isArray(part["annotations"]) && part["annotations"].length > 0 ? { providerData: { annotations: part["annotations"] } } : {}),
          },
    );
    const phase = item["phase"];
    return {
      type: "message",
      ...id,
      role: "assistant",
      status: item["status"] ?? "completed",
      content,
      ...(phase === "commentary" || phase === "final_answer" ? { phase } : {}),
    } as Item;
  }
  if (item.type === "function_call") {
    return {
      type: "function_call",
      ...id,
      callId: item["call_id"],
      name: item["name"],
      arguments: item["arguments"],
      ...(typeof item["status"] === "string" ? { status: item["status"] } : {}),
      ...(typeof item["namespace"] === "string" ? { namespace: item["namespace"] } : {}),
    } as Item;
  }
  return { type: "unknown", ...id, providerData: item } as Item;
}

/**
 * What the framework adapters (`convo/openai-agents`, `convo/ai-sdk`) share: the client
 * they talk through (started on first use, or the host's own), the session they keep
 * (created on first write), reads of its history, and a JSON codec that keeps the values
 * a framework's items may hold but JSON cannot (bytes, URLs) when they go into a
 * message's `metadata`. Internal: not exported from the package.
 */
import { ConvoClient } from "./client.js";
import { RevisionConflictError, SessionExistsError, SessionNotFoundError } from "./errors.js";
import type { Message, MessageInput } from "./protocol.js";

/** The options every adapter takes. */
export interface AdapterOptions {
  /** `--store` of the convo process the adapter starts: `sqlite` (convo's default, the
   * platform data folder), `sqlite:PATH` or `memory`. Ignored with `client`. */
  store?: string;
  /** A started client to use instead: shared by several sessions, and not disposed by
   * `close()` (its owner disposes it). */
  client?: ConvoClient;
  /** The convo binary, when the adapter starts the process (see `ConvoOptions.binary`). */
  binary?: string;
}

/** The cancellation text convo gives a call that never got its result. */
export const CANCELLED = "Cancelled — connection was lost before this tool ran.";

/** The client of an adapter: the host's, or one started on first use and disposed by `close()`. */
export class Connection {
  readonly #options: AdapterOptions;
  #client: Promise<ConvoClient> | undefined;
  #closed = false;

  constructor(options: AdapterOptions) {
    this.#options = options;
    if (options.client) this.#client = Promise.resolve(options.client);
  }

  get owned(): boolean {
    return !this.#options.client;
  }

  client(): Promise<ConvoClient> {
    if (this.#closed) return Promise.reject(new Error("this convo adapter is closed"));
    return (this.#client ??= ConvoClient.start({ binary: this.#options.binary, store: this.#options.store }).catch((e) => {
      this.#client = undefined; // a later call may try again
      throw e;
    }));
  }

  /** Disposes the client when the adapter started it; idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.owned && this.#client) {
      const client = await this.#client.catch(() => undefined);
      await client?.dispose();
    }
  }
}

/** A convo session that the adapter creates on its first write. */
export class SessionHandle {
  readonly id: string;
  readonly #connection: Connection;
  #created = false;

  constructor(id: string, connection: Connection) {
    this.id = id;
    this.#connection = connection;
  }

  client(): Promise<ConvoClient> {
    return this.#connection.client();
  }

  /** Creates the session unless it exists. */
  async ensure(): Promise<ConvoClient> {
    const client = await this.client();
    if (!this.#created) {
      try {
        await client.createSession({ session_id: this.id });
      } catch (e) {
        if (!(e instanceof SessionExistsError)) throw e;
      }
      this.#created = true;
    }
    return client;
  }

  /**
   * Runs a write, creating the session first; once more when the session was deleted
   * meanwhile (1001) or changed between a read and the write (1003).
   */
  async write<T>(action: (client: ConvoClient) => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const client = await this.ensure();
      try {
        return await action(client);
      } catch (e) {
        if (attempt >= 4) throw e;
        if (e instanceof SessionNotFoundError) this.#created = false;
        else if (!(e instanceof RevisionConflictError)) throw e;
      }
    }
  }

  /**
   * The history (repaired unless `repair` is false) from the `last` messages of the
   * stored history on (all with `last` undefined), or null when the session does not exist.
   */
  async read(options: { repair?: boolean; last?: number } = {}): Promise<{ messages: Message[]; revision: number; offset: number } | null> {
    const client = await this.client();
    try {
      for (let attempt = 0; ; attempt++) {
        if (options.last === undefined) {
          const { messages, revision } = await client.history({ session_id: this.id, repair: options.repair ?? true });
          return { messages, revision, offset: 0 };
        }
        const info = await client.getSession({ session_id: this.id });
        const offset = Math.max(0, info.message_count - options.last);
        const { messages, revision } = await client.history({ session_id: this.id, repair: options.repair ?? true, offset });
        // Changed between the two requests: the offset may be off; read again.
        if (revision === info.revision || attempt >= 4) return { messages, revision, offset };
      }
    } catch (e) {
      if (e instanceof SessionNotFoundError) return null;
      throw e;
    }
  }
}

/** The stored message as `add_message` takes it back (for `session/pop`'s `replace_with`). */
export function asInput(message: Message): MessageInput {
  const input: MessageInput = { role: message.role };
  if (message.native) input.native = message.native;
  else {
    input.content = message.content;
    if (message.tool_calls) input.tool_calls = message.tool_calls;
  }
  if (message.name !== null) input.name = message.name;
  if (message.tool_call_id !== null) input.tool_call_id = message.tool_call_id;
  if (message.images) input.images = message.images as string[];
  if (message.metadata) input.metadata = message.metadata;
  if (message.usage) input.usage = message.usage;
  if (message.role === "assistant" && !message.native && isEmptyAssistant(message)) input.allow_empty = true;
  return input;
}

function isEmptyAssistant(message: Pick<Message, "content" | "tool_calls">): boolean {
  const content = message.content;
  const text = typeof content === "string" ? content !== "" : Array.isArray(content) && content.length > 0;
  return !text && !(message.tool_calls && message.tool_calls.length > 0);
}

/** The common form's `content` of some texts: null for none, a string for one, else text parts. */
export function textContent(texts: string[]): MessageInput["content"] {
  const kept = texts.filter((t) => t !== "");
  if (kept.length === 0) return null;
  if (kept.length === 1) return kept[0]!;
  return kept.map((text) => ({ type: "text", text }));
}

/** The text of a stored message's content (text parts joined). */
export function contentText(content: Message["content"]): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) => (typeof part["text"] === "string" ? part["text"] : ""))
    .filter((t) => t !== "")
    .join("\n");
}

/** Whether a stored message is a result convo made for a call that never got one: in the
 * repaired view (id null), or stored when the conversation moved on. */
export function isCancellation(message: Message): boolean {
  return message.role === "tool" && message.metadata?.["synthetic"] === true;
}

/** The tool calls of a stored assistant message, with their names (any of the shapes convo keeps). */
export function callsOf(message: Message): Array<{ id: string; name: string; arguments: unknown }> {
  return (message.tool_calls ?? []).map((call) => {
    const fn = call["function"] as { name?: unknown; arguments?: unknown } | undefined;
    const name = typeof call["name"] === "string" ? call["name"] : typeof fn?.name === "string" ? fn.name : "";
    const args = "arguments" in call ? call["arguments"] : "input" in call ? call["input"] : fn?.arguments;
    return { id: call.id, name, arguments: args ?? {} };
  });
}

// The JSON codec of framework values kept in metadata. Bytes (Uint8Array, Buffer,
// ArrayBuffer), URLs and dates become tagged objects; a plain object that has the tag's
// key itself is wrapped, so that every value decodes to what was encoded.

const TAG = "$convo";

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

/** A framework value as JSON, for `metadata`. */
export function encodeValue(value: unknown): unknown {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map((v) => (v === undefined ? null : encodeValue(v)));
  if (value instanceof Uint8Array) return { [TAG]: "bytes", base64: base64(value) };
  if (value instanceof ArrayBuffer) return { [TAG]: "array_buffer", base64: base64(new Uint8Array(value)) };
  if (value instanceof URL) return { [TAG]: "url", href: value.href };
  if (value instanceof Date) return { [TAG]: "date", iso: value.toISOString() };
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (v !== undefined && typeof v !== "function" && typeof v !== "symbol") out[key] = encodeValue(v);
  }
  return Object.prototype.hasOwnProperty.call(out, TAG) ? { [TAG]: "object", value: out } : out;
}

/** What `encodeValue` encoded. */
export function decodeValue(value: unknown): unknown {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(decodeValue);
  const record = value as Record<string, unknown>;
  switch (record[TAG]) {
    case "bytes":
      return new Uint8Array(Buffer.from(String(record["base64"]), "base64"));
    case "array_buffer": {
      const bytes = Buffer.from(String(record["base64"]), "base64");
      return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
    }
    case "url":
      return new URL(String(record["href"]));
    case "date":
      return new Date(String(record["iso"]));
    case "object": {
      const inner = record["value"] as Record<string, unknown>;
      return Object.fromEntries(Object.entries(inner).map(([k, v]) => [k, decodeValue(v)]));
    }
    default:
      return Object.fromEntries(Object.entries(record).map(([k, v]) => [k, decodeValue(v)]));
  }
}

/** A base64 data URL's media type and data, or null. */
export function parseDataUrl(url: string): { mediaType: string; base64: string } | null {
  const match = /^data:([^;,]*)(?:;[^;,]*)*;base64,(.*)$/s.exec(url);
  return match ? { mediaType: match[1] ?? "", base64: match[2] ?? "" } : null;
}

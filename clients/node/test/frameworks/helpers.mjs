// @ts-check
// What the framework adapter tests share: the binary, a SQLite file in a temporary
// folder, killing convo with SIGKILL, reading a session in a new process, and the
// checks every adapter's stored history must pass. These tests run on the Node the
// frameworks need (22 or newer: test.sh installs one from the npm registry when the
// machine's is older).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

export { BINARY } from "../helpers.mjs";
import { BINARY } from "../helpers.mjs";

const execFileAsync = promisify(execFile);

/** A `sqlite:PATH` store in a new temporary folder, removed when the process exits. */
export function sqliteStore() {
  const dir = mkdtempSync(join(tmpdir(), "convo-frameworks-"));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  return `sqlite:${join(dir, "sessions.db")}`;
}

/**
 * Kills the convo process of a client with SIGKILL (no shutdown, nothing flushed by
 * convo on the way out) and waits for it to be gone.
 * @param {import("convo").ConvoClient} client
 */
export async function kill9(client) {
  const pid = /** @type {number} */ (client.pid);
  process.kill(pid, "SIGKILL");
  // An idle client does not keep this process alive (its child is unref'd): a timer does.
  const keepAlive = setInterval(() => {}, 50);
  try {
    assert.equal((await client.exited).signal, "SIGKILL");
  } finally {
    clearInterval(keepAlive);
  }
}

/**
 * JSON that keeps bytes and URLs (for comparing values read in another process).
 * @param {unknown} value
 */
export function toJson(value) {
  return JSON.stringify(value, function (key, v) {
    const raw = this[key];
    if (raw instanceof Uint8Array) return { $bytes: Buffer.from(raw).toString("base64") };
    if (raw instanceof URL) return { $url: raw.href };
    return v;
  });
}

/**
 * A value without its undefined members (as JSON would drop them), bytes and URLs kept.
 * @param {unknown} value
 * @returns {any}
 */
export function clean(value) {
  if (value === null || typeof value !== "object" || value instanceof Uint8Array || value instanceof URL) return value;
  if (Array.isArray(value)) return value.map(clean);
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined).map(([k, v]) => [k, clean(v)]));
}

/** @param {string} text */
export function fromJson(text) {
  return JSON.parse(text, (_key, v) => {
    if (v && typeof v === "object" && typeof v.$bytes === "string") return new Uint8Array(Buffer.from(v.$bytes, "base64"));
    if (v && typeof v === "object" && typeof v.$url === "string") return new URL(v.$url);
    return v;
  });
}

/**
 * What `reopen.mjs` reads, in a new Node process (the one running these tests), from a
 * new convo process on the same store: `ConvoSession.getItems()` (`openai-agents`) or
 * `ConvoChatHistory.load()` (`ai-sdk`).
 * @param {"openai-agents" | "ai-sdk"} adapter
 * @param {string} sessionId
 * @param {string} store
 */
export async function readInNewProcess(adapter, sessionId, store) {
  const script = new URL("./reopen.mjs", import.meta.url);
  const { stdout } = await execFileAsync(process.execPath, [script.pathname, adapter, sessionId, store], {
    env: { ...process.env, CONVO_BINARY: BINARY },
  });
  return fromJson(stdout);
}

export const FORMATS = /** @type {const} */ (["openai_chat", "openai_responses", "anthropic_messages"]);

/**
 * The stored history exports to each format, and `session/validate` finds nothing.
 * Returns the exports by format.
 * @param {import("convo").ConvoClient} client
 * @param {string} session_id
 */
export async function assertValidEverywhere(client, session_id) {
  /** @type {Record<string, import("convo").Exported>} */
  const exports = {};
  for (const format of FORMATS) {
    const { violations } = await client.validate({ session_id, format });
    assert.deepEqual(violations, [], `validate ${format}`);
    exports[format] = await client.export({ session_id, format });
  }
  return exports;
}

/**
 * Convo's view of the history: the assistant messages and the ids of their calls, and
 * the calls the tool messages answer, in order.
 * @param {import("convo").ConvoClient} client
 * @param {string} session_id
 */
export async function convoView(client, session_id) {
  const { messages } = await client.history({ session_id, repair: false });
  return messages.map((m) =>
    m.role === "assistant" ? `assistant[${(m.tool_calls ?? []).map((c) => c.id).join(",")}]` : m.role === "tool" ? `tool:${m.tool_call_id}` : m.role,
  );
}

// @ts-check
// An error of each kind, from the real binary, as its ConvoError subclass.
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import * as convo from "convo";
import { BINARY, start } from "./helpers.mjs";

/**
 * Asserts that `promise` rejects with `Class`, of `code` and `kind`; returns the error.
 * @template {convo.ConvoError<any>} E
 * @param {Promise<unknown>} promise @param {new (...a: any[]) => E} Class @param {number} code @param {string} kind
 * @returns {Promise<E>}
 */
async function rejectsWith(promise, Class, code, kind) {
  /** @type {E | undefined} */
  let error;
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof Class, `${e} is a ${Class.name}`);
    assert.ok(e instanceof convo.ConvoError);
    assert.equal(e.code, code);
    assert.equal(e.kind, kind);
    error = e;
    return true;
  });
  return /** @type {E} */ (error);
}

test("application errors 1001-1004, 1007 and the JSON-RPC ones", async () => {
  const client = await start();
  const session_id = "s";
  await client.createSession({ session_id });

  const missing = await rejectsWith(client.getSession({ session_id: "nope" }), convo.SessionNotFoundError, 1001, "session_not_found");
  assert.equal(missing.data.session_id, "nope");
  assert.match(missing.message, /^session not found/);
  await rejectsWith(client.createSession({ session_id }), convo.SessionExistsError, 1002, "session_exists");
  const conflict = await rejectsWith(
    client.addUser({ session_id, text: "hi", expected_revision: 7 }),
    convo.RevisionConflictError,
    1003,
    "revision_conflict",
  );
  assert.deepEqual([conflict.data.current_revision, conflict.data.expected_revision], [0, 7]);
  const sequence = await rejectsWith(
    client.addToolResult({ session_id, tool_call_id: "nope", content: "x" }),
    convo.InvalidSequenceError,
    1004,
    "invalid_sequence",
  );
  assert.equal(sequence.data.reason, "no_pending_tool_calls");
  const message = await rejectsWith(
    client.fork({ session_id, at_message_id: "01a22a96-0000-7000-8000-000000000000" }),
    convo.MessageNotFoundError,
    1007,
    "message_not_found",
  );
  assert.equal(message.data.message_id, "01a22a96-0000-7000-8000-000000000000");

  const params = await rejectsWith(client.getSession({ session_id: "a b" }), convo.InvalidParamsError, -32602, "invalid_params");
  assert.match(params.message, /session_id/);
  await rejectsWith(client.request("session/nope", {}), convo.MethodNotFoundError, -32601, "method_not_found");
  await client.shutdown();
  await rejectsWith(client.getSession({ session_id }), convo.InvalidRequestError, -32600, "invalid_request");
  await client.dispose();
});

test("1005: a request over --max-message-bytes", async () => {
  const client = await start({ args: ["--max-message-bytes", "1024"] });
  await client.createSession({ session_id: "s" });
  await rejectsWith(client.addUser({ session_id: "s", text: "x".repeat(4096) }), convo.TooLargeError, 1005, "too_large");
  assert.equal((await client.getSession({ session_id: "s" })).message_count, 0, "the connection goes on");
  await client.dispose();
});

test("1006: a write past the file-size limit, logged on stderr", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "convo-test-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const wrapper = join(dir, "convo-limited");
  writeFileSync(wrapper, `#!/bin/sh\nulimit -f 400\nexec "${BINARY}" "$@"\n`);
  chmodSync(wrapper, 0o755);
  const client = await start({ binary: wrapper, store: `sqlite:${join(dir, "db.sqlite")}` });
  await client.createSession({ session_id: "s" });
  await rejectsWith(client.addUser({ session_id: "s", text: "x".repeat(300_000) }), convo.StorageUnavailableError, 1006, "storage_unavailable");
  assert.equal((await client.getSession({ session_id: "s" })).revision, 0, "nothing took effect");
  await client.dispose();
  assert.ok(client.lines.some((l) => l.includes("ERROR")), "convo's log line reached the logger");
});

test("1008 and 1009: no runtime, a runtime that throws, an answer that is not the JSON asked for", async () => {
  const bare = await start();
  await bare.createSession({ session_id: "s" });
  const none = await rejectsWith(bare.run({ session_id: "s", input: "hi" }), convo.RuntimeFailedError, 1008, "runtime_failed");
  assert.equal(none.data.reason, "no_runtime");
  await bare.dispose();

  const client = await start({
    runtime: (req) => {
      if (req.purpose === "json") return { text: "not json" };
      throw new Error("the provider is down");
    },
  });
  await client.createSession({ session_id: "s" });
  const failed = await rejectsWith(client.run({ session_id: "s", input: "hi" }), convo.RuntimeFailedError, 1008, "runtime_failed");
  assert.equal(failed.data.reason, "error");
  assert.equal(/** @type {any} */ (failed.data.error).message, "the provider is down");
  const output = await rejectsWith(
    client.json({ session_id: "s", input: "hi", schema: { type: "object" }, retries: 1 }),
    convo.InvalidOutputError,
    1009,
    "invalid_output",
  );
  assert.equal(output.data.text, "not json");
  assert.ok(output.data.errors.length > 0);
  assert.equal((await client.getSession({ session_id: "s" })).message_count, 0, "nothing appended");
  await client.dispose();
});

test("ConnectionClosedError: the process dies under a call, and every later call", async () => {
  const client = await start({
    runtime: async (_req, { signal }) => {
      await new Promise((r) => signal.addEventListener("abort", r));
      return { text: "never" };
    },
  });
  await client.createSession({ session_id: "s" });
  const pending = client.run({ session_id: "s", input: "hi" });
  await new Promise((r) => setTimeout(r, 50));
  process.kill(/** @type {number} */ (client.pid), "SIGKILL");
  const closed = await rejectsWith(pending, convo.ConnectionClosedError, convo.ConnectionClosedError.CODE, "connection_closed");
  assert.match(closed.message, /exited on SIGKILL/);
  assert.equal(closed.data.signal, "SIGKILL");
  await rejectsWith(client.getSession({ session_id: "s" }), convo.ConnectionClosedError, convo.ConnectionClosedError.CODE, "connection_closed");
  await client.dispose();
});

// @ts-check
// Exactly once: every append carries a message id (the caller's `message_id`, or a UUID v4
// the client chooses), a repeat is answered `duplicate`, and a write that failed with 1006
// is sent once more, the same. The 1006 is a real one: a SQLite store whose write lock
// another connection holds past --busy-timeout-ms.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import * as convo from "convo";
import { start } from "./helpers.mjs";

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const CALL = { id: "c1", name: "ls", arguments: {} };
/** @type {convo.ProviderResponses["anthropic_messages"]} */
const RESPONSE = {
  id: "msg_1",
  type: "message",
  role: "assistant",
  model: "claude-sonnet-4-5",
  content: [{ type: "text", text: "Hello." }],
  stop_reason: "end_turn",
  usage: { input_tokens: 3, output_tokens: 2 },
};

/**
 * Records every request `client` sends, with how it ended ("ok" or the error's kind);
 * `onError(method)` runs (and is awaited) when one fails, before the client goes on.
 * @param {convo.ConvoClient} client @param {(method: string) => unknown} [onError]
 */
function spy(client, onError) {
  /** @type {{ method: string, params: any, outcome: string }[]} */
  const attempts = [];
  const request = client.request.bind(client);
  client.request = /** @type {typeof client.request} */ (
    async (/** @type {string} */ method, /** @type {any} */ params, /** @type {any} */ options) => {
      try {
        const result = await request(method, params, options);
        attempts.push({ method, params, outcome: "ok" });
        return result;
      } catch (e) {
        attempts.push({ method, params, outcome: e instanceof convo.ConvoError ? e.kind : String(e) });
        await onError?.(method);
        throw e;
      }
    }
  );
  return attempts;
}

test("a given message_id is the message's, a repeat is a duplicate, another message with it is MessageExistsError", async () => {
  const client = await start();
  assert.equal(client.info.capabilities.exactly_once, true);
  const session_id = "s";
  await client.createSession({ session_id });
  const ids = Array.from({ length: 7 }, () => randomUUID());
  /** @type {((id: string) => Promise<convo.Added>)[]} */
  const appends = [
    (message_id) => client.addUser({ session_id, text: "hi", message_id }),
    (message_id) => client.addAssistant({ session_id, text: null, tool_calls: [CALL], message_id }),
    (message_id) => client.addToolResult({ session_id, tool_call_id: "c1", content: "README.md", message_id }),
    (message_id) => client.addMessage({ session_id, message: { role: "user", content: "next" }, message_id }),
    (message_id) => client.addMessage({ session_id, message: { role: "assistant", content: "in it", message_id } }),
    (message_id) => client.addResponse({ session_id, format: "anthropic_messages", response: RESPONSE, message_id }),
    (message_id) => client.addUser({ session_id, text: "shouted", message_id: message_id.toUpperCase() }),
  ];
  for (const [i, append] of appends.entries()) {
    const first = await append(ids[i]);
    assert.equal(first.message_id, ids[i]);
    assert.equal(first.duplicate, undefined);
    assert.deepEqual(await append(ids[i]), { ...first, duplicate: true });
  }
  const history = await client.history({ session_id, repair: false });
  assert.deepEqual(
    history.messages.map((m) => m.id),
    ids,
  );
  assert.equal(history.revision, 7);

  const many = [
    { role: /** @type {const} */ ("user"), content: "a", message_id: randomUUID() },
    { role: /** @type {const} */ ("assistant"), content: "b", message_id: randomUUID() },
  ];
  const first = await client.addMessages({ session_id, messages: many });
  assert.deepEqual(
    first.message_ids,
    many.map((m) => m.message_id),
  );
  assert.deepEqual(await client.addMessages({ session_id, messages: many }), { ...first, duplicate: true });

  await assert.rejects(client.addUser({ session_id, text: "something else", message_id: ids[0] }), (e) => {
    assert.ok(e instanceof convo.MessageExistsError);
    assert.deepEqual([e.code, e.kind, e.data.message_id], [1010, "message_exists", ids[0]]);
    return true;
  });
  // A partial retry (the second message is new): 1010 too.
  await assert.rejects(client.addMessages({ session_id, messages: [many[0], { role: "user", content: "new" }] }), convo.MessageExistsError);
  await assert.rejects(client.addUser({ session_id, text: "x", message_id: "not-a-uuid" }), convo.InvalidParamsError);
  assert.equal((await client.getSession({ session_id })).message_count, 9);
  await client.dispose();
});

test("without a message_id the client chooses a UUID v4 for each message, the caller's objects untouched", async () => {
  const client = await start();
  const session_id = "s";
  await client.createSession({ session_id });
  const added = [
    await client.addUser({ session_id, text: "hi" }),
    await client.addAssistant({ session_id, text: null, tool_calls: [CALL] }),
    await client.addToolResult({ session_id, tool_call_id: "c1", content: "ok" }),
    await client.addMessage({ session_id, message: { role: "user", content: "more" } }),
    await client.addResponse({ session_id, format: "anthropic_messages", response: RESPONSE }),
  ];
  const mine = randomUUID();
  /** @type {convo.MessageInput[]} */
  const messages = [
    { role: "user", content: "a" },
    { role: "assistant", content: "b", message_id: mine },
  ];
  const many = await client.addMessages({ session_id, messages });
  assert.equal(messages[0].message_id, undefined, "the caller's message is left as it was");
  assert.equal(many.message_ids[1], mine);
  const stored = (await client.history({ session_id, repair: false })).messages.map((m) => m.id);
  assert.deepEqual(stored, [...added.map((a) => a.message_id), ...many.message_ids]);
  for (const id of stored) assert.match(/** @type {string} */ (id), UUID_V4);
  await client.dispose();
});

test("a server without capabilities.exactly_once gets no ids and no retry", async () => {
  const client = await start();
  delete (/** @type {any} */ (client.info.capabilities).exactly_once); // as an older server answers
  await client.createSession({ session_id: "s" });
  const attempts = spy(client);
  const added = await client.addUser({ session_id: "s", text: "hi" });
  await client.addMessages({ session_id: "s", messages: [{ role: "assistant", content: "ho" }] });
  assert.deepEqual(
    attempts.map((a) => a.params),
    [
      { session_id: "s", text: "hi" },
      { session_id: "s", messages: [{ role: "assistant", content: "ho" }] },
    ],
  );
  assert.doesNotMatch(added.message_id, UUID_V4, "the server chose it (a v7)");
  await client.dispose();
});

/**
 * Holds the SQLite write lock of `db` (BEGIN IMMEDIATE) from another connection until
 * `release()`: the sqlite3 shell when there is one, else node:sqlite (Node 22.5 and
 * later); undefined when neither is there. Released at the end of the test at the latest.
 * @param {import("node:test").TestContext} t @param {string} db
 * @returns {Promise<{ release: () => Promise<void> } | undefined>}
 */
async function holdWriteLock(t, db) {
  const lock = await writeLock(db);
  if (lock) t.after(lock.release);
  return lock;
}

/** @param {string} db @returns {Promise<{ release: () => Promise<void> } | undefined>} */
async function writeLock(db) {
  if (spawnSync("sqlite3", ["-version"]).status === 0) {
    const shell = spawn("sqlite3", ["-bail", db], { stdio: ["pipe", "pipe", "inherit"] });
    let out = "";
    /** @param {string} line */
    const said = (line) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (out.includes(line)) resolve(undefined);
        };
        shell.stdout.on("data", (d) => ((out += d), check()));
        shell.once("exit", (code) => reject(new Error(`sqlite3 exited (${code}) before saying ${line}`)));
        check();
      });
    shell.stdin.write("BEGIN IMMEDIATE;\nSELECT 'locked';\n");
    await said("locked");
    let released = false;
    return {
      release: async () => {
        if (released) return;
        released = true;
        shell.stdin.end("ROLLBACK;\n");
        await new Promise((resolve) => shell.once("exit", resolve));
      },
    };
  }
  let sqlite;
  try {
    const name = "node:sqlite";
    sqlite = await import(name);
  } catch {
    return undefined;
  }
  const conn = new sqlite.DatabaseSync(db);
  conn.exec("BEGIN IMMEDIATE");
  let released = false;
  return {
    release: async () => {
      if (released) return;
      released = true;
      conn.exec("ROLLBACK");
      conn.close();
    },
  };
}

/** @param {import("node:test").TestContext} t */
async function sqliteClient(t) {
  const dir = mkdtempSync(join(tmpdir(), "convo-once-"));
  const db = join(dir, "db.sqlite");
  const client = await start({ store: `sqlite:${db}`, args: ["--busy-timeout-ms", "200"] });
  t.after(async () => {
    await client.dispose();
    rmSync(dir, { recursive: true, force: true });
  });
  return { client, db };
}

test("a write that failed with 1006 is sent once more, the same, and stored once", async (t) => {
  const { client, db } = await sqliteClient(t);
  const session_id = "s";
  await client.createSession({ session_id });
  let lock = await holdWriteLock(t, db);
  if (!lock) return t.skip("neither the sqlite3 shell nor node:sqlite is here to hold the lock with");
  // The lock is released when the first attempt has failed, before the retry is sent.
  let attempts = spy(client, () => lock?.release());
  const added = await client.addUser({ session_id, text: "hi" });
  assert.deepEqual(
    attempts.map((a) => [a.method, a.outcome]),
    [
      ["session/add_user", "storage_unavailable"],
      ["session/add_user", "ok"],
    ],
  );
  assert.deepEqual(attempts[1].params, attempts[0].params, "the retry is the same request, the same id");
  assert.match(added.message_id, UUID_V4);
  assert.equal(added.duplicate, undefined);
  const history = await client.history({ session_id, repair: false });
  assert.deepEqual(
    history.messages.map((m) => [m.id, m.content]),
    [[added.message_id, "hi"]],
  );

  // add_messages: an id for each message, the same ones in the retry.
  lock = await holdWriteLock(t, db);
  attempts = spy(client, () => lock?.release());
  const many = await client.addMessages({
    session_id,
    messages: [
      { role: "assistant", content: "a" },
      { role: "user", content: "b" },
    ],
  });
  assert.deepEqual(
    attempts.map((a) => a.outcome),
    ["storage_unavailable", "ok"],
  );
  assert.deepEqual(attempts[1].params, attempts[0].params);
  assert.deepEqual(
    attempts[1].params.messages.map((/** @type {any} */ m) => m.message_id),
    many.message_ids,
  );
  assert.equal((await client.getSession({ session_id })).message_count, 3);
});

test("a lock that outlasts the retry: StorageUnavailableError after exactly one retry; nothing else is retried", async (t) => {
  const { client, db } = await sqliteClient(t);
  const session_id = "s";
  await client.createSession({ session_id });
  const lock = await holdWriteLock(t, db);
  if (!lock) return t.skip("neither the sqlite3 shell nor node:sqlite is here to hold the lock with");
  const message_id = randomUUID();
  const attempts = spy(client);
  await assert.rejects(client.addUser({ session_id, text: "hi", message_id }), convo.StorageUnavailableError);
  assert.deepEqual(
    attempts.map((a) => [a.method, a.params.message_id, a.outcome]),
    [
      ["session/add_user", message_id, "storage_unavailable"],
      ["session/add_user", message_id, "storage_unavailable"],
    ],
  );
  // Not an append: not retried.
  attempts.length = 0;
  await assert.rejects(client.updateSession({ session_id, title: "t" }), convo.StorageUnavailableError);
  assert.equal(attempts.length, 1);
  await lock.release();
  assert.equal((await client.getSession({ session_id })).message_count, 0);

  // Other errors are not retried either.
  attempts.length = 0;
  await assert.rejects(client.addUser({ session_id, text: "hi", expected_revision: 7 }), convo.RevisionConflictError);
  assert.equal(attempts.length, 1);
  // The host may send it again later, the same id: stored once.
  assert.equal((await client.addUser({ session_id, text: "hi", message_id })).message_id, message_id);
  assert.equal((await client.addUser({ session_id, text: "hi", message_id })).duplicate, true);
  await assert.rejects(client.addUser({ session_id, text: "bye", message_id }), convo.MessageExistsError);
  assert.deepEqual(
    attempts.slice(1).map((a) => a.outcome),
    ["ok", "ok", "message_exists"],
  );
  assert.equal((await client.getSession({ session_id })).message_count, 1);
});

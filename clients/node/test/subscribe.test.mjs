// @ts-check
// subscribe(): session/subscribe as an async iterator of session/changed, routed by
// subscription id; changes of this client and of another convo process on the same SQLite
// file, in revision order, the last always told; ending the iterator (break, return(),
// abort) unsubscribes; the end of the client ends it.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import { promisify } from "node:util";
import { CancelledError, ConnectionClosedError, InvalidParamsError } from "convo";
import { BINARY, start } from "./helpers.mjs";

const folder = mkdtempSync(join(tmpdir(), "convo-node-subscribe-"));
test.after(() => rmSync(folder, { recursive: true, force: true }));
let files = 0;
/** A fresh SQLite store, for two processes to share. */
const sqlite = () => `sqlite:${join(folder, `store-${++files}.db`)}`;

/**
 * Reads changes until `last` holds for one; rejects when none comes for `ms`.
 * @param {import("convo").Subscription} sub
 * @param {(change: import("convo").SessionChange) => boolean} last
 */
async function readUntil(sub, last, ms = 30_000) {
  /** @type {import("convo").SessionChange[]} */
  const seen = [];
  for (;;) {
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer;
    /** @type {Promise<never>} */
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no change for ${ms} ms; seen: ${JSON.stringify(seen)}`)), ms);
    });
    const next = await Promise.race([sub.next(), timeout]).finally(() => clearTimeout(timer));
    if (next.done) return seen;
    seen.push(next.value);
    if (last(next.value)) return seen;
  }
}

/** Resolves with the next result of `sub`, or `"nothing"` when none comes within `ms`.
 * @param {import("convo").Subscription} sub */
const nextWithin = (sub, ms) =>
  Promise.race([sub.next(), new Promise((resolve) => setTimeout(() => resolve("nothing"), ms))]);

/** Whether `part` is `whole` with some members left out, in order. @param {unknown[]} part @param {unknown[]} whole */
const subsequence = (part, whole) => {
  let i = 0;
  for (const x of whole) if (i < part.length && part[i] === x) i++;
  return i === part.length;
};

/** Revisions rise, per session: only a draft or the deletion repeats its session's revision.
 * @param {import("convo").SessionChange[]} seen */
function assertRevisionOrder(seen) {
  for (let i = 1; i < seen.length; i++) {
    const [a, b] = [seen[i - 1], seen[i]];
    const same = b.revision === a.revision && (b.change === "draft" || b.change === "deleted");
    assert.ok(b.revision > a.revision || same, `revision order: ${JSON.stringify(seen)}`);
  }
}

test("subscribeSession and unsubscribeSession: the raw requests", async () => {
  const client = await start();
  try {
    const { subscription_id } = await client.subscribeSession({ session_id: "not-yet" });
    assert.equal(typeof subscription_id, "string");
    const all = await client.subscribeSession();
    assert.notEqual(all.subscription_id, subscription_id);
    assert.equal(await client.unsubscribeSession({ subscription_id }), null);
    await assert.rejects(client.unsubscribeSession({ subscription_id }), InvalidParamsError, "an unknown id is -32602");
    await assert.rejects(client.subscribeSession({ session_id: "a b" }), InvalidParamsError);
    await assert.rejects(client.subscribe({ session_id: "a b" }), InvalidParamsError);
  } finally {
    await client.dispose();
  }
});

test("a subscription sees the changes made through the same client, routed by subscription id", async () => {
  const client = await start();
  try {
    const sub = await client.subscribe({ session_id: "s" }); // s need not exist yet
    const other = await client.subscribe({ session_id: "other" });
    const all = await client.subscribe();
    assert.equal(typeof sub.id, "string");
    assert.equal(new Set([sub.id, other.id, all.id]).size, 3);

    const reading = readUntil(sub, (c) => c.change === "deleted");
    await client.createSession({ session_id: "s" });
    await client.addUser({ session_id: "s", text: "hi" });
    await client.addMessages({
      session_id: "s",
      messages: [
        { role: "assistant", content: "hello" },
        { role: "user", content: "bye" },
      ],
    });
    await client.updateSession({ session_id: "s", title: "t" });
    await client.clear({ session_id: "s" });
    const { revision } = await client.getSession({ session_id: "s" });
    await client.deleteSession({ session_id: "s" });
    await client.createSession({ session_id: "other" });
    const seen = await reading;

    assert.ok(seen.every((c) => c.subscription_id === sub.id && c.session_id === "s"), JSON.stringify(seen));
    assertRevisionOrder(seen);
    const kinds = ["created", "appended", "appended", "updated", "cleared", "deleted"];
    assert.ok(subsequence(seen.map((c) => c.change), kinds), JSON.stringify(seen));
    const last = /** @type {import("convo").SessionChange} */ (seen.at(-1));
    assert.equal(last.change, "deleted", "the last change is always told");
    assert.ok(last.revision >= revision);

    // The subscription of another session sees only its own.
    const [created] = await readUntil(other, () => true);
    assert.deepEqual(
      [created.subscription_id, created.session_id, created.change, created.revision, created.message_count],
      [other.id, "other", "created", 0, 0],
    );
    // The subscription of every session sees both, each in revision order.
    const everything = await readUntil(all, (c) => c.session_id === "other");
    assert.ok(everything.every((c) => c.subscription_id === all.id));
    assertRevisionOrder(everything.filter((c) => c.session_id === "s"));
    assert.equal(everything.filter((c) => c.session_id === "s").at(-1)?.change, "deleted");
  } finally {
    await client.dispose();
  }
});

test("two processes on one SQLite file: the changes of one reach the other's subscription in revision order, the last always", async () => {
  const store = sqlite();
  const [a, b] = await Promise.all([start({ store }), start({ store })]);
  assert.notEqual(a.pid, b.pid);
  try {
    const sub = await a.subscribe({ session_id: "shared" });
    const all = await a.subscribe();
    const reading = readUntil(sub, (c) => c.change === "updated");

    await b.createSession({ session_id: "shared" });
    const n = 30;
    for (let i = 0; i < n; i++) {
      await b.addUser({ session_id: "shared", text: `m${i}` });
      if (i % 10 === 0) await new Promise((r) => setTimeout(r, 120)); // some on their own, some in bursts
    }
    const { revision } = await b.updateSession({ session_id: "shared", title: "done" });
    await b.createSession({ session_id: "elsewhere" });

    const seen = await reading;
    assert.ok(seen.length >= 2, `changes arrive as they are made, not only the last: ${JSON.stringify(seen)}`);
    assert.ok(seen.every((c) => c.subscription_id === sub.id && c.session_id === "shared"));
    assertRevisionOrder(seen);
    assert.ok(subsequence([...new Set(seen.map((c) => c.change))], ["created", "appended", "updated"]), JSON.stringify(seen));
    const last = /** @type {import("convo").SessionChange} */ (seen.at(-1));
    assert.deepEqual([last.change, last.revision, last.message_count], ["updated", revision, n], "the last change is told");

    // The subscription to every session gets the other session too, and "shared" up to its last.
    const everything = await readUntil(all, (c) => c.session_id === "elsewhere");
    assert.deepEqual(everything.at(-1)?.change, "created");
    const shared = everything.filter((c) => c.session_id === "shared");
    assertRevisionOrder(shared);
    assert.equal(shared.at(-1)?.revision, revision);
  } finally {
    await Promise.all([a.dispose(), b.dispose()]);
  }
});

test("break, return() and abort unsubscribe: the changes stop, other subscriptions go on", async () => {
  const store = sqlite();
  const [a, b] = await Promise.all([start({ store }), start({ store })]);
  try {
    await b.createSession({ session_id: "s" });
    const stays = await a.subscribe({ session_id: "s" });
    const broken = await a.subscribe({ session_id: "s" });
    const returned = await a.subscribe({ session_id: "s" });
    const controller = new AbortController();
    const aborted = await a.subscribe({ session_id: "s" }, { signal: controller.signal });

    const { revision: first } = await b.addUser({ session_id: "s", text: "one" });
    for (const sub of [stays, broken, returned, aborted]) {
      const seen = await readUntil(sub, (c) => c.revision === first);
      assert.equal(seen.at(-1)?.change, "appended");
    }

    // break in for await calls return(), which sends session/unsubscribe.
    const { revision: second } = await b.addUser({ session_id: "s", text: "two" });
    for await (const change of broken) {
      assert.equal(change.revision, second);
      break;
    }
    for (const sub of [stays, returned, aborted]) await readUntil(sub, (c) => c.revision === second);
    // Aborting the signal ends a waiting next() (done) and unsubscribes.
    const waiting = aborted.next();
    controller.abort();
    assert.deepEqual(await waiting, { done: true, value: undefined });
    await Promise.all([returned.return(), returned.return()]); // once, however often it is called

    const { revision: last } = await b.addUser({ session_id: "s", text: "three" });
    assert.deepEqual(
      (await readUntil(stays, (c) => c.revision === last)).map((c) => c.revision),
      [last],
    );

    // convo has forgotten the three (unsubscribing again is -32602), and they yield nothing.
    await new Promise((r) => setTimeout(r, 300)); // the abort's unsubscribe is sent in the background
    for (const sub of [broken, returned, aborted]) {
      await assert.rejects(a.unsubscribeSession({ subscription_id: sub.id }), InvalidParamsError, sub.id);
      assert.deepEqual(await nextWithin(sub, 200), { done: true, value: undefined });
    }
    // The one left was told nothing more, and convo still knows it.
    assert.equal(await nextWithin(stays, 300), "nothing");
    assert.equal(await a.unsubscribeSession({ subscription_id: stays.id }), null);

    // A signal aborted before subscribe() is a CancelledError; Symbol.asyncDispose (what
    // `await using` calls at the end of its scope) unsubscribes too.
    await assert.rejects(a.subscribe({}, { signal: AbortSignal.abort() }), CancelledError);
    const scoped = await a.subscribe({ session_id: "s" });
    await scoped[Symbol.asyncDispose]();
    await assert.rejects(a.unsubscribeSession({ subscription_id: scoped.id }), InvalidParamsError);
  } finally {
    await Promise.all([a.dispose(), b.dispose()]);
  }
});

test("dispose() ends the subscriptions; convo exiting on its own rejects a waiting next()", async () => {
  const client = await start();
  const sub = await client.subscribe();
  await client.createSession({ session_id: "s" });
  const waiting = (async () => {
    const seen = [];
    for await (const change of sub) seen.push(change.change);
    return seen;
  })();
  await new Promise((r) => setTimeout(r, 50));
  await client.dispose();
  assert.deepEqual(await waiting, ["created"], "the changes read, then done");
  await assert.rejects(client.subscribe(), ConnectionClosedError);

  const crashing = await start();
  const crashed = await crashing.subscribe();
  const next = crashed.next();
  process.kill(/** @type {number} */ (crashing.pid), "SIGKILL");
  await assert.rejects(next, (e) => e instanceof ConnectionClosedError && /exited on SIGKILL/.test(e.message));
  assert.deepEqual(await crashed.next(), { done: true, value: undefined });
  await crashed.return(); // nothing to unsubscribe from: resolves
});

test("a waiting next() keeps the host process alive; a subscription nobody reads does not", async () => {
  const entry = new URL("../dist/index.js", import.meta.url).href;
  const run = promisify(execFile);
  const script = `
    import { ConvoClient } from ${JSON.stringify(entry)};
    const client = await ConvoClient.start({ binary: ${JSON.stringify(BINARY)}, store: "memory" });
    const idle = await client.subscribe(); // never read: must not hold the process
    const sub = await client.subscribe({ session_id: "s" });
    // An unreferenced timer fires only while something else keeps the event loop alive.
    setTimeout(() => client.createSession({ session_id: "s" }), 200).unref();
    const { value } = await sub.next();
    console.log(value.change);`;
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], { timeout: 10_000 });
  assert.equal(stdout.trim(), "created");
});

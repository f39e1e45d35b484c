// @ts-check
// Start, end and what is left behind: dispose leaves no process, neither does the host
// exiting (with or without dispose); stderr reaches the logger; start-up failures and a
// missing binary are clear errors (finding the binary: platforms.test.mjs).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import test from "node:test";
import { promisify } from "node:util";
import { ConnectionClosedError, ConvoClient } from "convo";
import { BINARY, alive, eventually, start } from "./helpers.mjs";

const run = promisify(execFile);
const entry = new URL("../dist/index.js", import.meta.url).href;

test("dispose() sends shutdown and exit, waits for the process, and leaves no child", async () => {
  const client = await start();
  const pid = /** @type {number} */ (client.pid);
  assert.ok(alive(pid));
  await client.createSession({ session_id: "s" });
  await Promise.all([client.dispose(), client.dispose()]);
  assert.deepEqual(await client.exited, { code: 0, signal: null }, "exit after shutdown is code 0");
  assert.equal(alive(pid), false);
  await assert.rejects(client.getSession({ session_id: "s" }), (e) => e instanceof ConnectionClosedError && /disposed/.test(e.message));
});

test("Symbol.asyncDispose ends it the same way (await using)", async () => {
  const client = await start();
  const pid = /** @type {number} */ (client.pid);
  await client[Symbol.asyncDispose]();
  assert.equal(alive(pid), false);
  assert.equal((await client.exited).code, 0);
});

test("dispose() waits for what is in flight", async () => {
  const client = await start();
  await client.createSession({ session_id: "s" });
  const writes = Array.from({ length: 100 }, (_, i) => client.addUser({ session_id: "s", text: `m${i}` }));
  await client.dispose();
  assert.equal((await Promise.all(writes)).at(-1)?.revision, 100);
});

test("the child is killed when the host process exits, and a host that never disposes still exits", async () => {
  for (const ending of ["process.exit(0)", "/* nothing: the event loop empties */"]) {
    const script = `
      import { ConvoClient } from ${JSON.stringify(entry)};
      const client = await ConvoClient.start({ binary: ${JSON.stringify(BINARY)}, store: "memory" });
      await client.createSession({});
      console.log(client.pid);
      ${ending}`;
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], { timeout: 10_000 });
    const pid = Number(stdout.trim());
    assert.ok(pid > 0);
    await eventually(() => !alive(pid));
  }
});

test("stderr lines go to the logger", async () => {
  const client = await start({ args: ["--log-level", "debug"] });
  await client.listSessions();
  await client.dispose();
  assert.ok(client.lines.some((l) => l.includes("DEBUG")), client.lines.join("\n"));
});

test("a store that cannot be opened fails start() with convo's own message", async () => {
  await assert.rejects(
    ConvoClient.start({ binary: BINARY, store: "sqlite:/nonexistent/folder/db.sqlite", logger: null }),
    (e) => e instanceof ConnectionClosedError && /exited with code 1/.test(e.message) && /cannot open the store/.test(e.message),
  );
});

test("a binary that is not there fails start() saying so", async () => {
  await assert.rejects(
    ConvoClient.start({ binary: "/nonexistent/convo", logger: null }),
    (e) => e instanceof ConnectionClosedError && /could not be started: spawn \/nonexistent\/convo ENOENT/.test(e.message),
  );
});


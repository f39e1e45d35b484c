// @ts-check
// The host runtime (run, json, stream) and cancellation through AbortSignal.
import assert from "node:assert/strict";
import test from "node:test";
import { CancelledError } from "convo";
import { deferred, start } from "./helpers.mjs";

test("run: the handler gets the history, the new message and the provider payload", async () => {
  /** @type {import("convo").RuntimeRequest[]} */
  const asked = [];
  const client = await start({
    runtime: {
      format: "openai_chat",
      run(req) {
        asked.push(req);
        return { text: null, tool_calls: [{ id: "t1", name: "ls", arguments: "{}" }], usage: { input_tokens: 9 }, stop_reason: "tool_use" };
      },
    },
  });
  await client.createSession({ session_id: "s", system: "Be brief." });
  await client.addUser({ session_id: "s", text: "earlier" });
  await client.addAssistant({ session_id: "s", text: "ok" });
  const run = await client.run({ session_id: "s", input: "List.", temperature: 0, max_tokens: 5, metadata: { turn: 2 } });
  assert.deepEqual(run.tool_calls, [{ id: "t1", name: "ls", arguments: "{}" }]);
  const [req] = asked;
  assert.deepEqual(
    [req.session_id, req.purpose, req.system, req.temperature, req.max_tokens, req.metadata],
    ["s", "run", "Be brief.", 0, 5, { turn: 2 }],
  );
  assert.deepEqual(req.messages.map((m) => m.content), ["earlier", "ok", "List."]);
  assert.equal(/** @type {any} */ (req.payload).messages[0].role, "system");
  const { messages } = await client.history({ session_id: "s", repair: false });
  assert.deepEqual(messages.at(-1)?.metadata, { usage: { input_tokens: 9 }, stop_reason: "tool_use" });
  await client.dispose();
});

test("json: response_format carries the schema; value is the parsed answer", async () => {
  const client = await start({
    runtime: (req) => {
      assert.equal(req.purpose, "json");
      assert.deepEqual(req.response_format?.type, "json_schema");
      return { text: JSON.stringify({ city: "Paris", population: 2102650 }) };
    },
  });
  await client.createSession({ session_id: "s" });
  /** @type {{value: {city: string}}} */
  const { value } = await client.json({
    session_id: "s",
    input: "Capital of France?",
    schema: { type: "object", required: ["city"], properties: { city: { type: "string" } } },
  });
  assert.equal(value.city, "Paris");
  await client.dispose();
});

test("stream: each chunk is a runtime/delta, the draft grows, the return value is stored", async () => {
  const step = deferred();
  /** @type {import("convo").ConvoClient} */
  let client;
  client = await start({
    runtime: {
      async *stream(req) {
        assert.ok(req.stream_id);
        yield "Hel";
        yield { text: "lo" };
        await step.promise; // the test reads the draft meanwhile
        return { text: "Hello!", model: "m-1" };
      },
    },
  });
  await client.createSession({ session_id: "s" });
  const streamed = client.stream({ session_id: "s", input: "Greet me." });
  /** @type {import("convo").History["draft"]} */
  let draft = null;
  for (let i = 0; i < 100 && draft?.messages[1].content !== "Hello"; i++) {
    await new Promise((r) => setTimeout(r, 20));
    draft = (await client.history({ session_id: "s", include_draft: true })).draft;
  }
  assert.deepEqual(draft?.messages.map((m) => m.content), ["Greet me.", "Hello"], "the deltas reached convo");
  step.resolve(undefined);
  assert.equal((await streamed).text, "Hello!");
  const { messages } = await client.history({ session_id: "s" });
  assert.deepEqual(messages.map((m) => m.content), ["Greet me.", "Hello!"], "the final answer is stored, not the deltas");
  assert.deepEqual(messages[1].metadata, { model: "m-1" });
  await client.dispose();
});

test("stream without a return value stores the chunks joined; run alone also answers stream", async () => {
  const generator = await start({
    runtime: {
      async *stream() {
        yield "a";
        yield "b";
      },
    },
  });
  await generator.createSession({ session_id: "s" });
  assert.equal((await generator.stream({ session_id: "s", input: "?" })).text, "ab");
  assert.equal((await generator.run({ session_id: "s", input: "?" })).text, "ab", "run answered by the stream handler");
  await generator.dispose();

  const plain = await start({ runtime: () => ({ text: "whole" }) });
  await plain.createSession({ session_id: "s" });
  assert.equal((await plain.stream({ session_id: "s", input: "?" })).text, "whole");
  await plain.dispose();
});

test("AbortSignal: $/cancelRequest ends a run waiting for the host, and convo cancels its runtime request", async () => {
  const asked = deferred();
  const hostCancelled = deferred();
  const client = await start({
    runtime: async (_req, { signal }) => {
      asked.resolve(undefined);
      await new Promise((r) => signal.addEventListener("abort", r));
      hostCancelled.resolve(undefined);
      return { text: "too late" };
    },
  });
  await client.createSession({ session_id: "s" });
  const controller = new AbortController();
  const run = client.run({ session_id: "s", input: "hi" }, { signal: controller.signal });
  await asked.promise;
  controller.abort();
  await assert.rejects(run, (e) => e instanceof CancelledError && e.code === -32800 && e.kind === "request_cancelled");
  await hostCancelled.promise; // convo sent $/cancelRequest for runtime/run: the handler's signal fired
  assert.equal((await client.getSession({ session_id: "s" })).message_count, 0, "nothing appended");

  const aborted = AbortSignal.abort();
  await assert.rejects(client.getSession({ session_id: "s" }, { signal: aborted }), CancelledError, "aborted before sending");
  await client.dispose();
});

test("AbortSignal on a stream keeps what was said: data.message_ids, partial metadata", async () => {
  const said = deferred();
  const client = await start({
    runtime: {
      async *stream(_req, { signal }) {
        yield "Partial ans";
        said.resolve(undefined);
        await new Promise((r) => signal.addEventListener("abort", r));
      },
    },
  });
  await client.createSession({ session_id: "s" });
  const controller = new AbortController();
  const stream = client.stream({ session_id: "s", input: "Tell me." }, { signal: controller.signal });
  await said.promise;
  await new Promise((r) => setTimeout(r, 100));
  controller.abort();
  /** @type {CancelledError | undefined} */
  let error;
  await assert.rejects(stream, (e) => ((error = /** @type {CancelledError} */ (e)), e instanceof CancelledError));
  assert.equal(error?.data.message_ids.length, 2);
  const { messages } = await client.history({ session_id: "s" });
  assert.deepEqual(messages.map((m) => m.id), error?.data.message_ids);
  assert.deepEqual(messages[1].content, "Partial ans");
  assert.deepEqual(messages[1].metadata, { partial: true, reason: "cancelled" });
  await client.dispose();
});

test("pipelined: hundreds of calls in flight, in order per session, while a run waits for the host", async () => {
  const release = deferred();
  const client = await start({ runtime: async () => (await release.promise, { text: "done" }) });
  await client.createSession({ session_id: "slow" });
  const run = client.run({ session_id: "slow", input: "take your time" });

  await client.createSession({ session_id: "s" });
  const adds = await Promise.all(Array.from({ length: 300 }, (_, i) => client.addUser({ session_id: "s", text: `m${i}` })));
  assert.deepEqual(adds.map((a) => a.index), adds.map((_, i) => i), "one session's requests apply in the order sent");
  assert.deepEqual(adds.map((a) => a.revision), adds.map((_, i) => i + 1));
  const sessions = await Promise.all(Array.from({ length: 50 }, (_, i) => client.createSession({ session_id: `p${i}` })));
  const written = await Promise.all(sessions.map((s) => client.addUser({ session_id: s.session_id, text: "x" })));
  assert.ok(written.every((w) => w.revision === 1));

  release.resolve(undefined);
  assert.equal((await run).text, "done");
  await client.dispose();
});

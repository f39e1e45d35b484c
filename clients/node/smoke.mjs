// @ts-check
// What a host does with the installed package, as the README shows it: test.sh copies this
// into a fresh project where the packed `convo` and its platform package (`@convo/linux-x64-gnu`;
// with CONVO_LIBC=musl, `@convo/linux-x64-musl`) were installed offline, and runs it there
// with no CONVO_BINARY, so the binary comes from the platform package of this machine.
import assert from "node:assert/strict";
import { realpathSync } from "node:fs";
import { ConvoClient, InvalidSequenceError, binaryPath, currentTarget, packageName, resolveBinary } from "convo";

const target = currentTarget();
assert.ok(target, `convo has a platform package for ${process.platform}-${process.arch}`);
const binary = realpathSync(resolveBinary());
const expected = realpathSync(new URL(`node_modules/${packageName(target)}/${binaryPath(target)}`, import.meta.url));
assert.equal(binary, expected, `the binary comes from ${packageName(target)}`);

const client = await ConvoClient.start({
  store: "memory",
  // The model: here a stand-in that answers every question with "4".
  runtime: {
    run: () => ({ text: "4", usage: { input_tokens: 12, output_tokens: 1 } }),
    async *stream() {
      yield "fo";
      yield "ur";
    },
  },
});
console.log(`${client.info.server_info.name} ${client.info.server_info.version} from ${binary}`);

const { session_id } = await client.createSession({ system: "You are terse." });
await client.addUser({ session_id, text: "List the files." });
await client.addAssistant({ session_id, tool_calls: [{ id: "call_1", name: "ls", arguments: {} }] });

// The host crashed before the tool ran? history() still hands out a valid transcript.
const { messages, repaired } = await client.history({ session_id });
assert.equal(repaired, 1);
assert.equal(messages.at(-1)?.tool_call_id, "call_1");

try {
  await client.addToolResult({ session_id, tool_call_id: "nope", content: "x" });
  assert.fail("an unknown tool call id is refused");
} catch (e) {
  if (!(e instanceof InvalidSequenceError)) throw e;
  console.log(`${e.name} ${e.code} (${e.kind}): ${e.data.reason}`);
  assert.equal(e.data.reason, "unknown_tool_call_id");
}

const run = await client.run({ session_id, input: "What is 2 + 2?", temperature: 0 });
assert.equal(run.text, "4");
const streamed = await client.stream({ session_id, input: "And spelled out?" });
assert.equal(streamed.text, "four");
console.log(`run: ${run.text}, stream: ${streamed.text}, revision ${streamed.revision}`);

// A provider's whole response (here a Chat Completions one), kept as it came, usage summed.
const message = { role: "assistant", content: null, tool_calls: [{ id: "call_2", type: "function", function: { name: "ls", arguments: "{}" } }] };
const { tool_call_ids } = await client.addResponse({
  session_id,
  format: "openai_chat",
  response: { id: "chatcmpl-1", object: "chat.completion", model: "gpt-4o-mini", choices: [{ index: 0, message, finish_reason: "tool_calls" }], usage: { prompt_tokens: 30, completion_tokens: 5 } },
});
assert.deepEqual(tool_call_ids, ["call_2"]);
await client.addToolResult({ session_id, tool_call_id: "call_2", content: "README.md" });
const { payload } = await client.export({ session_id, format: "openai_chat" });
assert.equal(JSON.stringify(/** @type {unknown[]} */ (payload.messages).at(-2)), JSON.stringify(message), "replayed as it came");
const { usage } = await client.getSession({ session_id });
console.log(`addResponse: ${tool_call_ids.join(", ")}; usage ${usage.input_tokens} in, ${usage.output_tokens} out`);

// Watching: the changes of the session, as an async iterator; break unsubscribes.
const sub = await client.subscribe({ session_id });
const { revision } = await client.updateSession({ session_id, title: "smoke" });
for await (const change of sub) {
  assert.deepEqual([change.session_id, change.change, change.revision], [session_id, "updated", revision]);
  console.log(`subscribe: ${change.change} at revision ${change.revision}`);
  break;
}

const pid = /** @type {number} */ (client.pid);
await client.dispose();
assert.throws(() => process.kill(pid, 0), { code: "ESRCH" }, "no convo process is left");
console.log("smoke: ok");

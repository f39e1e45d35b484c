// Spawns convo and talks to it over the child's stdio with vscode-jsonrpc (LSP framing),
// the way an editor plugin or a Node agent host would. It checks what it prints, so the
// test suite runs it: `node example.mjs [path/to/convo]`.
import { spawn } from "node:child_process";
import assert from "node:assert/strict";
import { createMessageConnection, StreamMessageReader, StreamMessageWriter } from "vscode-jsonrpc/node";

const binary = process.argv[2] ?? new URL("../../target/release/convo", import.meta.url).pathname;
const child = spawn(binary, ["--store", "memory"], { stdio: ["pipe", "pipe", "inherit"] });
const rpc = createMessageConnection(new StreamMessageReader(child.stdout), new StreamMessageWriter(child.stdin));
rpc.listen();

// The host runtime (see below) wants provider-ready request bodies, in OpenAI's format.
const init = await rpc.sendRequest("initialize", { runtime: { format: "openai_chat" } });
console.log(`${init.server_info.name} ${init.server_info.version}, ${init.capabilities.framing} framing`);

const { session_id } = await rpc.sendRequest("session/create", { system: "You are terse." });
await rpc.sendRequest("session/add_user", { session_id, text: "List the files." });
await rpc.sendRequest("session/add_assistant", {
  session_id,
  text: null,
  tool_calls: [{ id: "call_1", type: "function", function: { name: "ls", arguments: "{}" } }],
});

// The host crashed before the tool ran? history() still hands out a valid transcript.
const { messages, repaired } = await rpc.sendRequest("session/history", { session_id });
console.log(`${messages.length} messages, ${repaired} repaired:`, messages.at(-1).content);
assert.equal(repaired, 1);
assert.equal(messages.at(-1).tool_call_id, "call_1");

// Errors arrive as ResponseError with the spec's code and data.
await assert.rejects(rpc.sendRequest("session/add_tool_result", { session_id, tool_call_id: "nope", content: "x" }), (e) => {
  console.log(`error ${e.code}: ${e.data.reason}`);
  return e.code === 1004 && e.data.reason === "unknown_tool_call_id";
});

// The host runtime: this process owns the model, convo owns the conversation. For
// session/run convo asks the host with a server → client request, `runtime/run` (id
// "convo:<n>"), then stores the user message and the answer in one step.
const input = "What is 2 + 2?";
const usage = { input_tokens: 14, output_tokens: 1 };
rpc.onRequest("runtime/run", (params) => {
  assert.equal(params.purpose, "run");
  assert.equal(params.system, "You are terse.");
  assert.equal(params.temperature, 0, "0 is passed as 0");
  const last = params.messages.at(-1);
  assert.deepEqual([last.role, last.content], ["user", input]);
  // What a provider SDK takes as is: here an OpenAI chat body, as initialize asked.
  assert.equal(params.payload.messages.at(-1).content, input);
  return { text: "4", usage, model: "example-model" };
});
const chat = await rpc.sendRequest("session/create", { system: "You are terse." });
const run = await rpc.sendRequest("session/run", { session_id: chat.session_id, input, temperature: 0 });
console.log(`run: ${JSON.stringify(run.text)}, revision ${run.revision}`);
assert.equal(run.text, "4");
assert.equal(run.tool_calls, null);
assert.deepEqual(run.usage, usage);
assert.equal(run.revision, 1);
const after = await rpc.sendRequest("session/history", { session_id: chat.session_id });
assert.deepEqual(
  after.messages.map((m) => [m.role, m.content]),
  [
    ["user", input],
    ["assistant", "4"],
  ],
);
assert.deepEqual(after.messages.map((m) => m.id), run.message_ids);
assert.deepEqual(after.messages[1].metadata, { usage, model: "example-model" });

await rpc.sendRequest("shutdown");
await rpc.sendNotification("exit");
const code = await new Promise((resolve) => child.on("exit", resolve));
assert.equal(code, 0);
console.log("convo exited with", code);
rpc.dispose();

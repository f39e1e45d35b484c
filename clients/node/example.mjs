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

const init = await rpc.sendRequest("initialize", {});
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

await rpc.sendRequest("shutdown");
await rpc.sendNotification("exit");
const code = await new Promise((resolve) => child.on("exit", resolve));
assert.equal(code, 0);
console.log("convo exited with", code);
rpc.dispose();

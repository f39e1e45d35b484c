// Baseline 2: what a Node host does today: sessions in arrays, vscode-jsonrpc on stdio
// (LSP framing). The methods and params are convo's, so one load generator measures both.
import { createMessageConnection, StreamMessageReader, StreamMessageWriter } from "vscode-jsonrpc/node";

const sessions = new Map();
const conn = createMessageConnection(new StreamMessageReader(process.stdin), new StreamMessageWriter(process.stdout));
const get = (id) => {
  const s = sessions.get(id);
  if (!s) throw new Error(`no session ${id}`);
  return s;
};
const push = (p, message) => {
  const s = get(p.session_id);
  s.messages.push({ created_at: new Date().toISOString(), ...message });
  return { index: s.messages.length - 1 };
};

conn.onRequest("initialize", () => ({ server_info: { name: "node-baseline" } }));
conn.onRequest("shutdown", () => null);
conn.onNotification("exit", () => process.exit(0));
conn.onRequest("session/create", (p) => {
  sessions.set(p.session_id, { system: p.system ?? null, messages: [] });
  return { session_id: p.session_id };
});
conn.onRequest("session/add_user", (p) => push(p, { role: "user", content: p.text, images: p.images ?? null }));
conn.onRequest("session/add_assistant", (p) =>
  push(p, { role: "assistant", content: p.text ?? null, tool_calls: p.tool_calls ?? null }),
);
conn.onRequest("session/add_tool_result", (p) =>
  push(p, { role: "tool", content: p.content, tool_call_id: p.tool_call_id }),
);
conn.onRequest("session/history", (p) => ({ messages: get(p.session_id).messages }));
conn.onRequest("session/trim", (p) => {
  const s = get(p.session_id);
  const starts = s.messages.flatMap((m, i) => (m.role === "user" ? [i] : []));
  if (starts.length <= p.max_turns) return { removed: 0 };
  const cut = p.max_turns === 0 ? s.messages.length : starts[starts.length - p.max_turns];
  s.messages = s.messages.slice(cut);
  return { removed: cut };
});
conn.onRequest("session/fork", (p) => {
  const s = get(p.session_id);
  const id = p.new_session_id ?? `${p.session_id}-fork-${sessions.size}`;
  sessions.set(id, { system: s.system, messages: s.messages.slice() });
  return { session_id: id };
});
conn.onRequest("session/to_dict", (p) => ({ session_id: p.session_id, ...get(p.session_id) }));
conn.listen();

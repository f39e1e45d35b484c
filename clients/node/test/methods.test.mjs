// @ts-check
// Every method of the protocol through its client method, against the real binary.
import assert from "node:assert/strict";
import test from "node:test";
import { InvalidRequestError, METHOD_NAMES } from "convo";
import { start } from "./helpers.mjs";

test("every protocol method, through its client method", async () => {
  const client = await start({
    runtime: {
      format: "openai_chat",
      run: (req) => (req.purpose === "json" ? { text: '{"answer": 4}' } : { text: "4", usage: { output_tokens: 1 }, model: "m" }),
      async *stream() {
        yield "fo";
        yield "ur";
      },
    },
  });
  const seen = new Set();
  const request = client.request.bind(client);
  client.request = /** @type {typeof client.request} */ ((method, params, options) => (seen.add(method), request(method, params, options)));

  const info = await client.initialize();
  assert.equal(info.server_info.name, "convo");
  assert.equal(info.capabilities.framing, "lsp");
  assert.ok(info.capabilities.formats.includes("openai_responses"));
  assert.deepEqual([...info.capabilities.methods].sort(), [...METHOD_NAMES].sort(), "the server registers what the document lists");
  assert.deepEqual(client.info, info);

  const session_id = "demo";
  const created = await client.createSession({ session_id, system: "Be brief.", cwd: "/tmp" });
  assert.deepEqual([created.session_id, created.revision, created.forked_from], [session_id, 0, null]);
  assert.equal((await client.getSession({ session_id })).system, "Be brief.");
  const updated = await client.updateSession({ session_id, title: "Files", cwd: null, expected_revision: 0 });
  assert.deepEqual([updated.title, updated.cwd, updated.revision], ["Files", null, 1]);

  assert.deepEqual(
    { ...(await client.addUser({ session_id, text: "List the files." })), message_id: "" },
    { message_id: "", index: 0, revision: 2 },
  );
  const calls = [
    { id: "c1", name: "ls", arguments: { path: "." } },
    { id: "c2", name: "cat", arguments: { path: "README.md" } },
  ];
  assert.equal((await client.addAssistant({ session_id, text: null, tool_calls: calls })).index, 1);
  assert.equal((await client.addToolResult({ session_id, tool_call_id: "c2", content: "# demo" })).index, 2);
  const repaired = await client.history({ session_id });
  assert.equal(repaired.repaired, 1, "c1 is answered as cancelled in the view");
  assert.deepEqual(repaired.messages.at(-1)?.metadata, { synthetic: true });
  assert.equal((await client.history({ session_id, repair: false, offset: 1, limit: 1 })).messages[0].tool_calls?.length, 2);

  await client.addMessage({ session_id, message: { role: "user", content: [{ type: "text", text: "Thanks." }] } });
  const many = await client.addMessages({
    session_id,
    messages: [
      { role: "assistant", content: "You are welcome." },
      { role: "user", content: "Bye." },
    ],
  });
  assert.equal(many.message_ids.length, 2);
  const response = {
    id: "chatcmpl-1",
    object: /** @type {const} */ ("chat.completion"),
    model: "gpt-4o-mini",
    choices: [{ index: 0, message: { role: "assistant", content: "Bye!" }, finish_reason: "stop" }],
    usage: { prompt_tokens: 30, completion_tokens: 2 },
  };
  const answered = await client.addResponse({ session_id, format: "openai_chat", response });
  assert.deepEqual([answered.index, answered.tool_call_ids], [7, []], "after c1's cancelled result, stored by addMessage");
  const [stored] = (await client.history({ session_id, offset: 7 })).messages;
  assert.deepEqual([stored.content, stored.native?.body, stored.metadata], ["Bye!", response.choices[0].message, { response_id: "chatcmpl-1", stop_reason: "stop" }]);
  assert.deepEqual((await client.getSession({ session_id })).usage, {
    input_tokens: 30,
    output_tokens: 2,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    reasoning_tokens: 0,
  });

  const fork = await client.fork({ session_id, new_session_id: "demo-alt" });
  assert.equal(fork.forked_from?.session_id, session_id);
  const page = await client.listSessions({ limit: 1 });
  assert.equal(page.sessions.length, 1);
  assert.equal((await client.listSessions({ cursor: page.next_cursor ?? "" })).sessions.length, 1);

  const exported = await client.export({ session_id, format: "anthropic_messages" });
  assert.ok(Array.isArray(exported.payload.messages));
  assert.deepEqual((await client.validate({ session_id, format: "openai_chat" })).violations, []);
  const { tokens } = await client.countTokens({ session_id });
  assert.ok(tokens > 0);

  const byTokens = await client.trim({ session_id: "demo-alt", max_tokens: 1 });
  assert.equal(byTokens.fits, false, "the last turn is never dropped");
  const byTurns = await client.trim({ session_id, max_turns: 1 });
  assert.ok(byTurns.removed > 0);

  const dict = await client.toDict({ session_id });
  const imported = await client.fromDict({ data: { ...dict, session_id: "copy" } });
  assert.deepEqual([imported.session_id, imported.message_count, imported.repaired], ["copy", dict.messages.length, { added: 0, dropped: 0 }]);
  const body = (await client.export({ session_id: "copy", format: "gemini_contents" })).payload;
  const back = await client.fromDict({ data: body, format: "gemini_contents", session_id: "from-body" });
  assert.equal(back.session_id, "from-body");
  assert.deepEqual((await client.export({ session_id: "from-body", format: "gemini_contents" })).payload, body);
  const first = /** @type {string} */ (dict.messages[0]?.id);
  const png = Buffer.from("\x89PNG\r\n\x1a\nabc", "latin1").toString("base64");
  await client.addUser({ session_id: "copy", text: "pic", images: [png] });
  const byRef = await client.history({ session_id: "copy", images: "ref", offset: dict.messages.length });
  const shown = /** @type {{ref: string}} */ (byRef.messages[0]?.images?.[0]);
  assert.deepEqual(await client.image({ ref: shown.ref }), { data: png, media_type: "image/png" });
  await client.addAssistant({ session_id: "copy", text: "extra Zephyrs here" });
  const found = await client.search({ query: "zephyr*", session_id: "copy", limit: 1 });
  assert.deepEqual([found.hits.length, found.hits[0]?.role, found.hits[0]?.snippet], [1, "assistant", "extra [Zephyrs] here"]);
  assert.equal(found.next_cursor, null);
  const rewound = await client.rewind({ session_id: "copy", to_message_id: first, archive: true });
  assert.deepEqual([rewound.removed, rewound.revision], [dict.messages.length + 1, 3]);
  assert.equal((await client.getSession({ session_id: rewound.archived_session_id ?? "" })).message_count, dict.messages.length + 2);
  const compacted = await client.compact({ session_id: rewound.archived_session_id ?? "", keep_turns: 1, summary: "earlier" });
  assert.ok(compacted.removed > 0 && compacted.summary_message_id !== null);
  const popped = await client.pop({ session_id: rewound.archived_session_id ?? "", expected_revision: compacted.revision });
  assert.deepEqual([popped.message?.content, popped.revision], ["extra Zephyrs here", compacted.revision + 1]);
  assert.deepEqual(await client.clear({ session_id: "copy" }), { removed: 1, revision: 4 });
  assert.deepEqual(await client.deleteSession({ session_id: "copy" }), { deleted: true });
  await client.createSession({ session_id: "gone" });
  assert.equal((await client.listSessions({ updated_before: "2000-01-01T00:00:00Z" })).sessions.length, 0);
  assert.deepEqual(await client.deleteSessions({ session_ids: ["gone", "ghost"] }), { deleted: 1 });

  const run = await client.run({ session_id, input: "2 + 2?", temperature: 0 });
  assert.deepEqual([run.text, run.tool_calls, run.usage], ["4", null, { output_tokens: 1 }]);
  const json = await client.json({ session_id, input: "2 + 2 as JSON?", schema: { type: "object", required: ["answer"] } });
  assert.deepEqual(json.value, { answer: 4 });
  const streamed = await client.stream({ session_id, input: "2 + 2, slowly?" });
  assert.equal(streamed.text, "four");

  // subscribe() sends session/subscribe and, once its loop ends, session/unsubscribe.
  const sub = await client.subscribe({ session_id });
  const raw = await client.subscribeSession();
  assert.notEqual(raw.subscription_id, sub.id);
  const watched = await client.updateSession({ session_id, title: "Watched" });
  for await (const change of sub) {
    const { subscription_id, change: kind, revision, message_count } = change;
    assert.deepEqual([subscription_id, change.session_id, kind, revision], [sub.id, session_id, "updated", watched.revision]);
    assert.equal(message_count, watched.message_count);
    break;
  }
  assert.equal(await client.unsubscribeSession(raw), null);

  assert.equal(await client.shutdown(), null);
  await assert.rejects(client.getSession({ session_id }), InvalidRequestError, "requests after shutdown are -32600");

  assert.deepEqual([...seen].sort(), [...METHOD_NAMES].sort(), "every method was called");
  await client.dispose();
  assert.deepEqual(await client.exited, { code: 0, signal: null });
});

test("addToolResult with images: exported inside the tool_result where the format carries them", async () => {
  const client = await start();
  const session_id = "screen";
  await client.createSession({ session_id });
  await client.addUser({ session_id, text: "Take a screenshot." });
  await client.addAssistant({ session_id, text: null, tool_calls: [{ id: "c1", name: "screenshot", arguments: {} }, { id: "c2", name: "screenshot", arguments: {} }] });
  // A 1×1 PNG.
  const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
  await client.addToolResult({ session_id, tool_call_id: "c1", content: "the screen", images: [png] });
  // The same image again, by the ref the store shows it as.
  const stored = (await client.history({ session_id, images: "ref" })).messages[2];
  const ref = /** @type {{ref: string}} */ (stored?.images?.[0]);
  await client.addToolResult({ session_id, tool_call_id: "c2", content: "again", images: [{ ref: ref.ref }] });

  const { payload, warnings } = await client.export({ session_id, format: "anthropic_messages" });
  assert.deepEqual(warnings, []);
  const image = { type: "image", source: { type: "base64", media_type: "image/png", data: png } };
  assert.deepEqual(/** @type {any} */ (payload).messages[2].content, [
    { type: "tool_result", tool_use_id: "c1", content: [{ type: "text", text: "the screen" }, image] },
    { type: "tool_result", tool_use_id: "c2", content: [{ type: "text", text: "again" }, image] },
  ]);
  const chat = await client.export({ session_id, format: "openai_chat" });
  assert.deepEqual(chat.warnings.map((w) => w.index), [2, 3], "Chat Completions leaves them out, with a warning naming the call");
  assert.match(chat.warnings[0]?.message ?? "", /"c1"/);
  await client.dispose();
});

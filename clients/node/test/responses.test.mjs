// @ts-check
// A provider's whole response object (spec section 13): addResponse with the responses of
// test/fixtures/providers, exported back in the same format as they came, usage summed,
// the body options, the runtime's `{format, response}` answer, and what is refused.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import test from "node:test";
import { InvalidParamsError, RevisionConflictError, RuntimeFailedError } from "convo";
import { start } from "./helpers.mjs";

const FIXTURES = new URL("./fixtures/providers/", import.meta.url);
/** The repository's originals, of which test/fixtures/providers holds copies. */
const ORIGINALS = new URL("../../../tests/fixtures/providers/", import.meta.url);

/** @param {string} name */
const text = (name) => readFileSync(new URL(`${name}.json`, FIXTURES), "utf8");

/**
 * A fixture, typed as the response of its format (as an SDK's type would be).
 * @template {import("convo").Format} F
 * @param {F} _format @param {string} name
 * @returns {import("convo").ProviderResponses[F]}
 */
const fixture = (_format, name) => JSON.parse(text(name));

/** Byte for byte, member order and all: what JSON.stringify makes of both. */
const same = (/** @type {unknown} */ actual, /** @type {unknown} */ expected, /** @type {string} */ what) =>
  assert.equal(JSON.stringify(actual), JSON.stringify(expected), what);

/** Each response of a fixture, normalised as protocol/README.md's table says. */
const USAGE = {
  anthropic_thinking_tool_use: { input_tokens: 38 + 1912 + 0, output_tokens: 214, cache_read_tokens: 0, cache_write_tokens: 1912, reasoning_tokens: 131 },
  openai_responses_reasoning_calls: { input_tokens: 412, output_tokens: 238, cache_read_tokens: 0, cache_write_tokens: 0, reasoning_tokens: 164 },
  openai_chat_tool_calls: { input_tokens: 187, output_tokens: 56, cache_read_tokens: 0, cache_write_tokens: null, reasoning_tokens: 0 },
  gemini_thought_signatures: { input_tokens: 5210, output_tokens: 96 + 412, cache_read_tokens: 4096, cache_write_tokens: null, reasoning_tokens: 412 },
  gemini_interactions_thought_calls: { input_tokens: 96, output_tokens: 58 + 212, cache_read_tokens: 0, cache_write_tokens: null, reasoning_tokens: 212 },
};

test("the fixtures are copies of the repository's", { skip: !existsSync(ORIGINALS) && "no tests/fixtures/providers here" }, () => {
  for (const name of [
    "anthropic_thinking_tool_use",
    "anthropic_final_answer",
    "openai_responses_reasoning_calls",
    "gemini_final",
    "anthropic_compaction_iterations",
    "openai_responses_compacted",
    "gemini_interactions_thought_calls",
    "gemini_interactions_final",
    "gemini_interactions_failed",
    "openai_chat_content_filter",
  ]) {
    assert.equal(text(name), readFileSync(new URL(`${name}.json`, ORIGINALS), "utf8"), name);
  }
});

/**
 * Where each format's export holds an appended turn: the provider message (or the run of
 * Responses items) at `at` of the payload, and what of the response it must be, verbatim.
 * @type {{[F in import("convo").Format]: {turn(payload: any, at: number, count: number): unknown, body(response: any): unknown}}}
 */
const FORMATS = {
  anthropic_messages: { turn: (p, at) => p.messages[at], body: (r) => ({ role: "assistant", content: r.content }) },
  openai_responses: { turn: (p, at, count) => p.input.slice(at, at + count), body: (r) => r.output },
  openai_chat: { turn: (p, at) => p.messages[at], body: (r) => r.choices[0].message },
  gemini_contents: { turn: (p, at) => p.contents[at], body: (r) => r.candidates[0].content },
  gemini_interactions: { turn: (p, at, count) => p.input.slice(at, at + count), body: (r) => r.steps },
};

/** A tool loop per provider: the response with calls, the tool results, the final answer. */
const LOOPS = /** @type {const} */ ([
  ["anthropic_messages", "anthropic_thinking_tool_use", "anthropic_final_answer", ["toolu_01NRrZKi33evThhcqajiJafW", "toolu_01EbfuYLS2mb2ixXokwVJmU7"]],
  ["openai_responses", "openai_responses_reasoning_calls", "openai_responses_final", ["call_NMMoQkOVhAvFRMrYYMH4J2HD", "call_lUybIJbnarepQGqc34N5vUxx"]],
  ["openai_chat", "openai_chat_tool_calls", "deepseek_chat_reasoning_content", ["call_xNvnWeOXqz5VQYmSQt9a61m8", "call_QhPDZIse59W8BwS2Pg6KyS60"]],
  ["gemini_contents", "gemini_thought_signatures", "gemini_final", ["call_1", "call_2"]],
  ["gemini_interactions", "gemini_interactions_thought_calls", "gemini_interactions_final", ["isykdkwf", "obimjy3p"]],
]);

test("addResponse: each provider's tool loop, exported back in its format byte for byte", async () => {
  const client = await start();
  assert.deepEqual(client.info.capabilities.formats, ["openai_chat", "openai_responses", "anthropic_messages", "gemini_contents", "gemini_interactions"]);
  for (const [format, first, last, ids] of LOOPS) {
    const session_id = format;
    await client.createSession({ session_id, system: "You are a concise travel assistant." });
    await client.addUser({ session_id, text: "What should I pack for Paris and London tomorrow?" });
    const calls = fixture(format, first);
    const added = await client.addResponse({ session_id, format, response: calls, metadata: { trace_id: "t-1" } });
    assert.deepEqual({ ...added, message_id: "" }, { message_id: "", index: 1, revision: 2, tool_call_ids: ids }, format);
    for (const id of added.tool_call_ids) await client.addToolResult({ session_id, tool_call_id: id, content: `weather for ${id}` });
    const answer = fixture(format, last);
    const final = await client.addResponse({ session_id, format, response: answer });
    assert.deepEqual([final.index, final.revision], [4, 5], format);

    // The stored message: the turn as it came, its common form, its usage, its metadata.
    const [message] = (await client.history({ session_id, offset: 1, limit: 1 })).messages;
    const raw = /** @type {any} */ (calls);
    const native = {
      anthropic_messages: () => ({ format, model: raw.model, body: raw.content }),
      openai_responses: () => ({ format, model: raw.model, body: raw.output }),
      openai_chat: () => ({ format, model: raw.model, body: raw.choices[0].message }),
      gemini_contents: () => ({ format, model: raw.modelVersion, body: raw.candidates[0].content }),
      gemini_interactions: () => ({ format, model: raw.model, body: raw.steps }),
    }[format]();
    same(message.native, native, `${format}: native is the turn as it came`);
    assert.deepEqual(message.tool_calls?.map((c) => c.id), ids);
    assert.equal(message.metadata?.trace_id, "t-1");
    assert.equal(message.metadata?.response_id, raw.id ?? raw.responseId);
    assert.deepEqual(message.usage, USAGE[first], `${format}: usage normalised`);

    // Exported in the same format: both turns verbatim, nothing to warn about.
    const { payload, warnings } = await client.export({ session_id, format });
    assert.deepEqual(warnings, [], format);
    const offset = format === "openai_chat" ? 1 : 0; // the system message
    const { turn, body } = FORMATS[format];
    // Responses items and Interactions steps: the turn is a run of them, each result one.
    const flat = format === "openai_responses" || format === "gemini_interactions";
    const itemsOf = (/** @type {any} */ r) => (format === "openai_responses" ? r.output.length : format === "gemini_interactions" ? r.steps.length : 1);
    same(turn(payload, offset + 1, itemsOf(calls)), body(calls), `${format}: the turn with calls, as it came`);
    const after = flat ? offset + 1 + itemsOf(calls) + ids.length : format === "openai_chat" ? offset + 2 + ids.length : offset + 3;
    same(turn(payload, after, itemsOf(answer)), body(answer), `${format}: the final answer, as it came`);
  }
  await client.dispose();
});

test("usage: each response's on its message, their sum on the session; a fork starts at zero", async () => {
  const client = await start();
  const session_id = "sum";
  const info = await client.createSession({ session_id });
  assert.deepEqual(info.usage, { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0, reasoning_tokens: 0 });
  const appended = [];
  for (const [format, name] of /** @type {const} */ ([
    ["anthropic_messages", "anthropic_thinking_tool_use"],
    ["openai_responses", "openai_responses_reasoning_calls"],
    ["openai_chat", "openai_chat_tool_calls"],
    ["gemini_contents", "gemini_thought_signatures"],
    ["gemini_interactions", "gemini_interactions_thought_calls"],
  ])) {
    await client.addUser({ session_id, text: `ask ${format}` }); // moving on cancels the calls before
    await client.addResponse({ session_id, format, response: fixture(format, name) });
    appended.push(USAGE[name]);
  }
  await client.addAssistant({ session_id, text: "no usage of its own" });
  const sum = /** @type {import("convo").UsageTotals} */ ({});
  for (const key of /** @type {const} */ (["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens"])) {
    sum[key] = appended.reduce((total, usage) => total + (usage[key] ?? 0), 0);
  }
  const { usage, message_count } = await client.getSession({ session_id });
  assert.deepEqual(usage, sum, "the non-null members summed");
  assert.equal(message_count, 5 + 5 + 5 * 2 + 1, "users, responses, each response's two calls cancelled, the assistant");
  const { messages } = await client.history({ session_id, repair: false });
  assert.deepEqual(messages.filter((m) => m.usage).map((m) => m.usage), appended);
  assert.equal(messages.at(-1)?.usage, null);
  assert.equal(messages.at(-1)?.native, null);

  await client.trim({ session_id, max_turns: 1 });
  assert.deepEqual((await client.getSession({ session_id })).usage, sum, "trim does not lower what was spent");
  const fork = await client.fork({ session_id, new_session_id: "fork" });
  assert.deepEqual(fork.usage, info.usage, "a fork starts at zero");
  await client.dispose();
});

test("refused responses are -32602 and store nothing; expected_revision is 1003", async () => {
  const client = await start();
  const session_id = "s";
  await client.createSession({ session_id });
  await client.addUser({ session_id, text: "hi" });
  /** @type {[import("convo").Format, string, RegExp][]} */
  const refused = [
    ["openai_responses", "openai_responses_failed", /carries no assistant output \(its status is failed\); nothing was stored/],
    ["anthropic_messages", "anthropic_refusal_empty", /^invalid params: response:/],
    ["gemini_contents", "gemini_no_candidates", /^invalid params: response:/],
    ["openai_chat", "anthropic_final_answer", /expected a `chat.completion`/],
    ["gemini_interactions", "gemini_interactions_failed", /carries no assistant output \(its status is failed\); nothing was stored/],
    ["gemini_interactions", "anthropic_final_answer", /expected an Interaction/],
    ["openai_chat", "openai_chat_content_filter", /stopped by the content filter with no content\); nothing was stored/],
  ];
  for (const [format, name, message] of refused) {
    await assert.rejects(client.addResponse({ session_id, format, response: JSON.parse(text(name)) }), (e) => {
      assert.ok(e instanceof InvalidParamsError, `${name}: ${e}`);
      assert.deepEqual([e.code, e.kind], [-32602, "invalid_params"]);
      assert.match(e.message, message);
      return true;
    });
  }
  // Paired by type too: an Anthropic message is not a chat.completion.
  const message = fixture("anthropic_messages", "anthropic_final_answer");
  // @ts-expect-error: `openai_chat` takes a chat.completion
  await assert.rejects(client.addResponse({ session_id, format: "openai_chat", response: message }), InvalidParamsError);
  // @ts-expect-error: `gemini_interactions` takes an Interaction
  await assert.rejects(client.addResponse({ session_id, format: "gemini_interactions", response: message }), InvalidParamsError);
  const info = await client.getSession({ session_id });
  assert.deepEqual([info.message_count, info.revision, info.usage.input_tokens], [1, 1, 0], "nothing was stored");

  await assert.rejects(
    client.addResponse({ session_id, format: "anthropic_messages", response: message, expected_revision: 0 }),
    RevisionConflictError,
  );
  const added = await client.addResponse({ session_id, format: "anthropic_messages", response: message, expected_revision: 1 });
  assert.deepEqual([added.index, added.revision, added.tool_call_ids], [1, 2, []]);
  await client.dispose();
});

test("the body options: model, thinking and store on export, validate, countTokens and trim", async () => {
  const client = await start();
  const session_id = "claude";
  await client.createSession({ session_id, system: "Be brief." });
  await client.addUser({ session_id, text: "What should I pack?" });
  const { tool_call_ids } = await client.addResponse({
    session_id,
    format: "anthropic_messages",
    response: fixture("anthropic_messages", "anthropic_thinking_tool_use"),
  });
  for (const id of tool_call_ids) await client.addToolResult({ session_id, tool_call_id: id, content: "14 °C" });

  const format = "anthropic_messages";
  const dated = await client.export({ session_id, format, model: "claude-opus-4-6-20260101" });
  assert.deepEqual(dated.warnings, [], "the same model plus a date is replayed");
  const other = await client.export({ session_id, format, model: "claude-sonnet-4-5" });
  assert.match(other.warnings[0]?.message ?? "", /^built from the common form: .* "claude-opus-4-6", not "claude-sonnet-4-5"/);
  const content = (/** @type {any} */ e) => e.payload.messages[1].content.map((/** @type {{type: string}} */ b) => b.type);
  assert.deepEqual(content(other), ["text", "tool_use", "tool_use"]);
  const off = await client.export({ session_id, format, thinking: false });
  assert.deepEqual(content(off), ["text", "tool_use", "tool_use"]);
  assert.deepEqual(off.warnings, [{ index: 1, message: "thinking left out: `thinking` is false" }]);
  assert.deepEqual((await client.validate({ session_id, format, thinking: true })).violations, []);

  const all = await client.countTokens({ session_id, format });
  const without = await client.countTokens({ session_id, format, thinking: false });
  assert.ok(without.tokens < all.tokens, "the thinking block counts, when it is sent");
  assert.ok((await client.countTokens({ session_id, format: "openai_responses", model: "gpt-5" })).tokens > 0);
  const trimmed = await client.trim({ session_id, max_tokens: without.tokens, format, thinking: false });
  assert.deepEqual([trimmed.removed, trimmed.tokens, trimmed.fits], [0, without.tokens, true]);

  // A turn from Chat Completions has no thinking to replay: Anthropic with thinking on refuses it.
  await client.createSession({ session_id: "chat" });
  await client.addUser({ session_id: "chat", text: "What should I pack?" });
  const chat = await client.addResponse({ session_id: "chat", format: "openai_chat", response: fixture("openai_chat", "openai_chat_tool_calls") });
  for (const id of chat.tool_call_ids) await client.addToolResult({ session_id: "chat", tool_call_id: id, content: "14 °C" });
  const { violations } = await client.validate({ session_id: "chat", format, thinking: true });
  assert.deepEqual(violations.map((v) => [v.index, v.rule]), [[1, "thinking_required"]]);

  // Responses reasoning without encrypted_content cannot go back in a stateless request.
  await client.createSession({ session_id: "gpt" });
  await client.addUser({ session_id: "gpt", text: "Read my notes." });
  const gpt = await client.addResponse({
    session_id: "gpt",
    format: "openai_responses",
    response: fixture("openai_responses", "openai_responses_reasoning_no_encrypted"),
  });
  await client.addToolResult({ session_id: "gpt", tool_call_id: gpt.tool_call_ids[0], content: "bring a coat" });
  const stored = await client.export({ session_id: "gpt", format: "openai_responses" });
  assert.deepEqual(stored.warnings, []);
  const stateless = await client.export({ session_id: "gpt", format: "openai_responses", store: false });
  assert.match(stateless.warnings[0]?.message ?? "", /^reasoning left out: `store` is false/);
  const types = (/** @type {any} */ e) => e.payload.input.map((/** @type {{type: string}} */ i) => i.type);
  assert.deepEqual(types(stored), ["message", "reasoning", "function_call", "function_call_output"]);
  assert.deepEqual(types(stateless), ["message", "function_call", "function_call_output"]);
  const rules = (await client.validate({ session_id: "gpt", format: "openai_responses", store: false })).violations.map((v) => v.rule);
  assert.deepEqual(rules, ["reasoning_not_replayable"]);
  await client.dispose();
});

/** Type checks only (never called): what a runtime may answer. @param {import("convo").RuntimeAnswer} answer */
const runtimeAnswer = (answer) => answer;
void (() => {
  const chat = fixture("openai_chat", "openai_chat_tool_calls");
  runtimeAnswer({ text: "4", usage: { output_tokens: 1 } });
  runtimeAnswer({ format: "openai_chat", response: chat });
  // @ts-expect-error: format and response are paired
  runtimeAnswer({ format: "anthropic_messages", response: chat });
  // @ts-expect-error: text, or a whole response, not both
  runtimeAnswer({ text: "4", format: "openai_chat", response: chat });
});

test("runtime: a {format, response} answer is stored as addResponse stores it", async () => {
  /** @type {import("convo").RuntimeRequest[]} */
  const asked = [];
  const client = await start({
    runtime: {
      format: "openai_responses",
      run(req) {
        asked.push(req);
        if (req.metadata?.fail) return { format: "openai_responses", response: fixture("openai_responses", "openai_responses_failed") };
        return { format: "gemini_contents", response: fixture("gemini_contents", "gemini_thought_signatures") };
      },
    },
  });
  const session_id = "g";
  await client.createSession({ session_id, system: "Be brief." });
  const run = await client.run({ session_id, input: "What should I pack?" });
  assert.equal(run.text, "I'll look up the current weather in both cities.");
  assert.deepEqual(run.tool_calls?.map((c) => c.id), ["call_1", "call_2"]);
  assert.deepEqual(run.usage, USAGE.gemini_thought_signatures, "the normalised usage");
  same(asked[0].payload, { instructions: "Be brief.", input: [{ type: "message", role: "user", content: [{ type: "input_text", text: "What should I pack?" }] }] }, "an openai_responses payload");

  const { messages } = await client.history({ session_id, repair: false });
  const response = /** @type {any} */ (fixture("gemini_contents", "gemini_thought_signatures"));
  same(messages[1].native, { format: "gemini_contents", model: "gemini-3-pro-preview", body: response.candidates[0].content }, "native");
  assert.deepEqual(messages[1].metadata, { response_id: response.responseId, stop_reason: "STOP" });
  assert.deepEqual((await client.getSession({ session_id })).usage, { ...USAGE.gemini_thought_signatures, cache_write_tokens: 0 });

  // session/stream answered by `run`: the same answer, stored the same way.
  const streamed = await client.stream({ session_id, input: "And for Rome?" });
  assert.deepEqual(streamed.tool_calls?.map((c) => c.id), ["call_3", "call_4"], "numbered after the ids the session holds");

  // A response add_response would refuse: 1008 invalid_response, nothing appended.
  const before = await client.getSession({ session_id });
  await assert.rejects(client.run({ session_id, input: "?", metadata: { fail: true } }), (e) => {
    assert.ok(e instanceof RuntimeFailedError, String(e));
    assert.equal(e.data.reason, "invalid_response");
    assert.match(e.data.detail, /status is failed/);
    return true;
  });
  assert.equal((await client.getSession({ session_id })).revision, before.revision);
  await client.dispose();
});

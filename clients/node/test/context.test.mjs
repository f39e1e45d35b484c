// @ts-check
// Context management (spec section 17) against the binary: the options of export,
// countTokens and validate, the reply's `context`, `edits` and `fit`, and the
// TooLargeError of a fit that cannot be met.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import test from "node:test";
import { InvalidParamsError, TooLargeError } from "convo";
import { start } from "./helpers.mjs";

/**
 * A system prompt and three user turns, each a loop of four calls (`run` and `read_file`
 * in turn) with long results, then a final answer.
 * @param {import("convo").ConvoClient} client @param {string} session_id
 */
async function toolLoop(client, session_id) {
  await client.createSession({ session_id, system: "You are a coding agent." });
  for (let turn = 0; turn < 3; turn++) {
    await client.addUser({ session_id, text: `Task ${turn}: fix the failing build.` });
    for (let step = 0; step < 4; step++) {
      const id = `call_${turn}_${step}`;
      const name = step % 2 ? "read_file" : "run";
      await client.addAssistant({ session_id, text: `Step ${step}.`, tool_calls: [{ id, name, arguments: { path: `f${step}` } }] });
      await client.addToolResult({ session_id, tool_call_id: id, content: `line of output ${step} `.repeat(60) });
    }
    await client.addAssistant({ session_id, text: "Fixed: the build passes." });
  }
}

/** The cache_control of every block of an Anthropic body that has one, in order. @param {any} payload */
const breakpoints = (payload) =>
  [...(Array.isArray(payload.system) ? payload.system : []), ...payload.messages.flatMap((/** @type {any} */ m) => (Array.isArray(m.content) ? m.content : []))]
    .filter((b) => "cache_control" in b)
    .map((b) => b.cache_control);

test("initialize lists the context options", async () => {
  const client = await start();
  assert.deepEqual(client.info.capabilities.context, ["compaction", "clear_thinking", "clear_tool_results", "fit", "cache"]);
  await client.dispose();
});

test("export with fit and cache; countTokens previews the fit", async () => {
  const client = await start();
  await toolLoop(client, "loop");
  const format = "anthropic_messages";
  const before = await client.countTokens({ session_id: "loop", format });
  assert.deepEqual(Object.keys(before), ["tokens"], "no option: the reply is as it always was");

  /** @type {import("convo").Fit} */
  const fit = { max_tokens: Math.floor(before.tokens / 2) };
  const preview = await client.countTokens({ session_id: "loop", format, fit });
  assert.ok(preview.fit, "fit in the reply");
  assert.equal(preview.fit.tokens_before, before.tokens);
  assert.equal(preview.tokens, preview.fit.tokens);
  assert.ok(preview.tokens <= fit.max_tokens);
  assert.ok(preview.fit.cleared_tool_results + preview.fit.turns_left_out > 0);

  /** @type {import("convo").Cache} */
  const cache = { ttl: "5m", system_ttl: "1h" };
  const exported = await client.export({ session_id: "loop", format, fit, cache });
  assert.deepEqual(exported.fit, preview.fit, "countTokens previewed the very body export sends");
  assert.equal(exported.context, undefined);
  assert.equal(exported.edits, undefined);
  const payload = /** @type {any} */ (exported.payload);
  assert.deepEqual(payload.system, [{ type: "text", text: "You are a coding agent.", cache_control: { type: "ephemeral", ttl: "1h" } }]);
  const marks = breakpoints(payload);
  assert.ok(marks.length >= 2 && marks.length <= 4, `${marks.length} breakpoints`);
  assert.deepEqual(marks.slice(1), Array(marks.length - 1).fill({ type: "ephemeral", ttl: "5m" }));
  assert.equal(payload.messages.at(-1).content.at(-1).text, "Fixed: the build passes.", "the last turn is kept whole");
  assert.deepEqual(await client.validate({ session_id: "loop", format, cache: true }), { violations: [] });

  // cache: true — OpenAI's prompt_cache_key is the session id; key and retention.
  const chat = /** @type {any} */ ((await client.export({ session_id: "loop", format: "openai_chat", cache: true })).payload);
  assert.equal(chat.prompt_cache_key, "loop");
  assert.equal(chat.prompt_cache_retention, undefined);
  const responses = /** @type {any} */ (
    (await client.export({ session_id: "loop", format: "openai_responses", cache: { key: "k-1", retention: "24h" } })).payload
  );
  assert.deepEqual([responses.prompt_cache_key, responses.prompt_cache_retention], ["k-1", "24h"]);
  const gemini = await client.export({ session_id: "loop", format: "gemini_contents", cache: true });
  assert.ok(gemini.warnings.some((w) => w.index === null && w.message === "cache adds nothing: Gemini caches implicitly"));
  await assert.rejects(client.export({ session_id: "loop", format, cache: { ttl: "1h", system_ttl: "5m" } }), InvalidParamsError);

  assert.deepEqual(await client.countTokens({ session_id: "loop", format }), before, "the stored history never changed");
  await client.dispose();
});

test("clear_tool_results and clear_thinking: edits in the reply", async () => {
  const client = await start();
  await toolLoop(client, "loop");
  const format = "anthropic_messages";
  const options = {
    /** @type {import("convo").ClearToolResults} */
    clear_tool_results: { keep: 2, exclude_tools: ["run"], placeholder: "[cleared]" },
    /** @type {import("convo").ClearThinking} */
    clear_thinking: { keep: 0 },
  };
  const exported = await client.export({ session_id: "loop", format, ...options });
  // Six read_file results, the last two kept: four cleared; run's never.
  const edits = exported.edits;
  assert.ok(edits);
  assert.deepEqual([edits.cleared_tool_results, edits.cleared_thinking_turns], [4, 0]);
  assert.ok(edits.cleared_tokens > 0);
  const results = /** @type {any} */ (exported.payload).messages
    .filter((/** @type {any} */ m) => m.role === "user")
    .flatMap((/** @type {any} */ m) => m.content.filter((/** @type {any} */ b) => b.type === "tool_result"));
  assert.equal(results.length, 12);
  assert.equal(results.filter((/** @type {any} */ r) => r.content === "[cleared]").length, 4);
  assert.equal(exported.fit, undefined);
  const counted = await client.countTokens({ session_id: "loop", format, ...options });
  assert.deepEqual(counted.edits, edits);
  assert.equal(counted.tokens, (await client.countTokens({ session_id: "loop", format })).tokens - edits.cleared_tokens);
  await client.dispose();
});

test("a fit that cannot be met: TooLargeError with data.tokens and data.max_tokens", async () => {
  const client = await start();
  await toolLoop(client, "loop");
  const format = "anthropic_messages";
  /** @type {TooLargeError | undefined} */
  let error;
  await assert.rejects(client.export({ session_id: "loop", format, fit: { max_tokens: 10 } }), (/** @type {unknown} */ e) => {
    error = /** @type {TooLargeError} */ (e);
    return e instanceof TooLargeError;
  });
  assert.ok(error);
  assert.equal(error.code, 1005);
  assert.equal(error.kind, "too_large");
  const { tokens, max_tokens } = error.data;
  assert.equal(max_tokens, 10);
  assert.ok(typeof tokens === "number" && tokens > 10);
  assert.deepEqual(error.data, { kind: "too_large", tokens, max_tokens: 10 });
  // The smallest body convo could make is what a fit to exactly that size gives.
  assert.equal((await client.countTokens({ session_id: "loop", format, fit: { max_tokens: tokens } })).tokens, tokens);
  await assert.rejects(client.countTokens({ session_id: "loop", format, fit: { max_tokens: tokens, keep_turns: 2 } }), TooLargeError);
  await client.dispose();
});

test("a compaction point from an Anthropic response: context.from_index, usage over iterations", async () => {
  const client = await start();
  const session_id = "trip";
  const response = JSON.parse(readFileSync(new URL("./fixtures/providers/anthropic_compaction_iterations.json", import.meta.url), "utf8"));
  await client.createSession({ session_id, system: "You are a concise travel assistant." });
  await client.addUser({ session_id, text: "Plan a week in Paris and London." });
  await client.addAssistant({ session_id, text: "Paris first, then London." });
  await client.addUser({ session_id, text: "How long is the train?" });
  const added = await client.addResponse({ session_id, format: "anthropic_messages", response });
  assert.equal(added.index, 3);
  const { usage } = await client.getSession({ session_id });
  assert.deepEqual([usage.input_tokens, usage.output_tokens], [180000 + 23000, 3500 + 1000]);

  const exported = await client.export({ session_id, format: "anthropic_messages" });
  assert.deepEqual(exported.context, { from_index: 3 });
  const messages = /** @type {any} */ (exported.payload).messages;
  assert.equal(JSON.stringify(messages[1]), JSON.stringify({ role: "assistant", content: response.content }));
  assert.ok(!JSON.stringify(messages).includes("Plan a week"));

  const counted = await client.countTokens({ session_id, format: "anthropic_messages" });
  const whole = await client.countTokens({ session_id, format: "anthropic_messages", compaction: "ignore" });
  assert.deepEqual(counted.context, { from_index: 3 });
  assert.equal(whole.context, undefined);
  assert.ok(whole.tokens > counted.tokens);
  assert.equal((await client.export({ session_id, format: "anthropic_messages", compaction: "ignore" })).context, undefined);

  const chat = await client.export({ session_id, format: "openai_chat" });
  assert.equal(chat.context, undefined);
  assert.ok(JSON.stringify(chat.payload).includes("Plan a week"));
  assert.ok(
    chat.warnings.some(
      (w) => w.index === 3 && w.message === "compaction left out: Chat Completions cannot read anthropic_messages's compaction; the history before it is sent instead",
    ),
  );
  await client.dispose();
});

test("the Responses compact endpoint's result is a compaction point (typed as an openai_responses response)", async () => {
  const client = await start();
  const session_id = "gpt";
  const raw = JSON.parse(readFileSync(new URL("./fixtures/providers/openai_responses_compacted.json", import.meta.url), "utf8"));
  /** @type {import("convo").ProviderResponses["openai_responses"]} */
  const compacted = { ...raw, object: "response.compaction", output: raw.output };
  await client.createSession({ session_id, system: "Be brief." });
  await client.addUser({ session_id, text: "What should I pack?" });
  await client.addAssistant({ session_id, text: "Rain gear." });
  const added = await client.addResponse({ session_id, format: "openai_responses", response: compacted });
  await client.addUser({ session_id, text: "And the train?" });
  const exported = await client.export({ session_id, format: "openai_responses" });
  assert.deepEqual(exported.context, { from_index: added.index });
  const input = /** @type {any} */ (exported.payload).input;
  assert.equal(JSON.stringify(input.slice(0, -1)), JSON.stringify(raw.output), "the compacted output, sent back as it is");
  assert.equal(input.at(-1).content[0].text, "And the train?");
  await client.dispose();
});

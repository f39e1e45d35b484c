// @ts-check
// `convo/openai-agents` under the OpenAI Agents SDK's own runner (@openai/agents-core
// 0.20) and its offline model, `ScriptedModel`: a tool loop with parallel calls and
// reasoning whose signature (`encrypted_content`) must survive, a second turn, a crash
// between a call and its result, a reopen in a new process, and a differential run
// against the SDK's own `MemorySession`.
import assert from "node:assert/strict";
import test from "node:test";
import { Agent, MemorySession, Runner, tool } from "@openai/agents-core";
import { ScriptedModel, assistantMessage, functionCall } from "@openai/agents-core/testing";
import { z } from "zod";
import { ConvoSession } from "convo/openai-agents";
import { BINARY, assertValidEverywhere, clean, convoView, kill9, readInNewProcess, sqliteStore } from "./helpers.mjs";

const CANCELLED = "Cancelled — connection was lost before this tool ran.";
const runner = new Runner({ tracingDisabled: true });

const weather = tool({
  name: "get_weather",
  description: "The weather in a city.",
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `${city}: 14 °C, light rain`,
});

/**
 * A reasoning item as the OpenAI provider makes it: its summary, and its signature
 * (`encrypted_content`) in `providerData`.
 * @param {string} id
 * @param {string} text
 * @returns {import("@openai/agents-core").AgentInputItem}
 */
const reasoning = (id, text) => ({
  type: "reasoning",
  id,
  content: [{ type: "input_text", text }],
  providerData: { encrypted_content: `gAAAAB-signature-of-${id}` },
});

const TURN_1 = "What should I pack for Paris and London tomorrow?";
const TURN_2 = "And for Rome?";

/** The model's answers for a two-turn run: parallel calls, then an answer; a call, then an answer. */
function scriptedModel() {
  return new ScriptedModel([
    [
      reasoning("rs_1", "I need the weather in both cities."),
      assistantMessage("Checking both cities.", { id: "msg_1", phase: "commentary" }),
      functionCall("get_weather", { city: "Paris" }, { callId: "call_paris", id: "fc_1" }),
      functionCall("get_weather", { city: "London" }, { callId: "call_london", id: "fc_2" }),
    ],
    [reasoning("rs_2", "Rain in both."), assistantMessage("Pack an umbrella and a light jacket.", { id: "msg_2" })],
    [reasoning("rs_3", "Rome next."), functionCall("get_weather", { city: "Rome" }, { callId: "call_rome", id: "fc_3" })],
    [assistantMessage("Rome is rainy too: the umbrella stays.", { id: "msg_3" })],
  ]);
}

/** @param {import("@openai/agents-core").Model} model */
const agent = (model) => new Agent({ name: "travel", instructions: "You are a concise travel assistant.", model, tools: [weather] });

/**
 * What the model was sent: the request less its signal and the runner's internals.
 * @param {ScriptedModel} model
 */
function requests(model) {
  return model.calls.map(({ request }) => {
    const { systemInstructions, input, modelSettings, tools, outputType, handoffs, previousResponseId, conversationId } = request;
    return JSON.parse(JSON.stringify({ systemInstructions, input, modelSettings, tools, outputType, handoffs, previousResponseId, conversationId }));
  });
}

/**
 * Runs both turns against a session; returns what the model was sent.
 * @param {import("@openai/agents-core").Session} session
 */
async function twoTurns(session) {
  const model = scriptedModel();
  const first = await runner.run(agent(model), TURN_1, { session });
  assert.equal(first.finalOutput, "Pack an umbrella and a light jacket.");
  const second = await runner.run(agent(model), TURN_2, { session });
  assert.equal(second.finalOutput, "Rome is rainy too: the umbrella stays.");
  model.assertComplete();
  return requests(model);
}

/** @param {unknown} value */
const json = (value) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));

test("a two-turn tool loop: the model is sent what MemorySession gives it, items come back equal, convo's view is valid", async () => {
  const memory = new MemorySession();
  const expected = await twoTurns(memory);
  const memoryItems = await memory.getItems();

  const store = sqliteStore();
  const session = new ConvoSession({ sessionId: "agents-two-turns", store, binary: BINARY });
  try {
    const sent = await twoTurns(session);
    assert.deepEqual(sent.at(-1), expected.at(-1), "the last request is the same");
    assert.deepEqual(sent, expected, "every request is the same");
    assert.deepEqual(json(await session.getItems()), json(memoryItems), "items come back equal");
    for (const limit of [1, 2, 3, 5, 8, 100]) assert.deepEqual(json(await session.getItems(limit)), json(await memory.getItems(limit)), `limit ${limit}`);
    assert.deepEqual(await session.getItems(0), []);

    // One assistant message per run of assistant-side items: the parallel calls are one group.
    const client = await session.client();
    assert.deepEqual(await convoView(client, session.sessionId), [
      "user",
      "assistant[call_paris,call_london]",
      "tool:call_paris",
      "tool:call_london",
      "assistant[]",
      "user",
      "assistant[call_rome]",
      "tool:call_rome",
      "assistant[]",
    ]);
    const exports = await assertValidEverywhere(client, session.sessionId);
    // The Responses export replays the stored wire form: reasoning, signature, item ids.
    const input = /** @type {any[]} */ (exports["openai_responses"]?.payload["input"]);
    assert.deepEqual(input[1], {
      id: "rs_1",
      type: "reasoning",
      summary: [{ type: "summary_text", text: "I need the weather in both cities." }],
      encrypted_content: "gAAAAB-signature-of-rs_1",
    });
    assert.deepEqual(
      input.filter((i) => i.type === "function_call").map((i) => i.call_id),
      ["call_paris", "call_london", "call_rome"],
    );
    assert.equal(exports["openai_responses"]?.payload["instructions"], undefined, "no system prompt stored: the agent's instructions are the SDK's");
  } finally {
    await session.close();
  }
  // A new process, a new convo on the same file: the same items.
  assert.deepEqual(json(await readInNewProcess("openai-agents", "agents-two-turns", store)), json(memoryItems));
});

test("kill -9 between a call and its result: the next run gets the call answered with convo's cancellation text", async () => {
  const store = sqliteStore();
  const sessionId = "agents-crash";
  // A host stored the user's message and the model's parallel calls, then died before the
  // tools returned (the runner itself stores a whole turn at its end).
  const before = new ConvoSession({ sessionId, store, binary: BINARY });
  /** @type {import("@openai/agents-core").AgentInputItem[]} */
  const stored = [
    { type: "message", role: "user", content: TURN_1 },
    reasoning("rs_1", "I need the weather in both cities."),
    functionCall("get_weather", { city: "Paris" }, { callId: "call_paris" }),
    functionCall("get_weather", { city: "London" }, { callId: "call_london" }),
  ];
  await before.addItems(stored);
  await kill9(await before.client());
  await before.close();

  const session = new ConvoSession({ sessionId, store, binary: BINARY });
  try {
    const cancelled = (/** @type {string} */ callId) => ({ type: "function_call_result", name: "get_weather", callId, status: "completed", output: { type: "text", text: CANCELLED } });
    const repaired = [...json(stored), cancelled("call_paris"), cancelled("call_london")];
    assert.deepEqual(json(await session.getItems()), repaired, "the calls come back answered, in the SDK's own result shape");
    for (const limit of [1, 2, 3]) assert.deepEqual(json(await session.getItems(limit)), repaired.slice(-limit), `limit ${limit}: the call named though not on the page`);
    assert.deepEqual(json(await readInNewProcess("openai-agents", sessionId, store)), repaired, "the same in a new process");

    // The next run goes on: the model is sent the answered calls, then the new input.
    const model = new ScriptedModel([[assistantMessage("Sorry, the lookups were lost: try again?", { id: "msg_9" })]]);
    const result = await runner.run(agent(model), TURN_2, { session });
    assert.equal(result.finalOutput, "Sorry, the lookups were lost: try again?");
    assert.deepEqual(requests(model)[0].input, [...repaired, { type: "message", role: "user", content: TURN_2 }]);

    // Moving on stored the cancellations; the history is valid for every provider.
    const client = await session.client();
    assert.deepEqual(await convoView(client, sessionId), ["user", "assistant[call_paris,call_london]", "tool:call_paris", "tool:call_london", "user", "assistant[]"]);
    await assertValidEverywhere(client, sessionId);
    assert.deepEqual((await session.getItems()).slice(0, 6).map(json), repaired, "the stored cancellations read as before");
  } finally {
    await session.close();
  }
});

test("popItem removes exactly one item, keeping the rest of a grouped message, as MemorySession does", async () => {
  const memory = new MemorySession();
  await twoTurns(memory);
  const session = new ConvoSession({ store: "memory", binary: BINARY });
  try {
    await twoTurns(session);
    const client = await session.client();
    for (;;) {
      const [mine, theirs] = [await session.popItem(), await memory.popItem()];
      assert.deepEqual(json(mine), json(theirs));
      if (mine === undefined) break;
      // What is left reads the same, but for the calls a popped result leaves open,
      // which the repaired view answers (and popItem never returns).
      const left = json(await memory.getItems());
      const items = json(await session.getItems());
      assert.deepEqual(items.slice(0, left.length), left);
      for (const extra of items.slice(left.length)) assert.equal(extra.output?.text, CANCELLED);
    }
    assert.deepEqual(await convoView(client, session.sessionId), []);
  } finally {
    await session.close();
  }
});

test("popItem on one call of a parallel group re-stores the other in the same step", async () => {
  const session = new ConvoSession({ store: "memory", binary: BINARY });
  try {
    const calls = [
      functionCall("get_weather", { city: "Paris" }, { callId: "call_paris", id: "fc_1" }),
      functionCall("get_weather", { city: "London" }, { callId: "call_london", id: "fc_2" }),
    ];
    await session.addItems([{ role: "user", content: TURN_1 }, reasoning("rs_1", "both"), ...calls]);
    // The last item is the call, not the repaired result the view shows after it.
    assert.deepEqual(json(await session.popItem()), json(calls[1]));
    const client = await session.client();
    assert.deepEqual(await convoView(client, session.sessionId), ["user", "assistant[call_paris]"]);
    const items = json(await session.getItems());
    assert.deepEqual(items.at(-2), json(calls[0]));
    assert.equal(items.at(-1).callId, "call_paris");
    assert.equal(items.at(-1).output.text, CANCELLED);

    // A real result is still accepted, and a popped result leaves its call open again.
    const result = { type: "function_call_result", name: "get_weather", callId: "call_paris", status: "completed", output: { type: "text", text: "Paris: sunny" } };
    await session.addItems([/** @type {any} */ (result)]);
    assert.deepEqual(json(await session.popItem()), result);
    assert.equal(json(await session.getItems()).at(-1).output.text, CANCELLED);
    await session.addItems([/** @type {any} */ (result)]);
    assert.deepEqual(json(await session.getItems()).at(-1), result);

    await session.clearSession();
    assert.deepEqual(await session.getItems(), []);
    assert.equal(await session.popItem(), undefined);
  } finally {
    await session.close();
  }
});

test("items that continue the stored run join its message (a run never splits in two)", async () => {
  const session = new ConvoSession({ store: "memory", binary: BINARY });
  const memory = new MemorySession();
  try {
    const first = [{ role: "user", content: TURN_1 }, reasoning("rs_1", "both"), functionCall("get_weather", { city: "Paris" }, { callId: "call_paris" })];
    const second = [functionCall("get_weather", { city: "London" }, { callId: "call_london" }), { type: "function_call_result", name: "get_weather", callId: "call_paris", status: "completed", output: "Paris: sunny" }];
    for (const s of [session, memory]) {
      await s.addItems(/** @type {any} */ (first));
      await s.addItems(/** @type {any} */ (second));
    }
    const client = await session.client();
    assert.deepEqual(await convoView(client, session.sessionId), ["user", "assistant[call_paris,call_london]", "tool:call_paris"]);
    const left = json(await memory.getItems());
    assert.deepEqual(json(await session.getItems()).slice(0, left.length), left);
  } finally {
    await session.close();
  }
});

test("a tool that needs approval: the interrupted call is stored, and the resumed run stores its real result", async () => {
  const approvalTool = tool({
    name: "book_hotel",
    description: "Books a hotel.",
    parameters: z.object({ city: z.string() }),
    needsApproval: true,
    execute: async ({ city }) => `Booked in ${city}.`,
  });
  const script = () =>
    new ScriptedModel([
      [functionCall("book_hotel", { city: "Paris" }, { callId: "call_book", id: "fc_9" })],
      [assistantMessage("Booked.", { id: "msg_9" })],
    ]);
  /** @param {import("@openai/agents-core").Session} session */
  const flow = async (session) => {
    const model = script();
    const a = new Agent({ name: "booker", instructions: "Book hotels.", model, tools: [approvalTool] });
    const interrupted = await runner.run(a, "Book Paris.", { session });
    assert.equal(interrupted.interruptions.length, 1);
    interrupted.state.approve(interrupted.interruptions[0]);
    if (session instanceof ConvoSession) {
      // Waiting for the tool, the call reads as stored to the run that approved it, and
      // as answered (cancelled) to anyone else.
      assert.equal((await session.getItems(undefined, interrupted.state._context)).at(-1)?.type, "function_call");
      assert.equal(json(await session.getItems()).at(-1).output.text, CANCELLED);
    }
    const done = await runner.run(a, interrupted.state, { session });
    assert.equal(done.finalOutput, "Booked.");
    return requests(model);
  };
  const memory = new MemorySession();
  const expected = await flow(memory);
  const session = new ConvoSession({ store: "memory", binary: BINARY });
  try {
    assert.deepEqual(await flow(session), expected);
    assert.deepEqual(json(await session.getItems()), json(await memory.getItems()));
    const client = await session.client();
    const { messages } = await client.history({ session_id: session.sessionId });
    assert.equal(messages.find((m) => m.role === "tool")?.content, "Booked in Paris.");
    await assertValidEverywhere(client, session.sessionId);
  } finally {
    await session.close();
  }
});

test("an empty answer, images and bytes in items: stored, and back equal", async () => {
  const session = new ConvoSession({ store: "memory", binary: BINARY });
  try {
    /** @type {any[]} */
    const items = [
      { role: "user", content: [{ type: "input_text", text: "Say nothing." }, { type: "input_image", image: "data:image/png;base64,iVBORw0KGgo=" }] },
      { type: "message", role: "assistant", status: "completed", content: [] },
      { role: "user", content: "Show the chart." },
      functionCall("chart", {}, { callId: "call_chart" }),
      { type: "function_call_result", name: "chart", callId: "call_chart", status: "completed", output: { type: "image", image: { data: new Uint8Array([137, 80, 78, 71]), mediaType: "image/png" } } },
    ];
    await session.addItems(items);
    assert.deepEqual(clean(await session.getItems()), clean(items));
    const client = await session.client();
    const { messages } = await client.history({ session_id: session.sessionId });
    assert.deepEqual(messages[0]?.images, ["iVBORw0KGgo="], "the image is in convo's common form too");
    // A result for a call convo does not know is refused, as convo's rules say.
    await assert.rejects(session.addItems([{ ...items[4], callId: "nope" }]), { name: "InvalidSequenceError" });
  } finally {
    await session.close();
  }
});

test("the session is created on the first write; another client shares it", async () => {
  const { ConvoClient } = await import("convo");
  const client = await ConvoClient.start({ binary: BINARY, store: "memory" });
  try {
    const session = new ConvoSession({ sessionId: "shared", client });
    assert.equal(await session.getSessionId(), "shared");
    assert.deepEqual(await session.getItems(), []);
    await assert.rejects(client.getSession({ session_id: "shared" }), { name: "SessionNotFoundError" });
    await session.addItems([{ role: "user", content: "hi" }]);
    // A message another client adds reads as the SDK's item.
    await client.addAssistant({ session_id: "shared", text: "hello", tool_calls: [{ id: "c1", name: "f", arguments: { a: 1 } }] });
    await client.addToolResult({ session_id: "shared", tool_call_id: "c1", content: "done" });
    assert.deepEqual(json(await session.getItems()), [
      { role: "user", content: "hi" },
      { type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "hello" }] },
      { type: "function_call", callId: "c1", name: "f", status: "completed", arguments: '{"a":1}' },
      { type: "function_call_result", name: "f", callId: "c1", status: "completed", output: { type: "text", text: "done" } },
    ]);
    // A Responses API turn another client stored as it came (session/add_response, or
    // convo's Python adapter) reads as the SDK's items, reasoning and signature included.
    await client.addUser({ session_id: "shared", text: "More?" });
    await client.addResponse({
      session_id: "shared",
      format: "openai_responses",
      response: {
        id: "resp_1",
        object: "response",
        status: "completed",
        model: "gpt-5",
        output: [
          { id: "rs_9", type: "reasoning", summary: [{ type: "summary_text", text: "Look it up." }], encrypted_content: "gAAAA-9" },
          { id: "fc_9", type: "function_call", status: "completed", arguments: '{"q":"x"}', call_id: "call_9", name: "lookup" },
        ],
      },
    });
    assert.deepEqual(json((await session.getItems()).slice(4)), [
      { role: "user", content: "More?" },
      { type: "reasoning", id: "rs_9", content: [{ type: "input_text", text: "Look it up." }], providerData: { encrypted_content: "gAAAA-9" } },
      { type: "function_call", id: "fc_9", callId: "call_9", name: "lookup", arguments: '{"q":"x"}', status: "completed" },
      { type: "function_call_result", name: "lookup", callId: "call_9", status: "completed", output: { type: "text", text: CANCELLED } },
    ]);
    // Popping the call re-stores the reasoning, in the wire form it came in.
    assert.equal(json(await session.popItem())?.callId, "call_9");
    const { messages } = await client.history({ session_id: "shared" });
    assert.deepEqual(messages.at(-1)?.native?.body, [{ id: "rs_9", type: "reasoning", summary: [{ type: "summary_text", text: "Look it up." }], encrypted_content: "gAAAA-9" }]);
    await session.close(); // not the client's owner: it stays up
    assert.equal((await client.getSession({ session_id: "shared" })).message_count, 5);
  } finally {
    await client.dispose();
  }
});

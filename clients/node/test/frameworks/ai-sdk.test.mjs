// @ts-check
// `convo/ai-sdk` under the AI SDK's own loop (`generateText` of `ai` 7, with tools and
// `stopWhen`) and its offline model, `MockLanguageModelV4`: a tool loop with parallel
// calls and reasoning whose signature must survive, a second turn, a crash between a
// call and its result, a reopen in a new process, and a differential run against the
// plain array an app keeps without convo.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import test from "node:test";
import { generateText, modelMessageSchema, stepCountIs, tool } from "ai";
import { MockLanguageModelV4, mockId } from "ai/test";
import { z } from "zod";
import { ConvoChatHistory } from "convo/ai-sdk";
import { BINARY, assertValidEverywhere, clean, convoView, kill9, readInNewProcess, sqliteStore } from "./helpers.mjs";

const CANCELLED = "Cancelled — connection was lost before this tool ran.";

/** @typedef {import("ai").ModelMessage} ModelMessage */
/** @typedef {import("@ai-sdk/provider").LanguageModelV4GenerateResult} Step */
/** @typedef {import("@ai-sdk/provider").LanguageModelV4Content} Content */

const usage = {
  inputTokens: { total: 20, noCache: 20, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 8, text: 6, reasoning: 2 },
};
/**
 * One model answer.
 * @param {Content[]} content
 * @returns {Step}
 */
const step = (content) => ({
  content,
  finishReason: content.some((c) => c.type === "tool-call") ? { unified: "tool-calls", raw: "tool_use" } : { unified: "stop", raw: "end_turn" },
  usage,
  warnings: [],
});
/** Reasoning as Anthropic's provider gives it: its signature in the provider metadata.
 * @param {string} text @param {string} signature @returns {Content} */
const thinking = (text, signature) => ({ type: "reasoning", text, providerMetadata: { anthropic: { signature } } });
/** @param {string} text @returns {Content} */
const text = (text) => ({ type: "text", text });
/** @param {string} id @param {string} city @returns {Content} */
const call = (id, city) => ({ type: "tool-call", toolCallId: id, toolName: "weather", input: JSON.stringify({ city }) });

/** The model's answers for a two-turn run: parallel calls, then an answer; a call, then an answer. */
const SCRIPT = [
  step([thinking("I need the weather in both cities.", "EqRb-sig-1"), text("Checking both cities."), call("toolu_paris", "Paris"), call("toolu_london", "London")]),
  step([thinking("Rain in both.", "EqRb-sig-2"), text("Pack an umbrella and a light jacket.")]),
  step([thinking("Rome next.", "EqRb-sig-3"), call("toolu_rome", "Rome")]),
  step([text("Rome is rainy too: the umbrella stays.")]),
];

/** @param {Step[]} script */
function scriptedModel(script) {
  let next = 0;
  return new MockLanguageModelV4({
    doGenerate: async () => {
      const answer = script[next++];
      if (!answer) throw new Error("the model was called more often than scripted");
      return answer;
    },
  });
}

const weather = tool({
  description: "The weather in a city.",
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => `${city}: 14 °C, light rain`,
});

/**
 * What an app keeps between turns: convo's history, or a plain array.
 * @typedef {{ load(): Promise<ModelMessage[]>, append(messages: ModelMessage[]): Promise<void> }} History
 */

/** @returns {History & { messages: ModelMessage[] }} */
function plainArray() {
  /** @type {ModelMessage[]} */
  const messages = [];
  return { messages, load: async () => structuredClone(messages), append: async (m) => void messages.push(...structuredClone(m)) };
}

/**
 * One turn as an app runs it.
 * @param {History} history @param {MockLanguageModelV4} model @param {string} input
 */
async function turn(history, model, input) {
  /** @type {ModelMessage} */
  const user = { role: "user", content: input };
  const result = await generateText({ model, tools: { weather }, messages: [...(await history.load()), user], stopWhen: stepCountIs(5) });
  await history.append([user, ...result.responseMessages]);
  return result;
}

/** What the model was sent, call by call. @param {MockLanguageModelV4} model */
const prompts = (model) => model.doGenerateCalls.map((c) => JSON.parse(JSON.stringify({ prompt: c.prompt, tools: c.tools, toolChoice: c.toolChoice })));

/** @param {History} history */
async function twoTurns(history) {
  const model = scriptedModel(SCRIPT);
  assert.equal((await turn(history, model, "What should I pack for Paris and London tomorrow?")).text, "Pack an umbrella and a light jacket.");
  assert.equal((await turn(history, model, "And for Rome?")).text, "Rome is rainy too: the umbrella stays.");
  return prompts(model);
}

/** @param {unknown[]} messages */
function assertModelMessages(messages) {
  for (const m of messages) assert.ok(modelMessageSchema.safeParse(m).success, `modelMessageSchema: ${JSON.stringify(m)}`);
}

test("a two-turn tool loop: the model is sent what the plain array gives it, messages come back equal, convo's view is valid", async () => {
  const array = plainArray();
  const expected = await twoTurns(array);

  const store = sqliteStore();
  const history = await ConvoChatHistory.open({ sessionId: "ai-two-turns", store, binary: BINARY });
  try {
    const sent = await twoTurns(history);
    assert.deepEqual(sent.at(-1), expected.at(-1), "the last request is the same");
    assert.deepEqual(sent, expected, "every request is the same");
    const loaded = await history.load();
    assert.deepEqual(clean(loaded), clean(array.messages), "messages come back equal (as JSON: undefined members left out)");
    assertModelMessages(loaded);
    // The signature is kept exactly where the AI SDK put it.
    const first = /** @type {any} */ (loaded[1]).content[0];
    assert.deepEqual(first, { type: "reasoning", text: "I need the weather in both cities.", providerOptions: { anthropic: { signature: "EqRb-sig-1" } } });

    const client = await history.client();
    assert.deepEqual(await convoView(client, "ai-two-turns"), [
      "user",
      "assistant[toolu_paris,toolu_london]",
      "tool:toolu_paris",
      "tool:toolu_london",
      "assistant[]",
      "user",
      "assistant[toolu_rome]",
      "tool:toolu_rome",
      "assistant[]",
    ]);
    const exports = await assertValidEverywhere(client, "ai-two-turns");
    // Signed reasoning is stored as Anthropic's own blocks: the Anthropic export replays it.
    const anthropic = /** @type {any[]} */ (exports["anthropic_messages"]?.payload["messages"]);
    assert.deepEqual(anthropic[1].content[0], { type: "thinking", thinking: "I need the weather in both cities.", signature: "EqRb-sig-1" });
    assert.deepEqual(anthropic[1].content.slice(2).map((/** @type {any} */ b) => [b.type, b.id, b.input]), [
      ["tool_use", "toolu_paris", { city: "Paris" }],
      ["tool_use", "toolu_london", { city: "London" }],
    ]);
    assert.deepEqual(exports["anthropic_messages"]?.warnings, []);
  } finally {
    await history.close();
  }
  assert.deepEqual(await readInNewProcess("ai-sdk", "ai-two-turns", store), clean(array.messages), "the same from a new process");
});

test("the v7 trap: result.response.messages is the last step only; responseMessages is every step", async () => {
  const result = await generateText({ model: scriptedModel(SCRIPT.slice(0, 2)), tools: { weather }, prompt: "Pack?", stopWhen: stepCountIs(5) });
  assert.deepEqual(result.response.messages.map((m) => m.role), ["assistant"]);
  assert.deepEqual(result.responseMessages.map((m) => m.role), ["assistant", "tool", "assistant"]);
});

test("kill -9 between a call and its result: load() answers the calls with convo's cancellation text, and the next turn goes on", async () => {
  const store = sqliteStore();
  const sessionId = "ai-crash";
  // A host appended the user's message and the model's parallel calls (say from
  // onStepFinish), then died before the tools returned.
  const before = await ConvoChatHistory.open({ sessionId, store, binary: BINARY });
  /** @type {ModelMessage[]} */
  const stored = [
    { role: "user", content: "What should I pack for Paris and London tomorrow?" },
    {
      role: "assistant",
      content: [
        { type: "reasoning", text: "I need the weather in both cities.", providerOptions: { anthropic: { signature: "EqRb-sig-1" } } },
        { type: "tool-call", toolCallId: "toolu_paris", toolName: "weather", input: { city: "Paris" } },
        { type: "tool-call", toolCallId: "toolu_london", toolName: "weather", input: { city: "London" } },
      ],
    },
  ];
  await before.append(stored);
  await kill9(await before.client());
  await before.close();

  const history = await ConvoChatHistory.open({ sessionId, store, binary: BINARY });
  try {
    const cancelled = (/** @type {string} */ toolCallId) => ({ type: "tool-result", toolCallId, toolName: "weather", output: { type: "error-text", value: CANCELLED } });
    const repaired = [...stored, { role: "tool", content: [cancelled("toolu_paris"), cancelled("toolu_london")] }];
    const loaded = await history.load();
    assert.deepEqual(loaded, repaired, "the calls come back answered, as the AI SDK's own tool message");
    assertModelMessages(loaded);
    assert.deepEqual(await readInNewProcess("ai-sdk", sessionId, store), repaired, "the same in a new process");

    const model = scriptedModel([step([text("The lookups were lost: shall I try again?")])]);
    const result = await turn(history, model, "Well?");
    assert.equal(result.text, "The lookups were lost: shall I try again?");
    const prompt = /** @type {any[]} */ (prompts(model)[0].prompt);
    assert.deepEqual(
      prompt[2].content.map((/** @type {any} */ p) => [p.type, p.toolCallId, p.output]),
      [
        ["tool-result", "toolu_paris", { type: "error-text", value: CANCELLED }],
        ["tool-result", "toolu_london", { type: "error-text", value: CANCELLED }],
      ],
    );

    const client = await history.client();
    assert.deepEqual(await convoView(client, sessionId), ["user", "assistant[toolu_paris,toolu_london]", "tool:toolu_paris", "tool:toolu_london", "user", "assistant[]"]);
    await assertValidEverywhere(client, sessionId);
    const after = await history.load();
    assert.deepEqual(after.slice(0, 3), repaired, "the stored cancellations read as before");
    assertModelMessages(after);
  } finally {
    await history.close();
  }
});

test("bytes, URLs, images, files and empty answers come back equal", async () => {
  const history = await ConvoChatHistory.open({ sessionId: "ai-bytes", store: "memory", binary: BINARY });
  try {
    const png = new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13]);
    /** @type {ModelMessage[]} */
    const messages = [
      { role: "system", content: "You are terse." },
      {
        role: "user",
        content: [
          { type: "text", text: "What is in these?" },
          { type: "image", image: png, mediaType: "image/png" },
          { type: "file", data: new URL("https://example.com/report.pdf"), mediaType: "application/pdf" },
          { type: "file", data: { type: "data", data: png }, mediaType: "image/png", filename: "chart.png" },
        ],
        providerOptions: { anthropic: { cacheControl: { type: "ephemeral" } } },
      },
      { role: "assistant", content: "" },
      { role: "user", content: "Anything?" },
      { role: "assistant", content: [] },
      { role: "user", content: "Use a tool." },
      { role: "assistant", content: [{ type: "tool-call", toolCallId: "c1", toolName: "chart", input: { $convo: "a member named like the codec's tag" } }] },
      {
        role: "tool",
        content: [{ type: "tool-result", toolCallId: "c1", toolName: "chart", output: { type: "content", value: [{ type: "text", text: "a chart" }, { type: "file", mediaType: "image/png", data: { type: "data", data: png } }] } }],
      },
    ];
    await history.append(messages);
    const loaded = await history.load();
    assert.deepEqual(clean(loaded), clean(messages));
    assertModelMessages(loaded);
    const client = await history.client();
    const { messages: stored } = await client.history({ session_id: "ai-bytes" });
    assert.equal(stored[1]?.images?.length, 2, "the images are in convo's common form too");
    assert.deepEqual(
      stored.map((m) => m.content),
      ["You are terse.", "What is in these?", null, "Anything?", null, "Use a tool.", null, "a chart"],
    );
  } finally {
    await history.close();
  }
});

/** A 1x1 PNG, base64: a browser agent's screenshot. */
const SCREENSHOT = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

test("a tool result with an image (a screenshot): in convo's images, inside the result when exported, and back exactly", async () => {
  const screenshot = tool({
    description: "A screenshot of the page.",
    inputSchema: z.object({ url: z.string() }),
    execute: async ({ url }) => ({ url, png: SCREENSHOT }),
    // What the model is sent: the page's address as text, and the screenshot.
    toModelOutput: ({ output }) => ({
      type: "content",
      value: [
        { type: "text", text: `Screenshot of ${output.url}` },
        { type: "file", mediaType: "image/png", data: { type: "data", data: output.png } },
      ],
    }),
  });
  const script = [
    step([{ type: "tool-call", toolCallId: "toolu_shot", toolName: "screenshot", input: JSON.stringify({ url: "https://example.com" }) }]),
    step([text("A blank page.")]),
  ];
  /** @param {History} history */
  const run = async (history) => {
    const model = scriptedModel(script);
    /** @type {ModelMessage} */
    const user = { role: "user", content: "What is on example.com?" };
    const result = await generateText({ model, tools: { screenshot }, messages: [...(await history.load()), user], stopWhen: stepCountIs(5) });
    assert.equal(result.text, "A blank page.");
    await history.append([user, ...result.responseMessages]);
    return prompts(model);
  };
  const array = plainArray();
  const expected = await run(array);
  assert.deepEqual(/** @type {any} */ (array.messages[2]).content[0].output.value[1], { type: "file", mediaType: "image/png", data: { type: "data", data: SCREENSHOT } });

  const sessionId = "ai-tool-image";
  const store = sqliteStore();
  const history = await ConvoChatHistory.open({ sessionId, store, binary: BINARY });
  try {
    assert.deepEqual(await run(history), expected, "every request is the same");
    const loaded = await history.load();
    assert.deepEqual(clean(loaded), clean(array.messages), "the messages come back equal (as JSON: undefined members left out)");
    assert.equal(JSON.stringify(loaded), JSON.stringify(array.messages), "byte for byte as JSON, member order included");
    assertModelMessages(loaded);

    const client = await history.client();
    const { messages } = await client.history({ session_id: sessionId, repair: false });
    assert.deepEqual(
      messages.map((m) => [m.role, m.content, m.images]),
      [
        ["user", "What is on example.com?", null],
        ["assistant", null, null],
        ["tool", "Screenshot of https://example.com", [SCREENSHOT]],
        ["assistant", "A blank page.", null],
      ],
    );
    const exports = await assertValidEverywhere(client, sessionId);
    const anthropic = await client.export({ session_id: sessionId, format: "anthropic_messages" });
    assert.deepEqual(anthropic.warnings, []);
    assert.deepEqual(/** @type {any[]} */ (anthropic.payload["messages"])[2], {
      role: "user",
      content: [
        {
          type: "tool_result",
          tool_use_id: "toolu_shot",
          content: [
            { type: "text", text: "Screenshot of https://example.com" },
            { type: "image", source: { type: "base64", media_type: "image/png", data: SCREENSHOT } },
          ],
        },
      ],
    });
    // The Responses API and Gemini carry it inside the result too; Chat Completions says it cannot.
    const output = /** @type {any[]} */ (exports["openai_responses"]?.payload["input"]).find((i) => i.type === "function_call_output");
    assert.deepEqual(output.output[1], { type: "input_image", image_url: `data:image/png;base64,${SCREENSHOT}` });
    const gemini = await client.export({ session_id: sessionId, format: "gemini_contents" });
    assert.deepEqual(/** @type {any[]} */ (gemini.payload["contents"])[2].parts[0].functionResponse.parts, [{ inline_data: { mime_type: "image/png", data: SCREENSHOT } }]);
    const interactions = await client.export({ session_id: sessionId, format: "gemini_interactions" });
    assert.deepEqual(/** @type {any[]} */ (interactions.payload["input"]).find((s) => s.type === "function_result").result[1], { type: "image", data: SCREENSHOT, mime_type: "image/png" });
    assert.deepEqual(exports["openai_chat"]?.warnings, [
      { index: 2, message: '1 image(s) of the result of call "toolu_shot" left out: Chat Completions cannot carry an image in a tool message' },
    ]);
  } finally {
    await history.close();
  }
  assert.deepEqual(await readInNewProcess("ai-sdk", sessionId, store), clean(array.messages), "the same from a new process");
});

test("a tool result's images in every AI SDK shape (file, image-data, file-data, ai 5's media); URLs and other files are not images", async () => {
  const history = await ConvoChatHistory.open({ sessionId: "ai-tool-image-shapes", store: "memory", binary: BINARY });
  try {
    const png = Buffer.from(SCREENSHOT, "base64");
    /** @type {ModelMessage[]} */
    const messages = [
      { role: "user", content: "Look." },
      { role: "assistant", content: [{ type: "tool-call", toolCallId: "c1", toolName: "look", input: {} }, { type: "tool-call", toolCallId: "c2", toolName: "look", input: {} }] },
      {
        role: "tool",
        content: [
          {
            type: "tool-result",
            toolCallId: "c1",
            toolName: "look",
            output: {
              type: "content",
              value: [
                { type: "file", mediaType: "image", data: { type: "data", data: new Uint8Array(png) } },
                { type: "image-data", data: SCREENSHOT, mediaType: "image/png" },
                { type: "file-data", data: SCREENSHOT, mediaType: "image/png" },
                { type: "file", mediaType: "image/png", data: { type: "url", url: new URL("https://example.com/shot.png") } },
                { type: "file-data", data: "JVBERi0xLjQ=", mediaType: "application/pdf" },
                { type: "image-url", url: "https://example.com/shot.png" },
              ],
            },
          },
          // ai 5's shape (no longer in v7's types): stored all the same.
          /** @type {any} */ ({ type: "tool-result", toolCallId: "c2", toolName: "look", output: { type: "content", value: [{ type: "text", text: "v5" }, { type: "media", data: SCREENSHOT, mediaType: "image/png" }] } }),
        ],
      },
    ];
    await history.append(messages);
    assert.deepEqual(clean(await history.load()), clean(messages));
    const client = await history.client();
    const { messages: stored } = await client.history({ session_id: "ai-tool-image-shapes" });
    assert.deepEqual(
      stored.slice(2).map((m) => [m.tool_call_id, m.content, m.images]),
      [
        ["c1", "", [SCREENSHOT, SCREENSHOT, SCREENSHOT]],
        ["c2", "v5", [SCREENSHOT]],
      ],
    );
  } finally {
    await history.close();
  }
});

test("a tool that needs approval: the pending call is not answered, the approval and the result are stored", async () => {
  const book = tool({
    description: "Books a hotel.",
    inputSchema: z.object({ city: z.string() }),
    needsApproval: true,
    execute: async ({ city }) => `Booked in ${city}.`,
  });
  const script = [step([{ type: "tool-call", toolCallId: "toolu_book", toolName: "book", input: JSON.stringify({ city: "Paris" }) }]), step([text("Booked.")])];
  /** @param {History} history */
  const flow = async (history) => {
    const model = scriptedModel(script);
    const _internal = { generateId: mockId({ prefix: "approval" }) }; // the approval ids, as the other run's
    /** @type {ModelMessage} */
    const user = { role: "user", content: "Book Paris." };
    const first = await generateText({ model, tools: { book }, messages: [...(await history.load()), user], stopWhen: stepCountIs(5), _internal });
    await history.append([user, ...first.responseMessages]);
    const pending = await history.load();
    const request = /** @type {any} */ (pending.at(-1)).content.find((/** @type {any} */ p) => p.type === "tool-approval-request");
    assert.ok(request, "the model's call waits for an approval");
    /** @type {ModelMessage} */
    const approval = { role: "tool", content: [{ type: "tool-approval-response", approvalId: request.approvalId, approved: true }] };
    await history.append([approval]);
    const second = await generateText({ model, tools: { book }, messages: await history.load(), stopWhen: stepCountIs(5), _internal });
    await history.append(second.responseMessages);
    return { prompts: prompts(model), pending };
  };
  const array = plainArray();
  const expected = await flow(array);
  const history = await ConvoChatHistory.open({ sessionId: "ai-approval", store: "memory", binary: BINARY });
  try {
    const got = await flow(history);
    assert.deepEqual(clean(got.pending), clean(expected.pending), "the pending call is not answered as cancelled");
    assert.deepEqual(got.prompts, expected.prompts);
    assert.deepEqual(clean(await history.load()), clean(array.messages));
    const client = await history.client();
    const { messages } = await client.history({ session_id: "ai-approval" });
    assert.equal(messages.find((m) => m.role === "tool")?.content, "Booked in Paris.");
    await assertValidEverywhere(client, "ai-approval");
  } finally {
    await history.close();
  }
});

test("open() creates the session; a shared client stays up after close(); other clients' messages read as ModelMessages", async () => {
  const { ConvoClient } = await import("convo");
  const client = await ConvoClient.start({ binary: BINARY, store: "memory" });
  try {
    const history = await ConvoChatHistory.open({ sessionId: "ai-shared", client });
    assert.equal((await client.getSession({ session_id: "ai-shared" })).message_count, 0);
    await history.append([{ role: "user", content: "hi" }]);
    await client.addAssistant({ session_id: "ai-shared", text: "hello", tool_calls: [{ id: "c1", name: "f", arguments: { a: 1 } }, { id: "c2", name: "g", arguments: {} }] });
    await client.addToolResult({ session_id: "ai-shared", tool_call_id: "c1", content: "done" });
    const loaded = await history.load();
    assert.deepEqual(loaded, [
      { role: "user", content: "hi" },
      { role: "assistant", content: [{ type: "text", text: "hello" }, { type: "tool-call", toolCallId: "c1", toolName: "f", input: { a: 1 } }, { type: "tool-call", toolCallId: "c2", toolName: "g", input: {} }] },
      {
        role: "tool",
        content: [
          { type: "tool-result", toolCallId: "c1", toolName: "f", output: { type: "text", value: "done" } },
          { type: "tool-result", toolCallId: "c2", toolName: "g", output: { type: "error-text", value: CANCELLED } },
        ],
      },
    ]);
    assertModelMessages(loaded);
    // An Anthropic turn stored as it came reads with its signed thinking.
    await client.addUser({ session_id: "ai-shared", text: "More?" });
    await client.addResponse({
      session_id: "ai-shared",
      format: "anthropic_messages",
      response: {
        id: "msg_1",
        type: "message",
        role: "assistant",
        model: "claude-opus-4-6",
        content: [
          { type: "thinking", thinking: "Short answer.", signature: "EqRb-9" },
          { type: "text", text: "No." },
        ],
        stop_reason: "end_turn",
        usage: { input_tokens: 10, output_tokens: 5 },
      },
    });
    const more = await history.load();
    assert.deepEqual(more.at(-1), {
      role: "assistant",
      content: [
        { type: "reasoning", text: "Short answer.", providerOptions: { anthropic: { signature: "EqRb-9" } } },
        { type: "text", text: "No." },
      ],
    });
    assertModelMessages(more);
    await history.close();
    assert.equal((await client.getSession({ session_id: "ai-shared" })).message_count, 6);
  } finally {
    await client.dispose();
  }
});

/** What Google's Interactions provider (`google.interactions()` of `@ai-sdk/google`) puts
 * on each output part: `providerMetadata.google`, with the step's `signature` and the
 * Interaction's id (`interactionId`); the AI SDK turns it into the part's `providerOptions`.
 * @param {string} interactionId @param {string} [signature] */
const google = (interactionId, signature) => ({ google: { ...(signature ? { signature } : {}), interactionId } });

/** A two-step tool loop as `google.interactions()` answers it: a signed thought and parallel
 * calls (one signed), then a signed thought and the answer. */
const INTERACTIONS_SCRIPT = [
  step([
    { type: "reasoning", text: "**Checking both cities**", providerMetadata: google("v1_turn1", "CpwDAQw51-sig-1") },
    { type: "text", text: "Checking both cities.", providerMetadata: google("v1_turn1") },
    { type: "tool-call", toolCallId: "isykdkwf", toolName: "weather", input: JSON.stringify({ city: "Paris" }), providerMetadata: google("v1_turn1", "CpwDAQw51-sig-2") },
    { type: "tool-call", toolCallId: "obimjy3p", toolName: "weather", input: JSON.stringify({ city: "London" }), providerMetadata: google("v1_turn1") },
  ]),
  step([
    { type: "reasoning", text: "", providerMetadata: google("v1_turn2", "CrwBAQw51-sig-3") },
    { type: "text", text: "Pack an umbrella.", providerMetadata: google("v1_turn2") },
  ]),
];

test("Google's Interactions provider: providerOptions.google (signature, interactionId) kept; stored as Interactions steps", async () => {
  /** @param {History} history */
  const run = async (history) => {
    const model = scriptedModel(INTERACTIONS_SCRIPT);
    assert.equal((await turn(history, model, "What should I pack for Paris and London?")).text, "Pack an umbrella.");
    return prompts(model);
  };
  const array = plainArray();
  const expected = await run(array);
  const history = await ConvoChatHistory.open({ sessionId: "ai-interactions", store: "memory", binary: BINARY });
  try {
    assert.deepEqual(await run(history), expected, "every request is the same");
    const loaded = await history.load();
    assert.deepEqual(clean(loaded), clean(array.messages), "messages come back equal");
    assertModelMessages(loaded);
    const first = /** @type {any} */ (loaded[1]).content;
    assert.deepEqual(first[0].providerOptions, { google: { signature: "CpwDAQw51-sig-1", interactionId: "v1_turn1" } });
    assert.deepEqual(first[2].providerOptions, { google: { signature: "CpwDAQw51-sig-2", interactionId: "v1_turn1" } });

    // Stored as the steps the provider would send back: the Interactions export replays them.
    const client = await history.client();
    assert.deepEqual(await convoView(client, "ai-interactions"), ["user", "assistant[isykdkwf,obimjy3p]", "tool:isykdkwf", "tool:obimjy3p", "assistant[]"]);
    const { messages } = await client.history({ session_id: "ai-interactions", repair: false });
    assert.equal(messages[1]?.native?.format, "gemini_interactions");
    assert.deepEqual((await client.validate({ session_id: "ai-interactions", format: "gemini_interactions" })).violations, []);
    const { payload, warnings } = await client.export({ session_id: "ai-interactions", format: "gemini_interactions" });
    assert.deepEqual(warnings, []);
    assert.deepEqual(/** @type {any[]} */ (payload["input"]).slice(1, 5), [
      { type: "thought", signature: "CpwDAQw51-sig-1", summary: [{ type: "text", text: "**Checking both cities**" }] },
      { type: "model_output", content: [{ type: "text", text: "Checking both cities." }] },
      { type: "function_call", id: "isykdkwf", name: "weather", arguments: { city: "Paris" }, signature: "CpwDAQw51-sig-2" },
      { type: "function_call", id: "obimjy3p", name: "weather", arguments: { city: "London" } },
    ]);
    assert.deepEqual(/** @type {any[]} */ (payload["input"]).at(-2), { type: "thought", signature: "CrwBAQw51-sig-3" }, "an empty summary is left out, as the provider leaves it");
    await assertValidEverywhere(client, "ai-interactions");
  } finally {
    await history.close();
  }
});

test("an Interactions turn another client stored (addResponse) reads as the Interactions provider gives it", async () => {
  const { ConvoClient } = await import("convo");
  const client = await ConvoClient.start({ binary: BINARY, store: "memory" });
  try {
    const session_id = "ai-interactions-foreign";
    const history = await ConvoChatHistory.open({ sessionId: session_id, client });
    await history.append([{ role: "user", content: "What's the weather like right now in Paris and in London?" }]);
    const response = JSON.parse(readFileSync(new URL("../fixtures/providers/gemini_interactions_thought_calls.json", import.meta.url), "utf8"));
    await client.addResponse({ session_id, format: "gemini_interactions", response });
    const loaded = await history.load();
    const options = (/** @type {string} */ signature) => ({ google: { signature, interactionId: response.id } });
    assert.deepEqual(loaded[1], {
      role: "assistant",
      content: [
        { type: "reasoning", text: response.steps[0].summary[0].text, providerOptions: options(response.steps[0].signature) },
        { type: "text", text: "I'll check the current weather in Paris and London.", providerOptions: { google: { interactionId: response.id } } },
        { type: "tool-call", toolCallId: "isykdkwf", toolName: "get_current_weather", input: { location: "Paris, France", unit: "celsius" }, providerOptions: { google: { interactionId: response.id } } },
        { type: "tool-call", toolCallId: "obimjy3p", toolName: "get_current_weather", input: { location: "London, UK", unit: "celsius" }, providerOptions: { google: { interactionId: response.id } } },
      ],
    });
    assertModelMessages(loaded);
    // Appended back as they read, they make the same steps (member order aside).
    await client.clear({ session_id });
    await history.append(loaded);
    const { messages } = await client.history({ session_id, repair: false });
    assert.deepEqual(messages[1]?.native?.body, response.steps);
  } finally {
    await client.dispose();
  }
});

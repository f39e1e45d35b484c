// @ts-check
// The framework adapters as a user gets them: test.sh copies this into the fresh project
// where the packed `convo` and `@convo/linux-x64-gnu` were installed (which pulled in no
// framework), then installs the frameworks there from the registry, and runs it on
// Node 22 (what they need) with no CONVO_BINARY: the subpath exports `convo/openai-agents`
// and `convo/ai-sdk`, the binary from the platform package, a SQLite file, a two-turn
// tool loop with parallel calls, against each framework's in-memory history.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, MemorySession, Runner, tool as agentTool } from "@openai/agents-core";
import { ScriptedModel, assistantMessage, functionCall } from "@openai/agents-core/testing";
import { generateText, modelMessageSchema, stepCountIs, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import { ConvoChatHistory } from "convo/ai-sdk";
import { ConvoSession } from "convo/openai-agents";

const dir = mkdtempSync(join(tmpdir(), "convo-smoke-frameworks-"));
const store = `sqlite:${join(dir, "sessions.db")}`;
/** @param {unknown} v */
const json = (v) => JSON.parse(JSON.stringify(v));

try {
  // The OpenAI Agents SDK: its runner, its scripted model, MemorySession beside ConvoSession.
  const runner = new Runner({ tracingDisabled: true });
  const weather = agentTool({ name: "get_weather", description: "Weather.", parameters: z.object({ city: z.string() }), execute: async ({ city }) => `${city}: rain` });
  /** @param {import("@openai/agents-core").Session} session */
  const agents = async (session) => {
    const model = new ScriptedModel([
      [
        { type: "reasoning", id: "rs_1", content: [{ type: "input_text", text: "Both." }], providerData: { encrypted_content: "gAAAA-sig" } },
        functionCall("get_weather", { city: "Paris" }, { callId: "call_1" }),
        functionCall("get_weather", { city: "London" }, { callId: "call_2" }),
      ],
      [assistantMessage("Umbrella.")],
      [assistantMessage("Still an umbrella.")],
    ]);
    const agent = new Agent({ name: "travel", instructions: "Be brief.", model, tools: [weather] });
    await runner.run(agent, "Paris and London?", { session });
    await runner.run(agent, "And tomorrow?", { session });
    return { last: json(model.lastCall?.request.input), items: json(await session.getItems()) };
  };
  const session = new ConvoSession({ sessionId: "smoke-agents", store });
  const memory = new MemorySession();
  const [mine, theirs] = [await agents(session), await agents(memory)];
  assert.deepEqual(mine, theirs, "the same model input and items as MemorySession");
  const convo = await session.client();
  for (const format of /** @type {const} */ (["openai_chat", "openai_responses", "anthropic_messages"])) {
    assert.deepEqual((await convo.validate({ session_id: "smoke-agents", format })).violations, [], format);
  }
  await session.close();
  console.log(`convo/openai-agents: ${mine.items.length} items, the model's last input the same as with MemorySession`);

  // The AI SDK: generateText with a mock model, a plain array beside ConvoChatHistory.
  const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 1, text: 1, reasoning: undefined } };
  /** @param {{ load(): Promise<import("ai").ModelMessage[]>, append(m: import("ai").ModelMessage[]): Promise<void> }} history */
  const aiSdk = async (history) => {
    /** @type {import("@ai-sdk/provider").LanguageModelV4GenerateResult[]} */
    const steps = [
      {
        content: [
          { type: "reasoning", text: "Both.", providerMetadata: { anthropic: { signature: "sig" } } },
          { type: "tool-call", toolCallId: "t1", toolName: "weather", input: '{"city":"Paris"}' },
          { type: "tool-call", toolCallId: "t2", toolName: "weather", input: '{"city":"London"}' },
        ],
        finishReason: { unified: "tool-calls", raw: "tool_use" },
        usage,
        warnings: [],
      },
      { content: [{ type: "text", text: "Umbrella." }], finishReason: { unified: "stop", raw: "end_turn" }, usage, warnings: [] },
      { content: [{ type: "text", text: "Still an umbrella." }], finishReason: { unified: "stop", raw: "end_turn" }, usage, warnings: [] },
    ];
    const model = new MockLanguageModelV4({ doGenerate: steps });
    const tools = { weather: tool({ description: "Weather.", inputSchema: z.object({ city: z.string() }), execute: async ({ city }) => `${city}: rain` }) };
    for (const text of ["Paris and London?", "And tomorrow?"]) {
      /** @type {import("ai").ModelMessage} */
      const user = { role: "user", content: text };
      const result = await generateText({ model, tools, messages: [...(await history.load()), user], stopWhen: stepCountIs(5) });
      await history.append([user, ...result.responseMessages]);
    }
    return { last: json(model.doGenerateCalls.at(-1)?.prompt), messages: json(await history.load()) };
  };
  /** @type {import("ai").ModelMessage[]} */
  const array = [];
  const history = await ConvoChatHistory.open({ sessionId: "smoke-ai", store });
  const [ours, plain] = [await aiSdk(history), await aiSdk({ load: async () => [...array], append: async (m) => void array.push(...m) })];
  assert.deepEqual(ours, plain, "the same prompt and messages as a plain array");
  for (const m of ours.messages) assert.ok(modelMessageSchema.safeParse(m).success);
  const client = await history.client();
  for (const format of /** @type {const} */ (["openai_chat", "openai_responses", "anthropic_messages"])) {
    assert.deepEqual((await client.validate({ session_id: "smoke-ai", format })).violations, [], format);
  }
  await history.close();
  console.log(`convo/ai-sdk: ${ours.messages.length} messages, the model's last prompt the same as with a plain array`);
  console.log("smoke-frameworks: ok");
} finally {
  rmSync(dir, { recursive: true, force: true });
}

// Sessions the tests build through the real binary: a conversation with every kind of
// message the transcript draws, and one full of hostile text.
export const PNG_1x1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/** An Anthropic Messages response with thinking, text and two parallel tool calls. */
export const anthropicResponse = {
  id: "msg_01",
  type: "message",
  role: "assistant",
  model: "claude-opus-4-6",
  content: [
    { type: "thinking", thinking: "Two cities: two independent weather calls.", signature: "c2lnbmF0dXJl" },
    { type: "text", text: "I'll check the **weather** in both cities." },
    { type: "tool_use", id: "toolu_paris", name: "get_weather", input: { location: "Paris" } },
    { type: "tool_use", id: "toolu_london", name: "get_weather", input: { location: "London" } },
  ],
  stop_reason: "tool_use",
  stop_sequence: null,
  usage: { input_tokens: 120, output_tokens: 80, cache_creation_input_tokens: 0, cache_read_input_tokens: 40, output_tokens_details: { thinking_tokens: 25 } },
};

/** A session with a system prompt, a user turn with an image, a reasoning assistant turn
 * with two calls and their results, a final answer in Markdown, then a call left cancelled
 * by the next user message. Returns its id and the ids of what was added. */
export async function richSession(client, title = "Packing for Paris and London") {
  const { session_id } = await client.createSession({ title, system: "You are a concise travel assistant." });
  const user = await client.addUser({ session_id, text: "What should I pack for Paris and London tomorrow?", images: [PNG_1x1] });
  const answer = await client.addResponse({ session_id, format: "anthropic_messages", response: anthropicResponse });
  const paris = await client.addToolResult({ session_id, tool_call_id: "toolu_paris", content: "Paris: 14 °C, rain" });
  const london = await client.addToolResult({ session_id, tool_call_id: "toolu_london", content: "London: 11 °C, wind" });
  const final = await client.addAssistant({
    session_id,
    text: "## Pack\n\n- an **umbrella** for Paris\n- a `windbreaker` for London\n\nSee [the forecast](https://example.com/forecast).",
  });
  const ask = await client.addAssistant({ session_id, tool_calls: [{ id: "call_late", name: "book_hotel", arguments: { city: "Paris" } }] });
  const next = await client.addUser({ session_id, text: "Never mind the hotel." });
  return { session_id, ids: { user: user.message_id, answer: answer.message_id, paris: paris.message_id, london: london.message_id, final: final.message_id, ask: ask.message_id, next: next.message_id } };
}

export const HOSTILE = [
  "<script>window.__convo_pwned = 'script'</script>",
  "<img src=x onerror=\"window.__convo_pwned = 'img'\">",
  '"><svg onload="window.__convo_pwned = 1">',
  "[click me](javascript:window.__convo_pwned=1) and <a href=\"javascript:alert(1)\">a</a>",
  "```html\n<script>alert(1)</script>\n```",
  "**<b>bold?</b>** &amp; &lt;escaped&gt;",
].join("\n\n");

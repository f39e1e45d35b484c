// The transcript's DOM, drawn from histories the real binary returns: the hooks of the
// protocol's section 19, tool results nested in their calls, reasoning collapsed, images as
// data: URLs through session/image, and hostile text kept as text.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Element, document } from "./dom.mjs";
import { HOSTILE, PNG_1x1, richSession } from "./fixtures.mjs";
import { lib, startClient } from "./helpers.mjs";

const { renderTranscript, imageDataUrl } = lib;

let convo;
before(async () => (convo = await startClient()));
after(() => convo.end());

/** Draws a session as the extension does: history without repair, images as refs, each
 * ref through session/image. */
async function draw(session_id, highlight) {
  const { client } = convo;
  const session = await client.getSession({ session_id });
  const parentLabel = session.forked_from ? await lib.labelOf(client, session.forked_from.session_id) : undefined;
  const { messages } = await client.history({ session_id, repair: false, images: "ref" });
  const images = {};
  for (const m of messages) {
    for (const image of m.images ?? []) {
      const { data, media_type } = await client.image({ ref: image.ref });
      images[image.ref] = imageDataUrl(media_type, data);
    }
  }
  const label = lib.sessionLabel(session, session.title ? undefined : lib.firstUserLine(messages));
  return { root: renderTranscript(document, { session, messages, images, highlight, label, parentLabel }), messages, session };
}

const withAttr = (name, value) => (e) => e.getAttribute(name) !== null && (value === undefined || e.getAttribute(name) === value);

describe("transcript rendering", () => {
  test("every stored message has one element with data-message-id and data-role", async () => {
    const { session_id } = await richSession(convo.client);
    const { root, messages } = await draw(session_id);
    assert.equal(messages.length, 8);
    for (const m of messages) {
      const found = root.findAll(withAttr("data-message-id", m.id));
      assert.equal(found.length, 1, `message ${m.id} (${m.role})`);
      assert.equal(found[0].getAttribute("data-role"), m.role);
    }
  });

  test("a tool call's element holds its result, nested", async () => {
    const { session_id, ids } = await richSession(convo.client);
    const { root } = await draw(session_id);
    for (const [call, result] of [["toolu_paris", ids.paris], ["toolu_london", ids.london]]) {
      const element = root.find(withAttr("data-tool-call-id", call));
      assert.ok(element, call);
      assert.equal(element.tag, "details");
      assert.equal(element.getAttribute("open"), null, "folded");
      const nested = element.find(withAttr("data-message-id", result));
      assert.ok(nested, `${result} inside ${call}`);
      assert.equal(nested.getAttribute("data-role"), "tool");
      assert.match(element.text, /get_weather/);
      assert.match(element.text, /"location": "Paris"|"location": "London"/);
    }
    // The calls sit in the assistant message that made them.
    const assistant = root.find(withAttr("data-message-id", ids.answer));
    assert.equal(assistant.findAll(withAttr("data-tool-call-id")).length, 2);
  });

  test("a cancelled result is marked, inside its call", async () => {
    const { session_id } = await richSession(convo.client);
    const { root } = await draw(session_id);
    const call = root.find(withAttr("data-tool-call-id", "call_late"));
    const result = call.find(withAttr("data-role", "tool"));
    assert.ok(result, "the synthetic result is nested in its call");
    assert.match(result.getAttribute("class"), /mark-cancelled/);
    assert.ok(result.find(withAttr("data-mark", "cancelled")));
    assert.match(result.text, /Cancelled/);
  });

  test("reasoning is a collapsed <details data-kind=reasoning> with its token count", async () => {
    const { session_id, ids } = await richSession(convo.client);
    const { root } = await draw(session_id);
    const assistant = root.find(withAttr("data-message-id", ids.answer));
    const reasoning = assistant.find(withAttr("data-kind", "reasoning"));
    assert.equal(reasoning.tag, "details");
    assert.equal(reasoning.getAttribute("open"), null);
    assert.match(reasoning.text, /Reasoning · 25 tokens/);
    assert.match(reasoning.text, /Two cities: two independent weather calls\./);
    assert.match(assistant.text, /160 in · 80 out · 40 cache read · 25 reasoning/);
    // Only one reasoning block, in the message that had it.
    assert.equal(root.findAll(withAttr("data-kind", "reasoning")).length, 1);
  });

  test("an Interactions turn's thought summary is its reasoning; a screenshot result shows under its call", async () => {
    const { client } = convo;
    const { session_id } = await client.createSession({});
    await client.addUser({ session_id, text: "Look at the page." });
    const steps = [
      { signature: "c2ln", summary: [{ text: "One screenshot will do.", type: "text" }], type: "thought" },
      { id: "shot1", type: "function_call", name: "screenshot", arguments: { url: "https://example.com" } },
    ];
    const turn = await client.addMessage({ session_id, message: { role: "assistant", native: { format: "gemini_interactions", model: null, body: steps } } });
    const result = await client.addToolResult({ session_id, tool_call_id: "shot1", content: "Captured.", images: [PNG_1x1] });
    const { root } = await draw(session_id);
    const assistant = root.find(withAttr("data-message-id", turn.message_id));
    assert.match(assistant.find(withAttr("data-kind", "reasoning")).text, /One screenshot will do\./);
    const call = assistant.find(withAttr("data-tool-call-id", "shot1"));
    const shown = call.find(withAttr("data-message-id", result.message_id));
    assert.equal(shown.findAll((e) => e.tag === "img")[0].getAttribute("src"), `data:image/png;base64,${PNG_1x1}`);
  });

  test("images are <img> with data: URLs read through session/image", async () => {
    const { session_id, ids } = await richSession(convo.client);
    const { root } = await draw(session_id);
    const user = root.find(withAttr("data-message-id", ids.user));
    const imgs = user.findAll((e) => e.tag === "img");
    assert.equal(imgs.length, 1);
    assert.equal(imgs[0].getAttribute("src"), `data:image/png;base64,${PNG_1x1}`);
  });

  test("Markdown becomes elements; a link keeps its target in data-href, not href", async () => {
    const { session_id, ids } = await richSession(convo.client);
    const { root } = await draw(session_id);
    const final = root.find(withAttr("data-message-id", ids.final));
    assert.ok(final.find((e) => e.tag === "h2" && e.text === "Pack"));
    assert.deepEqual(final.findAll((e) => e.tag === "li").map((e) => e.text), ["an umbrella for Paris", "a windbreaker for London"]);
    assert.ok(final.find((e) => e.tag === "strong" && e.text === "umbrella"));
    assert.ok(final.find((e) => e.tag === "code" && e.text === "windbreaker"));
    const link = final.find((e) => e.tag === "a");
    assert.equal(link.getAttribute("data-href"), "https://example.com/forecast");
    assert.equal(link.getAttribute("href"), "#");
  });

  test("the session's summary: title, id, message count, usage in total", async () => {
    const { session_id } = await richSession(convo.client);
    const { root } = await draw(session_id);
    assert.equal(root.find((e) => e.tag === "h1").text, "Packing for Paris and London");
    assert.match(root.find((e) => e.tag === "dl").text, new RegExp(`session${session_id}messages8usage160 in · 80 out`));
  });

  test("an untitled session is headed by its first user line; a fork names its parent by its label beside its id, a parent gone by its id", async () => {
    const { client } = convo;
    const { session_id, ids } = await richSession(client);
    const fork = await client.fork({ session_id, at_message_id: ids.paris });
    const facts = async (id) => (await draw(id)).root.find((e) => e.tag === "dl").text;
    assert.match(await facts(fork.session_id), new RegExp(`forked fromPacking for Paris and London \\(${session_id}\\) at ${ids.paris}messages`));
    // An untitled parent: its first user line, as the sessions view labels it.
    const untitled = await client.createSession({});
    const asked = await client.addUser({ session_id: untitled.session_id, text: "\n  How do I undo a git commit?\nAnd keep the changes?" });
    const whole = await client.fork({ session_id: untitled.session_id });
    const at = ` at ${asked.message_id}messages`;
    assert.equal((await draw(whole.session_id)).root.find((e) => e.tag === "h1").text, "How do I undo a git commit?");
    assert.match(await facts(whole.session_id), new RegExp(`forked fromHow do I undo a git commit\\? \\(${untitled.session_id}\\)${at}`));
    await client.deleteSession({ session_id: untitled.session_id });
    assert.match(await facts(whole.session_id), new RegExp(`forked from${untitled.session_id}${at}`));
  });

  test("a stream in progress is shown after the messages, marked, without a message id", async () => {
    const { client } = convo;
    const { session_id } = await client.createSession({ title: "streaming" });
    const session = await client.getSession({ session_id });
    const at = "2026-01-01T00:00:00.000000Z";
    const draft = [
      { id: null, role: "user", content: "Tell me a story.", name: null, tool_call_id: null, tool_calls: null, images: null, metadata: null, native: null, usage: null, created_at: at },
      { id: null, role: "assistant", content: "Once upon a <time>", name: null, tool_call_id: null, tool_calls: null, images: null, metadata: null, native: null, usage: null, created_at: at },
    ];
    const root = renderTranscript(document, { session, messages: [], images: {}, draft });
    const drafts = root.findAll(withAttr("data-draft"));
    assert.deepEqual(drafts.map((e) => e.getAttribute("data-role")), ["user", "assistant"]);
    assert.equal(root.findAll(withAttr("data-message-id")).length, 0);
    assert.ok(drafts.every((e) => e.find(withAttr("data-mark", "streaming…"))));
    assert.ok(drafts[1].texts().includes("Once upon a <time>"));
    assert.equal(root.find((e) => /empty/.test(e.getAttribute("class") ?? "")), undefined);
  });

  test("a search hit is marked", async () => {
    const { session_id, ids } = await richSession(convo.client);
    const { root } = await draw(session_id, ids.final);
    assert.match(root.find(withAttr("data-message-id", ids.final)).getAttribute("class"), /highlight/);
    assert.equal(root.findAll((e) => /highlight/.test(e.getAttribute("class") ?? "")).length, 1);
  });
});

describe("hostile text", () => {
  test("markup in messages, names, titles and tool output is text, never elements", async () => {
    const { client } = convo;
    const { session_id } = await client.createSession({ title: "<script>window.__convo_pwned='title'</script>", system: "<img src=x onerror=alert(1)>" });
    await client.addUser({ session_id, text: HOSTILE });
    await client.addAssistant({ session_id, text: HOSTILE, tool_calls: [{ id: "c<script>", name: "<img src=x onerror=alert(1)>", arguments: { "<b>": "</pre><script>alert(1)</script>" } }] });
    await client.addToolResult({ session_id, tool_call_id: "c<script>", content: HOSTILE });
    await client.addMessage({ session_id, message: { role: "user", name: "<svg onload=alert(1)>", content: [{ type: "text", text: HOSTILE }, { type: "<script>", x: "<script>" }] } });
    const { root } = await draw(session_id);
    const tags = new Set(root.findAll(() => true).map((e) => e.tag));
    for (const bad of ["script", "img", "svg", "iframe", "object", "embed", "b", "style", "link", "form", "input"]) {
      assert.ok(!tags.has(bad), `a <${bad}> element was made`);
    }
    // No attribute carries an event handler or a javascript: URL.
    for (const e of root.findAll(() => true)) {
      for (const [name, value] of e.attributes) {
        assert.ok(!/^on/i.test(name), `${e.tag} has ${name}`);
        if (name === "href" || name === "src") assert.doesNotMatch(value, /^\s*javascript:/i);
      }
    }
    // The text is all there, as text.
    const texts = root.texts().join("\n");
    assert.ok(texts.includes("<script>window.__convo_pwned = 'script'</script>"));
    assert.ok(texts.includes("<img src=x onerror=\"window.__convo_pwned = 'img'\">"));
    assert.ok(texts.includes("<script>window.__convo_pwned='title'</script>"));
    assert.ok(texts.includes("<svg onload=alert(1)>"));
    assert.ok(root.html.includes("&lt;script&gt;window.__convo_pwned = 'script'&lt;/script&gt;"));
    // The javascript: link is a link the extension will not open (flagged, data-href only).
    const link = root.find((e) => e.tag === "a" && e.getAttribute("data-href")?.startsWith("javascript:"));
    assert.ok(link);
    assert.equal(link.getAttribute("href"), "#");
    assert.equal(link.getAttribute("data-unsafe"), "");
    assert.equal(lib.isSafeLink(link.getAttribute("data-href")), false);
  });

  test("only data: URLs of image types are used for images", () => {
    assert.equal(imageDataUrl("image/png", PNG_1x1), `data:image/png;base64,${PNG_1x1}`);
    assert.equal(imageDataUrl("image/svg+xml", "PHN2Zz4="), undefined);
    assert.equal(imageDataUrl("text/html", "PHNjcmlwdD4="), undefined);
    assert.equal(imageDataUrl("image/png", "abc\"><script>"), undefined);
    assert.equal(imageDataUrl('image/png;x="', PNG_1x1), undefined);
  });

  test("the renderer uses only createElement, createTextNode, setAttribute, appendChild", async () => {
    const { session_id } = await richSession(convo.client);
    const { client } = convo;
    const session = await client.getSession({ session_id });
    const { messages } = await client.history({ session_id, repair: false, images: "ref" });
    const used = new Set();
    const spy = (target, name) =>
      new Proxy(target, {
        get(t, p) {
          used.add(`${name}.${String(p)}`);
          const v = t[p];
          return typeof v === "function" ? v.bind(t) : v;
        },
      });
    const doc = {
      createElement: (tag) => spy(new Element(tag), "element"),
      createTextNode: (text) => document.createTextNode(text),
    };
    renderTranscript(spy(doc, "document"), { session, messages, images: {} });
    assert.deepEqual([...used].sort(), ["document.createElement", "document.createTextNode", "element.appendChild", "element.setAttribute"]);
  });
});

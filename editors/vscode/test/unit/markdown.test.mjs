// Markdown → nodes: what chat models write, and nothing taken as HTML.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { lib } from "./helpers.mjs";

const { parseMarkdown, inline, plainText, transcriptMarkdown, guessFormat, target } = lib;

const tags = (nodes) => nodes.map((n) => (typeof n === "string" ? n : { [n.tag]: n.href ? [n.href, ...tags(n.children)] : tags(n.children) }));

describe("markdown", () => {
  test("blocks: headings, paragraphs with their line breaks, rules, quotes", () => {
    assert.deepEqual(tags(parseMarkdown("# Title\n\nline one\nline two\n\n---\n\n> quoted\n> more")), [
      { h1: ["Title"] },
      { p: ["line one", { br: [] }, "line two"] },
      { hr: [] },
      { blockquote: [{ p: ["quoted", { br: [] }, "more"] }] },
    ]);
  });

  test("code: fenced (with its language, any markup inside kept as text) and indented", () => {
    const [fenced] = parseMarkdown("```html\n<script>alert(1)</script>\n**not bold**\n```");
    assert.equal(fenced.tag, "pre");
    assert.equal(fenced.lang, "html");
    assert.deepEqual(tags(fenced.children), [{ code: ["<script>alert(1)</script>\n**not bold**"] }]);
    assert.deepEqual(tags(parseMarkdown("    indented\n    code")), [{ pre: [{ code: ["indented\ncode"] }] }]);
    assert.deepEqual(tags(parseMarkdown("```\nunclosed")), [{ pre: [{ code: ["unclosed"] }] }]);
  });

  test("lists, ordered and not, with nested items", () => {
    assert.deepEqual(tags(parseMarkdown("- one\n- **two**\n  - two.a\n\n1. first\n2. second")), [
      { ul: [{ li: ["one"] }, { li: [{ p: [{ strong: ["two"] }] }, { ul: [{ li: ["two.a"] }] }] }] },
      { ol: [{ li: ["first"] }, { li: ["second"] }] },
    ]);
  });

  test("tables", () => {
    assert.deepEqual(tags(parseMarkdown("| a | b |\n|---|:-:|\n| 1 | `2` |")), [
      { table: [{ thead: [{ tr: [{ th: ["a"] }, { th: ["b"] }] }] }, { tbody: [{ tr: [{ td: ["1"] }, { td: [{ code: ["2"] }] }] }] }] },
    ]);
  });

  test("inline: strong, emphasis, code, strike-through, links, bare URLs, escapes", () => {
    assert.deepEqual(tags(inline("**b** and *i* and _u_ and `c*d*` and ~~s~~")), [
      { strong: ["b"] }, " and ", { em: ["i"] }, " and ", { em: ["u"] }, " and ", { code: ["c*d*"] }, " and ", { del: ["s"] },
    ]);
    assert.deepEqual(tags(inline("see [the *docs*](https://example.com/a_(b)) or https://x.org/y.")), [
      "see ", { a: ["https://example.com/a_(b)", "the ", { em: ["docs"] }] }, " or ", { a: ["https://x.org/y", "https://x.org/y"] }, ".",
    ]);
    assert.deepEqual(tags(inline("snake_case_name and 2 * 3 * 4 and \\*not em\\*")), ["snake_case_name and 2 * 3 * 4 and *not em*"]);
    assert.deepEqual(tags(inline("unclosed **bold and `tick")), ["unclosed **bold and `tick"]);
  });

  test("HTML is text", () => {
    assert.deepEqual(tags(parseMarkdown('<div onclick="x">hi</div>\n<script>alert(1)</script>')), [
      { p: ['<div onclick="x">hi</div>', { br: [] }, "<script>alert(1)</script>"] },
    ]);
    assert.equal(plainText(parseMarkdown("**a** [b](c)")[0].children), "a b");
  });
});

describe("copy as Markdown, import formats, command arguments", () => {
  test("a transcript as Markdown: headings per message, calls and results fenced", () => {
    const session = { session_id: "s1", title: "Trip", system: "terse" };
    const text = transcriptMarkdown(session, [
      { id: "1", role: "user", content: "hi", tool_calls: null, metadata: null },
      { id: "2", role: "assistant", content: null, tool_calls: [{ id: "c1", name: "ls", arguments: { dir: "```" } }], metadata: null },
      { id: "3", role: "tool", tool_call_id: "c1", content: "a\nb", metadata: { synthetic: true } },
    ]);
    assert.equal(
      text,
      '# Trip\n\n## system\n\nterse\n\n## user\n\nhi\n\n## assistant\n\nTool call `ls` (`c1`):\n\n````json\n{\n  "dir": "```"\n}\n````\n\n## tool — cancelled\n\nResult of `c1`:\n\n```\na\nb\n```\n',
    );
  });

  test("the format of a file to import is guessed from its shape", () => {
    assert.equal(guessFormat({ contents: [] }), "gemini_contents");
    assert.equal(guessFormat({ input: [{ type: "user_input", content: [{ type: "text", text: "hi" }] }] }), "gemini_interactions");
    assert.equal(guessFormat({ system_instruction: "Be brief.", input: [] }), "gemini_interactions");
    assert.equal(guessFormat({ input: [{ type: "function_call", call_id: "c", name: "f", arguments: "{}" }] }), "openai_responses");
    assert.equal(guessFormat({ input: [] }), "openai_responses");
    assert.equal(guessFormat({ system: "x", messages: [] }), "anthropic_messages");
    assert.equal(guessFormat({ messages: [{ role: "system", content: "x" }] }), "openai_chat");
    assert.equal(guessFormat({ session_id: "a", messages: [] }), "convo");
  });

  test("commands read (sessionId, messageId?), a tree node or a webview context", () => {
    assert.deepEqual(target(["s", "m"]), { sessionId: "s", messageId: "m" });
    assert.deepEqual(target(["s"]), { sessionId: "s", messageId: undefined });
    assert.deepEqual(target([{ kind: "session", info: { session_id: "s" } }]), { sessionId: "s" });
    assert.deepEqual(target([{ webviewSection: "message", sessionId: "s", messageId: "m" }]), { sessionId: "s", messageId: "m" });
    assert.deepEqual(target([]), {});
  });
});

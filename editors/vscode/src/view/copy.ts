/**
 * A transcript as Markdown text, for "Copy as Markdown": a heading per message, the text
 * as it was written, tool calls and results as fenced JSON and text, reasoning left out.
 */
import type { Message, SessionInfo } from "convo";
import { callParts, contentText, marks } from "./render.js";

/** A fence longer than any run of backticks in `text`. */
function fence(text: string, lang = ""): string {
  const longest = Math.max(2, ...Array.from(text.matchAll(/`+/g), (m) => m[0].length));
  const f = "`".repeat(longest + 1);
  return `${f}${lang}\n${text}\n${f}`;
}

export function transcriptMarkdown(session: SessionInfo, messages: readonly Message[]): string {
  const out: string[] = [`# ${session.title || session.session_id}`];
  if (session.system) out.push(`## system\n\n${session.system}`);
  for (const m of messages) {
    const flags = marks(m);
    const head = `## ${m.role}${m.name ? ` (${m.name})` : ""}${flags.length ? ` — ${flags.join(", ")}` : ""}`;
    const parts = [head];
    const text = contentText(m.content);
    if (m.role === "tool") {
      parts.push(`Result of \`${m.tool_call_id}\`:`);
      if (text) parts.push(fence(text));
    } else if (text) parts.push(text);
    for (const call of m.tool_calls ?? []) {
      const { name, args } = callParts(call);
      parts.push(`Tool call \`${name}\` (\`${call.id}\`):\n\n${fence(typeof args === "string" ? args : JSON.stringify(args, null, 2), "json")}`);
    }
    const images = m.images?.length ?? 0;
    if (images) parts.push(`(${images} image${images === 1 ? "" : "s"})`);
    out.push(parts.join("\n\n"));
  }
  return out.join("\n\n") + "\n";
}

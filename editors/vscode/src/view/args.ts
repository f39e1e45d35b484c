/**
 * What the commands read from their arguments and files, apart from VS Code: the session
 * and message a command is for, and the format of a file to import.
 */
import type { SessionInfo } from "convo";

/** `(sessionId, messageId?)` from whatever called: ids, a tree node, a webview context. */
export function target(args: readonly unknown[]): { sessionId?: string; messageId?: string } {
  const [a, b] = args;
  if (typeof a === "string") return { sessionId: a, messageId: typeof b === "string" ? b : undefined };
  if (a && typeof a === "object") {
    const o = a as { kind?: string; info?: SessionInfo; sessionId?: unknown; messageId?: unknown };
    if (o.kind === "session" && o.info) return { sessionId: o.info.session_id };
    return {
      sessionId: typeof o.sessionId === "string" ? o.sessionId : undefined,
      messageId: typeof o.messageId === "string" ? o.messageId : undefined,
    };
  }
  return {};
}

/** Which format a file to import looks like. */
export function guessFormat(data: unknown): string {
  if (!data || typeof data !== "object") return "convo";
  const d = data as Record<string, unknown>;
  if (Array.isArray(d.contents)) return "gemini_contents";
  if (Array.isArray(d.input)) {
    const steps = ["user_input", "model_output", "thought", "function_call", "function_result"];
    const typed = (d.input as Array<{ type?: unknown }>).some((s) => typeof s?.type === "string" && steps.includes(s.type) && s.type !== "function_call");
    return typed || typeof d.system_instruction === "string" ? "gemini_interactions" : "openai_responses";
  }
  if (Array.isArray(d.messages)) {
    const msgs = d.messages as Array<Record<string, unknown>>;
    if ("session_id" in d || "system_prompt" in d || msgs.some((m) => m && "tool_call_id" in m && m.role === "tool" && "created_at" in m)) return "convo";
    if (typeof d.system === "string" || Array.isArray(d.system) || msgs.some((m) => Array.isArray(m?.content) && (m.content as Array<{ type?: string }>).some((p) => p?.type === "tool_use" || p?.type === "tool_result"))) return "anthropic_messages";
    if (msgs.some((m) => m?.role === "system" || m?.role === "tool")) return "openai_chat";
    return "convo";
  }
  return "convo";
}


/**
 * The commands (palette, the view's and the transcript's context menus). Each is one call
 * of the Node client. Those that act on a session take `(sessionId, messageId?)` from code
 * or a menu — a tree item and a transcript's context-menu target are read the same way —
 * and ask with a quick pick when they come without them.
 */
import { readFile } from "node:fs/promises";
import type { ConvoClient, Format, Message } from "convo";
import * as vscode from "vscode";
import type { Connection } from "./connection.js";
import type { Transcripts } from "./transcript.js";
import type { Node, SessionsProvider } from "./tree.js";
import { transcriptMarkdown } from "./view/copy.js";
import { contentText, usageText } from "./view/render.js";
import { guessFormat, target } from "./view/args.js";
import { firstMessages, firstUserLine, sessionDescription, sessionLabel } from "./view/sessions.js";

export const FORMATS: readonly Format[] = ["openai_chat", "openai_responses", "anthropic_messages", "gemini_contents"];

/** Registers every command. */
export function registerCommands(
  connection: Connection,
  tree: SessionsProvider,
  view: vscode.TreeView<Node>,
  transcripts: Transcripts,
): vscode.Disposable[] {
  const client = () => connection.client();

  /** A session from the arguments, the transcript in front, or a pick. */
  const session = async (args: unknown[], placeHolder: string, useActive = true): Promise<string | undefined> => {
    const t = target(args);
    if (t.sessionId) return t.sessionId;
    const active = useActive ? transcripts.active : undefined;
    return pickSession(await client(), placeHolder, active);
  };

  const refreshAndReveal = async (id: string) => {
    await tree.refresh();
    const node = tree.nodeOf(id);
    if (node && view.visible) await view.reveal(node, { select: true, focus: false }).then(undefined, () => {});
  };

  const commands: Record<string, (...args: unknown[]) => Promise<unknown>> = {
    "convo.openSession": async (...args) => {
      const t = target(args);
      const id = t.sessionId ?? (await pickSession(await client(), "Open which session?"));
      if (id) await transcripts.open(id, t.messageId);
    },

    "convo.search": async () => {
      const query = await vscode.window.showInputBox({
        title: "Convo: Search",
        ignoreFocusOut: true,
        prompt: "Words all must match; `prefix*`; \"a phrase\"",
        placeHolder: "search every session's messages",
      });
      if (!query?.trim()) return;
      const c = await client();
      const { hits } = await c.search({ query, limit: 200 });
      if (hits.length === 0) {
        void vscode.window.showInformationMessage(`Convo: nothing matches ${query}`);
        return;
      }
      const titles = new Map<string, string>();
      await Promise.all(
        [...new Set(hits.map((h) => h.session_id))].map(async (id) => {
          const info = await c.getSession({ session_id: id }).catch(() => undefined);
          if (info) titles.set(id, sessionLabel(info));
        }),
      );
      const picked = await vscode.window.showQuickPick(
        hits.map((h) => ({ label: h.snippet, description: `${h.role} · ${titles.get(h.session_id) ?? h.session_id}`, detail: `${h.session_id}, message ${h.index + 1}`, hit: h })),
        { title: `Convo: ${hits.length} match${hits.length === 1 ? "" : "es"} for ${query}`, matchOnDescription: true, matchOnDetail: true, ignoreFocusOut: true },
      );
      if (picked) await transcripts.open(picked.hit.session_id, picked.hit.message_id);
    },

    "convo.fork": async (...args) => {
      const t = target(args);
      const id = await session(args, "Fork which session?");
      if (!id) return;
      const c = await client();
      let at = t.messageId;
      if (!t.sessionId) {
        const pick = await pickMessage(c, id, "Fork up to which message?", true);
        if (pick === undefined) return;
        at = pick ?? undefined;
      }
      const fork = await c.fork({ session_id: id, ...(at ? { at_message_id: at } : {}) });
      await refreshAndReveal(fork.session_id);
      await transcripts.open(fork.session_id);
      return fork.session_id;
    },

    "convo.rewind": async (...args) => {
      const t = target(args);
      const id = await session(args, "Rewind which session?");
      if (!id) return;
      const c = await client();
      const to = t.messageId ?? (await pickMessage(c, id, "Keep every message up to which one?", false));
      if (!to) return;
      const { messages } = await c.history({ session_id: id, repair: false, images: "ref" });
      const after = messages.length - 1 - messages.findIndex((m) => m.id === to);
      const answer = await vscode.window.showWarningMessage(
        `Rewind drops the ${after} message${after === 1 ? "" : "s"} after this one. Keep them as a fork?`,
        { modal: true },
        "Rewind, Keep a Fork",
        "Rewind",
      );
      if (!answer) return;
      const r = await c.rewind({ session_id: id, to_message_id: to, archive: answer !== "Rewind" });
      void vscode.window.showInformationMessage(`Convo: ${r.removed} message${r.removed === 1 ? "" : "s"} dropped${r.archived_session_id ? `, kept in ${r.archived_session_id}` : ""}.`);
      await tree.refresh();
    },

    "convo.exportAs": async (...args) => {
      const id = await session(args, "Export which session?");
      if (!id) return;
      const format = await vscode.window.showQuickPick(
        FORMATS.map((f) => ({ label: f, description: FORMAT_NAMES[f] })),
        { title: "Convo: Export As", placeHolder: "the request body of which API?", ignoreFocusOut: true },
      );
      if (!format) return;
      const { payload, warnings } = await (await client()).export({ session_id: id, format: format.label as Format });
      const doc = await vscode.workspace.openTextDocument({ language: "json", content: JSON.stringify(payload, null, 2) + "\n" });
      await vscode.window.showTextDocument(doc, { preview: false });
      if (warnings.length) {
        void vscode.window.showWarningMessage(`Convo: ${warnings.length} warning${warnings.length === 1 ? "" : "s"}: ${warnings.map((w) => `#${w.index}: ${w.message}`).join("; ").slice(0, 500)}`);
      }
      return doc;
    },

    "convo.copyMarkdown": async (...args) => {
      const id = await session(args, "Copy which session?");
      if (!id) return;
      const c = await client();
      const [info, { messages }] = await Promise.all([c.getSession({ session_id: id }), c.history({ session_id: id, repair: false, images: "ref" })]);
      const text = transcriptMarkdown(info, messages);
      await vscode.env.clipboard.writeText(text);
      void vscode.window.showInformationMessage(`Convo: ${messages.length} messages copied as Markdown.`);
      return text;
    },

    "convo.delete": async (...args) => {
      const id = await session(args, "Delete which session?", false);
      if (!id) return;
      const c = await client();
      const info = await c.getSession({ session_id: id });
      const ok = await vscode.window.showWarningMessage(
        `Delete "${sessionLabel(info)}" (${info.message_count} messages)? Its forks keep their history.`,
        { modal: true },
        "Delete",
      );
      if (ok !== "Delete") return;
      await c.deleteSession({ session_id: id });
      await tree.refresh();
    },

    "convo.trim": async (...args) => {
      const id = await session(args, "Trim which session?");
      if (!id) return;
      const n = await vscode.window.showInputBox({
        title: "Convo: Trim",
        ignoreFocusOut: true,
        prompt: "Keep the last N turns (a turn: a user message and all that follows it); 0 drops every message",
        value: "10",
        validateInput: (v) => (/^\d+$/.test(v.trim()) ? undefined : "a whole number"),
      });
      if (n === undefined) return;
      const r = await (await client()).trim({ session_id: id, max_turns: Number(n.trim()) });
      void vscode.window.showInformationMessage(`Convo: ${r.removed} message${r.removed === 1 ? "" : "s"} removed.`);
      await tree.refresh();
    },

    "convo.compact": async (...args) => {
      const id = await session(args, "Compact which session?");
      if (!id) return;
      const keep = await vscode.window.showInputBox({
        title: "Convo: Compact (1/2)",
        ignoreFocusOut: true,
        prompt: "Keep the last N turns as they are; the turns before become one summary message",
        value: "2",
        validateInput: (v) => (/^[1-9]\d*$/.test(v.trim()) ? undefined : "a whole number, at least 1"),
      });
      if (keep === undefined) return;
      const summary = await vscode.window.showInputBox({
        title: "Convo: Compact (2/2)",
        ignoreFocusOut: true,
        prompt: "The summary of the earlier turns (it replaces them)",
        validateInput: (v) => (v.trim() ? undefined : "a summary is needed"),
      });
      if (!summary) return;
      const r = await (await client()).compact({ session_id: id, keep_turns: Number(keep.trim()), summary });
      void vscode.window.showInformationMessage(r.removed ? `Convo: ${r.removed} messages replaced by the summary.` : "Convo: nothing to compact.");
      await tree.refresh();
    },

    "convo.import": async (...args) => {
      const given = typeof args[0] === "string" ? vscode.Uri.file(args[0]) : args[0] instanceof vscode.Uri ? args[0] : undefined;
      const uri =
        given ??
        (await vscode.window.showOpenDialog({ title: "Convo: Import", canSelectMany: false, filters: { JSON: ["json"], "All files": ["*"] } }))?.[0];
      if (!uri) return;
      const data: unknown = JSON.parse(uri.scheme === "file" ? await readFile(uri.fsPath, "utf8") : new TextDecoder().decode(await vscode.workspace.fs.readFile(uri)));
      const guess = guessFormat(data);
      const format =
        typeof args[1] === "string"
          ? args[1]
          : (
              await vscode.window.showQuickPick(
                [{ label: "convo", description: "session/to_dict (convo export, agent libraries' to_dict)" }, ...FORMATS.map((f) => ({ label: f, description: FORMAT_NAMES[f] }))].map((i) => ({
                  ...i,
                  picked: i.label === guess,
                  detail: i.label === guess ? "looks like this one" : undefined,
                })),
                { title: "Convo: Import", placeHolder: "what the file holds", ignoreFocusOut: true },
              )
            )?.label;
      if (!format) return;
      const info = await (await client()).fromDict({ data, ...(format === "convo" ? {} : { format: format as Format }) } as Parameters<ConvoClient["fromDict"]>[0]);
      await refreshAndReveal(info.session_id);
      await transcripts.open(info.session_id);
      return info.session_id;
    },

    "convo.showUsage": async (...args) => {
      const id = await session(args, "Usage of which session?");
      if (!id) return;
      const c = await client();
      const info = await c.getSession({ session_id: id });
      const tokens = await c.countTokens({ session_id: id }).then((r) => r.tokens, () => undefined);
      const text =
        `${sessionLabel(info)}: ${sessionDescription(info)}. Spent: ${usageText(info.usage) || "nothing recorded"}.` +
        (tokens !== undefined ? ` The history is ${tokens.toLocaleString("en-US")} tokens now.` : "");
      void vscode.window.showInformationMessage(`Convo: ${text}`);
      return { usage: info.usage, tokens };
    },

    "convo.refresh": async () => {
      await tree.refresh();
    },

    "convo.loadMore": async () => {
      await tree.loadMore();
    },
  };

  return Object.entries(commands).map(([name, run]) =>
    vscode.commands.registerCommand(name, async (...args: unknown[]) => {
      try {
        return await run(...args);
      } catch (e) {
        void vscode.window.showErrorMessage(`Convo: ${e instanceof Error ? e.message : String(e)}`);
        return undefined;
      }
    }),
  );
}

const FORMAT_NAMES: Record<Format, string> = {
  openai_chat: "OpenAI Chat Completions",
  openai_responses: "OpenAI Responses",
  anthropic_messages: "Anthropic Messages",
  gemini_contents: "Gemini generateContent",
  gemini_interactions: "Gemini Interactions",
};

// Every pick and input keeps open when focus moves (ignoreFocusOut): a transcript whose
// page loads again as it is shown takes the focus for a moment, which would close it.

/** A quick pick of sessions (the newest 200), the active transcript's first. */
async function pickSession(client: ConvoClient, placeHolder: string, active?: string): Promise<string | undefined> {
  const { sessions } = await client.listSessions({ limit: 200 });
  const items = await Promise.all(
    sessions.map(async (s) => {
      const first = s.title ? undefined : firstUserLine(await firstMessages(client, s.session_id).catch(() => [] as Message[]));
      return { label: sessionLabel(s, first), description: s.session_id, detail: sessionDescription(s), id: s.session_id };
    }),
  );
  if (active) items.sort((a, b) => Number(b.id === active) - Number(a.id === active));
  const picked = await vscode.window.showQuickPick(items, { title: "Convo", placeHolder, matchOnDescription: true, matchOnDetail: true, ignoreFocusOut: true });
  return picked?.id;
}

/** A quick pick of a session's messages; `whole` offers "the whole history" first (null). */
async function pickMessage(client: ConvoClient, sessionId: string, placeHolder: string, whole: boolean): Promise<string | null | undefined> {
  const { messages } = await client.history({ session_id: sessionId, repair: false, images: "ref" });
  const items: Array<vscode.QuickPickItem & { id: string | null }> = [];
  if (whole) items.push({ label: "The whole history", description: `${messages.length} messages`, id: null });
  messages.forEach((m, n) => {
    if (!m.id) return;
    const text = contentText(m.content).replace(/\s+/g, " ").trim();
    const calls = (m.tool_calls ?? []).length;
    items.push({ label: `${n + 1}. ${m.role}`, description: text.slice(0, 120) || (calls ? `${calls} tool call${calls === 1 ? "" : "s"}` : ""), id: m.id });
  });
  const picked = await vscode.window.showQuickPick(items.reverse().sort((a, b) => Number(b.id === null) - Number(a.id === null)), { title: "Convo", placeHolder, matchOnDescription: true, ignoreFocusOut: true });
  return picked ? picked.id : undefined;
}

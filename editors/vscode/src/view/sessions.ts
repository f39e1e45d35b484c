/**
 * The sessions view's model, apart from VS Code: the pages of `session/list` loaded so far
 * (newest first, in the order convo lists them), arranged as a forest — a fork under its
 * parent when the parent is loaded, at the top otherwise — and the labels of its items.
 * The view (`tree.ts`) asks it for roots and children; "Load more" fetches the next page;
 * a change reloads as many sessions as were shown, so a refresh never folds the list back.
 */
import type { ConvoClient, Message, SessionInfo, SessionPage } from "convo";
import { usageText } from "./render.js";

/** Fetches a page: `session/list` with this limit and cursor. */
export type ListPage = (params: { limit: number; cursor?: string }) => Promise<SessionPage>;
/** The first messages of a session (for an untitled one's label). */
export type FirstMessages = (sessionId: string) => Promise<Message[]>;

export class SessionsModel {
  #sessions: SessionInfo[] = [];
  #byId = new Map<string, SessionInfo>();
  #children = new Map<string, SessionInfo[]>();
  #cursor: string | null = null;
  #loaded = false;
  #firstLines = new Map<string, Promise<string | undefined>>();

  constructor(
    readonly list: ListPage,
    readonly pageSize = 100,
    readonly firstMessages?: FirstMessages,
  ) {}

  /** Whether the first page has been fetched. */
  get loaded(): boolean {
    return this.#loaded;
  }

  /** Whether `session/list` has more pages. */
  get hasMore(): boolean {
    return this.#cursor !== null;
  }

  /** Every loaded session, newest first. */
  get sessions(): readonly SessionInfo[] {
    return this.#sessions;
  }

  get(id: string): SessionInfo | undefined {
    return this.#byId.get(id);
  }

  /** Fetches the first page, unless it is loaded. */
  async ensureLoaded(): Promise<void> {
    if (!this.#loaded) await this.reload();
  }

  /** Fetches the next page and adds it. */
  async loadMore(): Promise<void> {
    if (!this.#loaded) return this.reload();
    if (this.#cursor === null) return;
    const page = await this.list({ limit: this.pageSize, cursor: this.#cursor });
    this.#set([...this.#sessions, ...page.sessions], page.next_cursor);
  }

  /** Fetches again from the start, as many sessions as are loaded (at least a page). */
  async reload(): Promise<void> {
    const want = Math.max(this.pageSize, this.#sessions.length);
    const sessions: SessionInfo[] = [];
    let cursor: string | undefined;
    let next: string | null = null;
    do {
      const page = await this.list({ limit: Math.min(1000, Math.max(this.pageSize, want - sessions.length)), ...(cursor ? { cursor } : {}) });
      sessions.push(...page.sessions);
      next = page.next_cursor;
      cursor = next ?? undefined;
    } while (next !== null && sessions.length < want);
    this.#set(sessions, next);
    this.#loaded = true;
  }

  /** Forgets what is known of a session's first line (it changed). */
  invalidate(id: string): void {
    this.#firstLines.delete(id);
  }

  #set(sessions: SessionInfo[], cursor: string | null): void {
    // A session listed twice (it cannot, but a store walked while written might): once.
    const seen = new Set<string>();
    this.#sessions = sessions.filter((s) => !seen.has(s.session_id) && seen.add(s.session_id));
    this.#cursor = cursor;
    this.#byId = new Map(this.#sessions.map((s) => [s.session_id, s]));
    this.#children = new Map();
    for (const s of this.#sessions) {
      const parent = this.parentOf(s);
      if (!parent) continue;
      const list = this.#children.get(parent) ?? [];
      list.push(s);
      this.#children.set(parent, list);
    }
  }

  /** The loaded parent of a fork, if any (a cycle cannot happen: a fork is newer). */
  parentOf(s: SessionInfo): string | undefined {
    const parent = s.forked_from?.session_id;
    return parent && parent !== s.session_id && this.#byId.has(parent) ? parent : undefined;
  }

  /** The sessions at the top: every one whose parent is not loaded (or that is no fork). */
  roots(): SessionInfo[] {
    return this.#sessions.filter((s) => !this.parentOf(s));
  }

  /** The loaded forks of a session, newest first. */
  children(id: string): SessionInfo[] {
    return this.#children.get(id) ?? [];
  }

  /** An untitled session's first user line (fetched once, then kept until invalidated). */
  firstLine(id: string): Promise<string | undefined> {
    let line = this.#firstLines.get(id);
    if (!line) {
      line = this.firstMessages ? this.firstMessages(id).then(firstUserLine, () => undefined) : Promise.resolve(undefined);
      this.#firstLines.set(id, line);
    }
    return line;
  }
}

/** The first non-empty line of the first user message's text, at most 80 characters. */
export function firstUserLine(messages: readonly Message[]): string | undefined {
  for (const m of messages) {
    if (m.role !== "user") continue;
    const text = typeof m.content === "string" ? m.content : Array.isArray(m.content) ? m.content.map((p) => (typeof p.text === "string" ? p.text : "")).join(" ") : "";
    const line = text.split("\n").map((l) => l.trim()).find((l) => l !== "");
    if (line) return line.length > 80 ? `${line.slice(0, 79)}…` : line;
  }
  return undefined;
}

/** The first messages of a session through `client`: what an untitled one's label is
 * taken from (`firstUserLine`). */
export async function firstMessages(client: ConvoClient, sessionId: string): Promise<Message[]> {
  return (await client.history({ session_id: sessionId, limit: 8, repair: false, images: "ref" })).messages;
}

/** The label of the session `sessionId` as the sessions view shows it, read through
 * `client`; `undefined` when it cannot be read (deleted, say). */
export async function labelOf(client: ConvoClient, sessionId: string): Promise<string | undefined> {
  try {
    const info = await client.getSession({ session_id: sessionId });
    return sessionLabel(info, info.title ? undefined : firstUserLine(await firstMessages(client, sessionId)));
  } catch {
    return undefined;
  }
}

/** A session's label: its title, else its first user line, else its id. */
export function sessionLabel(s: SessionInfo, firstLine?: string): string {
  return s.title?.trim() || firstLine || s.session_id;
}

/** What follows the label: the message count and the tokens spent. */
export function sessionDescription(s: SessionInfo): string {
  const n = `${s.message_count} message${s.message_count === 1 ? "" : "s"}`;
  const spent = (s.usage?.input_tokens ?? 0) + (s.usage?.output_tokens ?? 0);
  return spent > 0 ? `${n} · ${spent.toLocaleString("en-US")} tokens` : n;
}

/** The hover text of an item: id, dates, fork origin, usage. */
export function sessionTooltip(s: SessionInfo, label: string): string {
  const lines = [label, `id: ${s.session_id}`, `created: ${s.created_at}`, `updated: ${s.updated_at}`, `messages: ${s.message_count}`];
  if (s.forked_from) lines.push(`forked from: ${s.forked_from.session_id}${s.forked_from.message_id ? ` at ${s.forked_from.message_id}` : ""}`);
  const usage = usageText(s.usage);
  if (usage) lines.push(`usage: ${usage}`);
  if (s.cwd) lines.push(`cwd: ${s.cwd}`);
  return lines.join("\n");
}

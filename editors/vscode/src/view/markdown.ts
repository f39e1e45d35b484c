/**
 * Markdown → a tree of plain nodes (a tag from a fixed list, a link's target, text), which
 * `render.ts` turns into DOM elements and text nodes. Nothing here produces HTML: a `<script>`
 * in a message is the text `<script>`, whatever the Markdown around it. It covers what
 * chat models write: paragraphs, headings, fenced and indented code, block quotes, lists,
 * rules, tables, and inline code, strong, emphasis, strike-through, links and bare URLs.
 * Raw HTML in the Markdown is not interpreted: it stays text.
 */

export type Tag =
  | "p" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "pre" | "code" | "blockquote" | "ul" | "ol" | "li"
  | "hr" | "br" | "strong" | "em" | "del" | "a" | "table" | "thead" | "tbody" | "tr" | "th" | "td";

/** A Markdown element: `href` only on `a` (the link's target, opened on click by the
 * extension, never by the page), `lang` only on a fenced `pre`. */
export interface MdElement {
  tag: Tag;
  href?: string;
  lang?: string;
  children: MdNode[];
}

/** A node: an element, or text (always a text node). */
export type MdNode = MdElement | string;

const el = (tag: Tag, children: MdNode[] = [], extra: Partial<MdElement> = {}): MdElement => ({ tag, children, ...extra });

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+)?\s*$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const BULLET = /^( {0,3})([-*+])\s+(.*)$/;
const ORDERED = /^( {0,3})(\d{1,9})[.)]\s+(.*)$/;
const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

const blank = (line: string) => line.trim() === "";

/** Parses a Markdown document into block nodes. */
export function parseMarkdown(source: string): MdElement[] {
  return blocks(source.replace(/\r\n?/g, "\n").split("\n"));
}

function blocks(lines: string[]): MdElement[] {
  const out: MdElement[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (blank(line)) {
      i++;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      const marker = fence[1];
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i].trimStart().startsWith(marker)) body.push(lines[i++]);
      i++; // the closing fence (or the end)
      out.push(el("pre", [el("code", [body.join("\n")])], fence[2] ? { lang: fence[2] } : {}));
      continue;
    }
    if (/^( {4}|\t)/.test(line)) {
      const body: string[] = [];
      while (i < lines.length && (/^( {4}|\t)/.test(lines[i]) || (blank(lines[i]) && /^( {4}|\t)/.test(lines[i + 1] ?? "")))) {
        body.push(lines[i++].replace(/^( {4}|\t)/, ""));
      }
      out.push(el("pre", [el("code", [body.join("\n")])]));
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      out.push(el(`h${heading[1].length}` as Tag, inline(heading[2] ?? "")));
      i++;
      continue;
    }
    if (RULE.test(line)) {
      out.push(el("hr"));
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const body: string[] = [];
      while (i < lines.length && !blank(lines[i])) {
        const q = QUOTE.exec(lines[i]);
        body.push(q ? q[1] : lines[i]);
        i++;
      }
      out.push(el("blockquote", blocks(body)));
      continue;
    }
    if (BULLET.test(line) || ORDERED.test(line)) {
      i = list(lines, i, out);
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]) && lines[i + 1].includes("-")) {
      i = table(lines, i, out);
      continue;
    }
    const para: string[] = [];
    while (i < lines.length && !blank(lines[i]) && !startsBlock(lines[i])) para.push(lines[i++]);
    if (para.length === 0) para.push(lines[i++]); // a line no rule took: kept as text
    out.push(el("p", paragraph(para)));
  }
  return out;
}

function startsBlock(line: string): boolean {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || BULLET.test(line) || ORDERED.test(line);
}

/** A paragraph's lines: inline Markdown, each line break kept (chat text means them). */
function paragraph(lines: string[]): MdNode[] {
  const out: MdNode[] = [];
  lines.forEach((line, n) => {
    if (n > 0) out.push(el("br"));
    out.push(...inline(line.trim()));
  });
  return out;
}

/** A list from line `i`: its items (with their continuation lines, nested lists within). */
function list(lines: string[], i: number, out: MdElement[]): number {
  const ordered = ORDERED.test(lines[i]) && !BULLET.test(lines[i]);
  const marker = ordered ? ORDERED : BULLET;
  const items: MdElement[] = [];
  const indent = marker.exec(lines[i])![1].length;
  // A new item of this list: its marker, indented no deeper than the first one's.
  const item = (line: string) => {
    const m = marker.exec(line);
    return m && m[1].length <= indent ? m : null;
  };
  while (i < lines.length) {
    const m = item(lines[i]);
    if (!m) break;
    const body = [m[3]];
    i++;
    while (i < lines.length && !item(lines[i])) {
      if (blank(lines[i])) {
        if (i + 1 < lines.length && /^\s{2,}\S/.test(lines[i + 1])) {
          body.push("");
          i++;
          continue;
        }
        break;
      }
      if (!/^\s/.test(lines[i]) && startsBlock(lines[i])) break;
      body.push(lines[i].replace(/^ {2,4}/, ""));
      i++;
    }
    const inner = blocks(body);
    // A tight item is its paragraph's inline nodes; anything more keeps its blocks.
    items.push(el("li", inner.length === 1 && inner[0].tag === "p" ? inner[0].children : inner));
    while (i < lines.length && blank(lines[i]) && item(lines[i + 1] ?? "")) i++;
  }
  out.push(el(ordered ? "ol" : "ul", items));
  return i;
}

function cells(line: string): string[] {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  return s.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

function table(lines: string[], i: number, out: MdElement[]): number {
  const head = cells(lines[i]);
  i += 2;
  const rows: MdElement[] = [];
  while (i < lines.length && !blank(lines[i]) && lines[i].includes("|")) {
    const row = cells(lines[i++]);
    rows.push(el("tr", head.map((_, n) => el("td", inline(row[n] ?? "")))));
  }
  out.push(el("table", [el("thead", [el("tr", head.map((c) => el("th", inline(c))))]), el("tbody", rows)]));
  return i;
}

const ESCAPABLE = "\\`*_{}[]()#+-.!|~<>";
const URL_START = /https?:\/\/[^\s<>"'`]+/y;

/** Inline Markdown of one line or cell. */
export function inline(text: string): MdNode[] {
  const out: MdNode[] = [];
  let plain = "";
  const flush = () => {
    if (plain) out.push(plain);
    plain = "";
  };
  const push = (node: MdElement) => {
    flush();
    out.push(node);
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "\\" && i + 1 < text.length && ESCAPABLE.includes(text[i + 1])) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    if (c === "`") {
      const run = /^`+/.exec(text.slice(i))![0];
      const end = text.indexOf(run, i + run.length);
      if (end > 0) {
        push(el("code", [text.slice(i + run.length, end).replace(/^ (.*) $/, "$1")]));
        i = end + run.length;
        continue;
      }
      plain += run;
      i += run.length;
      continue;
    }
    if (c === "[") {
      const link = linkAt(text, i);
      if (link) {
        push(el("a", inline(link.label), { href: link.href }));
        i = link.end;
        continue;
      }
    }
    if (c === "h" && (i === 0 || /[\s(]/.test(text[i - 1]))) {
      URL_START.lastIndex = i;
      const m = URL_START.exec(text);
      if (m) {
        const url = m[0].replace(/[.,;:!?)]+$/, "");
        push(el("a", [url], { href: url }));
        i += url.length;
        continue;
      }
    }
    if (c === "~" && text.startsWith("~~", i)) {
      const end = text.indexOf("~~", i + 2);
      if (end > i + 2) {
        push(el("del", inline(text.slice(i + 2, end))));
        i = end + 2;
        continue;
      }
    }
    if (c === "*" || c === "_") {
      const span = emphasisAt(text, i);
      if (span) {
        push(el(span.strong ? "strong" : "em", inline(span.inner)));
        i = span.end;
        continue;
      }
    }
    plain += c;
    i++;
  }
  flush();
  return out;
}

/** `[label](href)` at `i`, with brackets and parentheses balanced. */
function linkAt(text: string, i: number): { label: string; href: string; end: number } | undefined {
  let depth = 0;
  let j = i;
  for (; j < text.length; j++) {
    if (text[j] === "\\") j++;
    else if (text[j] === "[") depth++;
    else if (text[j] === "]" && --depth === 0) break;
  }
  if (j >= text.length || text[j + 1] !== "(") return undefined;
  let k = j + 2;
  depth = 1;
  for (; k < text.length; k++) {
    if (text[k] === "(") depth++;
    else if (text[k] === ")" && --depth === 0) break;
  }
  if (k >= text.length) return undefined;
  const target = text.slice(j + 2, k).trim();
  const href = (/^<([^>]*)>/.exec(target)?.[1] ?? target.split(/\s+/)[0]) || "";
  return { label: text.slice(i + 1, j), href, end: k + 1 };
}

/** `**strong**`, `__strong__`, `*em*` or `_em_` at `i` (an underscore only at a word's edge). */
function emphasisAt(text: string, i: number): { strong: boolean; inner: string; end: number } | undefined {
  const c = text[i];
  const strong = text[i + 1] === c;
  const delim = strong ? c + c : c;
  const start = i + delim.length;
  if (start >= text.length || /\s/.test(text[start])) return undefined;
  if (c === "_" && i > 0 && /\w/.test(text[i - 1])) return undefined;
  let j = start;
  for (;;) {
    j = text.indexOf(delim, j + 1);
    if (j < 0) return undefined;
    if (strong || text[j + 1] !== c) {
      if (!/\s/.test(text[j - 1]) && !(c === "_" && /\w/.test(text[j + delim.length] ?? ""))) break;
    } else j++; // `**` inside an `*` span: skip both
  }
  return { strong, inner: text.slice(start, j), end: j + delim.length };
}

/** The text of a node tree, without markup (labels, titles). */
export function plainText(nodes: MdNode[]): string {
  return nodes.map((n) => (typeof n === "string" ? n : n.tag === "br" ? "\n" : plainText(n.children))).join("");
}

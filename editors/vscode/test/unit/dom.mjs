// A small DOM for the renderer's tests: elements with attributes and children, text nodes,
// and HTML serialisation that escapes as a browser does. It has no innerHTML and no parser:
// whatever markup the output holds, the renderer made with createElement.
const VOID = new Set(["br", "hr", "img"]);
const escapeText = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
const escapeAttr = (s) => s.replace(/&/g, "&amp;").replace(/"/g, "&quot;");

export class Text {
  constructor(data) {
    this.data = data;
  }
  get html() {
    return escapeText(this.data);
  }
  get text() {
    return this.data;
  }
}

export class Element {
  constructor(tag) {
    this.tag = tag;
    this.attributes = new Map();
    this.children = [];
  }
  setAttribute(name, value) {
    if (typeof value !== "string") throw new TypeError(`attribute ${name}: not a string`);
    this.attributes.set(name, value);
  }
  getAttribute(name) {
    return this.attributes.has(name) ? this.attributes.get(name) : null;
  }
  appendChild(child) {
    if (!(child instanceof Element || child instanceof Text)) throw new TypeError("appendChild: not a node");
    this.children.push(child);
    return child;
  }
  get html() {
    const attrs = [...this.attributes].map(([n, v]) => ` ${n}="${escapeAttr(v)}"`).join("");
    if (VOID.has(this.tag)) return `<${this.tag}${attrs}>`;
    return `<${this.tag}${attrs}>${this.children.map((c) => c.html).join("")}</${this.tag}>`;
  }
  get text() {
    return this.children.map((c) => c.text).join("");
  }
  /** Every element below (and this one) for which `test` holds, in document order. */
  findAll(test) {
    const out = [];
    const walk = (e) => {
      if (test(e)) out.push(e);
      for (const c of e.children) if (c instanceof Element) walk(c);
    };
    walk(this);
    return out;
  }
  find(test) {
    return this.findAll(test)[0];
  }
  /** Every text node below. */
  texts() {
    const out = [];
    const walk = (e) => {
      for (const c of e.children) c instanceof Text ? out.push(c.data) : walk(c);
    };
    walk(this);
    return out;
  }
}

export const document = {
  createElement: (tag) => new Element(tag),
  createTextNode: (text) => new Text(text),
};

// Runs brainbot/serve/static/markdown.js under node for tests/test_markdown_render.py: reads
// a JSON array of cases ({src, frontMatter, marks}) on stdin and prints, for each, the
// elements it built as HTML text, the tags and attributes it used, and what a click on each
// note link asked the page to open. The document is a stand-in that knows no HTML at all:
// innerHTML and its kin throw, so a renderer that used them fails here.
"use strict";

const path = require("path");
const md = require(path.join(__dirname, "..", "..", "brainbot", "serve", "static", "markdown.js"));

const escape = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
  .replace(/"/g, "&quot;");

class Node {
  constructor(doc, tag, text) {
    this.doc = doc;
    this.tag = tag;  // null: a text node; "#fragment": a fragment
    this.text = text;
    this.attrs = [];
    this.children = [];
    this.listeners = {};
  }
  append(...items) {
    for (const it of items) {
      const node = typeof it === "string" ? this.doc.createTextNode(it) : it;
      if (node.tag === "#fragment") this.children.push(...node.children);
      else this.children.push(node);
    }
  }
  setAttribute(name, value) {
    this.doc.attrs.add(name);
    this.attrs = this.attrs.filter(([n]) => n !== name).concat([[name, String(value)]]);
  }
  getAttribute(name) {
    const found = this.attrs.find(([n]) => n === name);
    return found ? found[1] : null;
  }
  addEventListener(type, fn) { (this.listeners[type] = this.listeners[type] || []).push(fn); }
  click() {
    for (const fn of this.listeners.click || []) fn({ preventDefault() {} });
  }
  set textContent(s) { this.children = [this.doc.createTextNode(String(s))]; }
  get textContent() {
    return this.tag === null ? this.text : this.children.map((c) => c.textContent).join("");
  }
  html() {
    if (this.tag === null) return escape(this.text);
    const inner = this.children.map((c) => c.html()).join("");
    if (this.tag === "#fragment") return inner;
    const attrs = this.attrs.map(([n, v]) => ` ${n}="${escape(v)}"`).join("");
    return this.tag === "br" || this.tag === "hr" ? `<${this.tag}${attrs}>`
      : `<${this.tag}${attrs}>${inner}</${this.tag}>`;
  }
  all(fn, out = []) {
    if (fn(this)) out.push(this);
    for (const c of this.children) c.all(fn, out);
    return out;
  }
}
for (const name of ["innerHTML", "outerHTML"]) {
  Object.defineProperty(Node.prototype, name, {
    set() { throw new Error(`${name} used`); }, get() { throw new Error(`${name} used`); } });
}
Node.prototype.insertAdjacentHTML = () => { throw new Error("insertAdjacentHTML used"); };

function makeDocument() {
  const doc = { tags: new Set(), attrs: new Set() };
  doc.createElement = (tag) => { doc.tags.add(tag); return new Node(doc, tag, ""); };
  doc.createTextNode = (s) => new Node(doc, null, String(s));
  doc.createDocumentFragment = () => new Node(doc, "#fragment", "");
  doc.write = () => { throw new Error("document.write used"); };
  return doc;
}

// The page's <mark> of the query's words, as app.js does it through the text hook.
function marker(doc, words) {
  if (!words || !words.length) return undefined;
  const re = new RegExp(`(${words.join("|")})`, "gi");
  return (s) => {
    const frag = doc.createDocumentFragment();
    for (const part of s.split(re)) {
      if (!part) continue;
      if (words.some((w) => w.toLowerCase() === part.toLowerCase())) {
        const m = doc.createElement("mark");
        m.append(part);
        frag.append(m);
      } else frag.append(part);
    }
    return frag;
  };
}

function run(c) {
  const doc = makeDocument();
  const opened = [];
  try {
    const frag = md.render(c.src, { document: doc, frontMatter: !!c.frontMatter,
      text: marker(doc, c.marks), openNote: (link) => opened.push(link) });
    for (const a of frag.all((n) => n.tag === "a" && /note-link/.test(n.getAttribute("class") || ""))) {
      a.click();
    }
    return { html: frag.html(), tags: [...doc.tags].sort(), attrs: [...doc.attrs].sort(),
      opened, text: frag.textContent };
  } catch (err) {
    return { error: String(err && err.stack || err) };
  }
}

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => { input += d; });
process.stdin.on("end", () => {
  const cases = JSON.parse(input);
  const out = cases.map((c) => {
    const t0 = process.hrtime.bigint();
    const r = run(c);
    r.ms = Number(process.hrtime.bigint() - t0) / 1e6;
    return r;
  });
  process.stdout.write(JSON.stringify({ results: out, allowed: { tags: [...md.TAGS].sort(),
    attrs: [...md.ATTRS].sort() } }));
});

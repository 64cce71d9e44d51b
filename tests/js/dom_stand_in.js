// A stand-in for the browser's document under node, for tests/js/render_markdown.js and
// tests/js/time_markdown.js: elements, text nodes and fragments that keep their children
// and attributes and print themselves as HTML text, and nothing of HTML itself: innerHTML
// and its kin throw, so a renderer that used them fails.
"use strict";

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
      if (node.tag === "#fragment") for (const c of node.children) this.children.push(c);
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

// A document that records the tags and attributes made in it (doc.tags, doc.attrs).
function makeDocument() {
  const doc = { tags: new Set(), attrs: new Set() };
  doc.createElement = (tag) => { doc.tags.add(tag); return new Node(doc, tag, ""); };
  doc.createTextNode = (s) => new Node(doc, null, String(s));
  doc.createDocumentFragment = () => new Node(doc, "#fragment", "");
  doc.write = () => { throw new Error("document.write used"); };
  return doc;
}

module.exports = { makeDocument };

// A note's markdown as page elements, built with the DOM alone (issue 35): createElement,
// createTextNode and setAttribute on an allowlist, never an HTML string. A note's raw HTML
// stays text; a link is live only when the browser's own URL parser reads it as http:,
// https: or mailto:, and a link to another note ([[wikilink]], [[Note|alias]],
// [[Note#Heading]], a relative .md link) is an element the page opens itself.
//
// Covered: ATX and setext headings, paragraphs, emphasis (*, _, ~~, ==), code spans and
// fenced or indented code, block quotes (Obsidian callouts), bullet, ordered and task
// lists, GFM tables, thematic breaks, front matter, links (inline, reference, <auto>, bare
// URLs), images (as their alt text: nothing is fetched), #tags, entities, backslash
// escapes. Left out: HTML (shown as typed), footnotes, math, embeds' contents.
// A newline inside a paragraph is a line break, as Obsidian shows it by default.
//
// Loaded by index.html before app.js (window.BrainbotMarkdown), and by node in
// tests/test_markdown_render.py (module.exports), with no build step.
"use strict";

(function (exports) {
  // The only elements and attributes this file creates: tests hold it to these lists.
  const TAGS = new Set(["a", "blockquote", "br", "code", "del", "div", "em", "h3", "h4",
    "h5", "h6", "hr", "li", "mark", "ol", "p", "pre", "span", "strong", "table", "tbody",
    "td", "th", "thead", "tr", "ul"]);
  const ATTRS = new Set(["class", "href", "title", "start", "rel", "target"]);
  const SCHEMES = new Set(["http:", "https:", "mailto:"]);
  // The note's h1 is an h3 on the page (its h1 is the page's, its h2 the cards').
  const HEADING_SHIFT = 2;

  // No pattern here backtracks over a line twice: a note of 10,000 spaces in one line
  // stays linear (a lazy (.*?) before [ \t]*$ did not).
  const FENCE = /^( {0,3})(`{3,}|~{3,})([^`]*)$/;
  const ATX = /^ {0,3}(#{1,6})(?:[ \t]|$)/;
  const HR = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
  const SETEXT = /^ {0,3}(=+|-+)[ \t]*$/;
  const QUOTE = /^ {0,3}> ?/;
  const ITEM = /^( {0,3})([-+*]|\d{1,9}[.)])([ \t]+|$)/;
  const REFDEF = /^ {0,3}\[([^\]]+)\]:[ \t]*<?([^\s>]+)>?(?:[ \t]+["'(](.*)["')])?[ \t]*$/;
  const DELIM_ROW = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
  const CALLOUT = /^\[!([\w-]+)\][+-]?[ \t]*(.*)$/;
  const PUNCT = /[!-/:-@[-`{-~\p{P}\p{S}]/u;
  const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'", nbsp: "\u00a0",
    copy: "©", reg: "®", trade: "™", mdash: "—", ndash: "–", hellip: "…", laquo: "«",
    raquo: "»", middot: "·", times: "×", deg: "°", euro: "€" };

  const blank = (line) => /^[ \t]*$/.test(line);
  const indent = (line) => line.match(/^ */)[0].length;
  const detab = (line) => line.replace(/^[ \t]+/, (ws) => ws.replace(/\t/g, "    "));

  // -- blocks ---------------------------------------------------------------------------
  function parse(src, opts = {}) {
    const lines = src.replace(/\r\n?/g, "\n").split("\n").map(detab);
    const refs = {};
    let start = 0;
    const out = [];
    if (opts.frontMatter && lines[0] === "---") {
      const end = lines.findIndex((l, i) => i > 0 && (l === "---" || l === "..."));
      if (end > 0) {
        out.push({ t: "front", text: lines.slice(1, end).join("\n") });
        start = end + 1;
      }
    }
    return { blocks: out.concat(blocks(lines.slice(start), refs)), refs };
  }

  // Whether ``line`` starts a block that ends a paragraph.
  function interrupts(line, next) {
    if (FENCE.test(line) || ATX.test(line) || HR.test(line) || QUOTE.test(line)) return true;
    const m = ITEM.exec(line);
    if (m && !blank(line.slice(m[0].length)) && (/[-+*]/.test(m[2]) || /^1\D/.test(m[2]))) {
      return true;
    }
    return tableStart(line, next);
  }

  function blocks(lines, refs, depth = 0) {
    if (depth > MAX_NESTING) return [{ t: "para", text: lines.join("\n") }];
    const out = [];
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if (blank(line)) i++;
      else if ((m = FENCE.exec(line))) i = fenced(lines, i, m, out);
      else if ((m = ATX.exec(line))) {
        out.push({ t: "heading", level: m[1].length, text: atxText(line.slice(m[0].length)) });
        i++;
      } else if (HR.test(line)) { out.push({ t: "hr" }); i++; }
      else if (QUOTE.test(line)) i = quote(lines, i, out, refs, depth);
      else if (ITEM.test(line)) i = list(lines, i, out, refs, depth);
      else if (indent(line) >= 4) i = indented(lines, i, out);
      else if (tableStart(line, lines[i + 1])) i = table(lines, i, out);
      else i = paragraph(lines, i, out, refs);
    }
    return out;
  }

  // An ATX heading's text: trimmed, without a closing run of # after a space.
  function atxText(s) {
    let text = s.trim();
    const end = text.replace(/#+$/, "");
    if (end === "" || /[ \t]$/.test(end)) text = end.trim();
    return text;
  }

  function fenced(lines, i, m, out) {
    const [, pad, fence, info] = m;
    const body = [];
    let j = i + 1;
    const close = new RegExp(`^ {0,3}${fence[0] === "`" ? "`" : "~"}{${fence.length},}[ \\t]*$`);
    for (; j < lines.length && !close.test(lines[j]); j++) {
      body.push(lines[j].slice(Math.min(pad.length, indent(lines[j]))));
    }
    out.push({ t: "code", lang: info.trim().split(/\s/)[0], text: body.join("\n") });
    return j + 1;  // past the closing fence; an unclosed one runs to the end
  }

  function indented(lines, i, out) {
    const body = [];
    let j = i;
    while (j < lines.length && (indent(lines[j]) >= 4 || blank(lines[j]))) {
      body.push(lines[j].slice(4));
      j++;
    }
    while (body.length && blank(body[body.length - 1])) body.pop();
    out.push({ t: "code", lang: "", text: body.join("\n") });
    return j;
  }

  function paragraph(lines, i, out, refs) {
    let m;
    while (i < lines.length && (m = REFDEF.exec(lines[i]))) {  // [label]: url "title"
      const key = m[1].trim().toLowerCase();
      if (!(key in refs)) refs[key] = { href: decodeText(m[2]), title: m[3] || "" };
      i++;
    }
    const text = [];
    for (; i < lines.length && !blank(lines[i]); i++) {
      if (text.length && (m = SETEXT.exec(lines[i]))) {
        out.push({ t: "heading", level: m[1][0] === "=" ? 1 : 2, text: text.join("\n") });
        return i + 1;
      }
      if (text.length && interrupts(lines[i], lines[i + 1])) break;
      text.push(lines[i].replace(/^[ \t]+/, ""));
    }
    if (text.length) out.push({ t: "para", text: text.join("\n") });
    return i;
  }

  function quote(lines, i, out, refs, depth) {
    const body = [];
    for (; i < lines.length; i++) {
      const line = lines[i];
      if (QUOTE.test(line)) body.push(line.replace(QUOTE, ""));
      else if (!blank(line) && body.length && !blank(body[body.length - 1]) &&
               !interrupts(line, lines[i + 1])) body.push(line);  // a lazy continuation
      else break;
    }
    const node = { t: "quote", children: [] };
    const m = CALLOUT.exec(body[0] || "");
    if (m) {  // > [!note] Title: an Obsidian callout
      node.callout = m[1].toLowerCase();
      node.title = m[2] || m[1];
      body.shift();
    }
    node.children = blocks(body, refs, depth + 1);
    out.push(node);
    return i;
  }

  function list(lines, i, out, refs, depth) {
    const first = ITEM.exec(lines[i]);
    const ordered = /\d/.test(first[2]);
    const kind = first[2].slice(-1);
    const node = { t: "list", ordered, start: ordered ? parseInt(first[2], 10) : 1,
      tight: true, items: [] };
    const sibling = (line) => {  // another item of this list
      const m = ITEM.exec(line || "");
      return m && m[2].slice(-1) === kind && /\d/.test(m[2]) === ordered && !HR.test(line)
        ? m : null;
    };
    while (i < lines.length) {
      const m = sibling(lines[i]);
      if (!m) break;
      const rest = lines[i].slice(m[0].length);
      const width = m[1].length + m[2].length + (blank(rest) || m[3].length > 4 ? 1
        : m[3].length);
      const body = [m[3].length > 4 ? " ".repeat(m[3].length - 1) + rest : rest];
      i = itemLines(lines, i + 1, width, body);
      let blankAt = body.length;
      while (blankAt && blank(body[blankAt - 1])) blankAt--;
      if (blankAt < body.length && sibling(lines[i])) node.tight = false;
      const kept = body.slice(0, blankAt);
      const item = { task: null, children: blocks(kept, refs, depth + 1) };
      if (item.children.length > 1 && kept.some(blank)) node.tight = false;
      const task = item.children[0] && item.children[0].t === "para" &&
        /^\[([ xX])\][ \t]+/.exec(item.children[0].text);
      if (task) {
        item.task = task[1] !== " ";
        item.children[0].text = item.children[0].text.slice(task[0].length);
      }
      node.items.push(item);
    }
    out.push(node);
    return i;
  }

  // The lines of one list item after its first: those indented past its marker, blank
  // ones, and lazy continuations of its paragraph.
  function itemLines(lines, i, width, body) {
    for (; i < lines.length; i++) {
      const line = lines[i];
      if (blank(line)) body.push("");
      else if (indent(line) >= width) body.push(line.slice(width));
      else if (!blank(body[body.length - 1]) && !ITEM.test(line) &&
               !interrupts(line, lines[i + 1])) body.push(line.trimStart());
      else break;
    }
    return i;
  }

  function cells(line) {
    let row = line.trim();
    if (row.startsWith("|")) row = row.slice(1);
    if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
    return row.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
  }

  function tableStart(line, next) {
    return next !== undefined && line.includes("|") && DELIM_ROW.test(next) &&
      next.includes("-") && cells(line).length === cells(next).length;
  }

  function table(lines, i, out) {
    const head = cells(lines[i]);
    const align = cells(lines[i + 1]).map((c) => (c.startsWith(":") && c.endsWith(":")
      ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : ""));
    const rows = [];
    for (i += 2; i < lines.length && lines[i].includes("|") && !blank(lines[i]) &&
         !(QUOTE.test(lines[i]) || FENCE.test(lines[i]) || ATX.test(lines[i])); i++) {
      const row = cells(lines[i]).slice(0, head.length);
      while (row.length < head.length) row.push("");
      rows.push(row);
    }
    out.push({ t: "table", head, align, rows });
    return i;
  }

  // -- inline ---------------------------------------------------------------------------
  // Sticky (y) patterns, tried at one position of the text without copying the rest of
  // it: a long paragraph stays linear.
  const ENTITY = /&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|([a-zA-Z][a-zA-Z0-9]{1,31}));/y;
  const AUTOLINK = /<([a-zA-Z][a-zA-Z0-9+.-]{1,31}:[^\s<>]*)>/y;
  const EMAIL = /<([a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*)>/y;
  const BARE_URL = /(?:https?:\/\/|www\.)[^\s<]*[^\s<?!.,:;*_~'"\]]/y;
  const TAG = /#([\p{L}\p{N}_/-]*[\p{L}_/-][\p{L}\p{N}_/-]*)/uy;
  const RUN = { "*": /\*+/y, "_": /_+/y, "~": /~+/y, "=": /=+/y, "`": /`+/y };
  const DEST = /\(\s*(?:<([^<>\n]*)>|((?:[^\s()\\]|\\.|\((?:[^\s()\\]|\\.)*\))*))\s*(?:("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\((?:[^()\\]|\\.)*\))\s*)?\)/y;
  const REF = /\[([^\]]{0,999})\]/y;
  const at = (re, s, i) => { re.lastIndex = i; return re.exec(s); };
  const MAX_LABEL = 1000;  // a longer [label] is text: every unclosed [ scans at most this
  const MAX_NESTING = 40;  // quotes and lists deeper than this are shown as text

  function entity(m) {
    const code = m[1] ? parseInt(m[1], 10) : m[2] ? parseInt(m[2], 16) : null;
    if (code === null) return ENTITIES[m[3]];
    return code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff)
      ? String.fromCodePoint(code) : "\ufffd";
  }

  // Backslash escapes and entities of a link destination or title.
  function decodeText(s) {
    return s.replace(/\\([!-/:-@[-`{-~])|&(?:#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z][a-zA-Z0-9]{1,31});/g,
      (all, esc) => {
        if (esc) return esc;
        const v = entity(at(ENTITY, all, 0));
        return v === undefined ? all : v;
      });
  }

  function inline(src, refs, inLink = false) {
    const nodes = [];
    const noCloser = {};  // code span lengths with no closing run further on
    let text = "";
    const flush = () => { if (text) nodes.push({ t: "text", s: text }); text = ""; };
    const push = (node) => { flush(); nodes.push(node); };
    let i = 0;
    while (i < src.length) {
      const c = src[i];
      const prev = i ? src[i - 1] : " ";
      const bracket = c === "[" ? i : c === "!" && src[i + 1] === "[" ? i + 1 : -1;
      let m, got;
      if (c === "\\" && /[!-/:-@[-`{-~]/.test(src[i + 1] || "")) { text += src[i + 1]; i += 2; }
      else if (c === "\\" && src[i + 1] === "\n") { push({ t: "br" }); i += 2; }
      else if (c === "`") {
        got = codeSpan(src, i, noCloser);
        if (got.node) push(got.node);
        else text += got.text;
        i = got.end;
      } else if (bracket >= 0 && (got = wikilink(src, bracket))) {
        push({ ...got.node, embed: c === "!" });
        i = got.end;
      } else if (bracket >= 0 && !inLink && (got = link(src, bracket, refs))) {
        if (c === "!") push({ t: "image", alt: plain(inline(got.label, refs, true)) });
        else push({ t: "link", href: got.href, title: got.title,
          children: inline(got.label, refs, true) });
        i = got.end;
      } else if (c === "<" && !inLink && (m = at(AUTOLINK, src, i) || at(EMAIL, src, i))) {
        const href = m[1].includes(":") ? m[1] : `mailto:${m[1]}`;
        push({ t: "link", href, title: "", children: [{ t: "text", s: m[1] }] });
        i += m[0].length;
      } else if (c === "&" && (m = at(ENTITY, src, i)) && entity(m) !== undefined) {
        text += entity(m); i += m[0].length;
      } else if ("*_~=".includes(c)) {
        const run = at(RUN[c], src, i)[0];
        const next = src[i + run.length] || " ";
        if ((c === "~" || c === "=") && run.length !== 2) text += run;
        else push(delimiter(c, run.length, prev, next));
        i += run.length;
      } else if (c === "\n") {
        let end = text.length;
        while (end && text[end - 1] === " ") end--;
        text = text.slice(0, end);
        push({ t: "br" }); i++;
      } else if (c === "#" && /\s/.test(prev) && (m = at(TAG, src, i))) {
        push({ t: "tag", s: m[0] }); i += m[0].length;
      } else if ((c === "h" || c === "w") && !inLink && /[\s(*_~]/.test(prev) &&
                 (got = bareUrl(src, i))) {
        push(got.node);
        i = got.end;
      } else { text += c; i++; }
    }
    flush();
    return emphasis(nodes);
  }

  // The code span opened by the backticks at src[i]: {node, end}, or {text, end} when
  // no run of as many closes it (noCloser remembers that length: none closes later).
  function codeSpan(src, i, noCloser) {
    const run = at(RUN["`"], src, i)[0];
    const end = noCloser[run.length] ? -1 : closingRun(src, i + run.length, run);
    if (end < 0) {
      noCloser[run.length] = true;
      return { text: run, end: i + run.length };
    }
    let code = src.slice(i + run.length, end).replace(/\n/g, " ");
    if (code.length > 2 && code[0] === " " && code[code.length - 1] === " " && code.trim()) {
      code = code.slice(1, -1);
    }
    return { node: { t: "code", s: code }, end: end + run.length };
  }

  // A bare http(s):// or www. URL at src[i] (GFM's autolink extension): its link node and
  // where it ends, without trailing punctuation or an unbalanced ")"; or null.
  function bareUrl(src, i) {
    const m = at(BARE_URL, src, i);
    if (!m) return null;
    let url = m[0];
    while (url.endsWith(")") && url.split(")").length > url.split("(").length) {
      url = url.slice(0, -1);
    }
    return { node: { t: "link", href: url.startsWith("www.") ? `http://${url}` : url,
      title: "", children: [{ t: "text", s: url }] }, end: i + url.length };
  }

  // Where the run of backticks ``run`` closes at or after ``from`` (a run of exactly as
  // many), or -1.
  function closingRun(src, from, run) {
    for (let j = src.indexOf(run, from); j >= 0; j = src.indexOf(run, j)) {
      const len = at(RUN["`"], src, j)[0].length;
      if (len === run.length) return j;
      j += len;
    }
    return -1;
  }

  // [[Target#Heading|alias]] at src[i]: its node and where it ends, or null.
  function wikilink(src, i) {
    if (!src.startsWith("[[", i)) return null;
    const end = src.slice(i + 2, i + 2 + MAX_LABEL).indexOf("]]");
    if (end < 0) return null;
    const inner = src.slice(i + 2, i + 2 + end);
    if (!inner.trim() || /[[\]\n]/.test(inner)) return null;
    const bar = inner.indexOf("|");
    const ref = bar < 0 ? inner : inner.slice(0, bar);
    const hash = ref.indexOf("#");
    const target = (hash < 0 ? ref : ref.slice(0, hash)).trim();
    const heading = hash < 0 ? "" : ref.slice(hash + 1).replace(/^\^/, "").trim();
    const label = bar < 0 ? ref.trim().replace("#", " › ") : inner.slice(bar + 1).trim();
    return { node: { t: "note", kind: "wikilink", target, heading, label: label || target },
      end: i + 4 + end };
  }

  // The closing ] of a link label opened at src[i], or -1.
  function labelEnd(src, i) {
    let depth = 0;
    for (let j = i; j < src.length && j < i + MAX_LABEL; j++) {
      const c = src[j];
      if (c === "\\") j++;
      else if (c === "`") {
        const run = at(RUN["`"], src, j)[0];
        const close = closingRun(src.slice(0, i + MAX_LABEL), j + run.length, run);
        j = close >= 0 ? close + run.length - 1 : j + run.length - 1;
      } else if (c === "[") depth++;
      else if (c === "]" && --depth === 0) return j;
    }
    return -1;
  }

  // [label](dest "title"), [label][ref], [label][] or [label] at src[i]: the parts and
  // where it ends, or null.
  function link(src, i, refs) {
    const close = labelEnd(src, i);
    if (close < 0) return null;
    const label = src.slice(i + 1, close);
    const m = at(DEST, src, close + 1);
    if (m) {
      return { label, href: decodeText(m[1] !== undefined ? m[1] : m[2]),
        title: m[3] ? decodeText(m[3].slice(1, -1)) : "", end: close + 1 + m[0].length };
    }
    const r = at(REF, src, close + 1);
    const key = (r && r[1].trim() ? r[1] : label).trim().toLowerCase();
    const def = refs[key];
    if (!def) return null;
    return { label, href: def.href, title: decodeText(def.title),
      end: close + 1 + (r ? r[0].length : 0) };
  }

  // A run of *, _, ~~ or ==, with CommonMark's flanking rules.
  function delimiter(ch, n, prev, next) {
    const ws = (c) => /\s/u.test(c);
    const left = !ws(next) && (!PUNCT.test(next) || ws(prev) || PUNCT.test(prev));
    const right = !ws(prev) && (!PUNCT.test(prev) || ws(next) || PUNCT.test(next));
    const open = ch === "_" ? left && (!right || PUNCT.test(prev)) : left;
    const close = ch === "_" ? right && (!left || PUNCT.test(next)) : right;
    return { t: "delim", ch, n, open, close };
  }

  // CommonMark's "process emphasis": each closer takes the nearest opener of its kind,
  // looking back over at most MAX_LOOKBACK nodes (a paragraph of a thousand unmatched
  // asterisks stays linear).
  const MAX_LOOKBACK = 200;
  function emphasis(nodes) {
    for (let ci = 0; ci < nodes.length; ci++) {
      const closer = nodes[ci];
      if (closer.t !== "delim" || !closer.close) continue;
      for (let oi = ci - 1; oi >= Math.max(0, ci - MAX_LOOKBACK) && closer.n > 0; oi--) {
        const opener = nodes[oi];
        if (opener.t !== "delim" || opener.ch !== closer.ch || !opener.open || !opener.n) {
          continue;
        }
        if ((opener.close || closer.open) && (opener.n + closer.n) % 3 === 0 &&
            (opener.n % 3 || closer.n % 3) && "*_".includes(closer.ch)) continue;
        const inner = nodes.slice(oi + 1, ci).map(literal);
        const depth = 1 + Math.max(0, ...inner.map((n) => n.depth || 0));
        if (depth > MAX_NESTING) break;  // ***…*** a thousand deep stays text
        const use = "~=".includes(closer.ch) ? 2 : opener.n >= 2 && closer.n >= 2 ? 2 : 1;
        const tag = closer.ch === "~" ? "del" : closer.ch === "=" ? "mark"
          : use === 2 ? "strong" : "em";
        nodes.splice(oi + 1, ci - oi - 1, { t: tag, children: inner, depth });
        opener.n -= use;
        closer.n -= use;
        ci = oi + 2;
        if (!opener.n) { nodes.splice(oi, 1); ci--; }
        oi = ci;  // the next opener is looked for before the new node
      }
      if (!closer.n) { nodes.splice(ci, 1); ci--; }
    }
    return nodes.map(literal);
  }

  function literal(node) {
    return node.t === "delim" ? { t: "text", s: node.ch.repeat(node.n) } : node;
  }

  function plain(nodes) {
    return nodes.map((n) => n.s !== undefined ? n.s : n.children ? plain(n.children)
      : n.label || n.alt || "").join("");
  }

  // -- links ----------------------------------------------------------------------------
  // What a link's destination does: {web: href} for http(s) and mailto, as the browser's
  // URL parser serialises it; {note: {kind, target, heading}} for a note of the vault
  // (a relative path to a markdown file or to a name without extension, or #heading);
  // null for anything else (javascript:, data:, vbscript:, a picture, //host), which stays
  // text. The URL parser drops tabs and newlines anywhere and C0 controls and spaces at
  // either end; so does this, before it looks for a scheme.
  function linkTarget(dest) {
    const raw = dest.replace(/[\t\n\r]/g, "").replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, "");
    if (!raw) return null;
    const scheme = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(raw);
    if (scheme) {
      let url;
      try { url = new URL(raw); } catch (e) { return null; }
      if (!SCHEMES.has(url.protocol) || url.protocol !== `${scheme[1].toLowerCase()}:`) {
        return null;
      }
      return { web: url.href };
    }
    if (raw.startsWith("//") || raw.startsWith("\\")) return null;
    const hash = raw.indexOf("#");
    const path = hash < 0 ? raw : raw.slice(0, hash);
    const heading = hash < 0 ? "" : undecoded(raw.slice(hash + 1));
    const name = undecoded(path);
    const base = name.split("/").pop();
    if (name && !/\.(md|markdown)$/i.test(base) && /\.[a-z0-9]{1,8}$/i.test(base)) return null;
    return { note: { kind: "markdown", target: name, heading } };
  }

  function undecoded(s) {
    try { return decodeURIComponent(s); } catch (e) { return s; }
  }

  // -- building the elements ------------------------------------------------------------
  function builder(doc, hooks) {
    const make = (tag, cls, ...children) => {
      if (!TAGS.has(tag)) throw new Error(`markdown.js does not create <${tag}>`);
      const node = doc.createElement(tag);
      if (cls) set(node, "class", cls);
      for (const c of children) if (c !== null && c !== undefined) node.append(c);
      return node;
    };
    const set = (node, name, value) => {
      if (!ATTRS.has(name)) throw new Error(`markdown.js does not set ${name}`);
      node.setAttribute(name, String(value));
    };
    const text = (s) => (hooks.text ? hooks.text(s) : doc.createTextNode(s));
    return { make, set, text };
  }

  function renderInline(nodes, b, hooks) {
    const out = [];
    for (const n of nodes) {
      if (n.t === "text") out.push(b.text(n.s));
      else if (n.t === "code") out.push(b.make("code", null, b.text(n.s)));
      else if (n.t === "br") out.push(b.make("br"));
      else if (n.t === "tag") out.push(b.make("span", "tag", b.text(n.s)));
      else if (n.t === "image") out.push(b.make("span", "image", b.text(`[${n.alt || "image"}]`)));
      else if (n.t === "note") out.push(noteLink(n, b, hooks, [b.text(n.label)]));
      else if (n.t === "link") out.push(webLink(n, b, hooks));
      else out.push(b.make(n.t, null, ...renderInline(n.children, b, hooks)));
    }
    return out;
  }

  function webLink(n, b, hooks) {
    const children = renderInline(n.children, b, hooks);
    const to = linkTarget(n.href);
    if (to && to.note) return noteLink({ ...to.note }, b, hooks, children);
    if (!to) {  // shown, never followed: the destination is the title's text
      const dead = b.make("span", "dead-link", ...children);
      b.set(dead, "title", `not opened: ${n.href}`);
      return dead;
    }
    const a = b.make("a", null, ...children);
    b.set(a, "href", to.web);
    b.set(a, "rel", "noopener noreferrer");
    b.set(a, "target", "_blank");
    if (n.title) b.set(a, "title", n.title);
    return a;
  }

  // A link to a note: the page opens it itself (hooks.openNote), the browser never
  // follows it. Its href is a fragment that names the note, for the status bar.
  function noteLink(n, b, hooks, children) {
    const a = b.make("a", n.embed ? "note-link embed" : "note-link", ...children);
    b.set(a, "href", "#" + encodeURIComponent(n.target + (n.heading ? "#" + n.heading : "")));
    b.set(a, "title", n.target ? n.target + (n.heading ? " › " + n.heading : "")
      : n.heading);
    if (a.addEventListener) {
      a.addEventListener("click", (e) => {
        e.preventDefault();
        if (hooks.openNote) {
          hooks.openNote({ kind: n.embed ? "embed" : n.kind, target: n.target,
            heading: n.heading });
        }
      });
    }
    return a;
  }

  function renderBlock(node, ctx, b, hooks, tight = false) {
    const inl = (s) => renderInline(inline(s, ctx.refs), b, hooks);
    switch (node.t) {
      case "heading":
        return b.make(`h${Math.min(6, node.level + HEADING_SHIFT)}`, `md-h${node.level}`,
          ...inl(node.text));
      case "para": return tight ? inl(node.text) : b.make("p", null, ...inl(node.text));
      case "hr": return b.make("hr");
      case "front": return b.make("pre", "front-matter", b.make("code", null, b.text(node.text)));
      case "code": {
        const lang = /^[\w+#.-]{1,32}$/.test(node.lang) ? `language-${node.lang}` : null;
        return b.make("pre", null, b.make("code", lang, b.text(node.text)));
      }
      case "quote": {
        const q = b.make("blockquote", node.callout ? `callout callout-${
          node.callout.replace(/[^\w-]/g, "")}` : null);
        if (node.callout) q.append(b.make("p", "callout-title", ...inl(node.title)));
        for (const c of node.children) q.append(...[].concat(renderBlock(c, ctx, b, hooks)));
        return q;
      }
      case "list": return renderList(node, ctx, b, hooks);
      case "table": return renderTable(node, ctx, b, hooks);
      default: return b.text("");
    }
  }

  function renderList(node, ctx, b, hooks) {
    const list = b.make(node.ordered ? "ol" : "ul");
    if (node.ordered && node.start !== 1) b.set(list, "start", node.start);
    for (const item of node.items) {
      const li = b.make("li", item.task === null ? null : item.task ? "task done" : "task");
      if (item.task !== null) li.append(b.make("span", "box", b.text(item.task ? "☑ " : "☐ ")));
      for (const c of item.children) {
        li.append(...[].concat(renderBlock(c, ctx, b, hooks, node.tight)));
      }
      list.append(li);
    }
    return list;
  }

  function renderTable(node, ctx, b, hooks) {
    const cell = (tag, s, k) => b.make(tag, node.align[k] ? `align-${node.align[k]}` : null,
      ...renderInline(inline(s, ctx.refs), b, hooks));
    const head = b.make("tr", null, ...node.head.map((s, k) => cell("th", s, k)));
    const body = b.make("tbody", null, ...node.rows.map((row) =>
      b.make("tr", null, ...row.map((s, k) => cell("td", s, k)))));
    return b.make("div", "table-wrap", b.make("table", null, b.make("thead", null, head), body));
  }

  // The markdown ``src`` as a DocumentFragment. hooks: text(s) -> a node for a run of
  // text (the page marks the query's words with it); openNote({kind, target, heading})
  // for a click on a link to a note; frontMatter: read a leading --- block as front
  // matter; document: the document to build in (the page's by default).
  function render(src, hooks = {}) {
    const doc = hooks.document || globalThis.document;
    const b = builder(doc, hooks);
    const ctx = parse(String(src), hooks);
    const frag = doc.createDocumentFragment();
    for (const node of ctx.blocks) frag.append(...[].concat(renderBlock(node, ctx, b, hooks)));
    return frag;
  }

  Object.assign(exports, { render, parse, inline, linkTarget, TAGS, ATTRS });
})(typeof module === "object" && module.exports ? module.exports
  : (globalThis.BrainbotMarkdown = {}));

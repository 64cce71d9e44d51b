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
// Linear in the note's length on every input (issue 40): no pattern tries a run of
// characters more than a bounded number of times, what scans from many positions would
// each look for again (where a code span or a link label closes, where a [[wikilink]]
// ends, a link's destination) is found once per text, emphasis is matched over linked
// lists, and a line is read once for each list or quote it is in (MAX_NESTING at most).
// tests/test_markdown_render.py times 31 pathological inputs against plain prose of the
// same size; tests/js/check_scanners.js holds each scanner to the pattern it replaced.
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
  // stays linear (a lazy (.*?) before [ \t]*$ did not, nor two [ \t]* that could share a
  // run of spaces, as the delimiter row's pattern had: delimiterRow() reads it by hand).
  const FENCE = /^( {0,3})(`{3,}|~{3,}(?!~))([^`]*)$/;  // (?!~): the info may hold ~
  const ATX = /^ {0,3}(#{1,6})(?:[ \t]|$)/;
  const HR = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
  const SETEXT = /^ {0,3}(=+|-+)[ \t]*$/;
  const QUOTE = /^ {0,3}> ?/;
  const ITEM = /^( {0,3})([-+*]|\d{1,9}[.)])([ \t]+|$)/;
  const REFDEF = /^ {0,3}\[([^\]]+)\]:[ \t]*<?([^\s>]+)>?(?:[ \t]+["'(](.*)["')])?[ \t]*$/;
  const CALLOUT = /^\[!([\w-]+)\][+-]?[ \t]*(.*)$/;
  const PUNCT = /[!-/:-@[-`{-~\p{P}\p{S}]/u;
  const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'", nbsp: "\u00a0",
    copy: "©", reg: "®", trade: "™", mdash: "—", ndash: "–", hellip: "…", laquo: "«",
    raquo: "»", middot: "·", times: "×", deg: "°", euro: "€" };

  // A line of spaces and tabs, and a line's leading spaces: read by hand, as they are asked
  // of each line once per list or quote it is in.
  const blank = (line) => {
    for (let k = 0; k < line.length; k++) {
      if (line[k] !== " " && line[k] !== "\t") return false;
    }
    return true;
  };
  const indent = (line) => {
    let k = 0;
    while (line[k] === " ") k++;
    return k;
  };
  const detab = (line) => line.replace(/^[ \t]+/, (ws) => ws.replace(/\t/g, "    "));

  // -- blocks ---------------------------------------------------------------------------
  function parse(src, opts = {}) {
    const lines = src.replace(/\r\n?/g, "\n").split("\n").map(detab);
    const refs = references();
    let start = 0;
    const out = [];
    if (opts.frontMatter && lines[0] === "---") {
      const end = lines.findIndex((l, i) => i > 0 && (l === "---" || l === "..."));
      if (end > 0) {
        out.push({ t: "front", text: lines.slice(1, end).join("\n") });
        start = end + 1;
      }
    }
    try {
      return { blocks: out.concat(blocks(lines.slice(start), refs)), refs };
    } finally {
      starting = new Map();
    }
  }

  // The [label]: url "title" definitions of a note: by label, trimmed and lower-cased (a
  // Map: a label may be "constructor"), and the lengths those labels have, so that a
  // [text] of another length is no reference without lower-casing it (lower-casing never
  // shortens a string: only U+0130 changes length, to 2).
  function references() {
    const defs = new Map();
    const lengths = new Set();
    const add = (key, def) => {
      if (!defs.has(key)) { defs.set(key, def); lengths.add(key.length); }
    };
    const get = (text) => {
      const t = text.trim();
      return defs.size && (lengths.has(t.length) || t.includes("\u0130"))
        ? defs.get(t.toLowerCase()) : undefined;
    };
    return { add, get };
  }

  // Whether ``line`` starts a block that ends a paragraph. A lazy line is asked this once
  // for each list or quote it is in: the part that does not depend on the next line is
  // kept for the note (parse() empties it), so forty nested lists read it once.
  let starting = new Map();
  function interrupts(line, next) {
    let starts = starting.get(line);
    if (starts === undefined) {
      const m = ITEM.exec(line);
      starts = FENCE.test(line) || ATX.test(line) || HR.test(line) || QUOTE.test(line) ||
        Boolean(m && !blank(line.slice(m[0].length)) && (/[-+*]/.test(m[2]) ||
          /^1\D/.test(m[2])));
      starting.set(line, starts);
    }
    return starts || tableStart(line, next);
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

  // An ATX heading's text: trimmed, without a closing run of # after a space. (The
  // pattern /#+$/ tried each # of a long run to the line's end: quadratic.)
  function atxText(s) {
    const text = s.trim();
    let end = text.length;
    while (end && text[end - 1] === "#") end--;
    return end === 0 || text[end - 1] === " " || text[end - 1] === "\t"
      ? text.slice(0, end).trim() : text;
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
      refs.add(key, { href: decodeText(m[2]), title: m[3] || "" });
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
    return next !== undefined && line.includes("|") && delimiterRow(next) &&
      next.includes("-") && cells(line).length === cells(next).length;
  }

  // Whether ``line`` is a table's delimiter row: cells of :?-+:? between pipes, the outer
  // pipes optional (up to 3 spaces before a leading one), spaces and tabs around each.
  function delimiterRow(line) {
    const n = line.length;
    let i = 0;
    const spaces = () => { while (i < n && (line[i] === " " || line[i] === "\t")) i++; };
    spaces();
    if (line[i] === "|") {
      if (i > 3 || line.slice(0, i).includes("\t")) return false;
      i++;
      spaces();
    }
    for (;;) {  // a cell, then the end or a pipe and (the end or another cell)
      if (line[i] === ":") i++;
      const dashes = i;
      while (line[i] === "-") i++;
      if (i === dashes) return false;
      if (line[i] === ":") i++;
      spaces();
      if (i === n) return true;
      if (line[i] !== "|") return false;
      i++;
      spaces();
      if (i === n) return true;
    }
  }

  // A row shorter than the header is padded with empty cells (GFM) while the table has
  // padded at most this many a character of its markdown; the row that would pass it ends
  // the table. Unbounded, a header of C cells over C one-cell rows made C^2 cells (60 KB
  // of note, 10^8 cells: markdown-it's issue 1000; it and cmark-gfm stop at a fixed count,
  // which would still make 65,536 cells of a few hundred characters). A real table pads
  // far less than a cell a character.
  const PADDING_PER_CHAR = 4;

  function table(lines, i, out) {
    const head = cells(lines[i]);
    const align = cells(lines[i + 1]).map((c) => (c.startsWith(":") && c.endsWith(":")
      ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : ""));
    const rows = [];
    let chars = lines[i].length + lines[i + 1].length;
    let padded = 0;
    for (i += 2; i < lines.length && lines[i].includes("|") && !blank(lines[i]) &&
         !(QUOTE.test(lines[i]) || FENCE.test(lines[i]) || ATX.test(lines[i])); i++) {
      const row = cells(lines[i]).slice(0, head.length);
      chars += lines[i].length;
      padded += head.length - row.length;
      if (padded > PADDING_PER_CHAR * chars) break;
      while (row.length < head.length) row.push("");
      rows.push(row);
    }
    out.push({ t: "table", head, align, rows });
    return i;
  }

  // -- inline ---------------------------------------------------------------------------
  // Sticky (y) patterns, tried at one position of the text without copying the rest of
  // it; none reads a run of characters more than twice, whatever follows the run.
  const ENTITY = /&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|([a-zA-Z][a-zA-Z0-9]{1,31}));/y;
  const AUTOLINK = /<([a-zA-Z][a-zA-Z0-9+.-]{1,31}:[^\s<>]*)>/y;
  const EMAIL = /<([a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*)>/y;
  const BARE_URL = /(?:https?:\/\/|www\.)[^\s<]*[^\s<?!.,:;*_~'"\]]/y;
  // A run of tag characters, one of them not a digit: the lookahead's digits cannot be the
  // character after them, where [L N]*[L][L N]* tried each split of a run of digits.
  const TAG = /#(?=\p{N}*[\p{L}_/-])[\p{L}\p{N}_/-]+/uy;
  const RUN = { "*": /\*+/y, "_": /_+/y, "~": /~+/y, "=": /=+/y, "`": /`+/y };
  const ANGLE_DEST = /<([^<>\n]*)>/y;
  const REF = /\[([^\]]{0,999})\]/y;
  const SPACE = /\s/;
  const LINE_END = /[\n\r\u2028\u2029]/;  // what a pattern's "." does not match
  const at = (re, s, i) => { re.lastIndex = i; return re.exec(s); };
  const MAX_LABEL = 1000;  // a longer [label] is text
  const MAX_NESTING = 40;  // quotes, lists and emphasis deeper than this are shown as text

  function entity(m) {
    const code = m[1] ? parseInt(m[1], 10) : m[2] ? parseInt(m[2], 16) : null;
    if (code === null) return Object.hasOwn(ENTITIES, m[3]) ? ENTITIES[m[3]] : undefined;
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

  function inline(src, refs = references(), inLink = false) {
    const nodes = [];
    let found = null;
    const ahead = () => found || (found = lookahead(src));  // only for a text with [ or `
    const dests = new Map();  // "(" position -> the link destination read there
    let text = "";
    const flush = () => { if (text) nodes.push({ t: "text", s: text }); text = ""; };
    const push = (node) => { flush(); nodes.push(node); };
    let i = 0;
    while (i < src.length) {
      let j = i;
      while (j < src.length && quiet(src, j, inLink)) j++;
      if (j > i) { text += src.slice(i, j); i = j; continue; }
      const c = src[i];
      const prev = i ? src[i - 1] : " ";
      const bracket = c === "[" ? i : c === "!" && src[i + 1] === "[" ? i + 1 : -1;
      let m, got;
      if (c === "\\" && /[!-/:-@[-`{-~]/.test(src[i + 1] || "")) { text += src[i + 1]; i += 2; }
      else if (c === "\\" && src[i + 1] === "\n") { push({ t: "br" }); i += 2; }
      else if (c === "`") {
        got = codeSpan(src, i, ahead);
        if (got.node) push(got.node);
        else text += got.text;
        i = got.end;
      } else if (bracket >= 0 && (got = wikilink(src, bracket, ahead))) {
        push({ ...got.node, embed: c === "!" });
        i = got.end;
      } else if (bracket >= 0 && !inLink && (got = link(src, bracket, refs, ahead, dests))) {
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

  // Whether src[i] is text whatever follows it (inline() takes a run of them at once: a
  // string built a character at a time was most of a long paragraph's cost).
  const SPECIAL = new Set("\\`[!<&*_~=\n");
  function quiet(src, i, inLink) {
    const c = src[i];
    if (SPECIAL.has(c)) return false;
    if (c === "#") return i > 0 && !/\s/.test(src[i - 1]);
    if (c === "h" || c === "w") return inLink || (i > 0 && !/[\s(*_~]/.test(src[i - 1]));
    return true;
  }

  // What scans from many positions of ``src`` would each look for again, found once from
  // its end (a label scan from every "[" and a search for a closing run from every run of
  // backticks made a line of "[" or of backtick runs of distinct lengths quadratic):
  //   ticks[p]: where the run of backticks closing those from p to the end of their run
  //     starts (the next run of exactly as many), or -1;
  //   label[p]: for a scan at p inside one "[", the "]" that closes it, or -1 ("[" and "]"
  //     balanced; code spans and backslash escapes skipped, as the scan from p sees them);
  //   stop[p]: the first "[", "]" or newline at or after p, or -1.
  function lookahead(src) {
    const n = src.length;
    const ticks = new Int32Array(n + 1).fill(-1);
    const label = new Int32Array(n + 1).fill(-1);
    const stop = new Int32Array(n + 1).fill(-1);
    const runs = new Map();  // run length -> where the nearest run that long starts
    let runEnd = n;
    for (let p = n - 1; p >= 0; p--) {
      const c = src[p];
      stop[p] = c === "[" || c === "]" || c === "\n" ? p : stop[p + 1];
      if (c === "`") {
        if (src[p + 1] !== "`") runEnd = p + 1;
        const close = runs.has(runEnd - p) ? runs.get(runEnd - p) : -1;
        ticks[p] = close;
        label[p] = label[close >= 0 ? close + runEnd - p : runEnd];
        if (src[p - 1] !== "`") runs.set(runEnd - p, p);
      } else if (c === "]") label[p] = p;
      else if (c === "[") label[p] = label[p + 1] < 0 ? -1 : label[label[p + 1] + 1];
      else if (c === "\\") label[p] = p + 2 <= n ? label[p + 2] : -1;
      else label[p] = label[p + 1];
    }
    return { ticks, label, stop };
  }

  // The code span opened by the backticks at src[i]: {node, end}, or {text, end} when
  // no run of as many closes it.
  function codeSpan(src, i, ahead) {
    const run = at(RUN["`"], src, i)[0];
    const end = ahead().ticks[i];
    if (end < 0) return { text: run, end: i + run.length };
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
    let unbalanced = 0;  // ")" less "(", counted once: two splits a trimmed ")" were N^2
    for (const ch of m[0]) unbalanced += ch === ")" ? 1 : ch === "(" ? -1 : 0;
    let end = m[0].length;
    while (m[0][end - 1] === ")" && unbalanced > 0) { end--; unbalanced--; }
    const url = m[0].slice(0, end);
    return { node: { t: "link", href: url.startsWith("www.") ? `http://${url}` : url,
      title: "", children: [{ t: "text", s: url }] }, end: i + url.length };
  }

  // [[Target#Heading|alias]] at src[i]: its node and where it ends, or null.
  function wikilink(src, i, ahead) {
    if (!src.startsWith("[[", i)) return null;
    const end = ahead().stop[i + 2];  // the inner part holds no [, ] nor newline
    if (end < 0 || src[end] !== "]" || src[end + 1] !== "]" || end - i > MAX_LABEL) {
      return null;
    }
    const inner = src.slice(i + 2, end);
    if (!inner.trim()) return null;
    const bar = inner.indexOf("|");
    const ref = bar < 0 ? inner : inner.slice(0, bar);
    const hash = ref.indexOf("#");
    const target = (hash < 0 ? ref : ref.slice(0, hash)).trim();
    const heading = hash < 0 ? "" : ref.slice(hash + 1).replace(/^\^/, "").trim();
    const label = bar < 0 ? ref.trim().replace("#", " › ") : inner.slice(bar + 1).trim();
    return { node: { t: "note", kind: "wikilink", target, heading, label: label || target },
      end: end + 2 };
  }

  // [label](dest "title"), [label][ref], [label][] or [label] at src[i]: the parts and
  // where it ends, or null. The label closes where lookahead() found (within MAX_LABEL);
  // a destination is read once however many labels end before its "(".
  function link(src, i, refs, ahead, dests) {
    const close = ahead().label[i + 1];
    if (close < 0 || close - i >= MAX_LABEL) return null;
    const label = src.slice(i + 1, close);
    if (src[close + 1] === "(") {
      if (!dests.has(close + 1)) dests.set(close + 1, destination(src, close + 1));
      const d = dests.get(close + 1);
      if (d) {
        return { label, href: decodeText(d.href), title: d.title === null ? ""
          : decodeText(d.title), end: d.end };
      }
    }
    const r = at(REF, src, close + 1);
    const def = refs.get(r && r[1].trim() ? r[1] : label);
    if (!def) return null;
    return { label, href: def.href, title: decodeText(def.title),
      end: close + 1 + (r ? r[0].length : 0) };
  }

  // A link's (destination "title") from the "(" at src[p]: {href, title, end} or null.
  // The grammar of the pattern it was, \(\s*(?:<…>|bare)\s*(?:title\s*)?\), read by hand
  // in the order backtracking tried it, without its cost: the \s* on either side of an
  // empty destination tried every split of a run of spaces. A bare destination is the
  // longest one, then each shorter one that ends where a title starts (from the longest).
  function destination(src, p) {
    const s = skipSpaces(src, p + 1);
    if (src[s] === "<") {
      const m = at(ANGLE_DEST, src, s);
      const t = m && destinationEnd(src, s + m[0].length);
      if (t) return { href: m[1], ...t };
    }
    const titles = [];  // where in the bare destination a title could start
    let q = s;
    for (;;) {  // one character, an escape or a (group) at a time
      const c = src[q];
      const end = q >= src.length || c === ")" || SPACE.test(c) ? -1 : c === "\\"
        ? escapeEnd(src, q) : c === "(" ? closing(src, q, ")", true) : q + 1;
      if (end < 0) break;
      if (c === "\"" || c === "'" || c === "(") titles.push(q);
      q = end;
    }
    const t = destinationEnd(src, q);
    if (t) return { href: src.slice(s, q), ...t };
    for (let k = titles.length - 1; k >= 0; k--) {
      const e = title(src, titles[k]);
      const f = e < 0 ? -1 : skipSpaces(src, e);
      if (f >= 0 && src[f] === ")") {
        return { href: src.slice(s, titles[k]), title: src.slice(titles[k] + 1, e - 1),
          end: f + 1 };
      }
    }
    return null;
  }

  // After a destination ending at p: spaces, a title and spaces, and ")"; or spaces and
  // ")". {title (null: none), end} or null.
  function destinationEnd(src, p) {
    const s = skipSpaces(src, p);
    const e = title(src, s);
    const f = e < 0 ? -1 : skipSpaces(src, e);
    if (f >= 0 && src[f] === ")") return { title: src.slice(s + 1, e - 1), end: f + 1 };
    return src[s] === ")" ? { title: null, end: s + 1 } : null;
  }

  // A link title at src[p] ("…", '…' or (…)): where it ends, or -1.
  function title(src, p) {
    const c = src[p];
    if (c === "\"" || c === "'") return closing(src, p, c, false);
    return c === "(" ? closing(src, p, ")", false) : -1;
  }

  // Where the span opened at src[p] ends at its first unescaped ``close``, or -1: at a
  // line end after a backslash, at a "(" when the span is parenthesised, and at a space
  // when ``tight`` (a parenthesised part of a bare destination).
  function closing(src, p, close, tight) {
    const paren = src[p] === "(";
    for (let q = p + 1; q < src.length;) {
      const c = src[q];
      if (c === close) return q + 1;
      if (c === "\\") q = escapeEnd(src, q);
      else if ((paren && c === "(") || (tight && SPACE.test(c))) return -1;
      else q++;
      if (q < 0) return -1;
    }
    return -1;
  }

  // A backslash and the character after it (any but a line end) at src[p]: where they
  // end, or -1.
  const escapeEnd = (src, p) => (p + 1 < src.length && !LINE_END.test(src[p + 1]) ? p + 2
    : -1);
  const skipSpaces = (src, p) => {
    while (p < src.length && SPACE.test(src[p])) p++;
    return p;
  };

  // A run of *, _, ~~ or ==, with CommonMark's flanking rules.
  const ws = (c) => /\s/u.test(c);
  function delimiter(ch, n, prev, next) {
    const left = !ws(next) && (!PUNCT.test(next) || ws(prev) || PUNCT.test(prev));
    const right = !ws(prev) && (!PUNCT.test(prev) || ws(next) || PUNCT.test(next));
    const open = ch === "_" ? left && (!right || PUNCT.test(prev)) : left;
    const close = ch === "_" ? right && (!left || PUNCT.test(next)) : right;
    return { t: "delim", ch, n, open, close };
  }

  // CommonMark's "process emphasis": each closer, left to right, takes the nearest opener
  // of its kind before it, and the runs between become text. Linear: the nodes and the
  // runs that can open or close are linked lists, so a match costs what it removes (a
  // splice of the node array a match was quadratic on '*a* ' × N), and a closer that finds
  // no opener records, for its kind, that none lies below it (CommonMark's openers_bottom),
  // so the next one stops there. Emphasis nested MAX_NESTING deep is a floor no closer
  // looks below: wrapping it again would go deeper (***…*** a thousand deep stays text).
  function emphasis(nodes) {
    if (!nodes.some((n) => n.t === "delim")) return nodes;
    const m = nodes.length;
    const next = nodes.map((_, k) => (k + 1 < m ? k + 1 : -1));  // the nodes, linked
    const prev = nodes.map((_, k) => k - 1);
    const after = new Int32Array(m).fill(-1);  // the runs that can open or close, linked
    const before = new Int32Array(m).fill(-1);
    let head = m ? 0 : -1;
    let runs = -1;
    for (let k = m - 1; k >= 0; k--) {
      if (nodes[k].t !== "delim" || !(nodes[k].open || nodes[k].close)) continue;
      if (runs >= 0) { after[k] = runs; before[runs] = k; }
      runs = k;
    }
    const dropRun = (k) => {
      if (before[k] >= 0) after[before[k]] = after[k];
      if (after[k] >= 0) before[after[k]] = before[k];
    };
    const unlink = (k) => {
      if (prev[k] >= 0) next[prev[k]] = next[k]; else head = next[k];
      if (next[k] >= 0) prev[next[k]] = prev[k];
      dropRun(k);
    };
    const bottom = new Int32Array(24);  // closer kind: no run below this index opens it
    let floor = 0;  // no run below this index opens for any closer
    for (let ci = runs; ci >= 0; ci = after[ci]) {
      const closer = nodes[ci];
      if (!closer.close) continue;
      while (closer.n > 0) {
        const kind = "*_~=".indexOf(closer.ch) * 6 + (closer.open ? 3 : 0) + closer.n % 3;
        const low = Math.max(floor, bottom[kind]);
        let oi = before[ci];
        while (oi >= low && !opens(nodes[oi], closer)) oi = before[oi];
        if (oi < low) { bottom[kind] = ci; break; }
        if (wrap(nodes, oi, ci, next, prev) === MAX_NESTING) floor = oi + 1;
        after[oi] = ci;  // the runs between are text inside the new node
        before[ci] = oi;
        if (!nodes[oi].n) unlink(oi);
        else for (let k = 0; k < 24; k++) bottom[k] = Math.min(bottom[k], oi);  // look again
      }
      if (!closer.n) unlink(ci);
      else if (!closer.open) dropRun(ci);
    }
    const out = [];
    for (let k = head; k >= 0; k = next[k]) out.push(literal(nodes[k]));
    return out;
  }

  // Whether the run ``o`` opens emphasis for the closer ``c``: the same character, and
  // CommonMark's rule of 3 (when either run can both open and close, their lengths may
  // not sum to a multiple of 3 unless both are one).
  const opens = (o, c) => o.ch === c.ch && o.open && o.n > 0 && !((o.close || c.open) &&
    (o.n + c.n) % 3 === 0 && (o.n % 3 || c.n % 3) && (c.ch === "*" || c.ch === "_"));

  // The emphasis the runs nodes[oi] and nodes[ci] make of the nodes between them, linked
  // in their place (the runs lose the characters it uses): its depth.
  function wrap(nodes, oi, ci, next, prev) {
    const opener = nodes[oi];
    const closer = nodes[ci];
    const children = [];
    let depth = 0;
    for (let k = next[oi]; k !== ci; k = next[k]) {
      children.push(literal(nodes[k]));
      depth = Math.max(depth, nodes[k].depth || 0);
    }
    const use = "~=".includes(closer.ch) ? 2 : opener.n >= 2 && closer.n >= 2 ? 2 : 1;
    const tag = closer.ch === "~" ? "del" : closer.ch === "=" ? "mark"
      : use === 2 ? "strong" : "em";
    opener.n -= use;
    closer.n -= use;
    const k = nodes.push({ t: tag, children, depth: depth + 1 }) - 1;
    next[oi] = k;
    prev[k] = oi;
    next[k] = ci;
    prev[ci] = k;
    return depth + 1;
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
    const raw = trimControls(dest.replace(/[\t\n\r]/g, ""));
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

  // ``s`` without the C0 controls and spaces at either end. (A pattern's
  // [\u0000-\u0020]+$ tried each run of spaces inside a <destination> to its end.)
  function trimControls(s) {
    let a = 0;
    let b = s.length;
    while (a < b && s.charCodeAt(a) <= 0x20) a++;
    while (b > a && s.charCodeAt(b - 1) <= 0x20) b--;
    return s.slice(a, b);
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
      append(node, children);
      return node;
    };
    // ``items`` (nodes, or arrays of them) appended one at a time: spread into one call,
    // the 128,000 nodes of a long paragraph passed V8's limit on arguments.
    const append = (node, items) => {
      for (const c of items) {
        if (Array.isArray(c)) append(node, c);
        else if (c !== null && c !== undefined) node.append(c);
      }
      return node;
    };
    const set = (node, name, value) => {
      if (!ATTRS.has(name)) throw new Error(`markdown.js does not set ${name}`);
      node.setAttribute(name, String(value));
    };
    const text = (s) => (hooks.text ? hooks.text(s) : doc.createTextNode(s));
    return { make, append, set, text };
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
      else out.push(b.make(n.t, null, renderInline(n.children, b, hooks)));
    }
    return out;
  }

  function webLink(n, b, hooks) {
    const children = renderInline(n.children, b, hooks);
    const to = linkTarget(n.href);
    if (to && to.note) return noteLink({ ...to.note }, b, hooks, children);
    if (!to) {  // shown, never followed: the destination is the title's text
      const dead = b.make("span", "dead-link", children);
      b.set(dead, "title", `not opened: ${n.href}`);
      return dead;
    }
    const a = b.make("a", null, children);
    b.set(a, "href", to.web);
    b.set(a, "rel", "noopener noreferrer");
    b.set(a, "target", "_blank");
    if (n.title) b.set(a, "title", n.title);
    return a;
  }

  // A link to a note: the page opens it itself (hooks.openNote), the browser never
  // follows it. Its href is a fragment that names the note, for the status bar.
  function noteLink(n, b, hooks, children) {
    const a = b.make("a", n.embed ? "note-link embed" : "note-link", children);
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
          inl(node.text));
      case "para": return tight ? inl(node.text) : b.make("p", null, inl(node.text));
      case "hr": return b.make("hr");
      case "front": return b.make("pre", "front-matter", b.make("code", null, b.text(node.text)));
      case "code": {
        const lang = /^[\w+#.-]{1,32}$/.test(node.lang) ? `language-${node.lang}` : null;
        return b.make("pre", null, b.make("code", lang, b.text(node.text)));
      }
      case "quote": {
        const q = b.make("blockquote", node.callout ? `callout callout-${
          node.callout.replace(/[^\w-]/g, "")}` : null);
        if (node.callout) q.append(b.make("p", "callout-title", inl(node.title)));
        for (const c of node.children) b.append(q, [renderBlock(c, ctx, b, hooks)]);
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
        b.append(li, [renderBlock(c, ctx, b, hooks, node.tight)]);
      }
      list.append(li);
    }
    return list;
  }

  function renderTable(node, ctx, b, hooks) {
    const cell = (tag, s, k) => b.make(tag, node.align[k] ? `align-${node.align[k]}` : null,
      s ? renderInline(inline(s, ctx.refs), b, hooks) : []);
    const head = b.make("tr", null, node.head.map((s, k) => cell("th", s, k)));
    const body = b.make("tbody", null, node.rows.map((row) =>
      b.make("tr", null, row.map((s, k) => cell("td", s, k)))));
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
    for (const node of ctx.blocks) b.append(frag, [renderBlock(node, ctx, b, hooks)]);
    return frag;
  }

  // The scanners that replaced patterns, for tests/js/check_scanners.js to hold to them.
  const scanners = { destination, delimiterRow, lookahead, emphasis, FENCE };
  Object.assign(exports, { render, parse, inline, linkTarget, TAGS, ATTRS, scanners });
})(typeof module === "object" && module.exports ? module.exports
  : (globalThis.BrainbotMarkdown = {}));

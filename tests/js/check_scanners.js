// Holds the hand-written scanners of brainbot/serve/static/markdown.js (issue 40) to the
// patterns and loops they replaced, kept here as oracles: each of those was quadratic on
// some input, and each scanner must give what it gave on every input, only faster.
//   destination(): the link destination pattern, on every "(" + up to 6 characters of
//     ( ) space < > " ' \ x newline;
//   delimiterRow(): the table delimiter row pattern, on every line of up to 8 of
//     space tab | - : x;
//   lookahead(): the label scan from each "[" and the closing-run search from each run of
//     backticks, on every text of up to 8 of [ ] ` \ a newline;
//   FENCE: the fence pattern whose ~ could give characters back, on up to 8 of ~ ` a
//     space tab;
//   emphasis(): the splicing "process emphasis" (without its lookback limit), on 100,000
//     seeded random runs of * _ ~ = (1 to 6 long, opening, closing, both or neither)
//     between text, and on nestings deep enough to reach MAX_NESTING.
// Prints {checked: {name: count}, differ: [{scanner, input, want, got}]} (at most 20).
"use strict";

const path = require("path");
const md = require(path.join(__dirname, "..", "..", "brainbot", "serve", "static",
  "markdown.js"));
const { destination, delimiterRow, lookahead, emphasis, FENCE } = md.scanners;

// -- the oracles: markdown.js before issue 40 ----------------------------------------------
const DEST = /\(\s*(?:<([^<>\n]*)>|((?:[^\s()\\]|\\.|\((?:[^\s()\\]|\\.)*\))*))\s*(?:("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\((?:[^()\\]|\\.)*\))\s*)?\)/y;
const DELIM_ROW = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
const OLD_FENCE = /^( {0,3})(`{3,}|~{3,})([^`]*)$/;
const RUN = /`+/y;
const at = (re, s, i) => { re.lastIndex = i; return re.exec(s); };

function closingRun(src, from, run) {
  for (let j = src.indexOf(run, from); j >= 0; j = src.indexOf(run, j)) {
    const len = at(RUN, src, j)[0].length;
    if (len === run.length) return j;
    j += len;
  }
  return -1;
}

function labelEnd(src, i) {
  let depth = 0;
  for (let j = i; j < src.length; j++) {
    const c = src[j];
    if (c === "\\") j++;
    else if (c === "`") {
      const run = at(RUN, src, j)[0];
      const close = closingRun(src, j + run.length, run);
      j = close >= 0 ? close + run.length - 1 : j + run.length - 1;
    } else if (c === "[") depth++;
    else if (c === "]" && --depth === 0) return j;
  }
  return -1;
}

const literal = (n) => (n.t === "delim" ? { t: "text", s: n.ch.repeat(n.n) } : n);

function oldEmphasis(nodes) {
  for (let ci = 0; ci < nodes.length; ci++) {
    const closer = nodes[ci];
    if (closer.t !== "delim" || !closer.close) continue;
    for (let oi = ci - 1; oi >= 0 && closer.n > 0; oi--) {
      const opener = nodes[oi];
      if (opener.t !== "delim" || opener.ch !== closer.ch || !opener.open || !opener.n) {
        continue;
      }
      if ((opener.close || closer.open) && (opener.n + closer.n) % 3 === 0 &&
          (opener.n % 3 || closer.n % 3) && "*_".includes(closer.ch)) continue;
      const inner = nodes.slice(oi + 1, ci).map(literal);
      const depth = 1 + Math.max(0, ...inner.map((n) => n.depth || 0));
      if (depth > 40) break;
      const use = "~=".includes(closer.ch) ? 2 : opener.n >= 2 && closer.n >= 2 ? 2 : 1;
      const tag = closer.ch === "~" ? "del" : closer.ch === "=" ? "mark"
        : use === 2 ? "strong" : "em";
      nodes.splice(oi + 1, ci - oi - 1, { t: tag, children: inner, depth });
      opener.n -= use;
      closer.n -= use;
      ci = oi + 2;
      if (!opener.n) { nodes.splice(oi, 1); ci--; }
      oi = ci;
    }
    if (!closer.n) { nodes.splice(ci, 1); ci--; }
  }
  return nodes.map(literal);
}

// -- the checks ----------------------------------------------------------------------------
const checked = {};
const differ = [];
const expect = (scanner, input, want, got) => {
  checked[scanner] = (checked[scanner] || 0) + 1;
  const a = JSON.stringify(want);
  const b = JSON.stringify(got);
  if (a !== b && differ.length < 20) differ.push({ scanner, input, want: a, got: b });
};

// Calls ``fn`` on every string of 1 to ``most`` characters of ``alphabet`` after ``start``.
function every(alphabet, most, start, fn) {
  const grow = (s, left) => {
    for (const c of alphabet) {
      fn(s + c);
      if (left > 1) grow(s + c, left - 1);
    }
  };
  grow(start, most);
}

every(["(", ")", " ", "<", ">", "\"", "'", "\\", "x", "\n"], 6, "(", (s) => {
  const m = at(DEST, s, 0);
  const d = destination(s, 0);
  expect("destination", s, m && [m[1] !== undefined ? m[1] : m[2],
    m[3] ? m[3].slice(1, -1) : null, m[0].length], d && [d.href, d.title, d.end]);
});
every([" ", "\t", "|", "-", ":", "x"], 8, "", (s) => {
  expect("delimiterRow", s, DELIM_ROW.test(s), delimiterRow(s));
});
every(["~", "`", "a", " ", "\t"], 8, "", (s) => {
  expect("FENCE", s, OLD_FENCE.exec(s), FENCE.exec(s));
});
every(["[", "]", "`", "\\", "a", "\n"], 8, "", (s) => {
  const got = lookahead(s);
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "[") expect("lookahead.label", s, labelEnd(s, i), got.label[i + 1]);
    if (s[i] === "`") {
      const run = at(RUN, s, i)[0];
      expect("lookahead.ticks", s, closingRun(s, i + run.length, run), got.ticks[i]);
    }
  }
});

let seed = 40;
const random = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed / 0x7fffffff; };
const pick = (xs) => xs[Math.floor(random() * xs.length)];
function runs(count, longest) {
  const nodes = [];
  for (let k = 0; k < count; k++) {
    if (random() < 0.4) nodes.push({ t: "text", s: pick(["a", "b", " "]) });
    const ch = pick(["*", "_", "*", "_", "~", "="]);
    const n = "~=".includes(ch) ? 2 : 1 + Math.floor(random() * longest);
    nodes.push({ t: "delim", ch, n, open: random() < 0.6, close: random() < 0.6 });
  }
  return nodes;
}
const copy = (nodes) => nodes.map((n) => ({ ...n }));
for (let k = 0; k < 100000; k++) {
  const nodes = runs(1 + Math.floor(random() * 14), 6);
  expect("emphasis", nodes, oldEmphasis(copy(nodes)), emphasis(copy(nodes)));
}
for (let k = 0; k < 200; k++) {  // deep: runs of up to 120 reach MAX_NESTING
  const nodes = runs(2 + Math.floor(random() * 6), 120);
  expect("emphasis", nodes, oldEmphasis(copy(nodes)), emphasis(copy(nodes)));
}

process.stdout.write(JSON.stringify({ checked, differ }));

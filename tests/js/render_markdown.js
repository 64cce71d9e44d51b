// Runs brainbot/serve/static/markdown.js under node for tests/test_markdown_render.py: reads
// a JSON array of cases ({src, frontMatter, marks}) on stdin and prints, for each, the
// elements it built as HTML text, the tags and attributes it used, and what a click on each
// note link asked the page to open. The document is a stand-in that knows no HTML at all
// (dom_stand_in.js): innerHTML and its kin throw, so a renderer that used them fails here.
"use strict";

const path = require("path");
const md = require(path.join(__dirname, "..", "..", "brainbot", "serve", "static", "markdown.js"));

const { makeDocument } = require(path.join(__dirname, "dom_stand_in.js"));

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

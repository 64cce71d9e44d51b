// Times brainbot/serve/static/markdown.js under node, for tests/test_markdown_render.py's
// linearity cases and benchmarks/bench_render_linear.py. Reads on stdin
//   {cases: [{name, sizes: [[n, src], ...]}], reps, max_ratio, max_ms, budget_ms,
//    markdown, clock, dom}
// and, for each case and size in order, renders src between two renders of a control of
// plain prose as long (one paragraph of "word "), ``reps`` times: the case's ratio is the
// median of its time over the mean of the two controls beside it (a slow spell of a
// shared machine falls on both), its ms and control_ms the least of each. clock "cpu"
// (the default) is the CPU time of this process (process.cpuUsage): a busy machine's
// waits are not counted; "wall" is elapsed time. The document builds nothing unless dom
// is true (then it is render_markdown.js's stand-in): what is timed is the renderer's own
// work. A case past max_ratio times its control, or past max_ms, at one size is not run
// at the larger ones, and a render past budget_ms is not repeated (a quadratic case at
// 64k would take minutes). Prints {node, cases: [{name, sizes: [{n, chars, ms,
// control_ms, ratio} or {n, chars, error}]}]}.
"use strict";

const path = require("path");
const { makeDocument } = require(path.join(__dirname, "dom_stand_in.js"));

const NONE = { append() {}, setAttribute() {}, addEventListener() {} };
const EMPTY = { createElement: () => NONE, createTextNode: () => NONE,
  createDocumentFragment: () => NONE };

// Everything the renderer knows, for the compiler to have seen before anything is timed.
const WARM = [
  "# Title\n\nSome *em*, **strong**, `code`, [a link](https://x.example/a \"t\"),",
  " [[Note#Heading|alias]], <https://x.example>, www.x.example, #tag, &amp; and \\*.\n\n",
  "> [!note] Callout\n> quoted\n\n- [ ] a task\n- item\n  1. nested\n\n| a | b |\n|:-|-:|\n",
  "| 1 | 2 |\n\n```js\ncode\n```\n\n[ref]: https://x.example/r\n\n[ref] ~~del~~ ==mark==\n",
].join("");

function timer(clock) {
  if (clock === "wall") return () => Number(process.hrtime.bigint()) / 1e6;
  return () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function main(job) {
  const md = require(job.markdown || path.join(__dirname, "..", "..", "brainbot", "serve",
    "static", "markdown.js"));
  const now = timer(job.clock);
  const render = (src) => md.render(src, { document: job.dom ? makeDocument() : EMPTY });
  const time = (src) => { const t = now(); render(src); return now() - t; };
  for (let k = 0; k < 20; k++) render(WARM.repeat(1 + (k % 4) * 20));
  const reps = job.reps || 5;
  const budget = job.budget_ms || 2000;
  const out = [];
  for (const c of job.cases) {
    const sizes = [];
    for (const [n, src] of c.sizes) {
      const control = "word ".repeat(Math.ceil(src.length / 5)).slice(0, src.length);
      const ratios = [];
      let ms = Infinity;
      let controlMs = Infinity;
      try {
        for (let r = 0; r < reps && (r === 0 || ms < budget); r++) {
          const before = time(control);
          const t = time(src);
          const after = time(control);
          ratios.push(t / Math.max((before + after) / 2, 0.01));
          ms = Math.min(ms, t);
          controlMs = Math.min(controlMs, before, after);
        }
      } catch (err) {  // the case's test says so; the other cases are still timed
        sizes.push({ n, chars: src.length, error: String(err).slice(0, 300) });
        break;
      }
      const ratio = median(ratios);
      sizes.push({ n, chars: src.length, ms, control_ms: controlMs, ratio });
      if ((job.max_ratio && ratio > job.max_ratio) || (job.max_ms && ms > job.max_ms)) break;
    }
    out.push({ name: c.name, sizes });
  }
  return { node: process.version, cases: out };
}

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => { input += d; });
process.stdin.on("end", () => {
  process.stdout.write(JSON.stringify(main(JSON.parse(input))));
});

"""The page's markdown: rendered in the page (static/markdown.js, DOM construction) against
rendered on the server (markdown-it-py, html off, a link-scheme allowlist) and inserted
as HTML. Issue 35 asked which serves better; this is what decided it.

What is measured, on 50 hits at a time (the page asks for 10; 50 is the API's limit), the
hits being the chunks of a vault in file order, cut into groups of 50 (at most --groups
of them, spread over the vault): examples/notes, and ../shared's dwarves-brain (an
Obsidian vault) when present:

- **bytes** — the /api/search reply's JSON for the group: as now (each hit's markdown in
  ``text``), with ``html`` instead of ``text``, and with both (the CLI and MCP clients
  read ``text``, so a server that renders would send both or take a flag); plus the
  one-time bytes of markdown.js. The server sends no Content-Encoding; gzip is shown
  beside for a proxy that adds it.
- **server render** — markdown-it-py (commonmark + tables + strikethrough, ``breaks``,
  html off, links only http/https/mailto or a relative note, a [[wikilink]] rule) over
  the group's texts in this interpreter: what each search would add to the server's
  work. Median of --reps.
- **page render** — in headless Debian chromium (the browser test's), per group: the
  DOM built by markdown.js from the texts, and ``innerHTML`` of the server's HTML, each
  into a container of the document, then a forced layout (``offsetHeight``), each with
  and without that layout. Interleaved repetitions, medians. Each group's server render
  is timed right before its page render, so the load of a shared machine falls on both;
  the totals compare the page's DOM with layout against the server's render plus the
  page's innerHTML with layout.

Not measured: the network (loopback), the JSON parse, the rest of the card.

    .venv/bin/python benchmarks/bench_markdown.py [--vault DIR ...] [--reps 15]

markdown-it-py is not a dependency of brainbot: `pip install markdown-it-py` first.
Run under `flock /tmp/brainbot-bench.lock` on a shared machine.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
MARKDOWN_JS = ROOT / "brainbot" / "serve" / "static" / "markdown.js"
RESULTS = ROOT / "benchmarks" / "results" / "markdown_render.json"
VAULTS = [ROOT / "examples" / "notes", ROOT.parent / "shared" / "data" / "corpora" /
          "dwarves-brain"]
GROUP = 50


def hits_of(vault: Path) -> list[dict]:
    """Hit records as /api/search sends them, one a chunk of ``vault``, in file order."""
    run = subprocess.run([sys.executable, "-m", "brainbot", "chunks", str(vault)],
                         capture_output=True, text=True, check=True)
    out = []
    for line in run.stdout.splitlines():
        c = json.loads(line)
        meta = c["metadata"]
        out.append({"chunk_id": c["chunk_id"], "path": meta["source_file"],
                    "root": str(vault), "heading_path": meta["heading_path"],
                    "start_line": meta["start_line"], "end_line": meta["end_line"],
                    "score": 0.031746, "text": c["source_text"], "stale": False,
                    "embedded": True, "date": None, "date_source": None})
    return out


def server_renderer():
    """markdown-it-py as the server would run it: html off, links validated."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(
        ["table", "strikethrough"])

    def validate(url: str) -> bool:
        raw = re.sub(r"[\t\n\r]", "", url).strip("\x00- ").lower()
        scheme = re.match(r"^([a-z][a-z0-9+.-]*):", raw)
        return scheme is None and not raw.startswith("//") or (
            scheme is not None and scheme.group(1) in ("http", "https", "mailto"))

    md.validateLink = validate
    wiki = re.compile(r"\[\[([^\[\]\n|#]*)(?:#([^\[\]\n|]*))?(?:\|([^\[\]\n]*))?\]\]")

    def wikilink(state, silent):
        m = wiki.match(state.src, state.pos)
        if not m:
            return False
        if not silent:
            token = state.push("link_open", "a", 1)
            token.attrs = {"class": "note-link", "href": "#" + m.group(1)}
            text = state.push("text", "", 0)
            text.content = m.group(3) or m.group(1)
            state.push("link_close", "a", -1)
        state.pos = m.end()
        return True

    md.inline.ruler.before("link", "wikilink", wikilink)
    return md


def bytes_row(groups: list[list[dict]], md) -> dict:
    def size(hits) -> tuple[int, int]:
        body = json.dumps({"query": "q", "mode": "hybrid", "hits": hits}).encode()
        return len(body), len(gzip.compress(body))

    rows = {"text": [], "html": [], "text_and_html": []}
    for hits in groups:
        html = [{**h, "html": md.render(h["text"])} for h in hits]
        rows["text"].append(size(hits))
        rows["html"].append(size([{k: v for k, v in h.items() if k != "text"} for h in html]))
        rows["text_and_html"].append(size(html))
    return {k: {"median_bytes": statistics.median(b for b, _ in v),
                "median_gzip_bytes": statistics.median(g for _, g in v)}
            for k, v in rows.items()}


def server_ms(hits: list[dict], md, reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        for h in hits:
            md.render(h["text"])
        times.append((time.perf_counter() - t) * 1000)
    return times


PAGE_JS = """
const [texts, htmls, reps] = arguments;
const box = document.createElement("div");
document.body.append(box);
const times = {dom: [], dom_layout: [], html: [], html_layout: []};
const dom = (layout) => {
  const t = performance.now();
  for (const s of texts) {
    const d = document.createElement("div");
    d.append(BrainbotMarkdown.render(s, {}));
    box.append(d);
  }
  if (layout) box.offsetHeight;
  const ms = performance.now() - t;
  box.replaceChildren();
  return ms;
};
const html = (layout) => {
  const t = performance.now();
  box.innerHTML = htmls.map((h) => "<div>" + h + "</div>").join("");
  if (layout) box.offsetHeight;
  const ms = performance.now() - t;
  box.replaceChildren();
  return ms;
};
for (let r = 0; r < reps; r++) {
  times.dom.push(dom(false)); times.html.push(html(false));
  times.dom_layout.push(dom(true)); times.html_layout.push(html(true));
}
return times;
"""


def timings(groups: list[list[dict]], md, reps: int) -> dict:
    """Per group, the server's render and the page's, back to back (a shared machine's
    load falls on both alike); medians over every group and repetition."""
    from test_browser import chrome

    driver = chrome()
    try:
        driver.get("about:blank")
        driver.execute_script(MARKDOWN_JS.read_text() + "\nreturn 1;")
        version = driver.capabilities.get("browserVersion")
        times: dict[str, list[float]] = {"server_render": []}
        for hits in groups:
            texts = [h["text"] for h in hits]
            htmls = [md.render(t) for t in texts]
            driver.execute_script(PAGE_JS, texts, htmls, 2)  # warm-up, not counted
            times["server_render"] += server_ms(hits, md, reps)
            for k, v in driver.execute_script(PAGE_JS, texts, htmls, reps).items():
                times.setdefault(k, []).extend(v)
        med = {k: statistics.median(v) for k, v in times.items()}
        return {"chromium": version, **{k: round(v, 3) for k, v in med.items()},
                "page_total_dom_layout": round(med["dom_layout"], 3),
                "server_total_html_layout": round(med["server_render"] +
                                                  med["html_layout"], 3)}
    finally:
        driver.quit()


def main() -> None:
    import markdown_it

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vault", action="append", type=Path)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--groups", type=int, default=20,
                    help="at most this many groups of 50 a vault, spread over it")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    md = server_renderer()
    load_before = os.getloadavg()
    runs = []
    for vault in args.vault or [v for v in VAULTS if v.is_dir()]:
        hits = hits_of(vault)
        groups = [hits[i:i + GROUP] for i in range(0, len(hits) - GROUP + 1, GROUP)]
        groups = groups[::max(1, -(-len(groups) // args.groups))]
        runs.append({"vault": vault.name, "chunks": len(hits), "groups": len(groups),
                     "bytes": bytes_row(groups, md),
                     "ms_per_50": timings(groups, md, args.reps)})
        print(json.dumps(runs[-1], indent=1), flush=True)
    result = {"host": {"cpu": _cpu(), "platform": platform.platform(),
                       "load_before": load_before},
              "markdown_it_py": markdown_it.__version__,
              "markdown_js_bytes": MARKDOWN_JS.stat().st_size,
              "markdown_js_gzip_bytes": len(gzip.compress(MARKDOWN_JS.read_bytes())),
              "hits_per_group": GROUP, "reps": args.reps, "runs": runs}
    result["host"]["load_after"] = os.getloadavg()
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(args.out)


def _cpu() -> str:
    """The model name and family ("AMD EPYC, family 26" is a Zen 5 here), and CPUs."""
    info = {}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        key, _, value = line.partition(":")
        info.setdefault(key.strip(), value.strip())
    name = info.get("model name") or platform.processor()
    return f"{name}, family {info.get('cpu family', '?')}, {os.cpu_count()} CPUs"


if __name__ == "__main__":
    main()

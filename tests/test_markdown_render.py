"""The page's markdown renderer (brainbot/serve/static/markdown.js) under node: what each
construct becomes, and that a hostile note never yields an element, attribute or link
outside its allowlists. node runs every case of this module in one process
(tests/js/render_markdown.js, over a stand-in document that throws on innerHTML); the
same file in a real browser is tests/test_browser.py's.

Skipped with the reason when node is missing, unless BRAINBOT_REQUIRE_NODE=1 (set by
.ci/run), which makes that a failure. `make test` installs nodejs as root on Debian.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

HARNESS = Path(__file__).parent / "js" / "render_markdown.js"

HOSTILE_HTML = [
    "<script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 2">',
    '<iframe src="javascript:window.__pwned = 3"></iframe>',
    '<svg onload="window.__pwned = 4"><circle r="1"/></svg>',
    '<a href="javascript:window.__pwned = 5">click</a>',
    '<div style="background:url(javascript:alert(1))">x</div>',
    "<style>body{display:none}</style>",
    '<form action="javascript:alert(1)"><button>go</button></form>',
    "<!-- <script>alert(1)</script> -->",
]
HOSTILE_LINKS = [
    "[a](javascript:window.__pwned=6)",
    "[a](JaVaScRiPt:window.__pwned=6)",
    "[a](jav&#x61;script:window.__pwned=6)",
    "[a](&#106;avascript:window.__pwned=6)",
    "[a](&#x6A;&#x61;&#x76;&#x61;&#x73;&#x63;&#x72;&#x69;&#x70;&#x74;:alert(1))",
    "[a]( javascript:alert(1))",
    "[a](<javascript:alert(1)>)",
    "[a](<java\tscript:alert(1)>)",
    "[a](<java\nscript:alert(1)>)",
    "[a](\x01javascript:alert(1))",
    "[a](<\x00javascript:alert(1)>)",
    "[a](javascript\\:alert(1))",
    "[a](javascript&colon;alert(1))",
    "[a](%6Aavascript:alert(1))",
    "[a](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[a](DATA:text/html,<script>alert(1)</script>)",
    "[a](vbscript:msgbox(1))",
    "[a](VBScript:msgbox(1))",
    "[a](file:///etc/passwd)",
    "[a](//evil.example/x)",
    "[a](\\\\evil.example\\x)",
    "[a](javascript:alert(1) \"title\")",
    "![x](javascript:alert(1))",
    "![x](https://evil.example/track.png)",
    "<javascript:alert(1)>",
    "<JAVASCRIPT:alert(1)>",
    "<data:text/html,x>",
    "[a][r]\n\n[r]: javascript:alert(1)",
    "[a][r]\n\n[r]: <jav&#97;script:alert(1)>",
    "[a](https://ok.example/\"onmouseover=\"alert(1))",
    "[[javascript:alert(1)]]",
    "[[x|<img src=x onerror=alert(1)>]]",
    '[a](https://ok.example/ "x\\" onmouseover=\\"alert(1)")',
]


def node_missing() -> str | None:
    if shutil.which("node") is None:
        return "node not found (Debian: apt-get install nodejs)"
    return None


def render_all(cases: list[dict]) -> list[dict]:
    run = subprocess.run(["node", str(HARNESS)], input=json.dumps(cases), text=True,
                         capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


CASES: dict[str, dict] = {}


def case(name: str, src: str, **opts) -> str:
    CASES[name] = {"src": src, **opts}
    return name


@pytest.fixture(scope="module")
def out():
    reason = node_missing()
    if reason:
        if os.environ.get("BRAINBOT_REQUIRE_NODE") == "1":
            pytest.fail(f"BRAINBOT_REQUIRE_NODE=1 but {reason}")
        pytest.skip(reason)
    names = list(CASES)
    got = render_all([CASES[n] for n in names])
    results = dict(zip(names, got["results"]))
    for name, r in results.items():
        assert "error" not in r, f"{name}: {r['error']}"
    return results, got["allowed"]


def html(out, name: str) -> str:
    return out[0][name]["html"]


# -- what each construct becomes ---------------------------------------------------------
case("headings", "# One\n\n## Two ##\n\n###### Six\n\nSetext\n======\n\nTwo\n---\n\n#nottitle")


def test_headings_shift_under_the_page_own(out):
    assert html(out, "headings") == (
        '<h3 class="md-h1">One</h3><h4 class="md-h2">Two</h4><h6 class="md-h6">Six</h6>'
        '<h3 class="md-h1">Setext</h3><h4 class="md-h2">Two</h4>'
        '<p><span class="tag">#nottitle</span></p>')


case("emphasis", "**strong** *em* _em_ ***both*** ~~gone~~ ==marked== snake_case_name "
                 "2*3*4 **unclosed")


def test_emphasis(out):
    assert html(out, "emphasis") == (
        "<p><strong>strong</strong> <em>em</em> <em>em</em> <em><strong>both</strong></em> "
        "<del>gone</del> <mark>marked</mark> snake_case_name 2<em>3</em>4 **unclosed</p>")


case("lists", "- one\n- two\n  - nested\n- [ ] todo\n- [x] done\n\n3. three\n4. four\n\n"
              "* loose\n\n* list\n")


def test_lists_nest_number_and_tick(out):
    assert html(out, "lists") == (
        "<ul><li>one</li><li>two<ul><li>nested</li></ul></li>"
        '<li class="task"><span class="box">☐ </span>todo</li>'
        '<li class="task done"><span class="box">☑ </span>done</li></ul>'
        '<ol start="3"><li>three</li><li>four</li></ol>'
        "<ul><li><p>loose</p></li><li><p>list</p></li></ul>")


case("lazy", "1. first line\ncontinued lazily\n2. second\n\n   indented paragraph\n")


def test_list_items_continue_lazily_and_across_blank_lines(out):
    assert html(out, "lazy") == (
        "<ol><li><p>first line<br>continued lazily</p></li>"
        "<li><p>second</p><p>indented paragraph</p></li></ol>")


case("code", "Use `x < y` and ``a ` b``.\n\n```python\nif a < b:\n    **not bold**\n```\n\n"
             "    indented <b>code</b>\n\n~~~\nunclosed fence <i>\n")


def test_code_is_text(out):
    assert html(out, "code") == (
        "<p>Use <code>x &lt; y</code> and <code>a ` b</code>.</p>"
        '<pre><code class="language-python">if a &lt; b:\n    **not bold**</code></pre>'
        "<pre><code>indented &lt;b&gt;code&lt;/b&gt;</code></pre>"
        "<pre><code>unclosed fence &lt;i&gt;\n</code></pre>")


case("table", "| Batch | Salt | Days |\n|:---|:-:|--:|\n| F-01 | 3.5 % | 21 |\n"
              "| [[sourdough\\|starter]] | `a\\|b` |\n\nafter")


def test_tables_align_and_pad(out):
    assert html(out, "table") == (
        '<div class="table-wrap"><table><thead><tr><th class="align-left">Batch</th>'
        '<th class="align-center">Salt</th><th class="align-right">Days</th></tr></thead>'
        '<tbody><tr><td class="align-left">F-01</td><td class="align-center">3.5 %</td>'
        '<td class="align-right">21</td></tr><tr><td class="align-left">'
        '<a class="note-link" href="#sourdough" title="sourdough">starter</a></td>'
        '<td class="align-center"><code>a|b</code></td><td class="align-right"></td></tr>'
        "</tbody></table></div><p>after</p>")


case("quotes", "> quoted *text*\nlazy line\n\n> [!warning] Careful\n> hot oven\n\n---\n")


def test_block_quotes_and_callouts(out):
    assert html(out, "quotes") == (
        "<blockquote><p>quoted <em>text</em><br>lazy line</p></blockquote>"
        '<blockquote class="callout callout-warning"><p class="callout-title">Careful</p>'
        "<p>hot oven</p></blockquote><hr>")


case("weblinks", '[site](https://example.org/a?b=1&c=2 "Title") <https://example.org> '
                 "see www.example.org/wiki/Foo_(bar). <me@example.org> [ref]\n\n"
                 "[ref]: http://example.com/r")


def test_web_links_open_in_a_new_tab_without_referrer(out):
    assert html(out, "weblinks") == (
        '<p><a href="https://example.org/a?b=1&amp;c=2" rel="noopener noreferrer" '
        'target="_blank" title="Title">site</a> <a href="https://example.org/" '
        'rel="noopener noreferrer" target="_blank">https://example.org</a> see '
        '<a href="http://www.example.org/wiki/Foo_(bar)" rel="noopener noreferrer" '
        'target="_blank">www.example.org/wiki/Foo_(bar)</a>. <a href="mailto:me@example.org" '
        'rel="noopener noreferrer" target="_blank">me@example.org</a> <a '
        'href="http://example.com/r" rel="noopener noreferrer" target="_blank">ref</a></p>')


case("notelinks", "[[Garden Plan]] [[Garden Plan|the plan]] [[Garden Plan#Beds]] "
                  "[[#Beds]] ![[diagram]] [next](../home/car%20maintenance.md#Tyres) "
                  "[here](#Beds) [pdf](files/manual.pdf) [[a]b]]")


def test_links_between_notes_open_in_the_page(out):
    r = out[0]["notelinks"]
    assert r["opened"] == [
        {"kind": "wikilink", "target": "Garden Plan", "heading": ""},
        {"kind": "wikilink", "target": "Garden Plan", "heading": ""},
        {"kind": "wikilink", "target": "Garden Plan", "heading": "Beds"},
        {"kind": "wikilink", "target": "", "heading": "Beds"},
        {"kind": "embed", "target": "diagram", "heading": ""},
        {"kind": "markdown", "target": "../home/car maintenance.md", "heading": "Tyres"},
        {"kind": "markdown", "target": "", "heading": "Beds"},
    ]
    text = r["text"]
    assert "Garden Plan the plan Garden Plan › Beds" in text and "pdf" in text
    assert 'class="dead-link" title="not opened: files/manual.pdf"' in r["html"]
    assert "[[a]b]]" in text


case("front", "---\ntitle: x <b>\ntags: [a]\n---\n# Title\n", frontMatter=True)
case("no-front", "---\ntitle: x\n---\n# Title\n")


def test_front_matter_only_when_asked(out):
    assert html(out, "front") == ('<pre class="front-matter"><code>title: x &lt;b&gt;\n'
                                  'tags: [a]</code></pre><h3 class="md-h1">Title</h3>')
    assert html(out, "no-front").startswith("<hr>")


case("marks", "Feed the **sourdough** starter; `sourdough` too.", marks=["sourdough"])


def test_the_page_marks_words_through_the_text_hook(out):
    assert html(out, "marks") == (
        "<p>Feed the <strong><mark>sourdough</mark></strong> starter; "
        "<code><mark>sourdough</mark></code> too.</p>")


case("entities", "&amp; &lt;b&gt; &#169; &#x1F600; &bogus; \\*not em\\* \\<b>")


def test_entities_and_escapes_are_text(out):
    assert html(out, "entities") == ("<p>&amp; &lt;b&gt; © 😀 &amp;bogus; *not em* "
                                      "&lt;b&gt;</p>")


# -- what a hostile note gets -------------------------------------------------------------
for n, src in enumerate(HOSTILE_HTML):
    case(f"html{n}", f"Pasted: {src}\n\n{src}\n\n- {src}\n\n| {src} |\n|---|\n| {src} |")
for n, src in enumerate(HOSTILE_LINKS):
    case(f"link{n}", src)


def safe_href(href: str) -> bool:
    """A fragment of this page (a note link), or what the URL parser serialises for an
    http(s) or mailto URL."""
    return bool(re.match(r"^(#|https?://|mailto:)", href))


@pytest.mark.parametrize("n", range(len(HOSTILE_HTML)))
def test_raw_html_is_text(out, n):
    r = out[0][f"html{n}"]
    assert HOSTILE_HTML[n] in r["text"]
    assert not set(r["tags"]) & {"script", "img", "iframe", "svg", "style", "form", "button"}
    assert not re.search(r"<(?!/?(p|ul|li|div|table|thead|tbody|tr|th|td)\b)", r["html"])


@pytest.mark.parametrize("n", range(len(HOSTILE_LINKS)))
def test_no_link_but_http_https_mailto_or_a_note(out, n):
    r = out[0][f"link{n}"]
    hrefs = re.findall(r'href="([^"]*)"', r["html"])
    assert all(safe_href(h) for h in hrefs), hrefs
    assert not any(h.lower().lstrip("#").startswith(("javascript", "data", "vbscript"))
                   for h in hrefs if not h.startswith("#"))


def test_every_case_keeps_to_the_allowlists(out):
    results, allowed = out
    for name, r in results.items():
        assert set(r["tags"]) <= set(allowed["tags"]), name
        assert set(r["attrs"]) <= set(allowed["attrs"]), name
        assert all(safe_href(h) for h in re.findall(r'href="([^"]*)"', r["html"])), name


FRAGMENTS = ["*", "**", "_", "~~", "==", "`", "```", "[", "]", "(", ")", "[[", "]]", "|",
             "#", "> ", "- ", "1. ", "\n", "\n\n", "    ", "<", ">", "&", "&#", "\\", "!",
             "javascript:", "JaVa\tScRiPt:", "data:", "https://x.example/", "mailto:a@b",
             "<script>", "onerror=", "\"", "'", "---", "| --- |", "[x]", "www.", "\x00",
             "\u202e", "a", "b c", "note.md", "#tag"]


def fuzz_inputs(n: int = 400, seed: int = 35) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 60)))
            for _ in range(n)]


for n, src in enumerate(fuzz_inputs()):
    case(f"fuzz{n}", src)


def test_fuzzed_markdown_never_fails_nor_leaves_the_allowlists(out):
    results, allowed = out
    for name, r in results.items():
        if name.startswith("fuzz"):
            assert set(r["tags"]) <= set(allowed["tags"]), CASES[name]
            assert all(safe_href(h) for h in re.findall(r'href="([^"]*)"', r["html"]))


DEEP = 20_000
case("deep-quotes", "> " * DEEP + "bottom")
case("deep-lists", "".join("  " * d + "- x\n" for d in range(2_000)))
case("deep-emphasis", "*" * DEEP + "a" + "*" * DEEP)


def test_deep_nesting_renders_without_exhausting_the_stack(out):
    """Quotes and lists past MAX_NESTING are text: a note of 20,000 '> ' made the parser
    recurse once a level, past node's stack."""
    assert "bottom" in out[0]["deep-quotes"]["text"]
    assert out[0]["deep-lists"]["html"].count("<ul>") <= 45
    assert "a" in out[0]["deep-emphasis"]["text"]


def test_skip_reason_names_what_is_missing(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert node_missing() == "node not found (Debian: apt-get install nodejs)"

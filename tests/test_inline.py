"""inline: visible text, links, comments, code spans and tags, with exact spans; hostile input;
properties over generated markdown."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainbot.notes.inline import (
    Autolink,
    BareUrl,
    CodeSpan,
    Comment,
    Definition,
    InlineMarkup,
    Link,
    WikiLink,
    parse_inline,
    tags,
    visible_text,
)
from brainbot.notes.markdown import parse


def markup(text: str) -> InlineMarkup:
    return InlineMarkup.of_note(parse(text))


def only(text: str, kind=None):
    found = [e for e in parse_inline(text) if kind is None or isinstance(e, kind)]
    assert len(found) == 1, found
    return found[0]


# --- visible text ------------------------------------------------------------------------


@pytest.mark.parametrize("source, seen", [
    ("See [the docs](https://x.org/a \"T\") now.", "See the docs now."),
    ("An ![old map](maps/1890.png) here.", "An old map here."),
    ("Ask [[Note]] or [[dir/Other Note.md]].", "Ask Note or Other Note."),
    ("Ask [[Old.markdown]] or [[Node.js]].", "Ask Old or Node.js."),  # only notes' extensions
    ("Ask [[Note|my alias]].", "Ask my alias."),
    ("Ask [[Note#Heading]] and [[Note#A#B]].", "Ask Note > Heading and Note > A > B."),
    ("Jump to [[#Setup]].", "Jump to Setup."),
    ("A block [[Note#^a1b2c3]].", "A block Note."),
    ("Embed ![[Recipe]] and ![[photo.JPG|300]] done.", "Embed Recipe and  done."),
    ("Mail <me@example.org> or <https://x.org/a?b=1>.", "Mail me@example.org or https://x.org/a?b=1."),
    ("Bare https://x.org/a#frag stays.", "Bare https://x.org/a#frag stays."),
    ("Hidden<!-- a note to self --> text.", "Hidden text."),
    ("**bold** and _it_ and \\[escaped](x) stay.", "**bold** and _it_ and \\[escaped](x) stay."),
    ("`[not](a link)` and `<!-- not a comment -->`.", "`[not](a link)` and `<!-- not a comment -->`."),
    ("[a [b](c) d](e)", "[a b d](e)"),  # a link cannot hold a link: the inner one wins
    ("[![logo](logo.svg) Home](index.md)", "logo Home"),
    ("[in <angle> text](<a b.md>)", "in <angle> text"),
    ("[x](https://en.wikipedia.org/wiki/Foo_(bar))", "x"),
    ("matrix[i][j] and [x] stay", "matrix[i][j] and [x] stay"),  # no definitions
    ("[Unclosed](x and <!-- never closed", "[Unclosed](x and <!-- never closed"),
    ("|a|[[Note\\|alias]]|", "|a|alias|"),  # a wikilink's pipe escaped inside a table
])
def test_visible_text(source, seen):
    assert visible_text(source) == seen


def test_comment_lines_vanish_with_their_line_break():
    text = ("<!-- source: https://docs.example.com/en/docs/prompt-caching -->\n"
            "# Prompt caching\n<!-- anchor: prompt-caching -->\n\nText.\n"
            "  <!-- indented -->\nMore.\n")
    assert visible_text(text) == "# Prompt caching\n\nText.\nMore.\n"


def test_multi_line_comment_block_and_unclosed_block():
    text = "Before.\n\n<!--\nhidden [link](x)\n\nstill hidden\n-->\n\nAfter.\n"
    assert visible_text(text) == "Before.\n\n\nAfter.\n"
    assert [type(e) for e in parse_inline(text)] == [Comment]
    # An HTML comment block never closed hides the rest of its block, as a browser would.
    assert visible_text("Text.\n\n<!-- draft\nmore draft") == "Text.\n\n"


def test_raw_html_blocks_show_except_comments():
    text = '<div class="x">\n[not a link](y) <!-- gone -->\n</div>\n'
    assert visible_text(text) == '<div class="x">\n[not a link](y) \n</div>\n'


def test_reference_links_need_a_definition():
    text = ("Read [the guide][Guide], the [guide] and [GUIDE][] but not [other][nope].\n\n"
            "[guide]: https://example.org/guide \"The guide\"\n[unused]: <a b.md>\n")
    m = markup(text)
    assert m.visible() == "Read the guide, the guide and GUIDE but not [other][nope].\n\n"
    links = [e for e in m.elements if isinstance(e, Link)]
    assert [(ln.text, ln.label, ln.destination, ln.title) for ln in links] == [
        ("the guide", "Guide", "https://example.org/guide", "The guide"),
        ("guide", "guide", "https://example.org/guide", "The guide"),
        ("GUIDE", "GUIDE", "https://example.org/guide", "The guide"),
    ]
    defs = [e for e in m.elements if isinstance(e, Definition)]
    assert [(d.label, d.destination, d.title) for d in defs] == [
        ("guide", "https://example.org/guide", "The guide"), ("unused", "a b.md", None)]


def test_a_definition_must_open_its_paragraph():
    text = "Some text\n[x]: https://x.org\n"
    assert visible_text(text) == text
    assert not any(isinstance(e, Definition) for e in parse_inline(text))


def test_code_is_never_scanned():
    text = ("```md\n[x](y) <!-- c --> [[Note]] #tag\n```\n\n    [x](y) #tag\n\n"
            "- item [[Real]]\n  ```\n  [x](y) #nottag\n  ```\n- after #real\n\n"
            "> quote [q](r)\n> ```\n> [x](y)\n> ```\n")
    m = markup(text)
    found = [(type(e).__name__, text[e.start:e.end]) for e in m.elements]
    assert found == [("WikiLink", "[[Real]]"), ("Link", "[q](r)")]
    assert [t.name for t in m.tags] == ["real"]


# --- code spans --------------------------------------------------------------------------


@pytest.mark.parametrize("source, span", [
    ("a `b` c", "`b`"),
    ("a ``b ` c`` d", "``b ` c``"),
    ("a ``b``` c`` d", "``b``` c``"),  # a run of 3 does not close a run of 2
    ("\\`not` code`", "` code`"),  # an escaped backtick opens nothing
])
def test_code_spans_match_backtick_runs(source, span):
    code = only(source, CodeSpan)
    assert source[code.start:code.end] == span


def test_unmatched_backticks_are_literal_and_links_after_them_work():
    text = "``` not closed `` and [x](y)"
    assert not any(isinstance(e, CodeSpan) for e in parse_inline(text))
    assert visible_text(text) == "``` not closed `` and x"


def test_a_code_span_beats_a_link_that_starts_later():
    text = "[a `]` b](c)"
    assert visible_text(text) == "a `]` b"


# --- links and wikilinks -------------------------------------------------------------------


def test_link_fields():
    text = 'See [the *docs*](guide.md#Setup "Read me") now.'
    link = only(text, Link)
    assert text[link.start:link.end] == '[the *docs*](guide.md#Setup "Read me")'
    assert text[link.text_start:link.text_end] == link.text == "the *docs*"
    assert (link.destination, link.fragment, link.title, link.image, link.label) == (
        "guide.md#Setup", "Setup", "Read me", False, None)
    image = only("![alt text](img/a.png 'Title')", Link)
    assert image.image and image.text == "alt text" and image.title == "Title"
    assert image.fragment is None


def test_wikilink_fields():
    text = "x ![[dir/Note.md#Part#Sub|shown]] y"
    link = only(text, WikiLink)
    assert text[link.start:link.end] == "![[dir/Note.md#Part#Sub|shown]]"
    assert (link.target, link.heading, link.alias, link.embed, link.name) == (
        "dir/Note.md", "Part#Sub", "shown", True, "Note")
    same = only("[[#Setup]]", WikiLink)
    assert (same.target, same.heading, same.name, same.visible) == ("", "Setup", "", "Setup")


def test_autolinks_and_bare_urls():
    text = "A <https://a.org/x> b (see https://b.org/p_(q).) and www.c.org, x=https://d.org"
    found = [e for e in parse_inline(text) if isinstance(e, (Autolink, BareUrl))]
    assert [text[e.start:e.end] for e in found] == [
        "<https://a.org/x>", "https://b.org/p_(q)", "www.c.org"]
    assert found[0].destination == "https://a.org/x" and found[1].url == "https://b.org/p_(q)"
    text = ("http://a.org at the start, HTTPS://B.ORG/X, ftp://c.org no, `https://d.org` no, "
            "[https://e.org](https://f.org) no, ( https://e.org) yes, https://www.g.org once.")
    urls = [e.url for e in parse_inline(text) if isinstance(e, BareUrl)]
    assert urls == ["http://a.org", "HTTPS://B.ORG/X", "https://e.org", "https://www.g.org"]


# --- tags --------------------------------------------------------------------------------


def test_tags():
    text = ("# Heading #in-heading\n\n#start of line, mid #nested/tag, #café and #123 not,\n"
            "C#sharp no, `#code` no, [[Note#head]] no, https://x.org/#frag no, "
            "[#text](u#frag) no, <!-- #hidden --> no, (#paren) no.\n")
    assert [t.name for t in tags(text)] == ["in-heading", "start", "nested/tag", "café"]
    # examples/vault's rules: colour codes are not tags, names are as written (compare them
    # case-folded), a tag ends at any other character, a table's "#" header is no tag.
    text = "- #todo #Reading #project/heron. #gift idea, #fff #e4d8c4 #ffff #fade1\n\n| # | a |\n"
    assert [t.name for t in tags(text)] == ["todo", "Reading", "project/heron", "gift", "ffff",
                                            "fade1"]
    for t in tags(text):
        assert text[t.start:t.end] == "#" + t.name


def test_front_matter_is_not_scanned():
    text = "---\ntags: [a]\nurl: <https://x.org>\n---\nBody #b\n"
    assert [t.name for t in tags(text)] == ["b"]
    assert parse_inline(text) == []


# --- spans of a part of a note -------------------------------------------------------------


def test_visible_text_of_a_span_cuts_deletions_and_keeps_cut_replacements():
    text = "Start [[Long Note Name|alias]] middle <!-- a long comment --> end."
    m = markup(text)
    cut = text.index("Name")
    assert m.visible(0, cut) == "Start [[Long Note "  # a replacement cut: left as written
    inside = text.index("long comment")
    assert m.visible(0, inside) == "Start alias middle "  # a deletion cut: cut with it
    assert m.visible(inside, len(text)) == " end."
    assert m.edited(0, 5) is False and m.edited(0, len(text)) is True
    assert m.blank(text.index("<!--"), text.index("-->") + 3)


def test_within_and_of_text():
    text = "[a](b) then [[c]] then <!-- d -->"
    m = markup(text)
    assert [type(e) for e in m.within(1, len(text))] == [WikiLink, Comment]
    assert InlineMarkup.of_text("Setup <!-- anchor --> [[Guide]]").visible() == "Setup  Guide"


# --- hostile input: each must simply finish (linear time; no clock asserted) --------------


@pytest.mark.parametrize("hostile", [
    "[[" * 500_000,
    "<!--" * 250_000,
    "x <!--" * 150_000,
    "[" * 300_000 + "]" * 300_000,
    "[a](" * 250_000,
    "[a](b \"" * 150_000,
    "[a](b" + " " * 500_000 + "x",
    "![" * 300_000,
    "`" * 3000 + " " + "` `` ``` " * 30_000,
    "<a@b" * 250_000,
    "x https://" * 100_000,
    "[x]: y\n" * 50_000 + "[x][" * 100_000,
    "#a" * 300_000,
    "([" * 300_000 + "](" * 300_000,
])
def test_hostile_input_completes(hostile):
    m = markup(hostile)
    assert len(m.visible()) <= len(hostile)
    assert all(hostile[e.start:e.end] for e in m.elements)


# --- properties --------------------------------------------------------------------------

_plain = st.text(st.characters(blacklist_characters="<[]`\\!\r", blacklist_categories=("Cs",)),
                 max_size=200)
_name = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 _.-]{0,15}", fullmatch=True).map(str.strip).filter(
    lambda s: s and not s.endswith("."))
_word = st.from_regex(r"[A-Za-z0-9]{1,8}", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(_plain)
def test_text_without_markup_is_its_own_visible_text(text):
    assert visible_text(text) == text


@st.composite
def _wikilink(draw):
    target, heading = draw(_name), draw(st.none() | _name)
    alias, embed = draw(st.none() | _name), draw(st.booleans())
    source = ("!" if embed else "") + "[[" + target + (f"#{heading}" if heading else "")
    return source + (f"|{alias}" if alias else "") + "]]", (target, heading, alias, embed)


@st.composite
def _link(draw):
    text, image = draw(st.lists(_word, min_size=1, max_size=4).map(" ".join)), draw(st.booleans())
    dest = draw(st.from_regex(r"[a-z]{1,8}(/[a-z0-9_.-]{1,8}){0,3}(#[a-z-]{1,8})?", fullmatch=True))
    title = draw(st.none() | st.lists(_word, min_size=1, max_size=3).map(" ".join))
    source = ("!" if image else "") + f"[{text}]({dest}" + (f' "{title}"' if title else "") + ")"
    return source, (text, dest, title, image)


_piece = st.one_of(_word, _wikilink(), _link(), st.just("<!-- hidden -->"), st.just("`[a](b)`"),
                   st.just("https://x.org/a#b"), st.just("#tag"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_piece, min_size=1, max_size=20))
def test_spans_are_exact_and_fields_reassemble(pieces):
    sources = [p if isinstance(p, str) else p[0] for p in pieces]
    text = "Start " + " ".join(sources)  # a line opening with "<!--" is an HTML block
    m = markup(text)
    by_start = {e.start: e for e in m.elements}
    pos = len("Start ")
    for piece, source in zip(pieces, sources, strict=True):
        if not isinstance(piece, str):
            element = by_start[pos]
            assert text[element.start:element.end] == source
            if isinstance(element, WikiLink):
                assert (element.target, element.heading, element.alias, element.embed) == piece[1]
            else:
                assert (element.text, element.destination, element.title, element.image) == piece[1]
                assert text[element.text_start:element.text_end] == element.text
        pos += len(source) + 1
    assert m.visible() == "Start " + " ".join(_seen(p) for p in pieces)


def _seen(piece) -> str:
    if isinstance(piece, str):
        return "" if piece.startswith("<!--") else piece
    if piece[0].startswith(("[[", "![[")):
        return WikiLink(0, 0, *piece[1]).visible
    return piece[1][0]


@settings(max_examples=200, deadline=None)
@given(st.lists(_piece, min_size=1, max_size=12), st.data())
def test_visible_text_of_adjacent_spans_joins(pieces, data):
    text = "\n".join(p if isinstance(p, str) else p[0] for p in pieces)
    m = markup(text)
    a, b, c = sorted(data.draw(st.lists(st.integers(0, len(text)), min_size=3, max_size=3)))
    inside_replacement = any(
        isinstance(e, WikiLink) and e.visible and e.start < b < e.end for e in m.elements)
    if not inside_replacement:
        assert m.visible(a, b) + m.visible(b, c) == m.visible(a, c)
    for e in m.elements:
        assert 0 <= e.start < e.end <= len(text)


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from("[]()<>!`#-\\|:\"' \nab"), max_size=120))
def test_arbitrary_markup_never_breaks(text):
    m = markup(text)
    starts = [e.start for e in m.elements]
    assert starts == sorted(starts)
    edits = m._edits
    for (a1, b1, _), (a2, _, _) in zip(edits, edits[1:], strict=False):
        assert a1 < b1 <= a2  # edits never overlap
    assert len(m.visible()) <= len(text) + sum(len(r) for _, _, r in edits)

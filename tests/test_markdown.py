"""markdown.parse: every block kind, exact spans, front matter, hostile input; and the
sentence splitter."""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainbot.notes.markdown import BLOCK_KINDS, list_item_starts, parse
from brainbot.notes.sentences import ends_sentence, sentences, split_sentences


def kinds(text: str) -> list[str]:
    return [b.kind for b in parse(text).blocks]


def texts(text: str) -> list[str]:
    return [text[b.start_char : b.end_char] for b in parse(text).blocks]


def check_spans(text: str) -> None:
    """The invariants every parse must hold."""
    note = parse(text)
    lines = text.split("\n")
    starts = [0, *accumulate(len(line) + 1 for line in lines[:-1])]
    covered = set()
    previous_end = -1
    for b in note.blocks:
        assert b.kind in BLOCK_KINDS
        assert 0 <= b.start_char <= b.end_char <= len(text)
        assert b.start_char > previous_end
        previous_end = b.end_char
        assert 1 <= b.start_line <= b.end_line <= len(lines)
        # The span runs from the start of its first line to the end of its last line.
        assert b.start_char == 0 or text[b.start_char - 1] == "\n"
        assert b.end_char == len(text) or text[b.end_char] == "\n"
        assert bisect_right(starts, b.start_char) == b.start_line
        assert bisect_right(starts, b.end_char) == b.end_line
        assert not text[b.start_char : b.end_char].endswith("\n")
        assert (b.level > 0) == (b.kind == "heading")
        covered.update(range(b.start_line, b.end_line + 1))
    for number, line in enumerate(lines, start=1):
        if line.strip():
            assert number in covered, f"line {number} {line!r} is in no block"
    assert 0 <= note.body_start_char <= len(text)


# --- block kinds -------------------------------------------------------------------------


def test_atx_headings():
    text = "# Title #\n\n#hashtag\n\n####### seven\n\n## C#\n### closing ###   \n#\n"
    blocks = parse(text).blocks
    assert [(b.kind, b.level, b.heading) for b in blocks] == [
        ("heading", 1, "Title"),
        ("paragraph", 0, None),
        ("paragraph", 0, None),
        ("heading", 2, "C#"),
        ("heading", 3, "closing"),
        ("heading", 1, ""),
    ]
    check_spans(text)


def test_atx_heading_with_indent_and_tab():
    blocks = parse("   ## Three spaces\n\n    # four spaces is code\n\n#\tTab\n").blocks
    assert [(b.kind, b.heading) for b in blocks] == [
        ("heading", "Three spaces"),
        ("code", None),
        ("heading", "Tab"),
    ]


def test_setext_headings():
    text = "Title\n===\n\nTwo\nlines\n---\n\npara\n\n---\n"
    blocks = parse(text).blocks
    assert [(b.kind, b.level, b.heading) for b in blocks] == [
        ("heading", 1, "Title"),
        ("heading", 2, "Two lines"),
        ("paragraph", 0, None),
        ("hr", 0, None),
    ]
    assert texts(text)[1] == "Two\nlines\n---"


def test_fenced_code_and_hash_lines_inside():
    text = "```python\n# not a heading\nx = 1\n```\n# Heading\n"
    blocks = parse(text).blocks
    assert [(b.kind, b.info) for b in blocks] == [("code", "python"), ("heading", None)]
    assert texts(text)[0] == "```python\n# not a heading\nx = 1\n```"


def test_tilde_fence_needs_same_char_and_length():
    text = "~~~~\n~~~\n```\n# still code\n~~~~~\nafter\n"
    assert kinds(text) == ["code", "paragraph"]
    assert texts(text)[0].endswith("~~~~~")


def test_backtick_fence_info_with_backtick_is_not_a_fence():
    assert kinds("``` a`b\ntext\n") == ["paragraph"]
    assert kinds("~~~ a`b\ncode\n~~~\n") == ["code"]


def test_unterminated_fence_runs_to_the_end():
    text = "intro\n\n````\ncode\n```\n\n# not a heading\n\n"
    blocks = parse(text).blocks
    assert [b.kind for b in blocks] == ["paragraph", "code"]
    assert texts(text)[1] == "````\ncode\n```\n\n# not a heading"
    check_spans(text)


def test_indented_code_not_inside_a_paragraph():
    text = "para\n    continuation\n\n    code\n\n    more code\n\nend"
    assert kinds(text) == ["paragraph", "code", "paragraph"]
    assert texts(text)[1] == "    code\n\n    more code"


def test_tables():
    text = "| a | b |\n|---|:-:|\n| 1 | 2 |\n| 3 | 4 |\n\nafter\n\na|b\n-|-\n"
    assert kinds(text) == ["table", "paragraph", "table"]
    assert texts(text)[0].count("\n") == 3


def test_table_needs_a_matching_delimiter_row():
    assert kinds("| a | b |\n| --- |\n") == ["paragraph"]
    assert kinds("| a | b |\nnot a delimiter\n") == ["paragraph"]


def test_table_interrupts_a_paragraph_and_ends_at_a_heading():
    text = "Intro line\n| a | b |\n| - | - |\n| 1 | 2 |\n# Next\n"
    assert kinds(text) == ["paragraph", "table", "heading"]


def test_lists_with_continuations_nesting_and_fences():
    text = (
        "- item\n  continued\n* star\n+ plus\n  - nested\n    - deeper\n"
        "- fence\n  ```sh\n  # a comment, not a heading\n  ```\n\n  para in item\n"
        "1. ordered\n2) other\n\nnot list\n"
    )
    blocks = parse(text).blocks
    assert [b.kind for b in blocks] == ["list", "paragraph"]
    assert texts(text)[0].endswith("2) other")
    starts = list_item_starts(text, blocks[0])
    assert starts == [0, 2, 3, 6, 12, 13]  # item, star, plus, fence, 1., 2): not nested


def test_list_interrupts_paragraph_only_when_it_may():
    assert kinds("text\n- bullet\n") == ["paragraph", "list"]
    assert kinds("text\n1. one\n") == ["paragraph", "list"]
    assert kinds("text\n2. two\n") == ["paragraph"]
    assert kinds("text\n-\n") == ["heading"]  # a lone "-" under text is a setext underline


def test_list_ends_at_heading_and_after_blank_then_text():
    assert kinds("- a\n# H\n") == ["list", "heading"]
    assert kinds("- a\n\ntext\n") == ["list", "paragraph"]
    assert kinds("- a\nlazy\n") == ["list"]


def test_quotes():
    text = "> quote\nlazy continuation\n> more\n\n> second\n"
    assert kinds(text) == ["quote", "quote"]
    assert texts(text)[0] == "> quote\nlazy continuation\n> more"


def test_html_blocks():
    text = "<div>\nhtml\n\n<!-- comment\n\n# not a heading -->\nafter\n\n<span>\n"
    assert kinds(text) == ["html", "html", "paragraph", "html"]
    assert kinds("para\n<div>\ninterrupts\n") == ["paragraph", "html"]
    assert kinds("para\n<span>\ndoes not\n") == ["paragraph"]
    assert kinds("<script>\n\nvar x;\n\n</script>\n") == ["html"]


def test_thematic_breaks():
    assert kinds("***\n\n- - -\n\n___\n\n* * *\n") == ["hr", "hr", "hr", "hr"]
    assert kinds("--\n") == ["paragraph"]


def test_paragraph_spans_keep_indentation_and_trailing_spaces():
    text = "  indented para  \nsecond line\n"
    assert texts(text) == ["  indented para  \nsecond line"]


# --- front matter ------------------------------------------------------------------------


def test_front_matter_parsed_and_json_safe():
    text = "---\ntitle: Hello\ndate: 2024-01-02\ntags: [a, b]\n---\n# H1\nbody\n"
    note = parse(text)
    assert note.front_matter == {"title": "Hello", "date": "2024-01-02", "tags": ["a", "b"]}
    assert note.front_matter_error is None
    assert note.title == "Hello"
    assert note.blocks[0].kind == "front_matter"
    assert text[note.body_start_char :] == "# H1\nbody\n"


def test_title_falls_back_to_first_h1():
    assert parse("## two\n# One\n# Two\n").title == "One"
    assert parse("no heading\n").title is None
    assert parse("---\ntags: [x]\n---\n# From H1\n").title == "From H1"


def test_bad_front_matter_is_reported_not_raised():
    note = parse("---\n: bad: [\n---\ntext\n")
    assert note.front_matter == {}
    assert note.front_matter_error.startswith("invalid YAML front matter")
    assert [b.kind for b in note.blocks] == ["front_matter", "paragraph"]
    bad_date = parse("---\ndate: 2024-13-45\n---\n")
    assert bad_date.front_matter == {} and bad_date.front_matter_error


def test_front_matter_that_is_not_a_mapping():
    note = parse("---\n- a\n- b\n---\ntext\n")
    assert note.front_matter == {}
    assert "not a mapping" in note.front_matter_error
    assert parse("---\n---\ntext\n").front_matter_error is None


def test_unclosed_front_matter_is_not_front_matter():
    note = parse("---\nno close\n\ntext")
    assert note.front_matter == {} and note.body_start_char == 0
    assert [b.kind for b in note.blocks] == ["hr", "paragraph", "paragraph"]


def test_front_matter_only_and_alias_bomb():
    note = parse("---\ntitle: x\n---")
    assert note.body_start_char == len("---\ntitle: x\n---")
    assert [b.kind for b in note.blocks] == ["front_matter"]
    bomb = "---\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 9):
        bomb += f"{chr(97 + i)}: &{chr(97 + i)} [*{chr(96 + i)}, *{chr(96 + i)}, *{chr(96 + i)}, *{chr(96 + i)}, *{chr(96 + i)}, *{chr(96 + i)}, *{chr(96 + i)}, *{chr(96 + i)}, *{chr(96 + i)}, *{chr(96 + i)}]\n"
    note = parse(bomb + "---\nbody\n")
    assert note.front_matter == {} and "too large" in note.front_matter_error


# --- hostile input -----------------------------------------------------------------------


def test_empty_and_blank():
    assert parse("").blocks == []
    assert parse("\n\n   \n").blocks == []


def test_binary_junk_decoded_with_replacement():
    junk = bytes(range(256)) * 64 + b"\x00\xff\xfe# x\n```\n\x1b[0m"
    text = junk.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    check_spans(text)


def test_all_hashes_and_single_megabyte_line(pace):
    for text in ("#" * 1_000_000, "#\n" * 50_000, "word " * 200_000, "`" * 100_000):
        pace.run(lambda text=text: check_spans(text) if len(text) < 300_000 else parse(text), len(text))


def test_ten_thousand_headings(pace):
    text = "".join(f"{'#' * (i % 6 + 1)} Heading {i}\n\ntext {i}\n\n" for i in range(10_000))
    note = pace.run(lambda: parse(text), len(text))
    assert sum(b.kind == "heading" for b in note.blocks) == 10_000


def test_five_thousand_row_table():
    text = "| a | b |\n|---|---|\n" + "".join(f"| {i} | row {i} |\n" for i in range(5000))
    note = parse(text)
    assert [b.kind for b in note.blocks] == ["table"]
    assert note.blocks[0].end_line == 5002


def test_pathological_constructs_are_linear(pace):
    cases = [
        "<a " + "b=c " * 50_000 + "\n",
        "- " * 100_000 + "\n",
        "> " * 100_000 + "\n",
        "|" * 200_000 + "\n" + "|-" * 100_000 + "\n",
        "    " * 50_000 + "x\n",
        "1. " * 50_000 + "\n",
        ("*" * 5000 + "\n") * 40,
    ]
    for text in cases:
        pace.run(lambda text=text: parse(text), len(text), text[:20])


@pytest.mark.slow
def test_twenty_megabyte_note(pace):
    para = "Some prose about notes, with a [link](https://example.com/a.b). And more. "
    piece = f"## Section\n\n{para * 5}\n\n```\ncode\n```\n\n- a\n- b\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n"
    text = piece * (20_000_000 // len(piece))
    note = pace.run(lambda: parse(text), len(text))
    assert note.blocks[-1].end_char == len(text.rstrip("\n"))


# --- properties --------------------------------------------------------------------------

_inline = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"),
    max_size=40,
)
_line = st.one_of(
    _inline,
    st.sampled_from(["#", "# ", "## x ##", "#tag", "```", "~~~", "````py", "---", "===",
                     "***", "| a | b |", "|---|---|", "- item", "  - nested", "1. one",
                     "> quote", "<div>", "<!--", "-->", "    code", "\t\ttab", "", "   ",
                     "\ufeff---", "title: x", "Ünïcødé 漢字。", "e.g. x. Y"]),
)
_doc = st.lists(_line, max_size=40).map("\n".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_doc)
def test_spans_are_exact_on_generated_markdown(text):
    check_spans(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_spans_are_exact_on_any_text(text):
    check_spans(text.replace("\r", "\n"))


@settings(max_examples=100, deadline=None)
@given(_doc)
def test_parse_is_deterministic(text):
    assert parse(text) == parse(text)


# --- sentences ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Use e.g. this one. And i.e. that one.", ["Use e.g. this one.", "And i.e. that one."]),
        ("Apples, pears, etc. are fruit. Next.", ["Apples, pears, etc. are fruit.", "Next."]),
        ("Apples, pears, etc. The end.", ["Apples, pears, etc.", "The end."]),
        ("Dr. Smith met Mr. Jones. They left.", ["Dr. Smith met Mr. Jones.", "They left."]),
        ("It is in the U.S. today. Yes.", ["It is in the U.S. today.", "Yes."]),
        ("Pi is 3.14 now. Fine.", ["Pi is 3.14 now.", "Fine."]),
        ("Version 1.2.3 is out. Upgrade.", ["Version 1.2.3 is out.", "Upgrade."]),
        ("See https://example.com/a.b?c=d for it. Done.",
         ["See https://example.com/a.b?c=d for it.", "Done."]),
        ("Edit config.json first. Then run.", ["Edit config.json first.", "Then run."]),
        ("Wait... what? Yes!", ["Wait... what?", "Yes!"]),
        ("J. R. R. Tolkien wrote it. He was British.",
         ["J. R. R. Tolkien wrote it.", "He was British."]),
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        ("It ended (finally.) Next one.", ["It ended (finally.)", "Next one."]),
        ("A **bold.** Next.", ["A **bold.**", "Next."]),
        ("我们走吧。他说好！真的吗？是的", ["我们走吧。", "他说好！", "真的吗？", "是的"]),
        ("Steps:\n1. First.\n2. Then.", ["Steps:\n1. First.", "2. Then."]),
        ("Fig. 3 shows it. No. 5 too.", ["Fig. 3 shows it.", "No. 5 too."]),
        ("Page Callum on ext. 4471 or tel. 555 0100. Done.",  # the vault's escalation line
         ["Page Callum on ext. 4471 or tel. 555 0100.", "Done."]),
        ("It costs approx. five dollars.", ["It costs approx. five dollars."]),
        ("  padded  ", ["padded"]),
        ("", []),
        ("no terminator", ["no terminator"]),
    ],
)
def test_sentence_splitter(text, expected):
    assert sentences(text) == expected


def test_sentence_spans_honour_start_and_end():
    text = "xx First one. Second one. yy"
    assert split_sentences(text, 3, 25) == [(3, 13), (14, 25)]


def test_ends_sentence():
    assert ends_sentence('He said "stop."')
    assert ends_sentence("Done!  ")
    assert not ends_sentence("half a")


_pieces = st.sampled_from(
    list("ab .!?…。\"')\n\t1AZ") + ["etc.", "Dr.", "e.g.", "U.S.", "3.14", "...", "**", "「"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_pieces, max_size=60).map("".join))
def test_sentences_cover_every_non_space_character(text):
    spans = split_sentences(text)
    covered = set()
    last = 0
    for s, e in spans:
        assert last <= s < e <= len(text)
        assert text[last:s].strip() == ""  # only whitespace between sentences
        assert not text[s].isspace() and not text[e - 1].isspace()
        covered.update(range(s, e))
        last = e
    assert text[last:].strip() == ""
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())
    assert split_sentences(text) == spans  # deterministic


def test_sentence_splitter_is_linear(pace):
    for text in ("a. " * 300_000, "." * 1_000_000, "Dr. " * 200_000, "x" * 1_000_000):
        pace.run(lambda text=text: split_sentences(text), len(text))

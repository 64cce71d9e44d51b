"""How a citation is verified. A citation verifies when its text lies inside the block it
points at and that block still matches the file on disk (``index/freshness`` says whether
it does; here is the policy: a changed span is dropped, a file changed elsewhere is kept
and flagged). The Claude path (``ask/agent.py``) and the offline one
(``ask/extractive.py``) both check this way.

Two kinds of citation come from a model: the API's ``search_result_location`` objects
(``verify``), and, from a server that takes the passages only as numbered text, marks in
the prose, ``"exact words" [n]`` (``text_marks``: the quote must lie inside passage n; the
citation is the lines that hold it). A bare ``[n]`` or a quote that is not in passage n is
dropped and reported, never kept.
"""

from __future__ import annotations

import re

from brainbot.index.freshness import CHANGED, GONE, Freshness, as_stale

from .answers import Citation, Passage


def squash_spaces(text: str) -> str:
    """Whitespace runs as one space and curly apostrophes as straight ones: the form in
    which a quote and the text it cites are compared."""
    return " ".join(text.split()).replace("\u2019", "'")


def check_fresh(src: Passage, files: Freshness | None = None) -> str | None:
    """None when the file still holds ``src.text`` at its span (or its folder is not on this
    machine: the index's text is all there is), else why the citation is dropped."""
    verdict = (files or Freshness()).span_state(src.root, src.path, src.start_char,
                                                src.end_char, src.text)
    if verdict == GONE:
        return "stale: the note is gone from disk since it was indexed"
    if verdict == CHANGED:
        return "stale: the note changed on disk since it was indexed"
    return None


def is_stale(src: Passage, files: Freshness) -> bool | None:
    """Whether the file of a citation that verified changed elsewhere since indexing (None:
    its folder is not on this machine)."""
    return as_stale(files.bytes_state(src.root, src.path, src.indexed_sha256))


def verify(src: Passage | None, loc, cache: Freshness) -> tuple[Passage | None, str | None]:
    """The exact span a search_result_location citation names, or why it is dropped: the
    result was sent, its source matches, the block range lies within the blocks sent,
    the quote is those blocks' text, and the file still holds them at those lines."""
    if src is None:
        return None, "cites a search result that was never sent"
    claimed = getattr(loc, "source", None)
    if claimed is not None and claimed != src.source:
        return None, f"source {claimed!r} does not match the result it points at"
    start, end = getattr(loc, "start_block_index", None), getattr(loc, "end_block_index", None)
    cited = src.cited(start, end)
    if cited is None:
        return None, (f"cites blocks {start}-{end} outside the {len(src.blocks)} blocks of "
                      "the result sent")
    quote = squash_spaces(getattr(loc, "cited_text", "") or "")
    if not quote or quote not in squash_spaces(src.text[src.blocks[start][0]:
                                                         src.blocks[end - 1][1]]):
        return None, "cited text is not the text of the cited blocks"
    return cited, check_fresh(cited, cache)


def dropped_entry(src: Passage | None, cited_text: str, reason: str, claimed: str = "") -> dict:
    where = src.source if src else claimed
    return {"source": where, "cited_text": cited_text[:300], "reason": reason}


# -- text citations: "exact words" [n] ------------------------------------------------------
# A model that is sent the passages as numbered text (a server that drops search_result
# blocks, ask/agent.py) is asked to quote the words it relies on and mark each quote with
# its passage's number. A mark verifies when its quote lies inside passage n; the citation
# is then the lines of passage n that hold the quote, checked against the file as above.
MARKS = re.compile(
    r"(?:(?P<open>[\"\u201c])(?P<quote>[^\"\u201c\u201d]{1,1000}?)[\"\u201d][ \t]*)?"
    r"(?P<marks>\[\d{1,4}\](?:[ \t]*,?[ \t]*\[\d{1,4}\])*)")
NUMBER = re.compile(r"\[(\d{1,4})\]")
ELLIPSIS = re.compile(r"\.\.\.|\u2026")
# Fewer letters or digits than this cannot say where in a passage a quote is ("a", "30"):
# such a mark is dropped as too short. Four keeps a quoted time or number with its unit
# ("09:00", "3 kg").
MIN_QUOTE_CHARS = 4
EDGE_PUNCTUATION = " \t\n.,;:!?"


def ground_marks(text: str, passage_at) -> tuple[str, list[Citation], list[dict]]:
    """The answer text with each verified mark numbered as brainbot numbers citations (by
    the cited lines, in order of first mark), its Citations, and the marks dropped, with
    why. ``passage_at(i)``: the i-th passage sent (0-based), or None."""
    numbers: dict = {}
    cites: list[Citation] = []
    dropped: list[dict] = []
    cache = Freshness()

    def label(span: Passage, quote: str) -> str:
        reason = check_fresh(span, cache)
        if reason:
            dropped.append(dropped_entry(span, quote, reason))
            return ""
        if span.key not in numbers:
            numbers[span.key] = len(numbers) + 1
            cites.append(Citation.of(numbers[span.key], span, stale=is_stale(span, cache)))
        return f"[{numbers[span.key]}]"

    marked = _marks(text, passage_at, label, dropped)
    return marked, cites, dropped


def _marks(text: str, passage_at, label, dropped: list[dict]) -> str:
    """The text with each mark replaced by ``label(span, quote)`` of the spans its quote
    verified in (none: the quoted words stay, without a mark); what does not verify goes
    to ``dropped``."""
    out, last = [], 0
    for m in MARKS.finditer(text):
        out.append(text[last:m.start()])
        last = m.end()
        quote, spans = m.group("quote"), []
        for number in (int(n) for n in NUMBER.findall(m.group("marks"))):
            src = passage_at(number - 1) if number >= 1 else None
            span, reason = locate(src, quote)
            if reason:
                dropped.append(dropped_entry(src, quote or "", reason, f"[{number}]"))
            elif all(span.key != s.key for s in spans):
                spans.append(span)
        labels = "".join(dict.fromkeys(x for x in (label(s, quote) for s in spans) if x))
        head = f"{m.group('open')}{quote}{_closing(m.group('open'))}" if quote is not None else ""
        if not head:
            out[-1] = out[-1].rstrip(" \t") + (" " if labels else "")
        out.append(head + (" " if head and labels else "") + labels)
    out.append(text[last:])
    return "".join(out)


def _closing(opening: str) -> str:
    return "\u201d" if opening == "\u201c" else '"'


def locate(src: Passage | None, quote: str | None) -> tuple[Passage | None, str | None]:
    """The lines of ``src`` that hold ``quote`` (case and whitespace aside; parts joined by
    an ellipsis each found in turn), or why the mark is dropped."""
    if src is None:
        return None, "cites a passage that was never sent"
    if quote is None:
        return None, "a bare mark with no quoted words before it"
    parts = [p.strip(EDGE_PUNCTUATION) for p in ELLIPSIS.split(quote)]
    parts = [p for p in parts if p]
    if sum(ch.isalnum() for p in parts for ch in p) < MIN_QUOTE_CHARS:
        return None, "the quote is too short to say where in the passage it is"
    flat, where = _folded(src.text)
    start, end, pos = None, None, 0
    for part in parts:
        needle = _folded(part)[0]
        found = flat.find(needle, pos)
        if found < 0:
            return None, "the quoted words are not in the passage it marks"
        start = where[found] if start is None else start
        pos = found + len(needle)
        end = where[pos - 1] + 1
    line_start = src.text.rfind("\n", 0, start) + 1
    line_end = src.text.find("\n", end)
    return src.span(line_start, len(src.text) if line_end < 0 else line_end), None


def _folded(text: str) -> tuple[str, list[int]]:
    """``text`` with whitespace runs as one space, lower case and straight apostrophes and
    quotes, and for each of its characters the index it came from."""
    chars, where, space = [], [], False
    for i, ch in enumerate(text):
        if ch.isspace():
            space = bool(chars)
            continue
        if space:
            chars.append(" ")
            where.append(i - 1)
            space = False
        low = ch.lower()
        chars.append(FOLD.get(low, low) if len(low) == 1 else ch)
        where.append(i)
    return "".join(chars), where


FOLD = {"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'}

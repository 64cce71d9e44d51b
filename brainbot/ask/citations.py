"""How a citation is verified. A citation verifies when its text lies inside the block it
points at and that block still matches the file on disk (``index/freshness`` says whether
it does; here is the policy: a changed span is dropped, a file changed elsewhere is kept
and flagged). The Claude path (``ask/agent.py``) and the offline one
(``ask/extractive.py``) both check this way.
"""

from __future__ import annotations

from brainbot.index.freshness import CHANGED, GONE, Freshness, as_stale

from .answers import Passage


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

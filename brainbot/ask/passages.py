"""What an ask shows when it cannot answer: the closest passages (each a window of at
most PASSAGE_LINES lines, verified like any citation), and for a refusal the NEAREST
chunks; REFUSE_BELOW is the evidence under which nothing relevant was found.
"""

from __future__ import annotations

from brainbot.index.freshness import Freshness

from .answers import Citation, Passage
from .citations import check_fresh, dropped_entry, is_stale

NEAREST = 3
MAX_PASSAGES = 3  # chunks shown as closest passages
PASSAGE_LINES = 12  # of a passage (or a quoted list or code block): a screenful, no more

# Refusal by evidence: the best cosine between the question and any chunk (the vector
# leg's top-1). RRF scores are rank-only and BM25 scores grow with query length, so only
# the cosine compares with a fixed number. Top-1 scores per mode on
# examples/questions.jsonl (48 answerable / 12 unanswerable, tests/test_extractive.py):
#   vector  answerable min 0.292, p10 0.395, median 0.535 | unanswerable 0.315-0.725
#   bm25    answerable min 7.71,  p10 10.6,  median 15.2  | unanswerable 7.08-21.1
#   hybrid  (RRF) 0.029-0.033 for both: carries no evidence
# The set's unanswerable questions are near misses on purpose (Q3 vs the Q2 offsite), so
# no retrieval score separates them; the threshold sits just under the lowest answerable
# question and only stops off-topic ones (capital of Australia 0.16, bicycle tyre 0.21).
# The near misses are left to the model (Claude) or to SUPPORT_MIN (ask/extractive.py).
REFUSE_BELOW = 0.27


def window(src: Passage, question: str, lines: int = PASSAGE_LINES) -> Passage:
    """At most ``lines`` lines of a passage: all of it, or the window of that many
    lines holding the most of the question's terms (the earliest such window)."""
    rows = src.text.split("\n")
    if len(rows) <= lines:
        return src
    from brainbot.text import lexical

    wanted = set(lexical.analyze(question))
    hits = [len(wanted & set(lexical.analyze(row))) for row in rows]
    best = max(range(len(rows) - lines + 1), key=lambda i: (sum(hits[i:i + lines]), -i))
    start = sum(len(r) + 1 for r in rows[:best])
    return src.span(start, start + len("\n".join(rows[best:best + lines])))


def closest_passages(passages: list[Passage], question: str,
                     cache: Freshness) -> tuple[list[Citation], list[dict]]:
    """The top distinct chunks as citations (each at most PASSAGE_LINES lines), verified
    against the files like any citation, and the ones dropped."""
    cites, dropped, seen = [], [], set()
    for src in passages:
        if len(cites) == MAX_PASSAGES:
            break
        part = window(src, question)
        if part.key in seen:
            continue
        seen.add(part.key)
        reason = check_fresh(part, cache)
        if reason:
            dropped.append(dropped_entry(part, part.text, reason))
            continue
        cites.append(Citation.of(len(cites) + 1, part, stale=is_stale(part, cache)))
    return cites, dropped


def nearest(srcs: list[Passage], hits, query: str) -> list[dict]:
    from brainbot.render import Style, snippet

    return [{"root": s.root, "path": s.path, "start_line": s.start_line, "end_line": s.end_line,
             "heading_path": s.heading_path, "score": round(float(h.score), 6),
             "snippet": snippet(s.text, query, Style(False))}
            for s, h in list(zip(srcs, hits, strict=False))[:NEAREST]]

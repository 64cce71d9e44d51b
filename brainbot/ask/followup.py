"""A follow-up question searched as part of its conversation.

"How long does it keep?" means nothing alone. Asked after "How do I make the tare for my
shoyu ramen?", it is about the tare. Before a question of a conversation is retrieved, its
earlier questions (or the notes their answers cited: measured, and not shipped) shape the
search:

- **terms**: the BM25 query holds the question's own terms at weight 1 and each earlier
  question's terms at ``terms`` (times ``decay`` per turn further back);
- **vector**: the query vector is the question's, plus each earlier question's times
  ``vector`` (and ``decay``), normalised;
- **prior**: chunks of the notes the previous answer cited gain ``prior`` (in fused-score
  units) and the hits are ranked again;
- or **concat**: one query text of the earlier questions and this one (a baseline).

Which combination, and its numbers, was chosen by measuring on the conversation sets
(``brainbot eval --conversations``; README, "Follow-up questions"): weighted terms and
vectors won, with no prior and no gate; the comment above DEFAULT gives the figures of the
others, which ``benchmarks/bench_followups.py --methods`` measures.

A question that starts a new topic inside a conversation must not be searched as the old
one. ``gate`` decides whether a question follows up at all: ``always``; ``cue`` (it refers
back: a pronoun, "and ...", "what about ...", or too few words of its own); or
``evidence`` (a cue, or the question alone finds no chunk as close as ``evidence``). A
question judged new is searched alone, and the conversation's context restarts from it.

This module only shapes the search: the answer, offline or by Claude, is the caller's, and
is verified against the files as any other.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from brainbot.store.conversations import Turn
from brainbot.text import lexical

from .answer_types import QUESTION_WORDS

# Words that refer back to something said before, at any place in a question.
_BACK = re.compile(r"\b(?:it|its|it's|they|them|their|theirs|this|that|these|those|there|"
                   r"he|him|his|she|her|hers|one|ones|same|then|instead|else|also|too)\b",
                   re.I)
# How a follow-up starts: "and in the fridge?", "so how do I fix it?", "what about X?".
_OPENS = re.compile(r"^\s*(?:and|so|but|or|also|then|what about|how about|and what about|"
                    r"what if|same for|why not|which one)\b", re.I)
OWN_TERMS = 2  # a question with this few content terms of its own cannot stand alone


@dataclass(frozen=True)
class Method:
    """How the earlier turns of a conversation shape a question's search."""

    terms: float = 0.5
    vector: float = 0.25
    decay: float = 1.0
    turns: int = 4  # earlier questions that count, newest first
    prior: float = 0.0
    prior_turns: int = 1  # answers whose cited notes are boosted
    concat: bool = False
    gate: str = "always"  # always | cue | evidence
    evidence: float = 0.6


# Chosen on the tuning sets (examples/conversations.jsonl over examples/notes, 47
# follow-ups, and conversations-rust.jsonl over the rust book, 29), offline answers;
# found = a gold note cited or among the nearest passages (benchmarks/bench_followups.py
# --methods, eval_followups_methods.json; the two sets pooled). Alone: 61/76 found.
# Terms 0.5 and vector 0.25: 75/76 within, and all 30 first questions asked inside an
# unrelated conversation still found (30/30). Losers, within / first inside: both 0.5
# 75/76 / 27/30; both 0.75 75/76 / 22/30; terms 0.75 with vector 0.25 75/76 / 27/30; both
# 0.25 74/76 / 30; terms alone (0.5) 68/76; vector alone (0.5) 72/76; concatenating the
# last question 70/76 / 29, every earlier one 68/76 / 15; the last answer's notes as a
# prior alone (+0.005, +0.01 on fused scores) 67/76 and 65/76, added to the default
# 73/76 / 28 (a boosted note's chunks must already be in the pool: "how long does it
# keep?" alone ranks the tare's chunk 94th); decay 0.5 a turn 72/76; the last question
# only 71/76. A gate (cue words, or evidence 0.6) changed nothing at these weights.
DEFAULT = Method()
PRIOR_POOL = 40  # hits fetched so a boosted note's chunks can rise into the top k


@dataclass
class Searched:
    """How one question was searched: what to show, and what retrieval was given."""

    question: str
    text: str  # the question, or with its context: shown as ``searched``
    terms: Counter | None = None  # BM25 terms and weights, None: the text's own
    qvec: np.ndarray | None = None
    prior: set = field(default_factory=set)  # (path, root) of notes to boost
    boost: float = 0.0  # added to their chunks' fused scores
    follow_up: bool = False


def refers_back(question: str) -> bool:
    """Does the question lean on something said before it?"""
    own = set(lexical.analyze(question)) - QUESTION_WORDS
    return bool(_OPENS.search(question) or _BACK.search(question) or len(own) <= OWN_TERMS)


def topic(earlier: list[Turn], searcher, method: Method) -> list[Turn]:
    """The earlier turns that are still the topic: back to the last one that started a
    new topic (a question the gate judged new), at most ``method.turns`` of them."""
    kept: list[Turn] = []
    for turn in reversed(earlier[-max(method.turns, 1):]):
        kept.insert(0, turn)
        if not follows(turn.question, searcher, method):
            break
    return kept


def follows(question: str, searcher, method: Method, qvec=None) -> bool:
    """Whether a question asked inside a conversation follows up on it (``method.gate``)."""
    if method.gate == "always":
        return True
    if refers_back(question):
        return True
    if method.gate == "cue":
        return False
    if qvec is None:
        qvec = searcher.embedder.embed_query(question)
    return searcher.best_cosine(qvec) < method.evidence


def plan(question: str, earlier: list[Turn], searcher, method: Method = DEFAULT) -> Searched:
    """How to search ``question`` after the ``earlier`` turns of its conversation."""
    own = searcher.embedder.embed_query(question)
    alone = Searched(question, question, None, own)
    if not earlier or not follows(question, searcher, method, own):
        return alone
    context = topic(earlier, searcher, method)
    if not context:
        return alone
    if method.concat:
        text = " ".join([t.question for t in context] + [question])
        return Searched(question, text, None, searcher.embedder.embed_query(text),
                        _prior(context, method), method.prior, True)
    ages = [(t.question, method.decay ** age) for age, t in enumerate(reversed(context))]
    terms = Counter(searcher.query_terms(question))  # in the index's languages
    vec = np.asarray(own, dtype=np.float32).copy()
    for text, weight in ages:
        for term, n in searcher.query_terms(text).items():
            if method.terms and term not in QUESTION_WORDS:
                terms[term] += method.terms * weight * n
        if method.vector:
            vec += method.vector * weight * searcher.embedder.embed_query(text)
    vec /= float(np.linalg.norm(vec)) or 1.0
    shown = " / ".join([t.question for t in context] + [question])
    return Searched(question, shown, terms, vec, _prior(context, method), method.prior, True)


def _prior(context: list[Turn], method: Method) -> set:
    if not method.prior:
        return set()
    return {p for t in context[-max(method.prior_turns, 1):] for p in t.cited_paths}


def search(searched: Searched, searcher, k: int, rerank: bool = False) -> list:
    """The hybrid hits for a planned search: the prior's notes boosted, then the top k."""
    if not searched.prior:
        return searcher.search(searched.text, k, mode="hybrid", qvec=searched.qvec,
                               terms=searched.terms, rerank=rerank)
    hits = searcher.search(searched.text, max(k, PRIOR_POOL), mode="hybrid",
                           qvec=searched.qvec, terms=searched.terms, rerank=rerank)
    boost = _boost(searched)
    for h in hits:
        h.score += boost(h)
    return sorted(hits, key=lambda h: -h.score)[:k]


def _boost(searched: Searched):
    exact = {(p, r) for p, r in searched.prior if r is not None}
    rootless = {p for p, r in searched.prior if r is None}  # saved before citations had roots

    def of(hit) -> float:
        cited = (hit.path, hit.root) in exact or hit.path in rootless
        return searched.boost if cited else 0.0

    return of

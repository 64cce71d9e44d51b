"""A follow-up question searched as part of its conversation.

"How long does it keep?" means nothing alone. Asked after "How do I make the tare for my
shoyu ramen?", it is about the tare. Before a question of a conversation is retrieved, this
module decides how much of the earlier turns it needs:

- **none**, when the question stands alone: it is searched as itself, exactly as the first
  question of a new conversation would be, and the conversation's topic restarts from it.
  A question stands alone unless the notes hold it more closely read with its context
  than alone: the joined text's best cosine to any chunk beats the question's own. No
  threshold, no word list: the two readings are compared with each other.
- **its topic**, otherwise: the earlier questions back to the one that started the topic
  (the last that stood alone; each turn records how it was searched, so the chain is read
  from the previous turn, not recomputed), at most ``CHAIN`` of them, as one block. The
  block counts ``CONTEXT_WEIGHT`` against the question's 1 in both legs: its terms in BM25,
  its embedding in the query vector. One block, so the context weighs the same after one
  earlier question as after three.

The weight and the gate were chosen on the tuning conversation sets, the weight with a
leave-one-corpus-out check (``benchmarks/bench_followups.py --methods``; docs/benchmarks.md,
"Follow-up questions"); the test set was run once, after (examples/README.md, "Tuning and
test sets"). ``Method`` keeps the other ways raced there. Until issue 43 each earlier
question was weighted by itself (terms 0.5, vector 0.25, no gate), which held on the tuning
sets and lost five of twenty pairs on an unseen docs corpus where plain joining found all
twenty. A first version of this method also required the question to look like a
follow-up (a pronoun, an opening such as "and ...", too few words of its own): run once on
the Homebrew and lang-team test sets, it read "why were floats left out?" alone, so the
topic restarted there and the next follow-up lost its subject (examples/README.md).

This module only shapes the search: the answer, offline or by Claude, is the caller's, and
is verified against the files as any other.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

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
OWN_TERMS = 2  # too few content terms of its own to stand alone (the "cue" gates only)
# The context block's weight against the question's 1, in BM25 and in the query vector,
# and the gate: the eight tuning conversation sets (bench_followups.py --methods; a gold
# note cited or among the three nearest passages; 158 follow-ups, 73 questions that stand
# alone asked inside a conversation). Gates at 0.5: the closer reading 157 / 71, the cue
# words 154 / 72, both 154 / 72, either 157 / 71, none 157 / 71; reading a follow-up alone
# loses far more (123 of 158 found) than reading a new topic with its old one at 0.5 (71 of
# 73), so the gate that keeps fewer follow-ups apart wins, and of those the one with no
# word list and no constant. Each earlier question by itself at 0.5 / 0.25 (until issue
# 43): 153 / 72; plain joining of the last question: see docs/benchmarks.md. The weight,
# left out by corpus: docs/benchmarks.md, "Follow-up questions".
CONTEXT_WEIGHT = 0.5
# Earlier questions a context holds at most: five questions of ~20 wordpieces stay inside
# the 128 the embedding model was trained on (longer texts are truncated at 256).
CHAIN = 4
SEPARATOR = " / "  # between the questions of a searched text (Turn.searched)


@dataclass(frozen=True)
class Method:
    """How the earlier turns of a conversation shape a question's search."""

    terms: float = CONTEXT_WEIGHT  # the context's weight in BM25
    vector: float = CONTEXT_WEIGHT  # the context's weight in the query vector
    context: str = "topic"  # topic: one block, back to the topic's start | each: every
    # earlier question (at most ``turns``) weighted by itself, until issue 43 | last
    gate: str = "closer"  # closer | cue | both | either | always: whether it follows up
    turns: int = CHAIN
    concat: bool = False  # plain joining: the context and the question as one text
    own_terms: int = OWN_TERMS


DEFAULT = Method()
UNTIL_43 = Method(terms=0.5, vector=0.25, context="each", gate="always")


@dataclass
class Searched:
    """How one question was searched: what to show, and what retrieval was given."""

    question: str
    text: str  # the question, or with its context: shown as ``searched``
    terms: Counter | None = None  # BM25 terms and weights, None: the text's own
    qvec: np.ndarray | None = None
    follow_up: bool = False


def refers_back(question: str, own_terms: int = OWN_TERMS) -> bool:
    """Does the question lean on something said before it?"""
    own = set(lexical.analyze(question)) - QUESTION_WORDS
    return bool(_OPENS.search(question) or _BACK.search(question) or len(own) <= own_terms)


def context_of(earlier: list[Turn], method: Method) -> list[str]:
    """The earlier questions the next one may need, oldest first: the previous turn's
    searched text (its question with the topic it was read in), or its question alone
    (``last``), or every earlier question (``each``); at most ``method.turns``."""
    if not earlier:
        return []
    if method.context == "each":
        chain = [t.question for t in earlier]
    elif method.context == "last":
        chain = [earlier[-1].question]
    else:
        chain = (earlier[-1].searched or earlier[-1].question).split(SEPARATOR)
    return [q for q in chain if q.strip()][-max(method.turns, 1):]


def follows(question: str, joined: str, own, searcher, method: Method) -> bool:
    """Whether ``question`` is read in its context (``joined``: the two as one text): by
    ``method.gate``, the cue, the closer reading, both, either, or always."""
    if method.gate == "always":
        return True
    if method.gate != "closer":
        cue = refers_back(question, method.own_terms)
        settled = {"cue": True, "both": not cue, "either": cue}[method.gate]  # by the cue
        if settled:
            return cue
    embed = searcher.embedder.embed_query
    return searcher.best_cosine(embed(joined)) > searcher.best_cosine(own)


def plan(question: str, earlier: list[Turn], searcher, method: Method = DEFAULT) -> Searched:
    """How to search ``question`` after the ``earlier`` turns of its conversation."""
    embed = searcher.embedder.embed_query
    own = embed(question)
    context = context_of(earlier, method)
    joined = SEPARATOR.join([*context, question])
    if not context or not follows(question, joined, own, searcher, method):
        return Searched(question, question, None, own)
    if method.concat:
        return Searched(question, joined, None, embed(joined), True)
    terms = Counter(searcher.query_terms(question))  # in the index's languages
    for text in context:
        for term, n in searcher.query_terms(text).items():
            if term not in QUESTION_WORDS:
                terms[term] += method.terms * n
    blocks = context if method.context == "each" else [SEPARATOR.join(context)]
    vec = np.asarray(own, dtype=np.float32).copy()
    for block in blocks if method.vector else ():
        vec += method.vector * embed(block)
    vec /= float(np.linalg.norm(vec)) or 1.0
    return Searched(question, joined, terms, vec, True)


def search(searched: Searched, searcher, k: int, rerank: bool = False) -> list:
    """The hybrid hits for a planned search."""
    return searcher.search(searched.text, k, mode="hybrid", qvec=searched.qvec,
                           terms=searched.terms, rerank=rerank)

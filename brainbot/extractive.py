"""The offline answer: the best sentences of the top chunks, each cited by its own lines.

Used when there is no API key. The top chunks of the hybrid search are cut into units a
reader can quote: sentences of paragraphs and list items (with ``sentences.py``), table
rows, and blank-line groups of code. Each unit scores by how much of the question's
weighted terms it covers (``lexical.analyze``, idf from the index) plus the cosine between
its embedding and the question's; the best few become the answer, each cited with
``path:start-end`` of the unit's own lines and verified against the file like an API
citation. A unit can answer only if it holds the kind of value asked for (a time, a
date, a count, a name, an amount of money), every code or year of the question, and is
not a plan when the outcome is asked. It refuses like the Claude path when retrieval is
off-topic (REFUSE_BELOW), and also when no unit that could answer scores SUPPORT_MIN: a
model reads, this cannot.

It does not paraphrase, merge or reorder facts: it quotes, and says it is quoting.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from . import lexical
from .answers import (
    REFUSAL,
    REFUSE_BELOW,
    Answer,
    Citation,
    Passage,
    check_fresh,
    is_stale,
)
from .markdown import marker_lines, parse
from .sentences import split_sentences

CHUNKS = 4  # top chunks mined for sentences
MAX_SENTENCES = 3
# A unit joins the answer when it scores at least this share of the best unit's score.
KEEP_RATIO = 0.6
# Score = COVERAGE_WEIGHT * idf-weighted term coverage + cosine(unit, question)
#         + FIT_BONUS when the unit holds the kind of value the question asks for.
COVERAGE_WEIGHT = 1.0
FIT_BONUS = 0.1
RANK_PRIOR = 0.02  # per rank of the unit's chunk: ties go to the better-retrieved chunk
MIN_UNIT_CHARS = 12  # "Salt | 10" alone says nothing
EMBED_CHARS = 400  # of a unit, for its vector: ~100 wordpieces; bounds a huge run-on unit
# Refuse when the best quotable unit scores below this. Chosen on examples/questions.jsonl
# (the dev set), checked on examples/questions-holdout.jsonl, written afterwards by someone
# who had not seen this code (tests/test_extractive.py::test_extractive_rates). Best unit
# score of the 9 dev unanswerable questions that retrieval or the answer types do not
# already refuse: 0.51 0.52 0.54 0.78 0.79 0.88 1.06 | 1.43 1.52; of the 38 dev answerable
# ones whose answer is right at no threshold: 0.63 … 1.03 (12 of them) | 1.08 … 1.89. The
# cut with the best balanced accuracy on dev: 26/48 answered right (54 %), 10/12 refused
# (83 %); holdout: 13/28 (46 %), 11/12 (92 %). A looser cut answers a little more and
# refuses fewer (0.9: 60 % / 75 % on dev), and a refusal still shows the three nearest
# passages, so a wrong quote costs the reader more than a refusal does. No cut does well
# on both sides: the unanswerable questions are near misses ("tomatoes in 2024" when the
# notes count 2023) that only reading tells apart, and a third of the answerable misses
# are retrieval's (the answer's chunk is not among the top CHUNKS).
SUPPORT_MIN = 1.07

# Words that say what kind of answer is wanted but never occur in it ("how", "did").
QUESTION_WORDS = frozenset(lexical.analyze(
    "what whats which who whom whose when where why how much many do does did doing done "
    "is am are was were been being has have had can could should would might may must "
    "shall i me my mine we us our ours you your yours s ll ve re d get got"))

_MONTHS = ("jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec|january|february|march|"
           "april|june|july|august|september|october|november|december")
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday|mon|tue|wed|thu|fri|sat|sun"
_NUMBER_WORDS = ("one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|"
                 "twenty|thirty|forty|fifty|hundred|thousand|million|billion|half|dozen|once|"
                 "twice|thrice")
# What something cost is an amount of money: a currency sign or code next to a number (a
# table row's currency may be in its header, which the unit's context holds).
MONEY = re.compile(r"[$€£¥]\s?\d|\d\s?[$€£¥]|\b\d[\d,.]*\s?(?:usd|eur|gbp|jpy|chf|dollars?|"
                   r"euros?|yen|pounds?|francs?)\b|\b(?:usd|eur|gbp|jpy|chf)\b", re.I)
# What a question asks for -> what a unit must hold to answer it (classic factoid-QA
# answer typing). A question may ask for several kinds ("where and when"); a unit fits if
# it holds any of the hard ones, since each quoted unit may answer one part.
ANSWER_TYPES = [  # (question asks, unit must hold, hard: units without it cannot answer)
    (re.compile(r"\bwhat time\b|\bat what time\b", re.I),
     re.compile(r"\b\d{1,2}[:.h]\d{2}\b|\b\d{1,2}\s?(?:am|pm|a\.m\.|p\.m\.)|\bnoon\b|"
                r"\bmidnight\b", re.I), True),
    (re.compile(r"\bwhen\b|\bwhat (?:date|day|year|month)\b|\bwhich (?:date|day|year)\b",
                re.I),
     re.compile(rf"\d|\b(?:{_MONTHS}|{_DAYS})\b|\b(?:today|tomorrow|yesterday|weekend|"
                r"morning|evening|night|week|month|year|spring|summer|autumn|fall|winter)\b",
                re.I), True),
    (re.compile(r"\bhow many\b|\bnumber (?:of|is)\b", re.I),
     re.compile(rf"\d|\b(?:{_NUMBER_WORDS})\b", re.I), True),
    # "my passport number", "the PO number": an identifier, not any count.
    (re.compile(r"\bwhat(?:'s| is| was) (?:my|the|our) [\w-]+ (?:number|id|code)\b", re.I),
     re.compile(r"\b(?=[\w-]*\d)[a-z0-9][\w-]{3,}\b", re.I), True),
    (re.compile(r"\bhow (?:much|long|often|cold|hot|warm|big|far|old|fast|large|small|heavy)\b|"
                r"\bwhat (?:percentage|ratio|temperature|size|price)\b|\b(?:cost|price|budget)\b",
                re.I), re.compile(rf"\d|\b(?:{_NUMBER_WORDS})\b", re.I), False),
    (re.compile(r"\bwho\b|\bwhose\b|\bname of\b|\bwhat(?:'s| is) the name\b", re.I),
     "name", True),
    # "How long" is a duration (or a length): a number with its unit.
    (re.compile(r"\bhow long\b", re.I),
     re.compile(rf"(?:\d|\b(?:{_NUMBER_WORDS}|an?|few|several)\b)\s*-?\s*(?:s|sec|secs|seconds?|"
                r"min|mins|minutes?|h|hrs?|hours?|days?|nights?|weeks?|months?|years?|"
                r"mm|cm|m|km|in|inch(?:es)?|ft|feet|miles?)\b|\bovernight\b|\d[:h]\d\d",
                re.I), True),
    # The steps of a procedure are list items, not a sentence about them.
    (re.compile(r"\b(?:what|which) (?:are|were) the steps\b|\bstep[- ]by[- ]step\b", re.I),
     "steps", True),
    (re.compile(r"\bhow much\b.*\b(?:cost|costs|costing|spend|spent|pay|paid|charge|charged)\b|"
                r"\bwhat did .* cost\b|\b(?:salary|wage|rent|fee|price|budget)\b", re.I),
     MONEY, True),
]
# A list marker or task box that starts a quoted unit: dropped from the answer's prose.
_MARKER = re.compile(r"^(?:[-*+]|\d{1,9}[.)])\s+(?:\[[ xX]\]\s+)?")
# Query terms that must appear verbatim near the answer: codes mixing letters and digits
# ("Q3", "L4", "p99", "10k") and years. "2 a.m." alone is not one.
_EXACT = re.compile(r"^(?=.*\d)(?=.*[a-z])[a-z0-9]+$|^(?:19|20)\d\d$")
# A question about what actually happened ("did it end up costing", "my finish time")
# is not answered by what was planned ("budget €9,500", "target sub-2:00", "quote $685"):
# notes hold plans far more often than outcomes. A unit whose text or heading speaks of
# a plan cannot answer such a question, unless the question asks about the plan itself.
_ASKS_OUTCOME = re.compile(r"\b(?:end(?:ed)? up|in the end|in total|total|actual(?:ly)?|"
                           r"final(?:ly)?|finish(?:ed|ing)?|turn(?:ed)? out)\b", re.I)
_PLAN = re.compile(r"\b(?:budget(?:ed)?|target(?:s|ed|ing)?|goals?|plan(?:s|ned)?|"
                   r"quoted?|estimated?|expected|aim(?:s|ing)?)\b", re.I)


@dataclass
class Unit:
    """A quotable span of a top chunk, with what scoring needs to know about it."""

    rank: int  # of its chunk in the search
    src: Passage  # its chunk
    start: int  # span in src.text
    end: int
    context: str = ""  # the heading above it in the chunk, a table's header row: for scoring

    @property
    def text(self) -> str:
        return self.src.text[self.start:self.end]


def extractive_answer(question: str, *, searcher, hits, passages: list[Passage], qvec,
                      evidence: float, nearest: list[dict]) -> Answer:
    """The extractive Answer for ``question`` from the hybrid ``hits`` already fetched."""
    def refuse(reason: str, support: float | None = None) -> Answer:
        return Answer(question, REFUSAL, True, "extractive", nearest=nearest,
                      stop_reason=reason, evidence=evidence, support=support)

    if not hits or evidence < REFUSE_BELOW:
        return refuse("weak_evidence")
    units = distinct(u for rank, src in enumerate(passages[:CHUNKS]) for u in units_of(src, rank))
    if not units:
        return refuse("no_sentences")
    scores, fits = score_units(question, qvec, units, searcher)
    order = [i for i in np.argsort(-scores, kind="stable") if fits[i]]
    if not order or scores[order[0]] < SUPPORT_MIN:
        return refuse("weak_support", float(scores[order[0]]) if order else 0.0)
    best = float(scores[order[0]])
    chosen = [units[i] for i in order[:MAX_SENTENCES] if scores[i] >= KEEP_RATIO * best]
    cites: dict[str, Citation] = {}  # by location: two sentences of one line share it
    parts, dropped, cache = [], [], {}
    for u in chosen:
        unit = u.src.span(u.start, u.end)
        stale = check_fresh(unit, cache)
        if stale:
            dropped.append({"source": unit.source, "cited_text": unit.text[:300],
                            "reason": stale})
            continue
        cite = cites.get(unit.source)
        if cite is None:
            cite = cites[unit.source] = Citation(len(cites) + 1, unit.path, unit.start_line,
                                                 unit.end_line, unit.heading_path, unit.text,
                                                 stale=is_stale(unit, cache))
        else:
            cite.cited_text += " … " + unit.text
        parts.append(f"{_MARKER.sub('', ' '.join(unit.text.split()))} [{cite.n}]")
    if not cites:
        answer = refuse("stale", best)
        answer.dropped = dropped
        return answer
    return Answer(question, " ".join(parts), False, "extractive", list(cites.values()), 0,
                  {}, dropped, nearest, stop_reason="extracted", evidence=evidence,
                  support=best)


def distinct(units) -> list[Unit]:
    """Units of different places in the files: chunks overlap by whole sentences, and a
    sentence quoted twice would take two of the answer's few places."""
    seen, out = set(), []
    for u in units:
        where = (u.src.path, u.src.start_char + u.start)
        if u.src.start_char < 0 or where not in seen:
            seen.add(where)
            out.append(u)
    return out


def units_of(src: Passage, rank: int = 0) -> list[Unit]:
    """Quotable spans of a chunk: sentences, list-item sentences, table rows, code groups.
    A heading inside the chunk is context for the units under it."""
    text, out, section = src.text, [], ""
    for block in parse(text).blocks:
        a, b = block.start_char, block.end_char
        spans, context = [], section
        if block.kind in ("paragraph", "quote"):
            for s, e in _line_groups(text, a, b):
                spans.extend(split_sentences(text, s, e))
        elif block.kind == "list":
            starts = [a + _line_offset(text[a:b], k) for k in marker_lines(text, block)]
            for s, e in zip(starts, starts[1:] + [b], strict=True):
                spans.extend(split_sentences(text, s, e))
        elif block.kind == "table":
            spans = _lines(text, a, b, skip=2)
            context = "\n".join(p for p in (section, text[a:b].split("\n", 1)[0]) if p)
        elif block.kind == "code":
            spans = _code_groups(text, a, b)
        elif block.kind == "heading" and block.heading not in src.heading_path:
            spans = [(a, b)]  # a "# comment" line of a code block the chunk cut open
            section = block.heading
        elif block.kind == "heading":
            section = ""  # back under the chunk's own heading path
        for s, e in spans:
            s, e = s + len(text[s:e]) - len(text[s:e].lstrip()), s + len(text[s:e].rstrip())
            if e - s >= MIN_UNIT_CHARS:
                out.append(Unit(rank, src, s, e, context))
    return out


def _line_groups(text: str, a: int, b: int) -> list[tuple[int, int]]:
    """A paragraph's lines, each its own group unless it is hard-wrapped prose (the line
    does not end a clause and the next starts in lower case): "Invoice date: …" lines."""
    out, pos, start = [], a, a
    lines = text[a:b].split("\n")
    for i, line in enumerate(lines):
        end = pos + len(line)
        nxt = lines[i + 1].lstrip(" >") if i + 1 < len(lines) else ""
        if not nxt or not (nxt[:1].islower() and line.rstrip()[-1:] not in ".!?:;"):
            out.append((start, end))
            start = end + 1
        pos = end + 1
    return out


def _line_offset(text: str, k: int) -> int:
    pos = 0
    for _ in range(k):
        pos = text.index("\n", pos) + 1
    return pos


def _lines(text: str, a: int, b: int, skip: int = 0) -> list[tuple[int, int]]:
    out, pos = [], a
    for i, line in enumerate(text[a:b].split("\n")):
        if i >= skip and line.strip():
            out.append((pos, pos + len(line)))
        pos += len(line) + 1
    return out


def _code_groups(text: str, a: int, b: int) -> list[tuple[int, int]]:
    """Blank-line separated groups of a code block's lines, fences left out."""
    out, pos, start, end = [], a, None, None
    for line in text[a:b].split("\n"):
        fence = line.lstrip().startswith(("```", "~~~"))
        if line.strip() and not fence:
            start = pos if start is None else start
            end = pos + len(line)
        elif start is not None:
            out.append((start, end))
            start = None
        pos += len(line) + 1
    if start is not None:
        out.append((start, end))
    return out


def score_units(question: str, qvec, units: list[Unit], searcher):
    """Each unit's score (coverage, cosine, answer-type bonus, rank prior) and whether it
    can answer at all: it holds the kind of value a hard answer type asks for, and every
    code or year of the question ("Q3", "p99", "2024") is in it or its heading path."""
    qterms = set(lexical.analyze(question)) - QUESTION_WORDS
    weights = _idf(searcher, qterms)
    total = sum(weights.values()) or 1.0
    wanted = [(kind, hard) for asks, kind, hard in ANSWER_TYPES if asks.search(question)]
    exact = {t for t in qterms if _EXACT.match(t)}
    outcome = bool(_ASKS_OUTCOME.search(question)) and not _PLAN.search(question)
    texts, coverage, fit, bonus, prior = [], [], [], [], []
    for u in units:
        heading = " > ".join(u.src.heading_path)
        have = set(lexical.analyze(f"{heading}\n{u.context}\n{u.text}"))
        coverage.append(sum(w for t, w in weights.items() if t in have) / total)
        holds = [_holds(kind, f"{u.context}\n{u.text}" if kind is MONEY else u.text, question)
                 for kind, _ in wanted]
        musts = [h for h, (_, must) in zip(holds, wanted, strict=True) if must]
        hard = any(musts) or not musts  # one part of a two-part question is enough
        plan = outcome and bool(_PLAN.search(f"{heading}\n{u.context}\n{u.text}"))
        fit.append(exact <= have and hard and not plan)
        bonus.append(FIT_BONUS if any(holds) else 0.0)
        texts.append("\n\n".join(p for p in (heading, u.context, u.text[:EMBED_CHARS]) if p))
        prior.append(-RANK_PRIOR * u.rank)
    cos = _embed(searcher.embedder, texts) @ np.asarray(qvec, dtype=np.float32).reshape(-1)
    scores = COVERAGE_WEIGHT * np.array(coverage) + cos + np.array(prior) + np.array(bonus)
    return scores, fit


# (embedder fingerprint, unit text) -> vector: questions in one process (the eval, a
# session of asks) meet the same units again. 20k vectors of 384 float32 are ~30 MB.
_VECTORS: dict[tuple[str, str], np.ndarray] = {}
_VECTORS_MAX = 20_000


def _embed(embedder, texts: list[str]) -> np.ndarray:
    """Vectors of ``texts`` (n, dim), embedding only those not seen in this process."""
    fp = str(getattr(embedder, "fingerprint", id(embedder)))
    todo = sorted({t for t in texts if (fp, t) not in _VECTORS})
    if todo:
        if len(_VECTORS) + len(todo) > _VECTORS_MAX:
            _VECTORS.clear()
        _VECTORS.update(zip([(fp, t) for t in todo], embedder.embed(todo), strict=True))
    return np.stack([_VECTORS[fp, t] for t in texts])


def _holds(kind, text: str, question: str = "") -> bool:
    if kind == "steps":
        return bool(_MARKER.match(text))
    if kind == "name":  # a capitalised word that does not merely start the sentence and
        asked = {w.lower() for w in re.findall(r"[^\W\d_]+", question)}  # is not asked
        words = re.findall(r"[^\W\d_]+", text)
        return any(len(w) > 1 and w[0].isupper() and w[1:].islower() and w.lower() not in asked
                   for w in words[1:])
    return kind.search(text) is not None


def _idf(searcher, terms: set[str]) -> dict[str, float]:
    """BM25 idf of each query term in this index (unknown terms weigh as the rarest)."""
    if not terms:
        return {}
    n = searcher.store.chunk_count() or 1
    df = searcher.store.doc_freqs(sorted(terms))
    return {t: math.log1p((n - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t in terms}

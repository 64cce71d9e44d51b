"""What kind of answer a question asks for, and whether a passage can hold it.

Classic factoid-QA answer typing, by rules: "when" wants a date or a time, "how many" a
count, "who" a name, "how long" a duration with its unit, "what did X cost" an amount of
money, "what are the steps" list items. A question may ask for several kinds ("where and
when"); a span fits when it holds any of the hard ones, since each quoted span may answer
one part. Codes and years in the question ("Q3", "p99", "2024") must appear near the
answer, and a plan ("budget", "target") does not answer a question about what happened.
A question asking for a procedure or a list is answered with the whole list or code
block, not one sentence of it.

This module reads questions and spans; it does not score, rank or quote anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from brainbot.text import lexical

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
# Question words of Chinese, Japanese and Korean that ask for a number (how much, how
# many, how long, what time, how far) or for a date, and the day names that answer "when"
# without a digit. "何" alone ("what") and "哪" alone ("which") ask for anything. CJK
# numerals are not counted as numbers: 一 is in "一点" (a bit), "一定" (surely).
_CJK_ASKS_NUMBER = re.compile(
    r"多少|几(?!点)|多长|多久|多大|多高|多远|多重|多贵|いくら|何日|何年|何回|何人|何個|"
    r"何キロ|何メートル|何度|何歳|何枚|何本|何円|何点|どのくらい|どれくらい|몇|얼마")
# What time (or how many minutes): "4:38", "7 時", "7点", "7시", "15 分".
_CJK_ASKS_TIME = re.compile(r"何時|何分|几点|몇 ?시")
_CJK_ASKS_WHEN = re.compile(r"什么时候|哪天|哪一?年|いつ|언제")
_CJK_DAYS = "今天|明天|昨天|周末|今日|明日|昨日|週末|来週|先週|오늘|내일|어제|주말"
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
    # The same kinds asked in Chinese, Japanese or Korean (多少, いくら, 何時, 몇, 얼마, …): an
    # amount, a count, a time or a length is written with digits (examples/questions-cjk:
    # every one of its 41 such questions has a digit in its answer); "when" may also be a
    # day's name. The English model's cosine says little there, so the type must hold.
    (_CJK_ASKS_NUMBER, re.compile(r"\d"), True),
    (_CJK_ASKS_TIME, re.compile(r"\d{1,2}\s?[:：時时点시分]"), True),
    (_CJK_ASKS_WHEN, re.compile(rf"\d|{_CJK_DAYS}"), True),
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
    # "Which version of X": a version number ("1.39", "v0.8", "2021 edition" is a year).
    (re.compile(r"\b(?:which|what) (?:version|release)\b", re.I),
     re.compile(r"\b\d+\.\d+(?:\.\d+)?\b|\bv\d+\b", re.I), True),
    # The steps of a procedure are list items, not a sentence about them.
    (re.compile(r"\b(?:what|which) (?:are|were) the steps\b|\bstep[- ]by[- ]step\b", re.I),
     "steps", True),
    (re.compile(r"\bhow much\b.*\b(?:cost|costs|costing|spend|spent|pay|paid|charge|charged)\b|"
                r"\bwhat did .* cost\b|\b(?:salary|wage|rent|fee|price|budget)\b", re.I),
     MONEY, True),
]
# A list marker or task box that starts a quoted unit: dropped from the answer's prose.
MARKER = re.compile(r"^(?:[-*+]|\d{1,9}[.)])\s+(?:\[[ xX]\]\s+)?")
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
# A question asking for a procedure, a list or a how-to: the answer is a whole list or
# code block (bounded), not one sentence of it.
_ASKS_PROCEDURE = re.compile(
    r"\bsteps?\b|\bstep[- ]by[- ]step\b|\bhow (?:do|can|should|would) (?:i|you|we)\b|"
    r"\bprocedure\b|\blist\b|\bwhat (?:command|commands|options|rules)\b|"
    r"\bwhich (?:commands?|steps|options|rules|kinds|operations|places)\b", re.I)


@dataclass
class Asked:
    """What a question asks for: the kinds of value, its exact codes, whether it asks
    about an outcome, and whether it asks for a procedure or list."""

    question: str
    terms: set[str]  # analyzed content terms (question words left out)
    wanted: list[tuple[object, bool]]  # (kind, hard)
    exact: set[str]
    outcome: bool
    procedure: bool

    @classmethod
    def of(cls, question: str) -> Asked:
        terms = set(lexical.analyze(question)) - QUESTION_WORDS
        return cls(question, terms,
                   [(kind, hard) for asks, kind, hard in ANSWER_TYPES if asks.search(question)],
                   {t for t in terms if _EXACT.match(t)},
                   bool(_ASKS_OUTCOME.search(question)) and not _PLAN.search(question),
                   bool(_ASKS_PROCEDURE.search(question)))

    def fits(self, text: str, context: str, heading: str,
             code: bool = False) -> tuple[bool, bool]:
        """(the span can answer, it holds some kind of value asked for); ``code``: the
        span is a code block (a procedure's steps may be commands)."""
        have = set(lexical.analyze(f"{heading}\n{context}\n{text}"))
        holds = [code if kind == "steps" and code else
                 holds_kind(kind, f"{context}\n{text}" if kind is MONEY else text,
                            self.question) for kind, _ in self.wanted]
        musts = [h for h, (_, must) in zip(holds, self.wanted, strict=True) if must]
        hard = any(musts) or not musts  # one part of a two-part question is enough
        plan = self.outcome and bool(_PLAN.search(f"{heading}\n{context}\n{text}"))
        return self.exact <= have and hard and not plan, any(holds)


def holds_kind(kind, text: str, question: str = "") -> bool:
    if kind == "steps":
        return bool(MARKER.match(text))
    if kind == "name":  # a capitalised word that does not merely start the sentence and
        asked = {w.lower() for w in re.findall(r"[^\W\d_]+", question)}  # is not asked
        words = re.findall(r"[^\W\d_]+", text)
        return any(len(w) > 1 and w[0].isupper() and w[1:].islower() and w.lower() not in asked
                   for w in words[1:])
    return kind.search(text) is not None

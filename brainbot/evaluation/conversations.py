"""Follow-up questions measured within their conversations: ``brainbot eval --conversations``.

A set (examples/conversations*.jsonl, validated by examples/check_conversations.py) holds
one conversation a line: a first question that stands alone, then follow-ups that mean
little alone ("how long does it keep?": kind pronoun or ellipsis) and new questions asked
inside it (kind shift), each with its gold notes in ``expected``. Each question is asked as
`brainbot ask` answers it (Claude with a key, else offline) and scores:

- found: a gold note is cited by the answer or among its nearest passages (the three
  closest chunks every answer carries, a refusal's too);
- hit@k: a gold note is among the top k chunks its search retrieved;
- answered: the answer (outcome answer) quotes one of its ``answer_contains``.

Each follow-up is asked ALONE (a new conversation) and WITHIN its conversation (after its
earlier turns as answered in this run); each first question alone and INSIDE an unrelated
conversation (after the set's previous one): a new topic must not be searched as the old
one. Nothing is saved: the eval's turns live in memory.

This module measures; how a follow-up is searched is ``ask/followup.py``'s.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from brainbot.errors import InputError
from brainbot.evaluate import _RANGE, refuse_partial


def load_conversations(path: Path) -> list[dict]:
    if not path.is_file():
        raise InputError(f"{path}: no such conversation file")
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            conv = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{path}:{n}: not JSON ({exc})") from None
        turns = conv.get("turns") if isinstance(conv, dict) else None
        if not isinstance(turns, list) or len(turns) < 2 or not all(
                isinstance(t, dict) and t.get("question") and t.get("expected") for t in turns):
            raise InputError(f"{path}:{n}: a conversation needs 'turns', two or more, each "
                             "with a 'question' and its 'expected' notes")
        out.append(conv)
    if not out:
        raise InputError(f"{path}: no conversations")
    return out


def run_conversations(path: Path, *, db, k: int = 5, method=None, searcher=None) -> dict:
    """Each question of the set asked alone and within its conversation (see above)."""
    from brainbot.ask import followup
    from brainbot.search.searcher import Searcher

    convs = load_conversations(path)
    own = searcher is None
    searcher = searcher or Searcher(db)
    refuse_partial(searcher, ["hybrid"])
    method = method or followup.DEFAULT
    rows: list[dict] = []
    try:
        previous: list = []
        for conv in convs:
            rows += _conversation(conv, previous, searcher, k, method)
            previous = [r["_turn"] for r in rows if r["id"] == conv.get("id")]
    finally:
        if own:
            searcher.close()
    for r in rows:
        r.pop("_turn", None)
    return {"dataset": str(path), "k": k, "method": _method_dict(method),
            "conversations": len(convs), **conversation_rates(rows), "rows": rows}


def _conversation(conv: dict, previous: list, searcher, k: int, method) -> list[dict]:
    """The rows of one conversation: each turn alone and within; its first question also
    inside the previous conversation (``previous``: that one's turns, as answered)."""
    rows, turns = [], []
    for i, item in enumerate(conv["turns"]):
        kind = "first" if i == 0 else item.get("kind", "pronoun")
        alone, _ = _asked(item, [], searcher, k, method)
        within, turn = _asked(item, turns, searcher, k, method)
        row = {"id": conv.get("id"), "n": i + 1, "kind": kind, "question": item["question"],
               "alone": alone, "within": within, "_turn": turn}
        if i == 0 and previous:
            row["inside_unrelated"], _ = _asked(item, previous, searcher, k, method)
        turns.append(turn)
        rows.append(row)
    return rows


def _asked(item: dict, earlier: list, searcher, k: int, method) -> tuple[dict, object]:
    """One question asked after ``earlier``: its scores, and the turn it makes."""
    from brainbot.ask import followup
    from brainbot.ask.agent import ask
    from brainbot.ask.conversation import turn_of

    gold = {_note(e) for e in item["expected"]}
    answer = ask(item["question"], db=searcher.target, searcher=searcher, history=earlier,
                 method=method)
    hits = followup.search(followup.plan(item["question"], earlier, searcher, method),
                           searcher, k)
    shown = [c.path for c in answer.citations] + [n["path"] for n in answer.nearest]
    quoted = " ".join(c.cited_text.lower() for c in answer.citations)
    return ({"found": any(p in gold for p in shown),
             f"hit@{k}": any(h.path in gold for h in hits[:k]),
             "answered": answer.outcome == "answer" and any(
                 s.lower() in quoted for s in item.get("answer_contains", [])),
             "outcome": answer.outcome, "mode": answer.mode,
             "cited": sorted({c.path for c in answer.citations})}, turn_of(answer))


def _note(expected: str) -> str:
    """The note of an expected location (``path``, ``path#Heading``, ``path:10-20``)."""
    m = _RANGE.match(expected)
    return m.group("path") if m else expected.split("#", 1)[0]


def conversation_rates(rows: list[dict]) -> dict:
    """Rates by group: first questions (alone; inside an unrelated conversation; and alone
    again over only those asked inside one, ``alone_paired``, the figure "loses nothing" is
    judged against: the set's first conversation has none before it), follow-ups (alone,
    within) and new topics inside a conversation (alone, within)."""
    def rates(group: list[dict], how: str) -> dict:
        scored = [r[how] for r in group if how in r]
        keys = [key for key in (scored[0] if scored else {}) if key not in (
            "outcome", "mode", "cited")]
        return {"n": len(scored), **{key: round(sum(s[key] for s in scored) / len(scored), 4)
                                     for key in keys}} if scored else {"n": 0}

    firsts = [r for r in rows if r["kind"] == "first"]
    paired = [r for r in firsts if "inside_unrelated" in r]
    follows = [r for r in rows if r["kind"] not in ("first", "shift")]
    shifts = [r for r in rows if r["kind"] == "shift"]
    by_kind = defaultdict(list)
    for r in follows:
        by_kind[r["kind"]].append(r)
    modes = sorted({r[how]["mode"] for r in rows for how in ("alone", "within")})
    return {"mode": "+".join(modes),
            "first": {"alone": rates(firsts, "alone"),
                      "alone_paired": rates(paired, "alone"),
                      "inside_unrelated": rates(paired, "inside_unrelated")},
            "follow_ups": {"alone": rates(follows, "alone"), "within": rates(follows, "within")},
            "shifts": {"alone": rates(shifts, "alone"), "within": rates(shifts, "within")},
            "follow_ups_by_kind": {kind: {"alone": rates(g, "alone"),
                                          "within": rates(g, "within")}
                                   for kind, g in sorted(by_kind.items())},
            "missed_within": [r["question"] for r in follows if not r["within"]["found"]]}


def _method_dict(method) -> dict:
    from dataclasses import asdict

    return asdict(method)


def format_conversations(result: dict) -> str:
    k = result["k"]

    def line(title: str, group: dict) -> str:
        parts = [f"{how} {_pct(g.get('found'))} found, {_pct(g.get(f'hit@{k}'))} hit@{k}"
                 for how, g in group.items() if g.get("n")]
        n = max((g.get("n", 0) for g in group.values()), default=0)
        return f"{title} ({n}): " + "; ".join(parts)

    lines = [f"dataset: {result['dataset']} ({result['conversations']} conversations, "
             f"{result['mode']} answers)",
             line("follow-ups", result["follow_ups"]),
             line("first questions", result["first"]),
             line("new topics inside a conversation", result["shifts"])]
    lines += [f"  missed within: {q}" for q in result["missed_within"]]
    return "\n".join(lines)


def _pct(x) -> str:
    return "-" if x is None else f"{x:.0%}"

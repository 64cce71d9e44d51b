#!/usr/bin/env python3
"""Sanity checker for a conversation set (examples/conversations*.jsonl) against its notes.

A conversation set holds one conversation a line: {"id", "turns": [turn, ...]}. Each turn
is {"question", "expected": [note paths], "answer_contains": [1-3 strings], "kind"}: the
first turn stands alone and has no kind; a follow-up has the kind of reference it makes
("pronoun", "ellipsis") or is "shift", a new question that stands alone. Checks, for
every turn: the keys and kinds; every expected note exists (exact, NFC); every
answer_contains string occurs (case-insensitively) in at least one expected note, and
every expected note holds at least one of them. Ids and questions are unique.

Standard library only. Run, e.g.:

  python examples/check_conversations.py --questions examples/conversations.jsonl
  python examples/check_conversations.py --root /path/to/rust-book \
      --questions examples/conversations-rust.jsonl

Exit status 0 when everything passes.
"""

from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
KINDS = ("pronoun", "ellipsis", "shift")


def check_turn(where: str, turn: dict, first: bool, load) -> list[str]:
    errors = []
    if not isinstance(turn.get("question"), str) or not turn["question"].strip():
        errors.append(f"{where}: missing question")
    kind = turn.get("kind")
    if first and kind is not None:
        errors.append(f"{where}: the first turn stands alone and has no kind")
    if not first and kind not in KINDS:
        errors.append(f"{where}: a follow-up needs kind in {KINDS}, got {kind!r}")
    contains = turn.get("answer_contains") or []
    if not (1 <= len(contains) <= 3) or not all(isinstance(c, str) and c for c in contains):
        errors.append(f"{where}: answer_contains must hold 1-3 non-empty strings")
    texts = {}
    for rel in turn.get("expected") or []:
        text = load(rel)
        if text is None:
            errors.append(f"{where}: no such note {rel!r}")
        else:
            texts[rel] = text.lower()
    if not turn.get("expected"):
        errors.append(f"{where}: no expected note")
    for c in contains:
        if texts and not any(c.lower() in t for t in texts.values()):
            errors.append(f"{where}: {c!r} is in no expected note")
    for rel, t in texts.items():
        if not any(c.lower() in t for c in contains):
            errors.append(f"{where}: {rel!r} holds none of answer_contains")
    return errors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Validate a conversation set against its notes.")
    ap.add_argument("--root", type=Path, default=HERE / "notes")
    ap.add_argument("--questions", type=Path, default=HERE / "conversations.jsonl")
    args = ap.parse_args(argv)
    root = args.root.resolve()

    def load(rel: str) -> str | None:
        path = root / rel
        if unicodedata.normalize("NFC", rel) != rel or not path.is_file():
            return None
        return path.read_text(encoding="utf-8")

    errors, seen, kinds, n = [], Counter(), Counter(), 0
    for line_no, raw in enumerate(args.questions.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        conv = json.loads(raw)
        turns = conv.get("turns") or []
        seen[conv.get("id")] += 1
        if len(turns) < 2:
            errors.append(f"line {line_no}: a conversation needs two turns or more")
        for i, turn in enumerate(turns):
            where = f"line {line_no} turn {i + 1} ({str(turn.get('question'))[:40]!r})"
            errors += check_turn(where, turn, i == 0, load)
            seen[turn.get("question")] += 1
            kinds[turn.get("kind") or "first"] += 1
        n += 1
    errors += [f"duplicate id or question: {k!r}" for k, v in seen.items() if v > 1]
    print(f"{args.questions}: {n} conversations; turns by kind: "
          + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    for e in errors:
        print("  -", e)
    print("OK: all checks passed" if not errors else f"{len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

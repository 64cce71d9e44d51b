"""What `brainbot ask` answers, by outcome, on every question set (no API key: extractive).

Runs ``brainbot eval --sets examples/sets.json --answers``: every question set of the
manifest on its corpus's index (``--db NAME=PATH`` reuses one, else the eval cache's), and
writes benchmarks/results/eval_answers.json: each set with its role, tuning or test, and
each role pooled. docs/benchmarks.md's "Answers" table and the README's headline row are
made from it.

``--calibrate`` is how the answer/passages cut (``SUPPORT_MIN``, ask/extractive.py) was
chosen, on the TUNING sets only: every question is answered as if the cut were 0, so each
answer carries its support (the best quotable unit's score) and whether its quote holds
the fact; the cut is then swept: the lowest cut at which the answers quoting no fact stay
at or under 5 % of the answerable questions, pooled, and the same choice made on all
tuning corpora but one and scored on the one left out. Writes
benchmarks/results/eval_answers_calibration.json. The test sets are never run with it.

    python benchmarks/bench_answers.py [--role tuning|test] [--calibrate] [--db NAME=PATH ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "examples/sets.json"
WRONG_AT_MOST = 0.05  # the target: answers quoting no fact, of the answerable questions
GRID = [round(0.80 + 0.01 * i, 2) for i in range(51)]  # cuts swept: 0.80 .. 1.30


def _at(rows: list[dict], cut: float) -> dict:
    """What the answers would be with ``cut``: rows answered at cut 0 with less support
    would show passages instead."""
    def answered(r):
        return r["outcome"] == "answer" and (r["support"] or 0.0) >= cut

    n = sum(1 for r in rows if r["kind"] == "answerable")
    near = [r for r in rows if r["kind"] == "near_miss"]
    right = sum(1 for r in rows if r["kind"] == "answerable" and answered(r) and r["fact"])
    wrong = sum(1 for r in rows if r["kind"] == "answerable" and answered(r) and not r["fact"])
    gold = sum(1 for r in rows if r["kind"] == "answerable" and answered(r) and r["gold_note"])
    return {"cut": cut, "answerable": n, "correct": right, "wrong": wrong, "gold_note": gold,
            "near_miss": len(near), "near_miss_answered": sum(1 for r in near if answered(r))}


def choose(rows: list[dict]) -> float:
    """The lowest cut of the grid at which wrong answers are at most WRONG_AT_MOST."""
    return next(c for c in GRID if _at(rows, c)["wrong"] <= WRONG_AT_MOST * _at(rows, c)[
        "answerable"])


def calibrate(entries: list[dict]) -> dict:
    """The sweep pooled over the tuning sets, and the cut chosen leaving each corpus out."""
    rows = [dict(r, corpus=e["corpus"]) for e in entries for r in e["result"]["rows"]]
    corpora = sorted({r["corpus"] for r in rows})
    loco = []
    for left in corpora:
        cut = choose([r for r in rows if r["corpus"] != left])
        loco.append({"left_out": left, "chosen": cut,
                     **_at([r for r in rows if r["corpus"] == left], cut)})
    return {"sets": [e["file"] for e in entries], "corpora": corpora,
            "sweep": [_at(rows, c) for c in GRID], "chosen": choose(rows), "loco": loco}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", choices=["tuning", "test"], default=None)
    parser.add_argument("--calibrate", action="store_true",
                        help="sweep the answer/passages cut on the tuning sets")
    parser.add_argument("--db", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--out", default=str(REPO / "benchmarks/results"))
    args = parser.parse_args()
    os.environ.pop("ANTHROPIC_API_KEY", None)  # the offline answer, whatever is set
    from brainbot.ask import extractive
    from brainbot.evaluation.sets import ROLES, format_sets, load_manifest, run_sets
    from brainbot.model.embed import Embedder

    manifest, embedder = load_manifest(MANIFEST), Embedder()
    dbs = dict(x.split("=", 1) for x in args.db)
    out = Path(args.out)
    if args.calibrate:
        saved, extractive.SUPPORT_MIN = extractive.SUPPORT_MIN, 0.0
        try:
            result = run_sets(manifest, answers=True, kinds=("questions",), roles=("tuning",),
                              dbs=dbs, embedder=embedder)
        finally:
            extractive.SUPPORT_MIN = saved
        found = calibrate(result["sets"])
        print(f"chosen cut {found['chosen']} (shipped {saved}); left out by corpus: "
              + ", ".join(f"{x['left_out']} {x['chosen']}" for x in found["loco"]))
        (out / "eval_answers_calibration.json").write_text(json.dumps(
            {"command": "python benchmarks/bench_answers.py --calibrate (tuning sets only)",
             "shipped": saved, **found}, indent=1, ensure_ascii=False) + "\n")
        return 0
    roles = (args.role,) if args.role else ROLES
    result = run_sets(manifest, answers=True, kinds=("questions",), roles=roles, dbs=dbs,
                      embedder=embedder)
    print(format_sets(result), flush=True)
    (out / "eval_answers.json").write_text(json.dumps(
        {"command": "brainbot eval --sets examples/sets.json --answers (no API key: "
                    "extractive)", **result}, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

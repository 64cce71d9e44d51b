"""Follow-up questions, offline: does the gold note come up alone, and within its conversation?

Indexes examples/notes, the rust book and the dwarves-brain vault (../shared/data/corpora),
runs ``brainbot eval --conversations FILE -k 5`` on each conversation set with the method
``ask/followup.py`` ships (DEFAULT) and writes benchmarks/results/eval_followups.json, from
which the README's "Follow-up questions" table is made. With ``--methods`` it also races the
other ways of contextualising a follow-up on the TUNING sets only and writes
benchmarks/results/eval_followups_methods.json: the comparison DEFAULT was chosen by. The
held-out sets (``*-holdout``) are never run with anything but DEFAULT.

No API key is used: the answers are the offline (extractive) ones.

    python benchmarks/bench_followups.py [--methods] [--db NAME=PATH ...]

``--db notes=/tmp/notes.db`` reuses an index of that corpus instead of building one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared/data/corpora"
CORPORA = {"notes": REPO / "examples/notes", "rust-book": DATA / "rust-book",
           "dwarves-brain": DATA / "dwarves-brain"}
SETS = [("conversations", "notes", "tuning"), ("conversations-holdout", "notes", "held out"),
        ("conversations-rust", "rust-book", "tuning"),
        ("conversations-rust-holdout", "rust-book", "held out"),
        ("conversations-dwarves-holdout", "dwarves-brain", "held out")]


def methods() -> dict:
    """The ways raced on the tuning sets, DEFAULT first."""
    from brainbot.ask.followup import DEFAULT, Method

    return {"default: terms 0.5, vector 0.25": DEFAULT,
            "terms 0.25, vector 0.25": Method(terms=0.25, vector=0.25),
            "terms 0.5, vector 0.5": Method(terms=0.5, vector=0.5),
            "terms 0.75, vector 0.75": Method(terms=0.75, vector=0.75),
            "terms 0.75, vector 0.25": Method(terms=0.75, vector=0.25),
            "terms 0.5 only": Method(terms=0.5, vector=0),
            "vector 0.5 only": Method(terms=0, vector=0.5),
            "concatenate the last question": Method(concat=True, turns=1),
            "concatenate every earlier question": Method(concat=True, turns=4),
            "prior +0.005 on the last answer's notes": Method(terms=0, vector=0, prior=0.005),
            "prior +0.01": Method(terms=0, vector=0, prior=0.01),
            "default + prior +0.005": Method(terms=0.5, vector=0.25, prior=0.005),
            "default, decay 0.5 a turn": Method(terms=0.5, vector=0.25, decay=0.5),
            "default, last question only": Method(terms=0.5, vector=0.25, turns=1),
            "default, gate: cue words": Method(terms=0.5, vector=0.25, gate="cue"),
            "default, gate: evidence 0.6": Method(terms=0.5, vector=0.25, gate="evidence")}


def brief(result: dict) -> dict:
    """A result without its rows."""
    return {k: v for k, v in result.items() if k != "rows"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", action="store_true", help="also race the methods")
    parser.add_argument("--db", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--out", default=str(REPO / "benchmarks/results"))
    args = parser.parse_args()
    os.environ.pop("ANTHROPIC_API_KEY", None)  # the offline answer, whatever is set
    from brainbot.evaluation.conversations import format_conversations, run_conversations
    from brainbot.index.indexer import Indexer
    from brainbot.model.embed import Embedder
    from brainbot.search.searcher import Searcher

    embedder, given = Embedder(), dict(x.split("=", 1) for x in args.db)
    out, raced = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        dbs = {}
        for name, corpus in CORPORA.items():
            dbs[name] = Path(given.get(name) or Path(tmp) / f"{name}.db")
            if name not in given:
                with Indexer(dbs[name], embedder=embedder) as ix:
                    ix.index_paths([corpus])
        for name, corpus, role in SETS:
            path = REPO / f"examples/{name}.jsonl"
            with Searcher(dbs[corpus], embedder=embedder) as searcher:
                t0 = time.perf_counter()
                result = run_conversations(path, db=str(dbs[corpus]), k=5, searcher=searcher)
                result.update(dataset=f"examples/{name}.jsonl", corpus=corpus, role=role,
                              seconds=round(time.perf_counter() - t0, 1))
                print(format_conversations(result), flush=True)
                out[name] = result
                if args.methods and role == "tuning":
                    raced[name] = {label: brief(run_conversations(
                        path, db=str(dbs[corpus]), k=5, method=m, searcher=searcher))
                        for label, m in methods().items()}
    results = Path(args.out)
    (results / "eval_followups.json").write_text(json.dumps(
        {"command": "brainbot eval --conversations FILE -k 5 (no API key: extractive)",
         "sets": out}, indent=1, ensure_ascii=False) + "\n")
    if raced:
        (results / "eval_followups_methods.json").write_text(json.dumps(
            {"command": "python benchmarks/bench_followups.py --methods (tuning sets only)",
             "sets": raced}, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

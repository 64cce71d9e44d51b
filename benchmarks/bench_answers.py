"""What `brainbot ask` answers, by outcome, on every question set (no API key: extractive).

Indexes examples/notes, the rust book (../shared/data/corpora/rust-book) and examples/vault,
runs ``brainbot eval --questions FILE --answers`` on each set and writes
benchmarks/results/eval_answers.json, from which the README's "Answers" table is made.
The thresholds were chosen on examples/questions.jsonl and examples/questions-rust.jsonl;
the two holdout sets were run once, after (ask/extractive.py's comments).

    python benchmarks/bench_answers.py [--out benchmarks/results/eval_answers.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPORA = {"notes": REPO / "examples/notes",
           "rust-book": REPO.parent / "shared/data/corpora/rust-book",
           "vault": REPO / "examples/vault"}
SETS = [("questions", "notes", "tuning"), ("questions-holdout", "notes", "blind"),
        ("questions-rust", "rust-book", "tuning"), ("questions-rust-holdout", "rust-book", "blind"),
        ("questions-vault", "vault", "not tuned on"), ("questions-cjk", "vault", "not tuned on")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/eval_answers.json"))
    args = parser.parse_args()
    from brainbot.evaluate import format_answers, run_answers
    from brainbot.index.indexer import Indexer
    from brainbot.model.embed import Embedder
    from brainbot.search.searcher import Searcher

    embedder, out = Embedder(), {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, corpus in CORPORA.items():
            with Indexer(Path(tmp) / f"{name}.db", embedder=embedder) as ix:
                ix.index_paths([corpus])
        for name, corpus, role in SETS:
            db = Path(tmp) / f"{corpus}.db"
            with Searcher(db, embedder=embedder) as searcher:
                result = run_answers(REPO / f"examples/{name}.jsonl", db=str(db),
                                     searcher=searcher)
            print(format_answers(result), flush=True)
            result["dataset"] = f"examples/{name}.jsonl"
            result["role"] = role
            out[name] = result
    Path(args.out).write_text(json.dumps(
        {"command": "brainbot eval --questions FILE --answers (no API key: extractive)",
         "sets": out}, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

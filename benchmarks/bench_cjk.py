"""CJK analysis, measured: single characters, overlapping bigrams, or both, for BM25.

Indexes examples/vault (35 notes in Chinese, Japanese and Korean beside ~50 English ones)
once per analyzer variant (``lexical.CJK_GRAMS``) and runs the question sets over it:
examples/questions-cjk.jsonl (questions asked in those languages) and, as a check that
English is untouched, examples/questions-vault.jsonl. Reports hit@5 and MRR per mode.

    python benchmarks/bench_cjk.py [--out benchmarks/results/cjk.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VARIANTS = {"unigram": (1,), "bigram": (2,), "unigram+bigram": (1, 2)}
SETS = {"cjk": REPO / "examples/questions-cjk.jsonl",
        "vault-en": REPO / "examples/questions-vault.jsonl"}
MODES = ["bm25", "vector", "hybrid"]
# Hybrid's (bm25, vector) weights for a query mostly in CJK scripts (search.CJK_WEIGHTS).
CJK_WEIGHTS = [(1.0, 1.0), (1.0, 0.5), (1.0, 0.25), (1.0, 0.0)]


def run_variant(grams, embedder, tmp: Path) -> dict:
    from brainbot.evaluate import run_questions
    from brainbot.index.indexer import Indexer
    from brainbot.text import lexical

    lexical.CJK_GRAMS = grams
    db = tmp / f"vault-{'-'.join(map(str, grams))}.db"
    with Indexer(db, embedder=embedder) as ix:
        ix.index_paths([REPO / "examples/vault"])
    out = {}
    for name, path in SETS.items():
        result = run_questions(path, db=str(db), modes=MODES, k=5)
        out[name] = {m: {"hit@5": v["hit@5"], "mrr": v["mrr"], "hit@1": v["hit@1"]}
                     for m, v in result["modes"].items()}
        out[name]["answerable"] = result["answerable"]
    out["cjk_weights"] = weight_sweep(db)
    return out


def weight_sweep(db: Path) -> dict:
    from brainbot.evaluate import run_questions
    from brainbot.search import searcher as search

    saved, out = search.CJK_WEIGHTS, {}
    try:
        for w in CJK_WEIGHTS:
            search.CJK_WEIGHTS = w
            v = run_questions(SETS["cjk"], db=str(db), modes=["hybrid"], k=5)["modes"]["hybrid"]
            out[f"{w[0]}:{w[1]}"] = {"hit@5": v["hit@5"], "mrr": v["mrr"]}
    finally:
        search.CJK_WEIGHTS = saved
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/cjk.json"))
    args = parser.parse_args()
    from brainbot.model.embed import Embedder

    embedder = Embedder()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, grams in VARIANTS.items():
            results[name] = run_variant(grams, embedder, Path(tmp))
            for s in SETS:
                row = " ".join(f"{m} {results[name][s][m]['hit@5']:.3f}/{results[name][s][m]['mrr']:.3f}"
                               for m in MODES)
                print(f"{name:>15} {s:>8}: {row}   (hit@5/MRR)")
            sweep = " ".join(f"{w} {v['hit@5']:.3f}/{v['mrr']:.3f}"
                             for w, v in results[name]["cjk_weights"].items())
            print(f"{name:>15} hybrid CJK weights: {sweep}")
    Path(args.out).write_text(json.dumps({"variants": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

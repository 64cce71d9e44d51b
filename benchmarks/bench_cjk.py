"""CJK analysis, measured: the English-only analyzer's grams against per-language analysis.

Indexes examples/vault (36 notes in Chinese, Japanese and Korean beside ~50 English ones)
once per analyzer and runs the question sets over it: examples/questions-cjk.jsonl
(questions asked in those languages) and, as a check that English is untouched,
examples/questions-vault.jsonl. Reports hit@5 and MRR per mode.

  english-only    every chunk through lexical.analyze: CJK runs as single characters and
                  bigrams (Lucene's CJKBigramFilter with unigrams), the analyzer before
                  issue 41
  per-language    each chunk in its note's language (text/analyzers.py): Japanese cut by
                  script with its grammar left out, Chinese without its function
                  characters, Korean as before (text/cjk.py)

Then, with per-language analysis, the hybrid weight of the vector leg for these queries
(search/weights.py: the English model's weight for zh, ja and ko) is swept. The constants
themselves are chosen on the multilingual tuning set (benchmarks/tune_languages.py); this is
a second, older set that was not used to choose them.

    python benchmarks/bench_cjk.py [--out benchmarks/results/cjk.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SETS = {"cjk": REPO / "examples/questions-cjk.jsonl",
        "vault-en": REPO / "examples/questions-vault.jsonl"}
MODES = ["bm25", "vector", "hybrid"]
VECTOR_WEIGHTS = [1.0, 0.5, 0.25, 0.0]  # the vector leg's weight for a CJK query


def run_variant(name: str, embedder, tmp: Path) -> dict:
    from brainbot.evaluate import run_questions
    from brainbot.index.indexer import Indexer
    from brainbot.text import lexical

    db = tmp / f"vault-{name}.db"
    own = Indexer._analyzer
    if name == "english-only":
        Indexer._analyzer = lambda self: lexical.ANALYZER_VERSION
    try:
        with Indexer(db, embedder=embedder) as ix:
            ix.index_paths([REPO / "examples/vault"])
    finally:
        Indexer._analyzer = own
    out = {}
    for set_name, path in SETS.items():
        result = run_questions(path, db=str(db), modes=MODES, k=5)
        out[set_name] = {m: {"hit@5": v["hit@5"], "mrr": v["mrr"], "hit@1": v["hit@1"]}
                         for m, v in result["modes"].items()}
        out[set_name]["answerable"] = result["answerable"]
    out["cjk_weights"] = weight_sweep(db)
    return out


def weight_sweep(db: Path) -> dict:
    from brainbot.evaluate import run_questions
    from brainbot.model.records import MINILM

    table, out = MINILM.vector_weight, {}
    saved = dict(table)
    try:
        for w in VECTOR_WEIGHTS:
            table.update({"zh": w, "ja": w, "ko": w})
            v = run_questions(SETS["cjk"], db=str(db), modes=["hybrid"], k=5)["modes"]["hybrid"]
            out[f"1.0:{w}"] = {"hit@5": v["hit@5"], "mrr": v["mrr"]}
    finally:
        table.clear()
        table.update(saved)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/cjk.json"))
    args = parser.parse_args()
    from brainbot.model.embed import Embedder

    embedder = Embedder()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("english-only", "per-language"):
            results[name] = run_variant(name, embedder, Path(tmp))
            for s in SETS:
                row = " ".join(f"{m} {results[name][s][m]['hit@5']:.3f}/{results[name][s][m]['mrr']:.3f}"
                               for m in MODES)
                print(f"{name:>13} {s:>8}: {row}   (hit@5/MRR)")
            sweep = " ".join(f"{w} {v['hit@5']:.3f}/{v['mrr']:.3f}"
                             for w, v in results[name]["cjk_weights"].items())
            print(f"{name:>13} hybrid CJK weights: {sweep}")
    Path(args.out).write_text(json.dumps({"variants": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

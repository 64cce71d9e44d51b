"""NFCorpus as MTEB scores it, to hold brainbot's models to their published fp32 figures
(issue 41: the 4-bit multilingual-e5-small against its model card).

    python benchmarks/bench_mteb_nfcorpus.py ../shared/data/nfcorpus --precision int8

MTEB embeds each whole document (title and text, truncated at the model's limit) and
each query, ranks every document by cosine and scores nDCG@10 on the test qrels; e5 takes
"passage: " and "query: " prefixes (the Embedder puts them). No chunking, no BM25: the
model alone, so the distance to the published figure is the model's (4-bit weights, int8
or fp32 graph), not brainbot's. all-MiniLM-L6-v2 runs the same way as the anchor: its
published figure (0.31594, ../shared/data/reference_numbers) checks the protocol.
Published multilingual-e5-small: 0.31010 (its model card's MTEB NFCorpus ndcg_at_10).
Writes benchmarks/results/mteb_nfcorpus.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_chunking import machine  # noqa: E402

from brainbot.evaluate import _read_jsonl, load_qrels, ndcg_at  # noqa: E402
from brainbot.model.embed import Embedder  # noqa: E402

RESULTS = HERE / "results" / "mteb_nfcorpus.json"
# Published nDCG@10 (fp32 weights): all-MiniLM-L6-v2, MTEB's results (reference_numbers);
# multilingual-e5-small, the model-index of its model card ("MTEB NFCorpus").
PUBLISHED = {"all-MiniLM-L6-v2": 0.31594, "multilingual-e5-small": 0.31010}


def score(folder: Path, model: str, precision: str) -> dict:
    docs = list(_read_jsonl(folder / "corpus.jsonl"))
    ids = [d["_id"] for d in docs]
    texts = [(d.get("title", "") + " " + d.get("text", "")).strip() for d in docs]
    qrels = load_qrels(folder, "test")
    queries = {q["_id"]: q["text"] for q in _read_jsonl(folder / "queries.jsonl") if q["_id"] in qrels}
    e = Embedder(precision, model=model)
    start = time.perf_counter()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths together
    vectors = np.empty((len(texts), e.dimension), np.float32)
    vectors[order] = e.embed([texts[i] for i in order])
    seconds = time.perf_counter() - start
    qids = sorted(queries)
    qv = e.embed([queries[q] for q in qids], kind="query")
    scores = []
    for row, qid in zip(qv @ vectors.T, qids):
        top = np.argsort(-row, kind="stable")[:10]
        scores.append(ndcg_at([ids[i] for i in top], qrels[qid], 10))
    ndcg = float(np.mean(scores))
    return {"model": model, "precision": precision, "documents": len(docs),
            "queries": len(qids), "ndcg@10": round(ndcg, 5), "published": PUBLISHED[model],
            "difference": round(ndcg - PUBLISHED[model], 5), "truncated": e.texts_truncated,
            "embed_seconds": round(seconds, 1), "load": round(os.getloadavg()[0], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--precision", default="int8")
    parser.add_argument("--models", default="all-MiniLM-L6-v2,multilingual-e5-small")
    args = parser.parse_args(argv)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"runs": {}}
    results["machine"] = machine()
    for model in args.models.split(","):
        row = score(args.folder, model, args.precision)
        results["runs"][f"{model}|{args.precision}"] = row
        print(json.dumps(row), flush=True)
        RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

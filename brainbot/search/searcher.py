"""Retrieval: BM25, vector and hybrid modes, fusion, re-ranking, result records.

A Searcher opens an index read-only through its store (``store/interface.py``), which scores each
leg (on SQLite in the C kernel over arrays loaded once, so many queries, as in the eval,
pay for that once; on Postgres in SQL). Hybrid mode takes a candidate pool from each leg
and fuses them here, above the store, so both stores rank alike; the default fusion
method is the one ``brainbot eval`` measured best (see README, "Retrieval quality"), and
the vector leg weighs what the index's model can do in the query's language
(``search/weights.py``). The query's BM25 terms are those of the index's languages it may
be in (``text/analyzers.py``). Every search first lets the store pick up what another
process indexed.

Nothing here writes to the database or talks to an LLM except the optional LLM
re-ranker in ``search/rerank.py``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from brainbot.errors import InputError
from brainbot.index import freshness
from brainbot.kernel import native as kernel
from brainbot.store.interface import Store
from brainbot.store.records import DocumentRow, Filter
from brainbot.store.target import open_store
from brainbot.text import analyzers

from .weights import vector_weight

MODES = ("bm25", "vector", "hybrid")
# Candidates each leg hands to fusion. 100 covers recall@100 for the eval and costs
# well under a millisecond in the kernels.
POOL = 100
# Cormack, Clarke & Buettcher (2009), "Reciprocal rank fusion outperforms Condorcet and
# individual rank learning methods": k = 60.
RRF_K = 60.0
# Settled by `brainbot eval` on NFCorpus (README, "Retrieval quality").
DEFAULT_FUSION: Literal["rrf", "weighted"] = "rrf"
DEFAULT_WEIGHTS = (1.0, 1.0)  # (bm25, vector)
# Without weights given, the vector leg weighs what the index's model can do in the
# query's and the notes' languages (search/weights.py: all-MiniLM-L6-v2 is 0 for Chinese,
# Japanese and Korean, so such a query is not embedded at all).


@dataclass
class Hit:
    """One retrieved chunk, with where it lives (lines and characters) and how it scored."""

    chunk_id: str
    path: str
    root: str
    heading_path: list[str]
    start_line: int
    end_line: int
    score: float
    text: str
    rowid: int = 0
    explain: dict = field(default_factory=dict)
    start_char: int = -1
    end_char: int = -1
    document: DocumentRow | None = field(default=None, repr=False)
    stale: bool = False  # the file changed or vanished since it was indexed
    embedded: bool = True  # has a vector yet (a partly embedded index: BM25 found it)

    @property
    def location(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"

    def to_dict(self, explain: bool = False) -> dict:
        doc = self.document
        out = {"chunk_id": self.chunk_id, "path": self.path, "root": self.root,
               "heading_path": self.heading_path, "start_line": self.start_line,
               "end_line": self.end_line, "score": round(float(self.score), 6),
               "text": self.text, "stale": self.stale, "embedded": self.embedded,
               "date": doc.date if doc else None, "date_source": doc.date_source if doc else None}
        if explain:
            out["explain"] = self.explain
        return out


def index_precision(meta: dict[str, str]) -> str:
    """The precision an index's vectors were made at, which its queries are embedded at."""
    return "int8" if "int8" in meta.get("embedder", "") else "fp32"


def index_model(meta: dict[str, str]):
    """The model record an index's vectors were made with, which its queries are embedded
    with (a reader opened it, so its model is one this code knows)."""
    from brainbot.model.records import for_index, record

    return for_index(meta) or record()


class Searcher:
    """Query one index through its store; the embedder loads on the first vector query.

    The embedder follows the index: its model is the one the index records
    (``model/records.for_index``: MiniLM for an index from before model records), at the
    index's precision. When the store reopens a replaced file, or the index's index_id or
    recorded embedder changes (a rebuild at another precision or with another model),
    ``meta`` is read again and an embedder of another precision or model is dropped, so a
    long-lived server embeds queries as the index now wants (review H2: a daemon kept
    embedding at the old precision, and its answers silently differed from in-process
    ones). An embedder given without a precision (a test's stand-in) is kept; so is one
    when ``precision`` is."""

    def __init__(self, db, *, embedder=None, precision: str | None = None,
                 store: Store | None = None):
        self.target = db  # the --db target: a path or a postgresql:// URL
        self.store = store or open_store(db)
        self.meta = self.store.meta()
        self.precision = precision
        self._embedder = embedder
        self.kernel = kernel.active()
        self._coverage: tuple[tuple, tuple[int, int]] | None = None  # (its key, counts)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Searcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def embedder(self):
        self._follow_index()
        if self._embedder is None:
            from brainbot.model.embed import Embedder

            self._embedder = Embedder(precision=self.precision or index_precision(self.meta),
                                      model=index_model(self.meta))
        return self._embedder

    def _follow_index(self) -> None:
        """Take the store's meta as it is now, after its last refresh (see the class
        docstring)."""
        meta = self.store.meta()
        if all(meta.get(k) == self.meta.get(k) for k in ("index_id", "embedder")):
            return
        self.meta = meta
        wanted = self.precision or index_precision(meta)
        model = getattr(self._embedder, "model", None)
        if (getattr(self._embedder, "precision", wanted) != wanted
                or (model is not None and model != index_model(meta))):
            self._embedder = None

    def coverage(self) -> tuple[int, int]:
        """(chunks with a vector, chunks): equal once the semantic phase has finished.

        Counted once per committed state: every write commits in a batch, which bumps the
        store's generation, and a rebuild writes a new index_id (seen at the store's next
        refresh), so that pair keys the counts. Their two count(*)s cost ~50 ms at 100k
        chunks, which each call of a long-lived server (mcp, serve) paid before; reading
        the generation is one row. The key is read before the counts, so a commit in
        between is counted again on the next call."""
        key = (self.store.meta().get("index_id"), self.store.generation())
        if self._coverage is None or self._coverage[0] != key:
            self._coverage = (key, (self.store.vector_count(), self.store.chunk_count()))
        return self._coverage[1]

    def partial_note(self, mode: str) -> str | None:
        """The one line a vector or hybrid query on a partly embedded index prints."""
        if mode == "bm25":
            return None
        vectors, chunks = self.coverage()
        if vectors >= chunks:
            return None
        return (f"note: {vectors:,} of {chunks:,} chunks embedded; run `brainbot index` to "
                "finish (the vector leg sees only embedded chunks)")

    # -- legs: (chunk ids, scores), best first ------------------------------------------
    def bm25(self, query: str, n: int, flt: Filter | None = None, terms: Counter | None = None):
        return self.store.bm25_topk(terms or self.query_terms(query), n, flt)

    def languages(self) -> dict[str, int]:
        """Language -> chunks of the index analysed in it (text/analyzers.py)."""
        return analyzers.index_languages(self.store.meta())

    def query_terms(self, text: str) -> Counter:
        """BM25 terms of ``text`` in each of the index's languages it may be in."""
        return analyzers.query_terms(text, self.languages())

    def fusion_weights(self, query: str) -> tuple[float, float]:
        """(bm25, vector) weights for ``query``: the vector leg's from search/weights.py."""
        model = self.store.meta().get("model")
        return (1.0, vector_weight(model, query, self.languages()))

    def vector(self, query: str, n: int, flt: Filter | None = None, qvec=None):
        if qvec is None:
            qvec = self.embedder.embed_query(query)
        return self.store.vector_topk(qvec, n, flt)

    def best_cosine(self, qvec) -> float:
        """The best cosine between ``qvec`` and any chunk: the vector leg's top-1."""
        _, scores = self.store.vector_topk(qvec, 1)
        return float(scores[0]) if len(scores) and scores[0] > -1e30 else 0.0

    # -- the query ----------------------------------------------------------------------
    def search(self, query: str, k: int = 10, *, mode: str = "hybrid", rerank: bool = False,
               path_glob: str | None = None, tags: list[str] | None = None,
               since: str | None = None, before: str | None = None,
               linked_to: str | None = None, min_score: float | None = None,
               fusion: Literal["rrf", "weighted"] = DEFAULT_FUSION,
               weights: tuple[float, float] | None = None, pool: int = POOL,
               qvec=None, terms: Counter | None = None) -> list[Hit]:
        """The top ``k`` hits for ``query``; ``qvec`` and ``terms`` (BM25 terms with their
        weights) stand in for the query's own vector and terms when given: a follow-up
        question searches with its conversation's (ask/followup.py)."""
        if mode not in MODES:
            raise InputError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
        if k <= 0:
            raise InputError(f"k must be at least 1, not {k}")
        if not query.strip():
            raise InputError("the query is empty")
        self.store.refresh()  # another process may have indexed since the last query
        weights = weights or self.fusion_weights(query)
        flt = Filter(path_glob, tuple(tags or ()), since, before, linked_to)
        n = max(pool, k)
        if mode == "bm25":
            ids, scores = self.bm25(query, n, flt, terms)
            explain = [{"bm25_rank": i + 1, "bm25_score": float(s)} for i, s in enumerate(scores)]
        elif mode == "vector":
            ids, scores = self.vector(query, n, flt, qvec)
            explain = [{"vector_rank": i + 1, "vector_score": float(s)}
                       for i, s in enumerate(scores)]
        else:
            ids_a, sc_a = self.bm25(query, n, flt, terms)
            if weights[1] > 0:
                ids_b, sc_b = self.vector(query, n, flt, qvec)
            else:  # the leg would count for nothing: skip the embedding too
                ids_b, sc_b = np.full(n, -1, np.int64), np.full(n, -np.inf, np.float32)
            fused = self.kernel.fuse(ids_a, sc_a, ids_b, sc_b, n, method=fusion, rrf_k=RRF_K,
                                     weight_a=weights[0], weight_b=weights[1])
            order = _rrf_ties_by_scores(fused, sc_a, sc_b, weights) if fusion == "rrf" else \
                np.arange(len(fused.ids))
            ids, scores = fused.ids[order], fused.scores[order]
            explain = [_leg_explain(fused, i) for i in order]
        hits = self._hits(ids, scores, explain, n if rerank else k)
        if rerank:
            from .rerank import rerank as do_rerank

            hits = do_rerank(self, query, hits)[:k]
        if min_score is not None:
            hits = [h for h in hits if h.score >= min_score]
        freshness.mark(hits)
        return hits

    def _hits(self, ids: np.ndarray, scores: np.ndarray, explain: list[dict], k: int) -> list[Hit]:
        chosen = [(int(i), float(s), e) for i, s, e in zip(ids, scores, explain)
                  if i >= 0 and np.isfinite(s)][:k]
        rows = self.store.chunks([i for i, _, _ in chosen])
        hits = []
        for rowid, score, exp in chosen:
            r = rows.get(rowid)
            if r is None:  # removed by a concurrent index run since we loaded
                continue
            hits.append(Hit(r.chunk_id, r.path, r.root, r.heading_path, r.start_line,
                            r.end_line, score, r.text, rowid, exp, r.start_char, r.end_char,
                            r.document, embedded=r.embedded))
        return hits


def _rrf_ties_by_scores(fused, sc_a, sc_b, weights: tuple[float, float]) -> np.ndarray:
    """The order of RRF's results with its exact ties broken by the legs' scores.

    RRF sums 1/(k + rank), so a chunk ranked (3, 7) ties one ranked (7, 3) to the last bit,
    as do two chunks each found by one leg at the same rank; the kernel then puts the lower
    chunk id first, an order that says nothing about the query (issue 43: 113 of
    SciFact's 300 queries had a tie among their first 30 fused chunks at int8, and the
    int8 index's slightly reordered vector leg moved which chunks tied). Within a tie the
    chunk with the higher weighted sum of its legs' min-max normalised scores (the
    ``weighted`` fusion's score over the same pools) comes first; the kernel's order
    stays the last resort. Untied results keep their order. Chosen on NFCorpus (tuning),
    where it lowers neither precision: nDCG@10 +0.0004 at fp32, +0.0009 at int8, both
    within noise; SciFact is only reported (benchmarks/bench_precision_fusion.py,
    benchmarks/results/precision_fusion_*.json). Its point is an order that follows the
    query rather than the order the chunks were indexed in."""
    parts = []
    for leg_scores, pool, weight in ((fused.score_a, sc_a, weights[0]),
                                     (fused.score_b, sc_b, weights[1])):
        finite = pool[np.isfinite(pool)]
        lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 0.0)
        norm = (leg_scores - lo) / (hi - lo) if hi > lo else np.ones_like(leg_scores)
        parts.append(weight * np.where(np.isnan(leg_scores), 0.0, norm))  # NaN: not in it
    return np.lexsort((np.arange(len(fused.ids)), -(parts[0] + parts[1]), -fused.scores))


def _leg_explain(fused, i: int) -> dict:
    out = {}
    for leg, rank, score in (("bm25", fused.rank_a, fused.score_a),
                             ("vector", fused.rank_b, fused.score_b)):
        r = int(rank[i])
        out[f"{leg}_rank"] = r if r > 0 else None
        out[f"{leg}_score"] = float(score[i]) if r > 0 else None
    return out

"""Retrieval: BM25, vector and hybrid modes, fusion, re-ranking, result records.

A Searcher opens an index read-only, loads the vectors and chunk lengths once (so many
queries, as in the eval, pay for that once) and answers queries through the C kernels
(or their numpy twins when the extension is not built). Hybrid mode takes a candidate
pool from each leg and fuses them in the kernel; the default fusion method and weights
are the ones ``brainbot eval`` measured best (see README, "Retrieval quality").

Nothing here writes to the database or talks to an LLM except the optional LLM
re-ranker in ``rerank.py``.
"""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import kernel, lexical, model, store
from .errors import IncompatibleIndexError, InputError

MODES = ("bm25", "vector", "hybrid")
# Candidates each leg hands to fusion. 100 covers recall@100 for the eval and costs
# well under a millisecond in the kernels.
POOL = 100
# Cormack, Clarke & Buettcher (2009), "Reciprocal rank fusion outperforms Condorcet and
# individual rank learning methods": k = 60.
RRF_K = 60.0
# Settled by `brainbot eval` on NFCorpus (README, "Retrieval quality").
DEFAULT_FUSION = "rrf"
DEFAULT_WEIGHTS = (1.0, 1.0)  # (bm25, vector)


@dataclass
class Hit:
    """One retrieved chunk, with where it lives and how it scored."""

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

    @property
    def location(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"

    def to_dict(self, explain: bool = False) -> dict:
        out = {"chunk_id": self.chunk_id, "path": self.path,
               "heading_path": self.heading_path, "start_line": self.start_line,
               "end_line": self.end_line, "score": round(float(self.score), 6),
               "text": self.text}
        if explain:
            out["explain"] = self.explain
        return out


class Searcher:
    """Query one index. Loads vectors and lengths lazily, once."""

    def __init__(self, db_path: str | os.PathLike, *, embedder=None, precision: str | None = None):
        self.db_path = Path(db_path)
        self.db = store.open_index(self.db_path, readonly=True)
        self.meta = store.read_meta(self.db)
        self._check_compatible()
        self.precision = precision
        self._embedder = embedder
        self._loaded = False
        self._postings_cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.k = kernel.active()

    def _check_compatible(self) -> None:
        """Vectors and terms only compare with ours when model and analyzer match."""
        wanted = {"model": model.MODEL_ID, "model_sha256": model.weights_sha256(),
                  "dimension": str(model.DIMENSION)}
        for key, ours in wanted.items():
            theirs = self.meta.get(key)
            if theirs is not None and theirs != ours:
                self.db.close()
                raise IncompatibleIndexError(
                    f"{self.db_path} was built with {key} {theirs!r}, this brainbot uses "
                    f"{ours!r}; rebuild it with `brainbot index NOTES --db {self.db_path} "
                    "--rebuild`")
        chunker = self.meta.get("chunker")
        if chunker and not chunker.endswith("+" + lexical.ANALYZER_VERSION):
            self.db.close()
            raise IncompatibleIndexError(
                f"{self.db_path} was built with another text analyzer ({chunker}); rebuild "
                f"it with `brainbot index NOTES --db {self.db_path} --rebuild`")

    def close(self) -> None:
        self.db.close()

    # -- loading ------------------------------------------------------------------------
    @property
    def embedder(self):
        if self._embedder is None:
            from .embed import Embedder

            precision = self.precision
            if precision is None:
                precision = "int8" if "int8" in self.meta.get("embedder", "") else "fp32"
            self._embedder = Embedder(precision=precision)
        return self._embedder

    def _load(self) -> None:
        if self._loaded:
            return
        rows = self.db.execute(
            "SELECT c.id, c.lexical_length, e.vector FROM chunks c "
            "JOIN embeddings e ON e.chunk = c.id ORDER BY c.id").fetchall()
        dim = int(self.meta.get("dimension", model.DIMENSION))
        self.rowids = np.array([r[0] for r in rows], dtype=np.int64)
        self.lengths = np.array([r[1] for r in rows], dtype=np.float32)
        blob = b"".join(r[2] for r in rows)
        self.matrix = np.frombuffer(blob, dtype="<f4").reshape(len(rows), dim).astype(
            np.float32, copy=False)
        self.avgdl = lexical.average_length(self.lengths)
        self._loaded = True

    def _positions(self, chunk_rowids: np.ndarray, with_mask: bool = False):
        """Kernel positions of chunk row ids (rows written after we loaded are dropped)."""
        if len(self.rowids) == 0:
            ok = np.zeros(len(chunk_rowids), bool)
            pos = np.zeros(0, np.int32)
        else:
            pos = np.clip(np.searchsorted(self.rowids, chunk_rowids), 0, len(self.rowids) - 1)
            ok = self.rowids[pos] == chunk_rowids
            pos = pos[ok].astype(np.int32)
        return (pos, ok) if with_mask else pos

    def _postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        cached = self._postings_cache.get(term)
        if cached is None:
            self._load()
            rows = self.db.execute(
                "SELECT p.chunk, p.tf FROM postings p JOIN terms t ON t.id = p.term "
                "WHERE t.term = ? ORDER BY p.chunk", (term,)).fetchall()
            arr = np.array(rows, dtype=np.int64).reshape(-1, 2)
            pos, ok = self._positions(arr[:, 0], with_mask=True)
            tfs = arr[:, 1].astype(np.float32)[ok]
            cached = (pos, tfs)
            if len(self._postings_cache) < 50_000:
                self._postings_cache[term] = cached
        return cached

    # -- filters ------------------------------------------------------------------------
    def mask_for(self, path_glob: str | None = None, tags: list[str] | None = None):
        """uint8 allow-mask over chunk positions, or None when no filter is set."""
        if not path_glob and not tags:
            return None
        self._load()
        allowed_docs = []
        for doc_id, path, front in self.db.execute(
                "SELECT id, path, front_matter FROM documents"):
            if path_glob and not fnmatch.fnmatchcase(path, path_glob):
                continue
            if tags and not _has_tags(front, tags):
                continue
            allowed_docs.append(doc_id)
        mask = np.zeros(len(self.rowids), dtype=np.uint8)
        for i in range(0, len(allowed_docs), 500):
            part = allowed_docs[i:i + 500]
            marks = ",".join("?" * len(part))
            ids = np.array([r[0] for r in self.db.execute(
                f"SELECT id FROM chunks WHERE document_id IN ({marks})", part)], np.int64)
            mask[self._positions(ids)] = 1
        return mask

    # -- legs ---------------------------------------------------------------------------
    def bm25(self, query: str, n: int, mask=None) -> tuple[np.ndarray, np.ndarray]:
        self._load()
        terms = lexical.query_terms(query)
        parts = []
        weights = []
        for term, count in sorted(terms.items()):
            pos, tfs = self._postings(term)
            if len(pos):
                parts.append((term, pos, tfs))
                weights.append(float(count))
        if not parts or len(self.rowids) == 0:
            return np.full(n, -1, np.int64), np.full(n, -np.inf, np.float32)
        q = lexical.assemble(parts, len(self.rowids))
        ids, scores = self.k.bm25_topk(
            q.indptr, q.doc_ids, q.tfs, self.lengths, q.idf,
            np.arange(len(parts), dtype=np.int32), n,
            weights=np.array(weights, dtype=np.float32), k1=lexical.BM25_K1,
            b=lexical.BM25_B, avgdl=self.avgdl, mask=mask)
        return ids, scores

    def vector(self, query: str, n: int, mask=None, qvec=None) -> tuple[np.ndarray, np.ndarray]:
        self._load()
        if len(self.rowids) == 0:
            return np.full(n, -1, np.int64), np.full(n, -np.inf, np.float32)
        if qvec is None:
            qvec = self.embedder.embed_query(query)
        ids, scores = self.k.cosine_topk(self.matrix, qvec.reshape(1, -1).astype(np.float32),
                                         n, mask=mask)
        return ids[0], scores[0]

    # -- the query ----------------------------------------------------------------------
    def search(self, query: str, k: int = 10, *, mode: str = "hybrid", rerank: bool = False,
               path_glob: str | None = None, tags: list[str] | None = None,
               min_score: float | None = None, fusion: str = DEFAULT_FUSION,
               weights: tuple[float, float] = DEFAULT_WEIGHTS, pool: int = POOL,
               qvec=None) -> list[Hit]:
        if mode not in MODES:
            raise InputError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
        if k <= 0:
            raise InputError("-k must be at least 1")
        if not query.strip():
            raise InputError("the query is empty")
        mask = self.mask_for(path_glob, tags)
        n = max(pool, k)
        explain: list[dict] = []
        if mode == "bm25":
            ids, scores = self.bm25(query, n, mask)
            explain = [{"bm25_rank": i + 1, "bm25_score": float(s)} for i, s in enumerate(scores)]
        elif mode == "vector":
            ids, scores = self.vector(query, n, mask, qvec)
            explain = [{"vector_rank": i + 1, "vector_score": float(s)}
                       for i, s in enumerate(scores)]
        else:
            ids_a, sc_a = self.bm25(query, n, mask)
            ids_b, sc_b = self.vector(query, n, mask, qvec)
            fused = self.k.fuse(ids_a, sc_a, ids_b, sc_b, n, method=fusion, rrf_k=RRF_K,
                                weight_a=weights[0], weight_b=weights[1])
            ids, scores = fused.ids, fused.scores
            explain = [_leg_explain(fused, i) for i in range(len(ids))]
        hits = self._hits(ids, scores, explain, n if rerank else k)
        if rerank:
            from .rerank import rerank as do_rerank

            hits = do_rerank(self, query, hits)[:k]
        if min_score is not None:
            hits = [h for h in hits if h.score >= min_score]
        return hits

    def _hits(self, ids: np.ndarray, scores: np.ndarray, explain: list[dict], k: int) -> list[Hit]:
        chosen = [(int(i), float(s), e) for i, s, e in zip(ids, scores, explain)
                  if i >= 0 and np.isfinite(s)][:k]
        if not chosen:
            return []
        rowids = [int(self.rowids[i]) for i, _, _ in chosen]
        marks = ",".join("?" * len(rowids))
        rows = {r[0]: r for r in self.db.execute(
            "SELECT c.id, c.chunk_id, d.path, d.root, c.heading_path, c.start_line, "
            f"c.end_line, c.source_text FROM chunks c JOIN documents d ON d.id = c.document_id "
            f"WHERE c.id IN ({marks})", rowids)}
        hits = []
        for rowid, (_, score, exp) in zip(rowids, chosen):
            r = rows.get(rowid)
            if r is None:  # removed by a concurrent index run since we loaded
                continue
            hits.append(Hit(r[1], r[2], r[3], json.loads(r[4]), r[5], r[6], score, r[7],
                            rowid, exp))
        return hits


def _leg_explain(fused, i: int) -> dict:
    out = {}
    for leg, rank, score in (("bm25", fused.rank_a, fused.score_a),
                             ("vector", fused.rank_b, fused.score_b)):
        r = int(rank[i])
        out[f"{leg}_rank"] = r if r > 0 else None
        out[f"{leg}_score"] = float(score[i]) if r > 0 else None
    return out


def _has_tags(front_json: str, wanted: list[str]) -> bool:
    try:
        front = json.loads(front_json)
    except ValueError:
        return False
    tags = front.get("tags") if isinstance(front, dict) else None
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.replace(",", " ").split()]
    if not isinstance(tags, list):
        return False
    have = {str(t).lstrip("#").lower() for t in tags}
    return all(w.lstrip("#").lower() in have for w in wanted)

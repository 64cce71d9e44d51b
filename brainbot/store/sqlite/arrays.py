"""The SQLite store's search side: the arrays the C kernel scans, loaded once, kept fresh.

Chunk ids, BM25 lengths and (only when a vector leg runs) the vector matrix are loaded
from the file in chunk-id order, so a kernel position maps to a chunk id by one array
lookup. BM25 postings are read per query term and cached. Every index commit bumps the
store's generation; ``sync`` compares it and reloads only what changed: the chunk list
(from a covering index, no text read) and the vectors of chunks written since the loaded
generation. A chunk id reused by SQLite for a new chunk has a newer generation, so it is
re-read too.

The kernels return kernel positions; the legs here return chunk ids, which is what
fusion and the other store speak. A filter becomes an allow-mask over positions.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from brainbot.kernel import native as kernel
from brainbot.kernel.int8_scan import Int8Scan
from brainbot.kernel.load import scan_threads
from brainbot.store.lru import LRU
from brainbot.text import lexical

POSTINGS_CACHE_TERMS = 50_000  # a long-lived server must not cache a whole vocabulary
# A term's postings as two JSON arrays: chunk ids and tfs (KernelIndex._read_postings).
POSTINGS_JSON = ("SELECT json_group_array(p.chunk), json_group_array(p.tf) FROM postings p "
                 "JOIN terms t ON t.id = p.term WHERE t.term = ?")
# From this many chunks on, the vector leg scans an int8 copy of the matrix and proves
# the f32 top-k from it (kernel/int8_scan.py): the same ids and scores as the f32 scan.
# One query, k = 100, one thread, CPU time int8 / f32 on the Zen 1 host, two runs: 0.99
# and 0.94 at 20k rows, 0.79 and 0.94 at 30k, 0.64 and 0.77 at 50k, 0.47 and 0.48 at 100k
# (benchmarks/bench_vector_leg.py, README "Search kernels").
INT8_SCAN_MIN_ROWS = 50_000
# The copy is made in memory, and making it costs what ~24 int8 scans save over f32
# ones (100k x 384: copy 118 ms CPU, f32 scan 12.0 ms, int8 6.7 ms; in a fresh `brainbot
# query` process the copy added 135-340 ms CPU at 100k: README "Search kernels",
# benchmarks/bench_vector_leg.py). So the f32 scan answers the first INT8_AFTER_SCANS vector
# queries of each loaded generation (a one-shot query never pays for the copy), and a
# process that keeps asking (mcp, serve, watch, an eval) then makes it once: the rule
# of ski rental, never more than about twice the cheaper of the two choices.
INT8_AFTER_SCANS = 24


def _empty(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full(n, -1, np.int64), np.full(n, -np.inf, np.float32)


class KernelIndex:
    """Arrays over one SQLite connection: ids, lengths, vectors; postings on demand."""

    def __init__(self, db, dim: int) -> None:
        self.db = db
        self.dim = dim
        self.kernel = kernel.active()
        self.generation: int | None = None
        self.rowids = np.zeros(0, np.int64)
        self.lengths = np.zeros(0, np.float32)
        self.written = np.zeros(0, np.int64)  # each chunk's generation
        self.matrix: np.ndarray | None = None
        self.embedded = np.zeros(0, bool)  # positions with a vector (with the matrix)
        self.avgdl = 1.0
        self._postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._masks: LRU = LRU()  # bounded: one N-byte mask a distinct filter
        self.int8: Int8Scan | None = None  # made from the matrix once it pays
        self.f32_scans = 0  # vector queries of this generation the f32 scan answered

    # -- loading ---------------------------------------------------------------------
    def sync(self, generation: int) -> bool:
        """Reload what changed since the loaded generation; False when nothing did."""
        if generation == self.generation:
            return False
        rows = np.array(self.db.execute(
            "SELECT id, lexical_length, generation FROM chunks ORDER BY id").fetchall(),
            dtype=np.int64).reshape(-1, 3)
        old_ids, old_written, old_matrix = self.rowids, self.written, self.matrix
        old_embedded = self.embedded
        self.rowids, self.written = rows[:, 0].copy(), rows[:, 2].copy()
        self.lengths = rows[:, 1].astype(np.float32)
        self.avgdl = lexical.average_length(self.lengths)
        self._postings.clear()
        self._masks.clear()
        if old_matrix is not None:
            self.matrix = self._refreshed(old_ids, old_written, old_matrix, old_embedded)
        self.int8, self.f32_scans = None, 0
        self.generation = generation
        return True

    def _refreshed(self, old_ids, old_written, old_matrix, old_embedded) -> np.ndarray:
        """The matrix for the new ids: rows of unchanged chunks copied, others read."""
        matrix = np.zeros((len(self.rowids), self.dim), np.float32)
        self.embedded = np.zeros(len(self.rowids), bool)
        if len(old_ids):
            pos = np.clip(np.searchsorted(old_ids, self.rowids), 0, len(old_ids) - 1)
            same = (old_ids[pos] == self.rowids) & (old_written[pos] == self.written)
        else:
            pos, same = np.zeros(len(self.rowids), np.int64), np.zeros(len(self.rowids), bool)
        matrix[same] = old_matrix[pos[same]]
        self.embedded[same] = old_embedded[pos[same]]
        todo = self.rowids[~same]
        for i in range(0, len(todo), 500):
            part = [int(x) for x in todo[i:i + 500]]
            marks = ",".join("?" * len(part))
            self._place(matrix, self.db.execute(
                f"SELECT chunk, vector FROM embeddings WHERE chunk IN ({marks})", part))
        return matrix

    def _place(self, matrix: np.ndarray, rows) -> None:
        rows = list(rows)
        if not rows:
            return
        ids = np.array([r[0] for r in rows], np.int64)
        pos, ok = self.positions(ids, with_mask=True)
        blob = b"".join(r[1] for i, r in enumerate(rows) if ok[i])
        matrix[pos] = np.frombuffer(blob, dtype="<f4").reshape(-1, self.dim)
        self.embedded[pos] = True

    def ensure_matrix(self) -> np.ndarray:
        if self.matrix is None:
            self.matrix = np.zeros((len(self.rowids), self.dim), np.float32)
            self.embedded = np.zeros(len(self.rowids), bool)
            self._place(self.matrix, self.db.execute(
                "SELECT chunk, vector FROM embeddings ORDER BY chunk"))
        return self.matrix

    def positions(self, chunk_ids: np.ndarray, with_mask: bool = False):
        """Kernel positions of chunk ids (ids not loaded are dropped)."""
        if len(self.rowids) == 0:
            ok = np.zeros(len(chunk_ids), bool)
            pos = np.zeros(0, np.int32)
        else:
            pos = np.clip(np.searchsorted(self.rowids, chunk_ids), 0, len(self.rowids) - 1)
            ok = self.rowids[pos] == chunk_ids
            pos = pos[ok].astype(np.int32)
        return (pos, ok) if with_mask else pos

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        cached = self._postings.get(term)
        if cached is None:
            cached = self._positioned(*self._read_postings(term))
            if len(self._postings) < POSTINGS_CACHE_TERMS:
                self._postings[term] = cached
        return cached

    def _read_postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """A term's (chunk ids ascending, tfs). SQLite hands them over as two JSON arrays
        (json_group_array, in C; sqlean.py's SQLite has it): a row per posting through
        Python took 4.3x as long (100k chunks, 20 terms, 246k postings: 351 ms CPU against
        82; the SQLite scan alone 39) and set the garbage collector off every 700 rows.
        The arrays come in the table's (term, chunk) key order; checked, not assumed
        (an ORDER BY inside the aggregate would sort: 275 ms)."""
        return _ascending(*self.db.execute(POSTINGS_JSON, (term,)).fetchone())

    def _positioned(self, chunks: np.ndarray, tfs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A term's (chunk ids, tfs) as ``postings`` gives them: positions in the loaded
        arrays and float32 tfs, postings of chunks not loaded dropped."""
        pos, ok = self.positions(chunks, with_mask=True)
        return pos, tfs.astype(np.float32)[ok]

    def mask(self, key, chunk_ids_of) -> np.ndarray:
        """uint8 allow-mask over positions for a filter ``key`` (cached per generation);
        ``chunk_ids_of()`` gives the allowed chunk ids when it is not cached."""
        mask = self._masks.get(key)
        if mask is None:
            mask = np.zeros(len(self.rowids), dtype=np.uint8)
            mask[self.positions(np.asarray(chunk_ids_of(), np.int64))] = 1
            self._masks[key] = mask
        return mask

    # -- the legs ----------------------------------------------------------------------
    def bm25(self, terms: Counter, n: int, mask=None) -> tuple[np.ndarray, np.ndarray]:
        parts, weights = [], []
        for term, count in sorted(terms.items()):
            pos, tfs = self.postings(term)
            if len(pos):
                parts.append((term, pos, tfs))
                weights.append(float(count))
        if not parts or len(self.rowids) == 0:
            return _empty(n)
        q = lexical.assemble(parts, len(self.rowids))
        pos, scores = self.kernel.bm25_topk(
            q.indptr, q.doc_ids, q.tfs, self.lengths, q.idf,
            np.arange(len(parts), dtype=np.int32), n,
            weights=np.array(weights, dtype=np.float32), k1=lexical.BM25_K1,
            b=lexical.BM25_B, avgdl=self.avgdl, mask=mask)
        return self._ids(pos), scores

    def cosine(self, qvec: np.ndarray, n: int, mask=None) -> tuple[np.ndarray, np.ndarray]:
        if len(self.rowids) == 0:
            return _empty(n)
        matrix = self.ensure_matrix()
        if not self.embedded.all():  # a partial index: the leg runs over embedded chunks
            allowed = self.embedded.astype(np.uint8)
            mask = allowed if mask is None else (allowed & mask)
        query = np.ascontiguousarray(np.asarray(qvec, np.float32).reshape(1, -1))
        if self._int8_pays(len(matrix)):
            if self.int8 is None:
                self.int8 = Int8Scan(self.kernel, matrix)
            pos, scores = self.int8.topk(matrix, query, n, mask,
                                         threads=scan_threads(self.int8.codes.nbytes))
        else:
            self.f32_scans += 1
            pos, scores = self.kernel.cosine_topk(matrix, query, n, mask=mask,
                                                  threads=scan_threads(matrix.nbytes))
        return self._ids(pos[0]), scores[0]

    def _int8_pays(self, rows: int) -> bool:
        """Scan int8 (the f32 answer, proved): big enough, the C kernel, and either the
        copy made already or this generation's f32 scans past INT8_AFTER_SCANS."""
        if rows < INT8_SCAN_MIN_ROWS or not self.kernel.backend().startswith("c/"):
            return False
        return self.int8 is not None or self.f32_scans >= INT8_AFTER_SCANS

    def _ids(self, pos: np.ndarray) -> np.ndarray:
        ok = pos >= 0
        out = np.full(len(pos), -1, np.int64)
        out[ok] = self.rowids[pos[ok]]
        return out

    # -- a server's warm-up (serve/warmup.py): what a process that keeps asking will need --
    def preload_common(self, share: float) -> int:
        """Read and cache, in one SQL, the postings of every term in at least ``share`` of
        the loaded chunks (by its df) and not cached yet; the number of terms cached.

        The common terms are the ones whose first use costs a query the most: at 100k
        chunks a term in every chunk is 100k postings, ~20 ms to read. Scanning ``terms``
        in id order, each term's postings by the key (term, chunk), groups without a sort
        and keeps each array in chunk order (checked anyway, as _read_postings does); the
        same terms named in an IN list took a sort of every posting (1.1 s against 0.42 s
        at 100k chunks, 155 terms, 3.3M postings)."""
        cached, rows = 0, self.db.execute(PRELOAD_JSON, (self._least(share),))
        try:
            for term, chunks, tfs in rows:
                if len(self._postings) >= POSTINGS_CACHE_TERMS:
                    break
                if term not in self._postings:
                    self._postings[term] = self._positioned(*_ascending(chunks, tfs))
                    cached += 1
        finally:
            rows.close()  # a statement left open would hold its read snapshot
        return cached

    def common_terms(self, share: float) -> list[str]:
        """The terms in at least ``share`` of the loaded chunks not cached yet, most
        common first (a re-warm reads them one by one through ``postings``)."""
        rows = self.db.execute("SELECT term FROM terms WHERE df >= ? ORDER BY df DESC",
                               (self._least(share),))
        return [term for (term,) in rows if term not in self._postings]

    def _least(self, share: float) -> int:
        return max(1, int(np.ceil(share * len(self.rowids))))

    def int8_due(self) -> np.ndarray | None:
        """The matrix to make the int8 copy of now, for a process that will keep asking
        (a server: ``_int8_pays`` asked as if past INT8_AFTER_SCANS f32 scans); None when
        there is one already or it would not pay. ``make_int8`` makes it, ``adopt_int8``
        puts it in place; until then the scans go on as they would."""
        if self.int8 is not None or len(self.rowids) == 0:
            return None
        matrix = self.ensure_matrix()
        scans, self.f32_scans = self.f32_scans, max(self.f32_scans, INT8_AFTER_SCANS)
        try:
            return matrix if self._int8_pays(len(matrix)) else None
        finally:
            self.f32_scans = scans

    def make_int8(self, matrix: np.ndarray) -> Int8Scan:
        """The int8 copy of ``matrix`` (the kernels release the GIL: it may be made
        without the lock the index is used under)."""
        return Int8Scan(self.kernel, matrix)

    def adopt_int8(self, matrix: np.ndarray, scan: Int8Scan) -> bool:
        """Use ``scan`` from now on when it was made from the matrix still loaded."""
        if self.matrix is not matrix or self.int8 is not None:
            return False
        self.int8 = scan
        return True


# The postings of the terms with df >= ?, a row per term (KernelIndex.preload_common).
PRELOAD_JSON = ("SELECT t.term, json_group_array(p.chunk), json_group_array(p.tf) FROM terms t "
                "JOIN postings p ON p.term = t.id WHERE t.df >= ? GROUP BY t.id")


def _ascending(chunks_json: str, tfs_json: str) -> tuple[np.ndarray, np.ndarray]:
    """Two JSON arrays (json_group_array's) as (chunk ids ascending, tfs): they come in the
    postings table's (term, chunk) key order, checked, not assumed."""
    chunks, tfs = (np.fromstring(a[1:-1], dtype=np.int64, sep=",") for a in (chunks_json,
                                                                            tfs_json))
    if len(chunks) > 1 and not (chunks[1:] > chunks[:-1]).all():
        order = np.argsort(chunks, kind="stable")
        chunks, tfs = chunks[order], tfs[order]
    return chunks, tfs

"""Related notes: the notes whose chunks lie nearest a given note's, by their vectors.

A note is its chunks' vectors. Every other note is scored by its best chunk against the
note's mean vector (``mean``: one query of the vector leg), or by its best chunk-to-chunk
cosine with the note (``max``: each of the note's chunks asks for its nearest chunks, and
a note keeps its best pair). ``mean`` is the default: on examples/vault it puts more of
a note's own links in its top 5 and top 10, at one query instead of one per chunk
(README, "Related notes"; ``benchmarks/bench_related.py``). The note itself is never listed; ``unlinked`` also
drops the notes it links to or that link to it, to surface connections not yet made.

On a partly embedded index only embedded chunks take part, and the report says so; a
note none of whose chunks has a vector yet is an error naming the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from brainbot.errors import InputError, NotFoundError
from brainbot.index import freshness
from brainbot.store.interface import Store
from brainbot.store.records import ChunkRow, DocumentRow

METHODS = ("max", "mean")
DEFAULT_METHOD = "mean"
POOL = 100  # chunks each query asks for first; widened until k notes are found


@dataclass
class Related:
    """One related note, with its chunk nearest the note."""

    document: DocumentRow
    score: float
    chunk: ChunkRow
    linked: bool
    stale: bool = False

    def to_dict(self) -> dict:
        c = self.chunk
        return {"path": self.document.path, "root": self.document.root,
                "title": self.document.title, "score": round(float(self.score), 6),
                "linked": self.linked, "stale": self.stale, "chunk_id": c.chunk_id,
                "heading_path": c.heading_path, "start_line": c.start_line,
                "end_line": c.end_line, "text": c.text}


@dataclass
class RelatedReport:
    """The related notes of one note, and how much of the index took part."""

    note: DocumentRow
    related: list[Related] = field(default_factory=list)
    note_chunks: int = 0
    note_embedded: int = 0
    index_chunks: int = 0
    index_embedded: int = 0

    @property
    def partial_note(self) -> str | None:
        """The one line a partly embedded index earns."""
        if self.index_embedded >= self.index_chunks:
            return None
        return (f"note: {self.index_embedded:,} of {self.index_chunks:,} chunks embedded; "
                "run `brainbot index` to finish (related notes see only embedded chunks)")

    def to_dict(self) -> dict:
        return {"note": self.note.path, "root": self.note.root,
                "related": [r.to_dict() for r in self.related],
                "partial": self.partial_note}


def related(store: Store, note: str, k: int = 10, *, unlinked: bool = False,
            method: str = DEFAULT_METHOD) -> RelatedReport:
    """The ``k`` notes nearest ``note`` (a path or a wikilink name), best first."""
    if k <= 0:
        raise InputError(f"k must be at least 1, not {k}")
    if method not in METHODS:
        raise InputError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    store.refresh()  # another process may have indexed since
    doc = store.find_note(note)
    own = store.document_vectors(doc.id)
    vectors = [v for _, v in own if v is not None]
    report = RelatedReport(doc, note_chunks=len(own), note_embedded=len(vectors),
                           index_chunks=store.chunk_count(), index_embedded=store.vector_count())
    if not own:
        return report  # an empty note: nothing to compare
    if not vectors:
        raise NotFoundError(f"{doc.path} has no embedded chunks yet ({report.index_embedded:,} "
                            f"of {report.index_chunks:,} chunks embedded); run `brainbot "
                            "index` to finish")
    linked = store.linked_documents(doc.id)
    skip = {doc.id} | (linked if unlinked else set())
    best = _best_chunks(store, _queries(vectors, method), k, skip, len(own),
                        report.index_chunks)
    best.sort(key=lambda sc: (-sc[0], sc[1].document.path, sc[1].document.root))
    report.related = [Related(row.document, score, row, row.document.id in linked)
                      for score, row in best[:k]]
    check = freshness.Freshness()
    for r in report.related:
        r.stale = check.stale(r.document)
    return report


def _queries(vectors: list[np.ndarray], method: str) -> list[np.ndarray]:
    if method == "max":
        return vectors
    mean = np.mean(np.stack(vectors), axis=0)
    norm = float(np.linalg.norm(mean))
    return [mean / norm if norm > 0 else vectors[0]]


def _best_chunks(store: Store, queries, k: int, skip: set[int], own: int, total: int
                 ) -> list[tuple[float, ChunkRow]]:
    """(best score, its chunk) of each document outside ``skip`` among the queries'
    nearest chunks, the pool widened until it holds ``k`` documents (or every chunk)."""
    n = max(POOL, 10 * k) + own
    while True:
        scored: dict[int, float] = {}
        for q in queries:
            ids, scores = store.vector_topk(q, n)
            for i, s in zip(ids.tolist(), scores.tolist()):
                if i >= 0 and np.isfinite(s) and s > scored.get(i, -np.inf):
                    scored[i] = s
        best: dict[int, tuple[float, ChunkRow]] = {}
        for chunk_id, row in store.chunks(list(scored)).items():
            d = row.document.id
            if d not in skip and scored[chunk_id] > best.get(d, (-np.inf, None))[0]:
                best[d] = (scored[chunk_id], row)
        if len(best) >= k or n >= total:
            return list(best.values())
        n *= 4

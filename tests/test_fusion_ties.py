"""RRF's exact ties go to the chunk the legs' scores favour, not to the lower chunk id
(issue 43): a chunk ranked (1, 2) ties one ranked (2, 1) to the last bit."""

from __future__ import annotations

import numpy as np

from brainbot.search.searcher import Searcher, _rrf_ties_by_scores
from brainbot.store.records import ChunkRow


class TwoLegs:
    """A store whose legs are given: bm25 and vector (ids, scores), best first."""

    def __init__(self, bm25, vector) -> None:
        self.legs = {"bm25": bm25, "vector": vector}

    def meta(self) -> dict:
        return {}

    def refresh(self) -> bool:
        return False

    def bm25_topk(self, terms, n, flt=None):
        return _padded(*self.legs["bm25"], n)

    def vector_topk(self, qvec, n, flt=None):
        return _padded(*self.legs["vector"], n)

    def chunks(self, ids):
        return {i: ChunkRow(i, f"c{i}", f"note{i}.md", "/notes", [], 1, 1, 0, 1, "text", None)
                for i in ids}

    def close(self) -> None:
        pass


def _padded(ids, scores, n):
    out_ids, out_scores = np.full(n, -1, np.int64), np.full(n, -np.inf, np.float32)
    out_ids[: len(ids)], out_scores[: len(scores)] = ids, scores
    return out_ids, out_scores


class Vector:
    precision = "int8"

    def embed_query(self, text):
        return np.ones(384, np.float32) / np.sqrt(384)


def _search(store, **kwargs) -> list[int]:
    searcher = Searcher("unused.db", store=store, embedder=Vector())
    return [h.rowid for h in searcher.search("a query", 4, mode="hybrid", **kwargs)]


# Chunk 10 is bm25's first by a hair and the vector leg's second by a wide margin; chunk
# 20 the other way round. Their RRF sums are equal; the scores say 20.
LEGS = (([10, 20, 30], [9.0, 8.9, 1.0]), ([20, 10, 40], [0.9, 0.5, 0.1]))


def test_a_mirrored_tie_goes_to_the_chunk_the_scores_favour():
    assert _search(TwoLegs(*LEGS)) == [20, 10, 30, 40]


def test_untied_results_and_weighted_fusion_keep_the_kernel_order():
    untied = (([10, 20, 30], [9.0, 8.9, 1.0]), ([10, 20, 40], [0.9, 0.5, 0.1]))
    assert _search(TwoLegs(*untied)) == [10, 20, 30, 40]
    assert _search(TwoLegs(*LEGS), fusion="weighted")[:2] == [20, 10]  # its own scores


def test_the_order_from_the_fused_legs():
    from brainbot.kernel import native

    (ids_a, sc_a), (ids_b, sc_b) = (
        (np.array(i, np.int64), np.array(s, np.float32)) for i, s in LEGS)
    fused = native.active().fuse(ids_a, sc_a, ids_b, sc_b, 4)
    assert list(fused.ids) == [10, 20, 30, 40]  # the kernel: the lower id first
    order = _rrf_ties_by_scores(fused, sc_a, sc_b, (1.0, 1.0))
    assert list(fused.ids[order]) == [20, 10, 30, 40]
    # a leg weighed 0 counts for nothing in the tie either: bm25 decides
    order = _rrf_ties_by_scores(fused, sc_a, sc_b, (1.0, 0.0))
    assert list(fused.ids[order][:2]) == [10, 20]

"""int8 scanning with a proof (brainbot.kernel.int8_scan) held equal to the f32 scan.

The oracle is the f32 C kernel itself: ids and scores must be equal bit for bit, ties
(duplicated rows) in the same order, with and without masks. The bound the proof rests
on is checked directly against float64 dot products, on rows built to be hard for it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainbot.kernel import native as K
from brainbot.kernel import reference as R
from brainbot.kernel.int8_scan import Int8Scan

pytestmark = pytest.mark.skipif(not K.available(), reason="brainbot._kernel is not built")
FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-30)
    return np.ascontiguousarray(x, dtype=np.float32)


def data(kind: str, rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    if kind == "random":
        return unit(rng.standard_normal((n, d)))
    if kind == "clustered":  # embedding-like: a shared direction, topics, noise
        centres = rng.standard_normal((30, d))
        x = 0.8 * rng.standard_normal(d) + centres[rng.integers(0, 30, n)]
        return unit(x + 0.6 * rng.standard_normal((n, d)))
    if kind == "duplicates":  # exact ties everywhere, also across the k-th place
        base = unit(rng.standard_normal((max(n // 7, 1), d)))
        return np.ascontiguousarray(base[rng.integers(0, len(base), n)])
    if kind == "near":  # thousands of rows within rounding of each other
        return unit(rng.standard_normal(d) + 1e-4 * rng.standard_normal((n, d)))
    raise AssertionError(kind)


def assert_same_as_f32(scan, m, queries, k, mask):
    for q in queries:
        q = np.ascontiguousarray(q.reshape(1, -1))
        want = K.cosine_topk(m, q, k, mask=mask)
        got = scan.topk(m, q, k, mask)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


@FAST
@given(
    kind=st.sampled_from(["random", "clustered", "duplicates", "near"]),
    n=st.integers(1, 3000),
    d=st.sampled_from([8, 33, 100, 384]),
    k=st.sampled_from([1, 5, 10, 50, 300]),
    masked=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_int8_scan_returns_the_f32_topk(kind, n, d, k, masked, seed):
    rng = np.random.default_rng(seed)
    m = data(kind, rng, n, d)
    mask = (rng.random(n) < 0.5).astype(np.uint8) if masked else None
    queries = np.vstack([m[rng.integers(0, n, 2)] + 0.05, rng.standard_normal((1, d))])
    assert_same_as_f32(Int8Scan(K, m), m, unit(queries), k, mask)


def test_the_proof_answers_most_queries_on_embedding_like_data():
    """Not just a fallback: on realistic data the int8 pool is proved to hold the top-k."""
    rng = np.random.default_rng(1)
    m = data("clustered", rng, 30000, 384)
    scan = Int8Scan(K, m)
    queries = unit(m[rng.integers(0, 30000, 30)] + 0.3 * rng.standard_normal((30, 384)))
    assert_same_as_f32(scan, m, queries, 10, None)
    assert scan.stats["proved"] + scan.stats["widened"] >= 27, scan.stats


def test_near_ties_beyond_the_pool_fall_back_to_the_f32_scan(monkeypatch):
    from brainbot.kernel import int8_scan

    monkeypatch.setattr(int8_scan, "POOL", 64)  # both pools well below the 5000 rows
    rng = np.random.default_rng(2)
    m = data("near", rng, 5000, 64)
    scan = Int8Scan(K, m)
    assert_same_as_f32(scan, m, unit(m[:3] + 1e-5), 10, None)
    assert scan.stats["f32"] == 3, scan.stats


def test_a_pool_that_int8_got_wrong_is_not_accepted(monkeypatch):
    """Rows whose int8 codes lose what makes them the best: a spike at column 0 sets a
    coarse scale, and their small entries, aligned with the query, round to 0. int8 ranks
    a crowd of ordinary rows above them, so the pool misses the true top-k; the proof
    must see that (an unsound check, say without the bound, returns the crowd)."""
    from brainbot.kernel import int8_scan

    monkeypatch.setattr(int8_scan, "POOL", 16)  # pools of 80 and 320 rows for k = 5
    rng = np.random.default_rng(11)
    d = 64
    q = np.r_[0.0, np.ones(d - 1)] / np.sqrt(d - 1)
    spikes = np.hstack([np.ones((40, 1)), 0.0035 * (0.9 + 0.1 * rng.random((40, d - 1)))])
    crowd = rng.standard_normal((1000, d))
    crowd -= np.outer(crowd @ q, q)  # orthogonal to q, then a little along it
    along = np.linspace(0.005, 0.024, 1000)[:, None]  # all below the spikes' ~0.026
    crowd = unit(crowd) * np.sqrt(1 - along**2) + along * q
    m = unit(np.vstack([crowd, spikes]))
    query = unit(q.reshape(1, -1))
    scan = Int8Scan(K, m)
    assert (scan.codes[1000:, 1:] == 0).all()  # the spikes' aligned part is gone in int8
    want = K.cosine_topk(m, query, 5)
    assert (want[0] >= 1000).all()  # the true top-5 are spikes
    got = scan.topk(m, query, 5)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert scan.stats["f32"] == 1, scan.stats


def hard_rows(rng: np.random.Generator, d: int) -> np.ndarray:
    """Rows that stress the quantisation: one-hot, constant, a spike, tiny, rounding
    midpoints (x * 127 / max at .5), mixed scales."""
    rows = [np.eye(d)[0], np.ones(d), np.r_[100.0, rng.standard_normal(d - 1) * 1e-3]]
    rows += [rng.standard_normal(d) * 1e-38, (np.arange(d) % 3 - 1) * (0.5 / 127 + 1)]
    rows += list(rng.standard_normal((40, d)) * rng.choice([1e-3, 1.0, 1e3], (40, 1)))
    return np.ascontiguousarray(np.vstack(rows), dtype=np.float32)


@pytest.mark.parametrize("d", [3, 64, 384, 1500])
def test_the_error_bound_holds(d):
    """|x.q - approx| <= E row by row, the inequality the proof relies on (float64)."""
    rng = np.random.default_rng(d)
    m = hard_rows(rng, d)
    scan = Int8Scan(K, m)
    for q in hard_rows(rng, d)[:12]:
        q = np.ascontiguousarray(q.reshape(1, -1))
        qc, qs = K.quantize_int8(q)
        approx = (scan.codes.astype(np.float64) @ qc[0].astype(np.float64)) * scan.scales * qs[0]
        exact = m.astype(np.float64) @ q[0].astype(np.float64)
        l1 = np.abs(m.astype(np.float64)).sum(axis=1)
        bound = l1 * qs[0] / 2 + np.abs(qc[0]).sum() * qs[0] * scan.scales / 2
        assert np.all(np.abs(exact - approx) <= bound * (1 + 1e-5) + 1e-30)


def test_the_reference_kernel_quantises_queries_alike():
    """The proof quantises the query itself: it must match what the scan does."""
    rng = np.random.default_rng(3)
    q = unit(rng.standard_normal((4, 384)))
    np.testing.assert_array_equal(K.quantize_int8(q)[0], R.quantize_int8(q)[0])


def test_the_sqlite_vector_leg_scans_int8_with_the_f32_answer(examples_db, monkeypatch):
    """The app's vector leg (store/sqlite/arrays.py) above its cut-off: the same chunk
    ids and scores as its f32 scan, with and without a filter mask, pools small enough
    that the proof (not the pool covering everything) decides."""
    from brainbot.kernel import int8_scan
    from brainbot.store.sqlite import arrays
    from brainbot.store.target import open_store

    monkeypatch.setattr(int8_scan, "POOL", 8)
    monkeypatch.setattr(arrays, "INT8_AFTER_SCANS", 0)
    with open_store(examples_db) as store:
        index = store.index
        index.sync(store.generation())
        m = index.ensure_matrix()
        assert len(m) > 3 * 16, "the sample vault is too small for this test"
        rng = np.random.default_rng(4)
        queries = unit(m[rng.integers(0, len(m), 12)] + 0.2 * rng.standard_normal((12, m.shape[1])))
        mask = (rng.random(len(m)) < 0.7).astype(np.uint8)
        for flt in (None, mask):
            monkeypatch.setattr(arrays, "INT8_SCAN_MIN_ROWS", 10**9)
            want = [index.cosine(q, 3, flt) for q in queries]
            assert flt is not None or index.int8 is None  # the f32 scan answered
            monkeypatch.setattr(arrays, "INT8_SCAN_MIN_ROWS", 0)
            got = [index.cosine(q, 3, flt) for q in queries]
            for (wi, ws), (gi, gs) in zip(want, got, strict=True):
                np.testing.assert_array_equal(gi, wi)
                np.testing.assert_array_equal(gs, ws)
        assert index.int8 is not None and index.int8.stats["proved"] > 0, index.int8.stats


def test_the_int8_copy_is_made_only_once_enough_queries_ask(examples_db, monkeypatch):
    """A one-shot query scans f32 (the copy would cost more than it saves); from the
    (INT8_AFTER_SCANS + 1)-th vector query of a generation on, the int8 copy answers,
    with the same ids and scores; a new generation drops it and counts again."""
    from brainbot.kernel import int8_scan
    from brainbot.store.sqlite import arrays
    from brainbot.store.target import open_store

    monkeypatch.setattr(int8_scan, "POOL", 8)
    monkeypatch.setattr(arrays, "INT8_SCAN_MIN_ROWS", 0)
    monkeypatch.setattr(arrays, "INT8_AFTER_SCANS", 3)
    with open_store(examples_db) as store:
        index = store.index
        index.sync(store.generation())
        m = index.ensure_matrix()
        rng = np.random.default_rng(5)
        queries = unit(m[rng.integers(0, len(m), 6)] + 0.2 * rng.standard_normal((6, m.shape[1])))
        want = [K.cosine_topk(m, np.ascontiguousarray(q.reshape(1, -1)), 3) for q in queries]
        for round_ in range(2):
            for i, q in enumerate(queries):
                ids, scores = index.cosine(q, 3)
                assert (index.int8 is not None) == (i >= 3), (round_, i)
                np.testing.assert_array_equal(scores, want[i][1][0])
                np.testing.assert_array_equal(ids, index.rowids[want[i][0][0]])
            assert index.int8.stats["proved"] + index.int8.stats["widened"] > 0
            assert index.sync(index.generation + 1)  # as after an index commit
            assert index.int8 is None and index.f32_scans == 0

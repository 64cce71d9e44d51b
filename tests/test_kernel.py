"""The C search core held equal to its numpy twin (brainbot.kernel.reference).

Cosine scores are compared with a tolerance (BLAS and the C kernels sum in different
orders) and ids exactly, except inside groups of scores that tie within that tolerance.
Everything whose float32 formula is fixed is compared bit for bit: int8 codes, BM25,
fusion. Each C test also runs the forced-scalar path. C tests skip when the extension
is not built.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainbot.errors import KernelError
from brainbot.kernel import native as K
from brainbot.kernel import reference as R
from brainbot.text import lexical

if TYPE_CHECKING:  # mypy: both implementations satisfy what active() promises
    _C_KERNEL: K.SearchKernel = K
    _NUMPY_KERNEL: K.SearchKernel = R

needs_c = pytest.mark.skipif(
    not K.available(), reason="brainbot._kernel is not built: run `pip install -e .`"
)
SIMDS = ["auto", "scalar"]
TOL = 2e-5  # |score difference| allowed between summation orders, for |x| = |q| = 1
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------- helpers


def unit_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return np.ascontiguousarray(x, dtype=np.float32)


def clustered(rng: np.random.Generator, n: int, d: int, topics: int = 40) -> np.ndarray:
    """Embedding-like data: a shared direction, topic centroids, per-row noise."""
    common = rng.standard_normal(d)
    centres = rng.standard_normal((topics, d))
    x = 0.8 * common + centres[rng.integers(0, topics, n)] + 0.7 * rng.standard_normal((n, d))
    return _normalise(x)


def _normalise(x: np.ndarray) -> np.ndarray:
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x, dtype=np.float32)


def assert_valid_topk(ids, scores, true, eligible, k, tol=TOL):
    """ids/scores [k] are a correct top-k of `true` (float64 [n]) over `eligible`."""
    n_ok = int(eligible.sum())
    got = ids[ids >= 0]
    assert got.size == min(k, n_ok), (got.size, k, n_ok)
    assert np.all(ids[got.size :] == -1) and np.all(np.isneginf(scores[got.size :]))
    assert np.unique(got).size == got.size
    assert eligible[got].all()
    np.testing.assert_allclose(scores[: got.size], true[got], atol=tol, rtol=0)
    assert np.all(np.diff(scores[: got.size]) <= 0)  # best first, as returned
    if got.size and got.size < n_ok:
        rest = np.ones(true.size, bool)
        rest[got] = False
        rest &= eligible
        assert true[rest].max() <= true[got].min() + tol


def assert_same_topk(ids1, s1, ids2, s2, tol=TOL):
    """Equal padding and scores (within tol), and equal ids except for order inside a
    run of scores tied within tol; the last run may differ in its members only when it
    touches the k-th place (what lies beyond it is not returned)."""
    ids1, s1, ids2, s2 = (np.atleast_2d(a) for a in (ids1, s1, ids2, s2))
    assert ids1.shape == ids2.shape
    np.testing.assert_array_equal(ids1 < 0, ids2 < 0)
    live = ids1 >= 0
    np.testing.assert_allclose(s1[live], s2[live], atol=tol, rtol=0)
    k = ids1.shape[1]
    for r in range(ids1.shape[0]):
        n = int(live[r].sum())
        a, b = ids1[r, :n], ids2[r, :n]
        ends = [*(np.flatnonzero(np.abs(np.diff(s1[r, :n])) > 2 * tol) + 1).tolist(), n]
        start = 0
        for end in ends:
            if not (end == n and n == k):
                assert set(a[start:end]) == set(b[start:end]), (r, start, end, a, b, s1[r])
            start = end


def make_mask(rng, n, kind):
    if kind == "none":
        return None
    if kind == "off":
        return np.zeros(n, np.uint8)
    if kind == "bool":
        return rng.random(n) < 0.5
    return (rng.random(n) < 0.1).astype(np.uint8)  # sparse


def eligible_of(mask, n):
    return np.ones(n, bool) if mask is None else np.asarray(mask).astype(bool)


DIMS = st.sampled_from([1, 2, 3, 7, 8, 9, 15, 16, 17, 23, 24, 31, 32, 33, 63, 64, 65, 100,
                        127, 128, 129, 384, 385, 1024])


# ----------------------------------------------------------------- cosine, f32


@needs_c
@FAST
@given(
    n=st.integers(0, 70),
    d=DIMS,
    k=st.integers(1, 80),
    q=st.integers(1, 7),
    mask=st.sampled_from(["none", "off", "bool", "sparse"]),
    dup=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_cosine_matches_reference(n, d, k, q, mask, dup, seed):
    rng = np.random.default_rng(seed)
    m = unit_rows(rng, n, d)
    if dup and n >= 4:  # duplicated rows: exact ties that must go to the lower id
        m[n // 2 :] = m[: n - n // 2]
    queries = unit_rows(rng, q, d)
    mk = make_mask(rng, n, mask)
    ref_ids, ref_s = R.cosine_topk(m, queries, k, mask=mk)
    true = queries.astype(np.float64) @ m.astype(np.float64).T
    for simd in SIMDS:
        ids, s = K._cosine_topk(m, queries, k, mk, 0, simd)
        assert ids.shape == (q, k) and ids.dtype == np.int64 and s.dtype == np.float32
        assert_same_topk(ids, s, ref_ids, ref_s)
        for j in range(q):
            assert_valid_topk(ids[j], s[j], true[j], eligible_of(mk, n), k)


@needs_c
@pytest.mark.parametrize("simd", SIMDS)
@pytest.mark.parametrize("q", [1, 5])
@pytest.mark.parametrize("d", [40, 384, 385])
def test_cosine_ties_go_to_lower_id(simd, q, d):
    rng = np.random.default_rng(1)
    base = unit_rows(rng, 5, d)
    # Every row appears 30 times, at every position of a group of 4 rows and of a block.
    m = np.ascontiguousarray(np.tile(base, (30, 1)))
    ids, s = K._cosine_topk(m, base[:q], 12, None, 0, simd)
    for j in range(q):
        live = s[j] == s[j][0]
        assert live.sum() == 12  # the 30 copies of the query's own row tie exactly
        np.testing.assert_array_equal(ids[j], np.arange(12) * 5 + j)


@needs_c
@pytest.mark.parametrize("simd", SIMDS)
def test_batch_equals_single(simd):
    rng = np.random.default_rng(2)
    m, queries = unit_rows(rng, 3000, 384), unit_rows(rng, 70, 384)
    ids, s = K._cosine_topk(m, queries, 10, None, 1, simd)
    for j in range(0, 70, 7):
        one_ids, one_s = K._cosine_topk(m, queries[j], 10, None, 1, simd)
        assert_same_topk(ids[j], s[j], one_ids, one_s)


@needs_c
@pytest.mark.parametrize("simd", SIMDS)
@pytest.mark.parametrize("q", [1, 4])
@pytest.mark.parametrize("mask", ["none", "bool"])
def test_threads_are_bit_identical(simd, q, mask):
    rng = np.random.default_rng(3)
    m, queries = unit_rows(rng, 9000, 64), unit_rows(rng, q, 64)
    m[4500:] = m[:4500]  # ties across the threads' row ranges
    mk = make_mask(rng, 9000, mask)
    one = K._cosine_topk(m, queries, 25, mk, 1, simd)
    for threads in (0, 2, 3, 8):
        many = K._cosine_topk(m, queries, 25, mk, threads, simd)
        np.testing.assert_array_equal(one[0], many[0])
        np.testing.assert_array_equal(one[1], many[1])


@needs_c
@pytest.mark.parametrize("simd", SIMDS)
@pytest.mark.parametrize("q", [1, 4])
def test_int8_threads_are_bit_identical(simd, q):
    rng = np.random.default_rng(13)
    m, queries = unit_rows(rng, 9000, 64), unit_rows(rng, q, 64)
    m[4500:] = m[:4500]  # ties across the threads' row ranges
    codes, scales = K.quantize_int8(m)
    mk = make_mask(rng, 9000, "bool")
    one = K._cosine_topk_int8(codes, scales, m, queries, 25, 0, mk, 1, simd)[:2]
    for threads in (0, 2, 3, 8):
        many = K._cosine_topk_int8(codes, scales, m, queries, 25, 0, mk, threads, simd)[:2]
        np.testing.assert_array_equal(one[0], many[0])
        np.testing.assert_array_equal(one[1], many[1])


@needs_c
@pytest.mark.parametrize("simd", SIMDS)
@pytest.mark.parametrize("d", [7, 33, 100, 384, 385])
def test_unmasked_scan_equals_an_all_true_mask(simd, d):
    """Without a mask, one query reads the rows without an index: the same bits as with
    a mask that allows every row, whatever the thread count."""
    rng = np.random.default_rng(9)
    m, query = unit_rows(rng, 3001, d), unit_rows(rng, 1, d)
    want = K._cosine_topk(m, query, 40, np.ones(3001, np.uint8), 1, simd)
    for threads in (1, 2, 3):
        got = K._cosine_topk(m, query, 40, None, threads, simd)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


@needs_c
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_large_k_spills_and_keeps_the_same_items(threads):
    """From k = 1024 (BB_SPILL_MIN) a heap buffers what beats its root and selects in
    batches: ids, order and scores must be what sorting every row's score gives, ties
    (every row here twice) by id, with and without a mask."""
    rng = np.random.default_rng(9)
    m = unit_rows(rng, 6000, 48)
    m[3000:] = m[:3000]
    q = unit_rows(rng, 1, 48)
    mask = (rng.random(6000) < 0.7).astype(np.uint8)
    for mk in (None, mask):
        every = K._cosine_topk(m, q, 6000, mk, 1, "auto")  # never full: no spill
        for k in (1024, 1500, 2999, 3001, 4100):
            got = K._cosine_topk(m, q, k, mk, threads, "auto")
            np.testing.assert_array_equal(got[0][0], every[0][0][:k])
            np.testing.assert_array_equal(got[1][0], every[1][0][:k])
    codes, scales = R.quantize_int8(m)
    for pool in (1024, 2500):
        ids, _, floor = R.cosine_topk_int8_floor(codes, scales, m, q, pool, pool=pool, mask=mask)
        got, _, got_floor = K._cosine_topk_int8(codes, scales, m, q, pool, pool, mask, threads,
                                                "auto")
        assert set(got[0].tolist()) == set(ids[0].tolist())
        assert got_floor[0] == floor[0]


@needs_c
def test_simd_and_scalar_agree_on_large_input():
    rng = np.random.default_rng(4)
    m, queries = unit_rows(rng, 20000, 384), unit_rows(rng, 3, 384)
    for q in (queries[:1], queries):
        b = K._cosine_topk(m, q, 50, None, 0, "scalar")
        for simd in SIMDS:
            assert_same_topk(*K._cosine_topk(m, q, 50, None, 0, simd), *b)


@needs_c
def test_one_dimensional_query_is_a_batch_of_one():
    rng = np.random.default_rng(5)
    m = unit_rows(rng, 50, 8)
    ids, s = K.cosine_topk(m, m[3], 3)
    assert ids.shape == (1, 3) and ids[0, 0] == 3


# ------------------------------------------------------------------------- int8


def quant_rows(rng: np.random.Generator, n: int, d: int, kind: str) -> np.ndarray:
    """Rows to quantise. "unit": unit rows at a random scale. "halves": a +-127 entry
    makes 127 / max |x| exactly 1, and the other entries are k + 0.5, so every code is a
    rounding tie (AVX2's cvtps, rintf and np.rint must all round half to even). "tiny":
    max |x| below 2**-100, down to subnormals, where 127 / max |x| would overflow."""
    if kind == "tiny":
        scale = np.float32(2.0 ** rng.uniform(-149, -100))
        return np.ascontiguousarray(unit_rows(rng, n, d) * scale)
    if kind == "halves":
        m = rng.integers(-127, 127, (n, d)).astype(np.float32) + np.float32(0.5)
        if n:
            m[np.arange(n), rng.integers(0, d, n)] = rng.choice([-127, 127], n)
        return np.ascontiguousarray(m)
    return np.ascontiguousarray(unit_rows(rng, n, d) * np.float32(rng.uniform(0.1, 10)))


@needs_c
@FAST
@given(
    n=st.integers(0, 60),
    d=DIMS,
    kind=st.sampled_from(["unit", "halves", "tiny"]),
    zero_row=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_quantize_is_bit_identical(n, d, kind, zero_row, seed):
    """The AVX2 path (auto, on this machine), the scalar C twin and numpy give the same
    bytes: d covers the 32-wide AVX2 body, its scalar tail, and both alone."""
    m = quant_rows(np.random.default_rng(seed), n, d, kind)
    if zero_row and n:
        m[0] = 0
    c_ref, s_ref = R.quantize_int8(m)
    for simd in SIMDS:
        c, s = K._quantize_int8(m, simd)
        assert c.dtype == np.int8 and s.dtype == np.float32 and c.shape == m.shape
        np.testing.assert_array_equal(c, c_ref, err_msg=simd)
        np.testing.assert_array_equal(s, s_ref, err_msg=simd)
    if n:
        assert np.abs(c_ref.astype(int)).max() <= 127
    np.testing.assert_array_equal(K.quantize_int8(m)[0], c_ref)  # the public entry point


@needs_c
@FAST
@given(
    n=st.integers(0, 70),
    d=DIMS,
    k=st.integers(1, 30),
    q=st.integers(1, 4),
    pool=st.sampled_from([0, 1, 5, 40]),
    mask=st.sampled_from(["none", "off", "bool", "sparse"]),
    seed=st.integers(0, 2**31 - 1),
)
def test_int8_matches_reference(n, d, k, q, pool, mask, seed):
    rng = np.random.default_rng(seed)
    m, queries = unit_rows(rng, n, d), unit_rows(rng, q, d)
    if n >= 6:
        m[n // 2 :] = m[: n - n // 2]  # ties in the approximate and the exact scores
    codes, scales = R.quantize_int8(m)
    mk = make_mask(rng, n, mask)
    ref = R.cosine_topk_int8(codes, scales, m, queries, k, pool=pool, mask=mk)
    for simd in SIMDS:
        got = K._cosine_topk_int8(codes, scales, m, queries, k, pool, mk, 0, simd)[:2]
        assert_same_topk(*got, *ref)


@needs_c
@FAST
@given(n=st.integers(1, 300), d=DIMS, k=st.integers(1, 12), kind=st.sampled_from(["unit", "halves"]),
       mask=st.sampled_from(["none", "sparse"]), seed=st.integers(0, 2**31 - 1))
def test_int8_pool_is_the_same_rows_on_every_path(n, d, k, kind, mask, seed):
    """The pool is the best `pool` rows by int8 score, an exact integer dot times the
    row's scale: every path (VNNI, AVX2, scalar, numpy) must pick the same rows, ties by
    id included. pool = k, so the returned ids are the pool itself."""
    rng = np.random.default_rng(seed)
    m, query = quant_rows(rng, n, d, kind), unit_rows(rng, 1, d)
    if n >= 6:
        m[n // 2 :] = m[: n - n // 2]  # equal int8 scores: the lower id must win
    codes, scales = R.quantize_int8(m)
    mk = make_mask(rng, n, mask)
    ids, _, floor = R.cosine_topk_int8_floor(codes, scales, m, query, k, pool=k, mask=mk)
    want = set(ids[0].tolist())
    allowed = n if mk is None else int(np.count_nonzero(mk))
    assert (floor[0] == -np.inf) == (allowed < k or k >= n)  # -inf: the pool is not full
    for simd in SIMDS:
        got, _, got_floor = K._cosine_topk_int8(codes, scales, m, query, k, k, mk, 0, simd)
        assert set(got[0].tolist()) == want, simd
        assert got_floor.view(np.int32)[0] == floor.view(np.int32)[0], simd  # the same bits


@needs_c
@pytest.mark.parametrize("simd", SIMDS)
@pytest.mark.parametrize("d", [100, 384])
def test_int8_scores_are_the_exact_single_query_scores(simd, d):
    rng = np.random.default_rng(6)
    m, queries = unit_rows(rng, 5000, d), unit_rows(rng, 6, d)
    codes, scales = K.quantize_int8(m)
    ids, s = K._cosine_topk_int8(codes, scales, m, queries, 10, 0, None, 0, simd)[:2]
    for j in range(6):
        one_ids, one_s = K._cosine_topk(m, queries[j], 10, None, 0, simd)
        np.testing.assert_array_equal(ids[j], one_ids[0])
        np.testing.assert_array_equal(s[j], one_s[0])


def _recall_at_10(m, queries, threads=0):
    codes, scales = K.quantize_int8(m)
    exact, _ = K.cosine_topk(m, queries, 10, threads=threads)
    approx, _ = K.cosine_topk_int8(codes, scales, m, queries, 10, threads=threads)
    return np.mean([len(set(a) & set(e)) / 10 for a, e in zip(approx, exact, strict=True)])


@needs_c
def test_int8_recall_random():
    rng = np.random.default_rng(7)
    assert _recall_at_10(unit_rows(rng, 20000, 384), unit_rows(rng, 40, 384)) >= 0.99


@needs_c
def test_int8_recall_realistic():
    rng = np.random.default_rng(8)
    m = clustered(rng, 20000, 384)
    noisy = m[rng.integers(0, 20000, 40)] + 0.05 * rng.standard_normal((40, 384)).astype(np.float32)
    assert _recall_at_10(m, _normalise(noisy)) == 1.0
    assert _recall_at_10(m, clustered(rng, 40, 384)) == 1.0


# ------------------------------------------------------------------------- BM25


def random_postings(rng, n_docs, n_terms, max_tf=4, ties=False):
    """CSR postings with strictly increasing doc ids per term."""
    rows, tfs = [], []
    for _ in range(n_terms):
        df = int(rng.integers(0, n_docs + 1)) if n_docs else 0
        docs = np.sort(rng.choice(n_docs, size=df, replace=False)) if df else np.zeros(0, int)
        rows.append(docs)
        tf = np.ones(df) if ties else rng.integers(1, max_tf + 1, df)
        tfs.append(tf)
    indptr = np.zeros(n_terms + 1, np.int64)
    indptr[1:] = np.cumsum([r.size for r in rows])
    doc_ids = np.concatenate(rows).astype(np.int32) if rows else np.zeros(0, np.int32)
    tf = np.concatenate(tfs).astype(np.float32) if tfs else np.zeros(0, np.float32)
    if ties:
        doc_len = np.full(n_docs, 10, np.float32)
    else:
        doc_len = rng.integers(1, 300, n_docs).astype(np.float32)
    df = np.diff(indptr)
    idf = np.log1p((n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
    return indptr, doc_ids, tf, doc_len, idf


@needs_c
@FAST
@given(
    n_docs=st.integers(0, 150),
    n_terms=st.integers(1, 12),
    m=st.integers(0, 7),
    k=st.integers(1, 200),
    ties=st.booleans(),
    weighted=st.booleans(),
    mask=st.sampled_from(["none", "off", "bool", "sparse"]),
    seed=st.integers(0, 2**31 - 1),
)
def test_bm25_is_bit_identical(n_docs, n_terms, m, k, ties, weighted, mask, seed):
    rng = np.random.default_rng(seed)
    post = random_postings(rng, n_docs, n_terms, ties=ties)
    qt = rng.integers(0, n_terms, m).astype(np.int32)  # repeats allowed
    w = rng.uniform(0.2, 2, m).astype(np.float32) if weighted else None
    mk = make_mask(rng, n_docs, mask)
    kw = dict(weights=w, k1=1.2, b=0.75, mask=mk)
    ref = R.bm25_topk(*post, qt, k, **kw)
    for simd in SIMDS:
        got = K._bm25_topk(*post, qt, k, w, 1.2, 0.75, None, mk, simd)
        np.testing.assert_array_equal(got[0], ref[0])
        np.testing.assert_array_equal(got[1], ref[1])
    ids, s = ref
    live = ids >= 0
    assert np.all(np.diff(s[live]) <= 0)
    tie = np.flatnonzero(np.diff(s[live]) == 0)
    assert np.all(ids[tie] < ids[tie + 1])  # equal scores: lower id first


def test_bm25_formula_on_a_hand_example():
    # one term, two docs: score = idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avgdl))
    indptr = np.array([0, 2], np.int64)
    ids, s = R.bm25_topk(
        indptr,
        np.array([0, 1], np.int32),
        np.array([1, 3], np.float32),
        np.array([10, 30], np.float32),
        np.array([2.0], np.float32),
        np.array([0], np.int32),
        3,
        k1=1.2,
        b=0.75,
        avgdl=20.0,
    )
    want = [
        2 * 3 * 2.2 / (3 + 1.2 * (0.25 + 0.75 * 1.5)),
        2 * 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 0.5)),
    ]
    np.testing.assert_array_equal(ids, [1, 0, -1])
    np.testing.assert_allclose(s[:2], want, rtol=1e-6)


@needs_c
def test_bm25_default_avgdl_and_parameters():
    rng = np.random.default_rng(9)
    post = random_postings(rng, 500, 20)
    qt = np.array([1, 2, 3], np.int32)
    a = K.bm25_topk(*post, qt, 10)
    explicit = dict(k1=lexical.BM25_K1, b=lexical.BM25_B, avgdl=float(post[3].mean()))
    b = K.bm25_topk(*post, qt, 10, **explicit)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[0], R.bm25_topk(*post, qt, 10)[0])
    np.testing.assert_array_equal(a[0], R.bm25_topk(*post, qt, 10, **explicit)[0])


@pytest.mark.parametrize("impl", [K, R])
def test_bm25_defaults_are_the_apps_constants(impl):
    """One definition: the wrappers default to what search/searcher.py passes explicitly."""
    params = inspect.signature(impl.bm25_topk).parameters
    assert params["k1"].default is lexical.BM25_K1
    assert params["b"].default is lexical.BM25_B


# ----------------------------------------------------------------------- fusion


def random_leg(rng, n, id_space):
    ids = rng.integers(-1, id_space, n).astype(np.int64)  # -1 padding and repeats
    scores = np.sort(
        rng.choice([0.5, 1.0, 2.0, 3.5], n) if rng.random() < 0.3 else rng.uniform(-5, 5, n)
    )[::-1].astype(np.float32)
    return ids, np.ascontiguousarray(scores)


@needs_c
@FAST
@given(
    na=st.integers(0, 60),
    nb=st.integers(0, 60),
    k=st.integers(1, 130),
    method=st.sampled_from(["rrf", "weighted"]),
    rrf_k=st.sampled_from([0.0, 1.0, 60.0]),
    wa=st.sampled_from([1.0, 0.5, 2.0]),
    seed=st.integers(0, 2**31 - 1),
)
def test_fuse_is_bit_identical(na, nb, k, method, rrf_k, wa, seed):
    rng = np.random.default_rng(seed)
    a, b = random_leg(rng, na, 50), random_leg(rng, nb, 50)
    kw = dict(method=method, rrf_k=rrf_k, weight_a=wa, weight_b=1.0)
    got, ref = K.fuse(*a, *b, k, **kw), R.fuse(*a, *b, k, **kw)
    for g, r in zip(got, ref, strict=True):
        assert g.dtype == r.dtype and g.shape == (k,)
        np.testing.assert_array_equal(g, r)
    n = int((got.ids >= 0).sum())
    assert np.all(got.ids[n:] == -1) and np.all(np.isneginf(got.scores[n:]))
    assert np.all(got.rank_a[n:] == 0) and np.all(np.isnan(got.score_a[n:]))
    kept = {i for i in np.concatenate([a[0], b[0]]).tolist() if i >= 0}
    assert n == min(k, len(kept))


@pytest.mark.parametrize("impl", [R, pytest.param(K, marks=needs_c)])
def test_fuse_hand_example(impl):
    a = (np.array([10, 20, 30], np.int64), np.array([3.0, 2.0, 1.0], np.float32))
    b = (np.array([30, 40, -1], np.int64), np.array([0.9, 0.1, 0.0], np.float32))
    f = impl.fuse(*a, *b, 5, rrf_k=60.0)
    assert f.ids.tolist() == [30, 10, 20, 40, -1]
    assert f.scores[0] == np.float32(1 / 63) + np.float32(1 / 61)
    assert f.rank_a.tolist() == [3, 1, 2, 0, 0] and f.rank_b.tolist() == [1, 0, 0, 2, 0]
    assert np.isnan(f.score_b[1]) and f.score_a[0] == 1.0
    w = impl.fuse(*a, *b, 4, method="weighted", weight_a=1.0, weight_b=2.0)
    assert w.ids.tolist() == [30, 10, 20, 40]  # 0 + 2*1, 1, 0.5, 2*0
    np.testing.assert_array_equal(w.scores, np.array([2.0, 1.0, 0.5, 0.0], np.float32))


# ----------------------------------------------------------------- bad arguments

M = unit_rows(np.random.default_rng(10), 20, 8)
Q = unit_rows(np.random.default_rng(11), 2, 8)
NANQ = Q.copy()
NANQ[0, 3] = np.nan
CODES, SCALES = R.quantize_int8(M)

BAD_COSINE = {
    "k=0": lambda f: f(M, Q, 0),
    "k<0": lambda f: f(M, Q, -3),
    "k float": lambda f: f(M, Q, 2.0),
    "k bool": lambda f: f(M, Q, True),
    "matrix f64": lambda f: f(M.astype(np.float64), Q, 3),
    "queries f64": lambda f: f(M, Q.astype(np.float64), 3),
    "matrix list": lambda f: f(M.tolist(), Q, 3),
    "matrix strided": lambda f: f(M[:, ::2], Q[:, ::2], 3),
    "queries strided": lambda f: f(M, np.tile(Q, (1, 2))[:, ::2], 3),
    "matrix 1-D": lambda f: f(M[0], Q, 3),
    "dim mismatch": lambda f: f(M, Q[:, :7].copy(), 3),
    "nan query": lambda f: f(M, NANQ, 3),
    "inf query": lambda f: f(M, np.full((1, 8), np.inf, np.float32), 3),
    "mask length": lambda f: f(M, Q, 3, mask=np.ones(19, np.uint8)),
    "mask dtype": lambda f: f(M, Q, 3, mask=np.ones(20, np.float32)),
    "threads<0": lambda f: f(M, Q, 3, threads=-1),
}


@pytest.mark.parametrize("impl", [R, pytest.param(K, marks=needs_c)])
@pytest.mark.parametrize("case", sorted(BAD_COSINE))
def test_bad_cosine_arguments(impl, case):
    with pytest.raises(KernelError):
        BAD_COSINE[case](impl.cosine_topk)
    with pytest.raises(KernelError):  # the same checks guard the int8 path
        BAD_COSINE[case](lambda m, q, k, **kw: impl.cosine_topk_int8(CODES, SCALES, m, q, k, **kw))


@pytest.mark.parametrize("impl", [R, pytest.param(K, marks=needs_c)])
def test_bad_int8_arguments(impl):
    with pytest.raises(KernelError):
        impl.cosine_topk_int8(CODES, SCALES, M, Q, 3, pool=-1)
    with pytest.raises(KernelError):
        impl.cosine_topk_int8(CODES[:5], SCALES, M, Q, 3)
    with pytest.raises(KernelError):
        impl.cosine_topk_int8(CODES.astype(np.int16), SCALES, M, Q, 3)
    with pytest.raises(KernelError):
        impl.quantize_int8(np.full((2, 3), np.nan, np.float32))


POST = random_postings(np.random.default_rng(12), 30, 5)
QT = np.array([0, 1], np.int32)


def _bad_doc_ids():
    ids = POST[1].copy()
    ids[-1] = 999
    return (POST[0], ids, *POST[2:])


BAD_BM25 = {
    "k=0": lambda f: f(*POST, QT, 0),
    "term out of range": lambda f: f(*POST, np.array([5], np.int32), 3),
    "negative term": lambda f: f(*POST, np.array([-1], np.int32), 3),
    "query int64": lambda f: f(*POST, QT.astype(np.int64), 3),
    "doc_ids int64": lambda f: f(POST[0], POST[1].astype(np.int64), *POST[2:], QT, 3),
    "tfs f64": lambda f: f(*POST[:2], POST[2].astype(np.float64), *POST[3:], QT, 3),
    "indptr short": lambda f: f(POST[0][:-1], *POST[1:], QT, 3),
    "doc id out of range": lambda f: f(*_bad_doc_ids(), np.arange(5, dtype=np.int32), 3),
    "k1<0": lambda f: f(*POST, QT, 3, k1=-1.0),
    "b>1": lambda f: f(*POST, QT, 3, b=1.5),
    "avgdl 0": lambda f: f(*POST, QT, 3, avgdl=0.0),
    "avgdl nan": lambda f: f(*POST, QT, 3, avgdl=float("nan")),
    "nan weight": lambda f: f(*POST, QT, 3, weights=np.array([1, np.nan], np.float32)),
    "weights length": lambda f: f(*POST, QT, 3, weights=np.ones(3, np.float32)),
    "mask length": lambda f: f(*POST, QT, 3, mask=np.ones(3, np.uint8)),
}


@pytest.mark.parametrize("impl", [R, pytest.param(K, marks=needs_c)])
@pytest.mark.parametrize("case", sorted(BAD_BM25))
def test_bad_bm25_arguments(impl, case):
    with pytest.raises(KernelError):
        BAD_BM25[case](impl.bm25_topk)


LEG = (np.array([1, 2], np.int64), np.array([1.0, 0.5], np.float32))
BAD_FUSE = {
    "k=0": lambda f: f(*LEG, *LEG, 0),
    "method": lambda f: f(*LEG, *LEG, 3, method="max"),
    "length": lambda f: f(LEG[0], LEG[1][:1].copy(), *LEG, 3),
    "ids int32": lambda f: f(LEG[0].astype(np.int32), LEG[1], *LEG, 3),
    "rrf_k<0": lambda f: f(*LEG, *LEG, 3, rrf_k=-1.0),
    "nan weight": lambda f: f(*LEG, *LEG, 3, weight_a=float("nan")),
    "nan score, weighted": lambda f: f(
        LEG[0], np.array([np.nan, 1], np.float32), *LEG, 3, method="weighted"
    ),
}


@pytest.mark.parametrize("impl", [R, pytest.param(K, marks=needs_c)])
@pytest.mark.parametrize("case", sorted(BAD_FUSE))
def test_bad_fuse_arguments(impl, case):
    with pytest.raises(KernelError):
        BAD_FUSE[case](impl.fuse)


@needs_c
def test_c_status_codes():
    """The C layer itself refuses bad arguments (not only the Python checks)."""
    from brainbot._kernel import ffi, lib

    ids, sc = ffi.new("int64_t[4]"), ffi.new("float[4]")
    m, q = ffi.from_buffer("float[]", M), ffi.from_buffer("float[]", Q)
    assert lib.bb_cosine_topk(m, 20, 8, q, 1, 0, ffi.NULL, 0, 0, ids, sc) == lib.BB_ERR_K
    assert lib.bb_cosine_topk(ffi.NULL, 20, 8, q, 1, 4, ffi.NULL, 0, 0, ids, sc) == lib.BB_ERR_NULL
    assert lib.bb_cosine_topk(m, 20, 0, q, 1, 4, ffi.NULL, 0, 0, ids, sc) == lib.BB_ERR_SHAPE
    assert lib.bb_cosine_topk(m, 20, 8, q, 1, 4, ffi.NULL, 0, 7, ids, sc) == lib.BB_ERR_ARG
    assert (
        lib.bb_cosine_topk(
            m, 20, 8, ffi.from_buffer("float[]", NANQ), 1, 4, ffi.NULL, 0, 0, ids, sc
        )
        == lib.BB_ERR_NAN
    )
    assert (
        lib.bb_fuse(
            ffi.NULL,
            ffi.NULL,
            0,
            ffi.NULL,
            ffi.NULL,
            0,
            4,
            9,
            60.0,
            1.0,
            1.0,
            ids,
            sc,
            ffi.new("int32_t[4]"),
            ffi.new("float[4]"),
            ffi.new("int32_t[4]"),
            ffi.new("float[4]"),
        )
        == lib.BB_ERR_ARG
    )
    codes, scales = ffi.new("int8_t[160]"), ffi.new("float[20]")
    assert lib.bb_quantize_int8(m, 20, 8, 7, codes, scales) == lib.BB_ERR_ARG
    assert lib.bb_quantize_int8(m, 20, 8, lib.BB_SIMD_SCALAR, codes, scales) == lib.BB_OK
    assert ffi.string(lib.bb_strerror(lib.BB_ERR_K)) == b"k must be > 0"


# ------------------------------------------------------------- module plumbing


def test_reference_backend_and_pool():
    assert R.backend() == "numpy"
    assert R.default_pool(10) == 64 and R.default_pool(100) == 400


@needs_c
def test_kernel_backend_and_active():
    assert K.backend() in ("c/avx2-fma", "c/neon", "c/scalar")
    assert K.backend("scalar") == "c/scalar"
    assert K.active() is K
    from brainbot._kernel import lib

    assert all(lib.bb_default_pool(k) == R.default_pool(k) for k in (1, 10, 16, 17, 100))


PROTOCOL = sorted(
    n for n, v in vars(K.SearchKernel).items() if inspect.isfunction(v) and n[0] != "_"
)


def _params(fn, drop_self=False):
    ps = list(inspect.signature(fn).parameters.values())[1 if drop_self else 0 :]
    return [(p.name, p.kind, p.default) for p in ps]


@pytest.mark.parametrize("impl", [K, R], ids=["kernel", "reference"])
@pytest.mark.parametrize("name", PROTOCOL)
def test_both_kernels_match_the_protocol(impl, name):
    """Names, kinds and defaults of every SearchKernel member, as the modules define
    them (mypy checks the types: test_protocol_and_stub_type_check)."""
    want = _params(getattr(K.SearchKernel, name), drop_self=True)
    got = _params(getattr(impl, name))
    assert got[: len(want)] == want
    assert all(default is not inspect.Parameter.empty for _, _, default in got[len(want) :])


@pytest.mark.slow
def test_protocol_and_stub_type_check(tmp_path):
    """mypy accepts both modules as a SearchKernel (the TYPE_CHECKING block above), and
    stubtest finds kernel.pyi in step with kernel/native.py. Skipped where mypy is not
    installed (it is not a test dependency)."""
    pytest.importorskip("mypy")
    root = Path(__file__).resolve().parent.parent
    config = tmp_path / "mypy.ini"  # onnxruntime, reached through brainbot.embed, has no stubs
    config.write_text("[mypy]\nignore_missing_imports = True\n")
    common = ["--config-file", str(config), "--cache-dir", str(tmp_path / "cache")]
    for args in (
        ["-m", "mypy", *common, "tests/test_kernel.py"],
        ["-m", "mypy.stubtest", "--mypy-config-file", str(config), "brainbot.kernel.native"],
    ):
        run = subprocess.run([sys.executable, *args], cwd=root, capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr


def test_missing_extension_falls_back_with_one_warning():
    code = (
        "import sys, warnings\n"
        "sys.modules['brainbot._kernel'] = None\n"
        "from brainbot.kernel import native as kernel, reference\n"
        "assert not kernel.available()\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    assert kernel.active() is reference and kernel.active() is reference\n"
        "assert len(w) == 1 and 'pip install -e .' in str(w[0].message), w\n"
        "for call in (lambda: kernel.cosine_topk(None, None, 1), kernel.backend):\n"
        "    try:\n"
        "        call()\n"
        "    except ImportError as e:\n"
        "        assert 'pip install -e .' in str(e)\n"
        "    else:\n"
        "        raise SystemExit('no ImportError')\n"
    )
    root = Path(__file__).resolve().parent.parent  # import this checkout's brainbot
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"), reason="Linux only")
def test_auto_threads_honour_the_affinity_mask():
    """Pinned to one CPU (taskset -c 0), an automatic scan stays on one thread, however
    many CPUs are online: the CPU count is read from the sched affinity mask."""
    code = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
        "from brainbot.kernel import native as K; "
        "print(K.resolve_threads(0, 10**7, 10**10))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"


@pytest.mark.parametrize("simd", SIMDS)
@pytest.mark.parametrize("streams", [0, 2, 4])
@pytest.mark.parametrize("n", [0, 7, 64, 1023, 4096 * 3 + 5, 200_003])
def test_the_bandwidth_probe_reads_every_element_once(simd, streams, n):
    """bb_stream_sum (the benchmarks' bound) sums the whole array, its ragged tail included,
    however it splits the read into threads and streams."""
    x = np.random.default_rng(n).integers(1, 4, n).astype(np.float32)  # exact partial sums
    for threads in (1, 2):
        assert K.stream_sum(x, threads=threads, simd=simd, streams=streams) == int(x.sum())


def test_the_bandwidth_probe_refuses_other_stream_counts():
    with pytest.raises(KernelError):
        K.stream_sum(np.ones(100, np.float32), streams=3)

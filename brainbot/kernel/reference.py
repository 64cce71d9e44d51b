"""The search kernels in plain numpy: test oracle, benchmark baseline and fallback.

Every function here has the signature and the semantics of its twin in
`brainbot.kernel.native` (the C extension): same validation (bad input raises `KernelError`),
same tie rule (equal scores: the lower id wins), same padding (ids -1, scores -inf),
and the same float32 formulas where the result must match bit for bit (int8
quantisation, the int8 candidate pool, BM25 and fusion scores). Float dot products are
left to BLAS, so cosine scores match the C kernel to rounding, not bit for bit.

What this module deliberately does not do: threads (numpy's BLAS has its own), SIMD
selection, or anything faster than a clear numpy expression. The argument checks live
here too, because both implementations must refuse exactly the same inputs.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from brainbot.errors import KernelError

# The BM25 defaults are the app's measured ones, defined once in lexical (which imports
# only numpy and the stemmer, so the kernel layer still depends on no module above it).
from brainbot.text.lexical import BM25_B, BM25_K1

__all__ = [
    "Fused",
    "backend",
    "bm25_topk",
    "cosine_topk",
    "cosine_topk_int8",
    "cosine_topk_int8_floor",
    "default_pool",
    "fuse",
    "quantize_int8",
]

# The int8 candidate pool when pool=0: max(POOL_PER_K * k, POOL_MIN) (csrc/quant.c says
# why; the two must agree).
POOL_MIN = 64
POOL_PER_K = 4
# Integer dot products of int8 codes (|code| <= 127) are exact in float32 sums while
# d * 127 * 127 < 2**24, i.e. d <= 1040; past that the oracle sums in float64.
_F32_EXACT_INT8_DIM = (1 << 24) // (127 * 127)
_F32 = np.float32
# bb_quantize_int8's lift for rows of tiny values (BB_QUANT_TINY / BB_QUANT_LIFT).
_QUANT_TINY = _F32(2.0**-100)
_QUANT_LIFT = _F32(2.0**100)


class Fused(NamedTuple):
    """The result of `fuse`: the final top-k and where each hit came from."""

    ids: np.ndarray  # int64 [k], -1 padded
    scores: np.ndarray  # float32 [k], fused score, -inf padded
    rank_a: np.ndarray  # int32 [k], 1-based rank in leg A, 0 if absent
    score_a: np.ndarray  # float32 [k], raw score in leg A, NaN if absent
    rank_b: np.ndarray  # int32 [k]
    score_b: np.ndarray  # float32 [k]


def backend() -> str:
    """The name of this implementation."""
    return "numpy"


def default_pool(k: int) -> int:
    """The int8 candidate pool used when pool=0."""
    return max(POOL_PER_K * int(k), POOL_MIN)


# --------------------------------------------------------------------------- checks


def _array(name: str, a: object, dtype: type, ndim: int) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise KernelError(f"{name} must be a numpy array, not {type(a).__name__}")
    if a.dtype != np.dtype(dtype):
        raise KernelError(f"{name} must have dtype {np.dtype(dtype).name}, not {a.dtype}")
    if a.ndim != ndim:
        raise KernelError(f"{name} must be {ndim}-D, got shape {a.shape}")
    if not a.flags.c_contiguous:
        raise KernelError(f"{name} must be C-contiguous (use np.ascontiguousarray)")
    return a


def check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise KernelError(f"k must be an int, not {type(k).__name__}")
    if k <= 0:
        raise KernelError(f"k must be > 0, got {k}")
    return int(k)


def check_threads(threads: object) -> int:
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 0:
        raise KernelError(f"threads must be an int >= 0 (0 = auto), got {threads!r}")
    return int(threads)


def check_mask(mask: object, n: int) -> np.ndarray | None:
    """None, or the mask as a uint8 [n] array (a bool array is viewed, not copied)."""
    if mask is None:
        return None
    if isinstance(mask, np.ndarray) and mask.dtype == np.bool_:
        mask = mask.view(np.uint8)
    m = _array("mask", mask, np.uint8, 1)
    if m.shape[0] != n:
        raise KernelError(f"mask has {m.shape[0]} entries, expected {n}")
    return m


def check_matrix(matrix: object) -> np.ndarray:
    m = _array("matrix", matrix, np.float32, 2)
    if m.shape[1] == 0:
        raise KernelError("matrix must have at least one column")
    return m


def check_queries(queries: object, d: int, deep: bool = True) -> np.ndarray:
    """queries as float32 [q, d] (a 1-D [d] query becomes [1, d]); must be finite.

    deep=False skips the value checks the C kernels make themselves (finiteness here).
    """
    if isinstance(queries, np.ndarray) and queries.ndim == 1:
        queries = queries.reshape(1, -1)
    q = _array("queries", queries, np.float32, 2)
    if q.shape[1] != d:
        raise KernelError(f"queries have dimension {q.shape[1]}, the matrix has {d}")
    if deep and not np.isfinite(q).all():
        raise KernelError("queries contain NaN or infinity")
    return q


def check_cosine(matrix, queries, k, mask, threads, deep=True):
    m = check_matrix(matrix)
    return (
        m,
        check_queries(queries, m.shape[1], deep),
        check_k(k),
        check_mask(mask, m.shape[0]),
        check_threads(threads),
    )


def check_int8(codes, scales, matrix, queries, k, pool, mask, threads, deep=True):
    m, q, k, mk, t = check_cosine(matrix, queries, k, mask, threads, deep)
    c = _array("codes", codes, np.int8, 2)
    s = _array("scales", scales, np.float32, 1)
    if c.shape != m.shape or s.shape[0] != m.shape[0]:
        raise KernelError(f"codes {c.shape} and scales {s.shape} do not match matrix {m.shape}")
    if isinstance(pool, bool) or not isinstance(pool, (int, np.integer)) or pool < 0:
        raise KernelError(f"pool must be an int >= 0 (0 = default), got {pool!r}")
    return c, s, m, q, k, int(pool), mk, t


def check_bm25(
    indptr, doc_ids, tfs, doc_len, idf, query_terms, k, weights, k1, b, avgdl, mask, deep=True
):
    """Validate BM25 inputs; returns them normalised, with k1, b, avgdl as float32.

    deep=False skips the per-query-term checks (term range, indptr order, finite idf and
    weights) that bb_bm25_topk makes itself: they cost more than a small query.
    """
    ip = _array("indptr", indptr, np.int64, 1)
    ids = _array("doc_ids", doc_ids, np.int32, 1)
    tf = _array("tfs", tfs, np.float32, 1)
    dl = _array("doc_len", doc_len, np.float32, 1)
    idf_ = _array("idf", idf, np.float32, 1)
    qt = _array("query_terms", query_terms, np.int32, 1)
    k = check_k(k)
    n_terms, nnz, n_docs = idf_.shape[0], ids.shape[0], dl.shape[0]
    if ip.shape[0] != n_terms + 1:
        raise KernelError(
            f"indptr has {ip.shape[0]} entries, expected len(idf) + 1 = {n_terms + 1}"
        )
    if tf.shape[0] != nnz:
        raise KernelError(f"tfs has {tf.shape[0]} entries, doc_ids has {nnz}")
    w = None if weights is None else _array("weights", weights, np.float32, 1)
    if w is not None and w.shape[0] != qt.shape[0]:
        raise KernelError(f"weights has {w.shape[0]} entries, query_terms has {qt.shape[0]}")
    params = []
    for name, v in (("k1", k1), ("b", b), ("avgdl", avgdl)):
        if name == "avgdl" and v is None:
            v = float(dl.mean(dtype=np.float64)) if n_docs else 1.0
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise KernelError(f"{name} must be a number, got {v!r}")
        if not math.isfinite(float(v)):
            raise KernelError(f"{name} must be finite, got {v}")
        params.append(_F32(v))
    k1_, b_, avgdl_ = params
    if k1_ < 0 or not 0 <= b_ <= 1 or not avgdl_ > 0:
        raise KernelError(f"need k1 >= 0, 0 <= b <= 1 and avgdl > 0; got {k1}, {b}, {avgdl_}")
    if ip.shape[0] and (ip[0] < 0 or ip[-1] > nnz):
        raise KernelError("indptr points outside doc_ids")
    if deep:
        _check_query_terms(ip, idf_, qt, w, nnz)
    return ip, ids, tf, dl, idf_, qt, k, w, k1_, b_, avgdl_, check_mask(mask, n_docs)


def _check_query_terms(ip, idf_, qt, w, nnz):
    n_terms = idf_.shape[0]
    if qt.size and (qt.min() < 0 or qt.max() >= n_terms):
        raise KernelError(f"a query term id is outside [0, {n_terms})")
    lo, hi = ip[qt], ip[qt + 1]
    if np.any(lo < 0) or np.any(lo > hi) or np.any(hi > nnz):
        raise KernelError("indptr is not monotone for a query term")
    if not np.isfinite(idf_[qt]).all() or (w is not None and not np.isfinite(w).all()):
        raise KernelError("idf or weights contain NaN or infinity for a query term")


_METHODS = {"rrf": 0, "weighted": 1}


def check_fuse(ids_a, scores_a, ids_b, scores_b, k, method, rrf_k, weight_a, weight_b):
    legs = []
    for leg, ids, scores in (("a", ids_a, scores_a), ("b", ids_b, scores_b)):
        i = _array(f"ids_{leg}", ids, np.int64, 1)
        s = _array(f"scores_{leg}", scores, np.float32, 1)
        if i.shape != s.shape:
            raise KernelError(
                f"ids_{leg} and scores_{leg} differ in length: {i.shape} vs {s.shape}"
            )
        legs += [i, s]
    k = check_k(k)
    if method not in _METHODS:
        raise KernelError(f"method must be one of {sorted(_METHODS)}, got {method!r}")
    params = []
    for name, v in (("rrf_k", rrf_k), ("weight_a", weight_a), ("weight_b", weight_b)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise KernelError(f"{name} must be a number, got {v!r}")
        if not math.isfinite(float(v)):
            raise KernelError(f"{name} must be finite, got {v}")
        params.append(_F32(v))
    if params[0] < 0:
        raise KernelError(f"rrf_k must be >= 0, got {rrf_k}")
    return (*legs, k, _METHODS[method], *params)


# ------------------------------------------------------------------------- selection


def _select(ids: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best (score desc, id asc) of candidates ids/scores; NaN never selected."""
    out_ids = np.full(k, -1, dtype=np.int64)
    out_scores = np.full(k, -np.inf, dtype=np.float32)
    keep = ~np.isnan(scores)
    if not keep.all():
        ids, scores = ids[keep], scores[keep]
    if ids.size > k:
        part = np.argpartition(-scores, k - 1)[:k]
        kth = scores[part].min()
        above = np.flatnonzero(scores > kth)
        ties = np.flatnonzero(scores == kth)
        ties = ties[np.argsort(ids[ties], kind="stable")][: k - above.size]
        sel = np.concatenate([above, ties])
        ids, scores = ids[sel], scores[sel]
    order = np.lexsort((ids, -scores))
    out_ids[: ids.size] = ids[order]
    out_scores[: ids.size] = scores[order]
    return out_ids, out_scores


def _select_dense(
    scores: np.ndarray, k: int, allowed: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """_select over every row id 0..n-1 of scores [n], restricted to allowed (bool [n])."""
    if allowed is None:
        if scores.size > k and not np.isnan(scores).any():
            # The common case without building an id array: argpartition, then fix ties.
            part = np.argpartition(-scores, k - 1)[:k]
            kth = scores[part].min()
            if np.count_nonzero(scores == kth) == np.count_nonzero(scores[part] == kth):
                order = np.lexsort((part, -scores[part]))
                return part[order].astype(np.int64), scores[part][order]
        ids = np.arange(scores.size, dtype=np.int64)
        return _select(ids, scores, k)
    ids = np.flatnonzero(allowed).astype(np.int64)
    return _select(ids, scores[ids], k)


# --------------------------------------------------------------------------- kernels


def cosine_topk(matrix, queries, k, mask=None, threads=0) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k by dot product: ids int64 [q, k], scores float32 [q, k]."""
    m, q, k, mk, _ = check_cosine(matrix, queries, k, mask, threads)
    allowed = None if mk is None else mk != 0
    ids = np.empty((q.shape[0], k), dtype=np.int64)
    scores = np.empty((q.shape[0], k), dtype=np.float32)
    if q.shape[0] == 1:
        all_scores = (m @ q[0])[None, :]
    else:
        all_scores = q @ m.T
    for j in range(q.shape[0]):
        ids[j], scores[j] = _select_dense(all_scores[j], k, allowed)
    return ids, scores


def quantize_int8(matrix) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row int8 codes [n, d] and scales [n] (formula in csrc/kernel.h)."""
    m = check_matrix(matrix)
    if not np.isfinite(m).all():
        raise KernelError("matrix contains NaN or infinity")
    return _quantize(m)


def _quantize(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if m.shape[0] == 0:
        return np.zeros(m.shape, dtype=np.int8), np.zeros(0, dtype=np.float32)
    amax = np.abs(m).max(axis=1)
    nonzero = amax > 0
    # Rows with max |x| < 2**-100 are lifted by 2**100 (exact) first: 127 / max would
    # overflow below ~3.7e-37 (csrc/kernel.h, bb_quantize_int8).
    lift = np.where(amax < _QUANT_TINY, _QUANT_LIFT, _F32(1)).astype(np.float32)
    inv = np.where(nonzero, _F32(127) / np.where(nonzero, amax * lift, _F32(1)), _F32(0))
    inv = inv.astype(np.float32)
    codes = np.clip(np.rint((m * lift[:, None]) * inv[:, None]), -127, 127).astype(np.int8)
    return codes, (amax / _F32(127)).astype(np.float32)


def _int8_dots(codes: np.ndarray, qcodes: np.ndarray) -> np.ndarray:
    """Exact integer dots [q, n] as float32 (as the C kernel converts its int32 sums)."""
    if codes.shape[1] <= _F32_EXACT_INT8_DIM:
        return qcodes.astype(np.float32) @ codes.astype(np.float32).T
    return (qcodes.astype(np.float64) @ codes.astype(np.float64).T).astype(np.float32)


def cosine_topk_int8(
    codes, scales, matrix, queries, k, pool=0, mask=None, threads=0
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k via the int8 copy, then exact float32 rescoring of the best `pool` rows."""
    ids, scores, _ = cosine_topk_int8_floor(codes, scales, matrix, queries, k, pool, mask,
                                            threads)
    return ids, scores


def cosine_topk_int8_floor(
    codes, scales, matrix, queries, k, pool=0, mask=None, threads=0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """cosine_topk_int8, and each query's pool floor (the C kernel's out_floor)."""
    c, s, m, q, k, pool, mk, _ = check_int8(codes, scales, matrix, queries, k, pool, mask, threads)
    pool = max(pool or default_pool(k), k)
    allowed = None if mk is None else mk != 0
    qcodes, _ = _quantize(q)
    approx = _int8_dots(c, qcodes) * s[None, :]
    ids = np.empty((q.shape[0], k), dtype=np.int64)
    scores = np.empty((q.shape[0], k), dtype=np.float32)
    floor = np.full(q.shape[0], -np.inf, dtype=np.float32)
    for j in range(q.shape[0]):
        cand, _ = _select_dense(approx[j], pool, allowed)
        cand = cand[cand >= 0]
        if len(cand) == pool < len(m):  # a full pool that left rows out
            floor[j] = approx[j][cand].min()
        ids[j], scores[j] = _select(cand, m[cand] @ q[j], k)
    return ids, scores, floor


def bm25_topk(
    indptr,
    doc_ids,
    tfs,
    doc_len,
    idf,
    query_terms,
    k,
    *,
    weights=None,
    k1=BM25_K1,
    b=BM25_B,
    avgdl=None,
    mask=None,
) -> tuple[np.ndarray, np.ndarray]:
    """BM25 top-k over CSR postings: ids int64 [k], scores float32 [k].

    k1 and b default to brainbot.text.lexical.BM25_K1 / BM25_B (measured there on NFCorpus).
    """
    ip, ids, tf, dl, idf_, qt, k, w, k1_, b_, avgdl_, mk = check_bm25(
        indptr, doc_ids, tfs, doc_len, idf, query_terms, k, weights, k1, b, avgdl, mask
    )
    n_docs = dl.shape[0]
    acc = np.zeros(n_docs, dtype=np.float32)
    matched = np.zeros(n_docs, dtype=bool)
    A = k1_ * (_F32(1) - b_)
    B = (k1_ * b_) / avgdl_
    k1p1 = k1_ + _F32(1)
    for t, term in enumerate(qt):
        lo, hi = ip[term], ip[term + 1]
        d, f = ids[lo:hi], tf[lo:hi]
        if d.size and (d.min() < 0 or d.max() >= n_docs):
            raise KernelError(f"a doc id of term {term} is outside [0, {n_docs})")
        c = ((_F32(1) if w is None else w[t]) * idf_[term]) * k1p1
        acc[d] += (c * f) / (f + (A + B * dl[d]))
        matched[d] = True
    if mk is not None:
        matched &= mk != 0
    cand = np.flatnonzero(matched).astype(np.int64)
    return _select(cand, acc[cand], k)


def fuse(
    ids_a, scores_a, ids_b, scores_b, k, *, method="rrf", rrf_k=60.0, weight_a=1.0, weight_b=1.0
) -> Fused:
    """Fuse two ranked legs (reciprocal rank, or weighted min-max scores) into a top-k.

    rrf_k = 60 is the constant of Cormack, Clarke & Buettcher (SIGIR 2009).
    """
    ia, sa, ib, sb, k, meth, rk, wa, wb = check_fuse(
        ids_a, scores_a, ids_b, scores_b, k, method, rrf_k, weight_a, weight_b
    )
    legs = [_leg(ia, sa), _leg(ib, sb)]
    if meth == 1:
        for leg in legs:
            if leg and not all(math.isfinite(s) for _, s in leg.values()):
                raise KernelError("weighted fusion needs finite scores in both legs")
    contrib = []
    for leg, weight in zip(legs, (wa, wb), strict=True):
        part = {}
        if leg:
            scores = [s for _, s in leg.values()]
            lo, hi = min(scores), max(scores)
            for i, (rank, s) in leg.items():
                if meth == 0:
                    part[i] = weight / (rk + _F32(rank))
                else:
                    part[i] = weight * ((s - lo) / (hi - lo) if hi > lo else _F32(1))
        contrib.append(part)
    union = np.array(sorted(set(legs[0]) | set(legs[1])), dtype=np.int64)
    fused = np.array(
        [contrib[0].get(i, _F32(0)) + contrib[1].get(i, _F32(0)) for i in union.tolist()],
        dtype=np.float32,
    )
    out_ids, out_scores = _select(union, fused, k)
    details: list[np.ndarray] = []
    for leg in legs:
        leg_ranks = np.zeros(k, dtype=np.int32)
        leg_scores = np.full(k, np.nan, dtype=np.float32)
        for j, i in enumerate(out_ids.tolist()):
            if i in leg:
                leg_ranks[j], leg_scores[j] = leg[i]
        details += [leg_ranks, leg_scores]
    return Fused(out_ids, out_scores, *details)


def _leg(ids: np.ndarray, scores: np.ndarray) -> dict[int, tuple[int, np.float32]]:
    """id -> (1-based rank among kept entries, raw score); padding skipped, first wins."""
    leg: dict[int, tuple[int, np.float32]] = {}
    for i, s in zip(ids.tolist(), scores, strict=True):
        if i >= 0 and i not in leg:
            leg[i] = (len(leg) + 1, s)
    return leg

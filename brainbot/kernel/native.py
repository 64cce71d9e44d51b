"""The typed wrapper over the C search core (brainbot._kernel, built from csrc/).

Each function checks dtypes, C-contiguity and shapes (with the same checks as
`brainbot.kernel.reference`, its numpy twin), allocates the outputs, passes the arrays to C
with `ffi.from_buffer` (no copies) and turns a bad status into `KernelError`. The C
calls release the GIL.

The rest of brainbot should call `active()`, which returns this module when the
extension is built and `brainbot.kernel.reference` otherwise (warning once), typed as
`SearchKernel`, the protocol both modules satisfy. Importing this
module never fails: without the extension, `available()` is False and the kernel
functions raise ImportError.

Not here: the kernels themselves (csrc/), and any caching of scratch memory or threads
between calls (the C side is stateless).
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from typing import TYPE_CHECKING, Literal, Protocol, cast

import numpy as np

if TYPE_CHECKING:  # numpy.typing costs ~15 ms to import: a cold query does not need it
    import numpy.typing as npt

from brainbot.errors import KernelError
from brainbot.text.lexical import BM25_B, BM25_K1  # the app's measured defaults, defined once

from . import reference as _ref
from .reference import Fused, default_pool

try:  # the compiled extension; absent until `pip install -e .` has built it
    from brainbot._kernel import ffi as _ffi
    from brainbot._kernel import lib as _lib
except ImportError as exc:  # pragma: no cover - exercised only without a build
    _ffi = _lib = None
    _IMPORT_ERROR: ImportError | None = exc
else:
    _IMPORT_ERROR = None

__all__ = [
    "Fused",
    "SearchKernel",
    "active",
    "available",
    "backend",
    "bm25_topk",
    "cosine_topk",
    "cosine_topk_int8",
    "cosine_topk_int8_floor",
    "default_pool",
    "fuse",
    "quantize_int8",
]

BUILD_HINT = "build it with `pip install -e .` (or `python setup.py build_ext --inplace`)"
_SIMD = {"auto": 0, "scalar": 1}
# BRAINBOT_SIMD=scalar makes "auto" run the plain scalar C twins, so that the whole suite
# can be run as on a CPU without AVX2/NEON (`BRAINBOT_SIMD=scalar make test`).
_FORCED = os.environ.get("BRAINBOT_SIMD", "auto")


def available() -> bool:
    """True when the C extension brainbot._kernel is importable."""
    return _lib is not None


if TYPE_CHECKING:  # type aliases for the Protocol below (annotations are strings)
    _Ids = npt.NDArray[np.int64]
    _F32s = npt.NDArray[np.float32]
    _Mask = npt.NDArray[np.uint8] | npt.NDArray[np.bool_] | None


class SearchKernel(Protocol):
    """What `active()` returns: the kernels the rest of brainbot may call. Both this
    module (C) and brainbot.kernel.reference (numpy) satisfy it, as modules; kernel.pyi holds
    the same class for type checkers, and tests/test_kernel.py checks all three agree."""

    def backend(self) -> str: ...

    def default_pool(self, k: int) -> int: ...

    def cosine_topk(
        self, matrix: _F32s, queries: _F32s, k: int, mask: _Mask = None, threads: int = 0
    ) -> tuple[_Ids, _F32s]: ...

    def quantize_int8(self, matrix: _F32s) -> tuple[npt.NDArray[np.int8], _F32s]: ...

    def cosine_topk_int8(
        self,
        codes: npt.NDArray[np.int8],
        scales: _F32s,
        matrix: _F32s,
        queries: _F32s,
        k: int,
        pool: int = 0,
        mask: _Mask = None,
        threads: int = 0,
    ) -> tuple[_Ids, _F32s]: ...

    def cosine_topk_int8_floor(
        self,
        codes: npt.NDArray[np.int8],
        scales: _F32s,
        matrix: _F32s,
        queries: _F32s,
        k: int,
        pool: int = 0,
        mask: _Mask = None,
        threads: int = 0,
    ) -> tuple[_Ids, _F32s, _F32s]: ...

    def bm25_topk(
        self,
        indptr: _Ids,
        doc_ids: npt.NDArray[np.int32],
        tfs: _F32s,
        doc_len: _F32s,
        idf: _F32s,
        query_terms: npt.NDArray[np.int32],
        k: int,
        *,
        weights: _F32s | None = None,
        k1: float = BM25_K1,
        b: float = BM25_B,
        avgdl: float | None = None,
        mask: _Mask = None,
    ) -> tuple[_Ids, _F32s]: ...

    def fuse(
        self,
        ids_a: _Ids,
        scores_a: _F32s,
        ids_b: _Ids,
        scores_b: _F32s,
        k: int,
        *,
        method: Literal["rrf", "weighted"] = "rrf",
        rrf_k: float = 60.0,
        weight_a: float = 1.0,
        weight_b: float = 1.0,
    ) -> Fused: ...


@functools.cache
def active() -> SearchKernel:
    """The kernel implementation for the rest of brainbot: this module if the C
    extension is built, else brainbot.kernel.reference (with one warning)."""
    if available():
        return cast(SearchKernel, sys.modules[__name__])
    warnings.warn(
        f"brainbot's C extension is not built ({_IMPORT_ERROR}); falling back to the "
        f"slower numpy kernels. To build it: {BUILD_HINT}.",
        RuntimeWarning,
        stacklevel=2,
    )
    return cast(SearchKernel, _ref)


def backend(simd: str = "auto") -> str:
    """The code path the kernels run here: "c/avx2-fma", "c/neon" or "c/scalar"."""
    lib = _need()
    return "c/" + _ffi.string(lib.bb_backend(_simd(simd))).decode()


# ------------------------------------------------------------------------ plumbing


def _need():
    if _lib is None:
        raise ImportError(f"brainbot._kernel is not built: {BUILD_HINT}") from _IMPORT_ERROR
    return _lib


def _simd(simd: str) -> int:
    try:
        return _SIMD[_FORCED if simd == "auto" else simd]
    except KeyError:
        raise KernelError(f"simd (or BRAINBOT_SIMD) must be one of {sorted(_SIMD)}, "
                          f"got {simd!r} (BRAINBOT_SIMD={_FORCED!r})") from None


def _check(status: int, what: str) -> None:
    if status != 0:
        message = _ffi.string(_lib.bb_strerror(status)).decode()
        raise KernelError(f"{what}: {message} (status {status})")


def _buf(ctype: str, a: np.ndarray | None):
    return _ffi.NULL if a is None else _ffi.from_buffer(ctype, a)


# ------------------------------------------------------------------------- kernels


def cosine_topk(matrix, queries, k, mask=None, threads=0) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k by dot product over L2-normalised rows.

    matrix float32 [n, d]; queries float32 [q, d] or [d]; mask uint8/bool [n] or None
    (nonzero = may be returned); threads 0 = auto. Returns ids int64 [q, k] (-1
    padded) and scores float32 [q, k] (-inf padded), best first, ties to the lower id.
    """
    return _cosine_topk(matrix, queries, k, mask, threads, "auto")


def _cosine_topk(matrix, queries, k, mask, threads, simd):
    lib = _need()
    m, q, k, mk, t = _ref.check_cosine(matrix, queries, k, mask, threads, deep=False)
    ids = np.empty((q.shape[0], k), dtype=np.int64)
    scores = np.empty((q.shape[0], k), dtype=np.float32)
    _check(
        lib.bb_cosine_topk(
            _buf("float[]", m),
            m.shape[0],
            m.shape[1],
            _buf("float[]", q),
            q.shape[0],
            k,
            _buf("uint8_t[]", mk),
            t,
            _simd(simd),
            _buf("int64_t[]", ids),
            _buf("float[]", scores),
        ),
        "cosine_topk",
    )
    return ids, scores


def quantize_int8(matrix) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row int8 codes [n, d] and float32 scales [n] (see csrc/kernel.h)."""
    return _quantize_int8(matrix, "auto")


def _quantize_int8(matrix, simd):
    lib = _need()
    m = _ref.check_matrix(matrix)
    codes = np.empty(m.shape, dtype=np.int8)
    scales = np.empty(m.shape[0], dtype=np.float32)
    _check(
        lib.bb_quantize_int8(
            _buf("float[]", m),
            m.shape[0],
            m.shape[1],
            _simd(simd),
            _buf("int8_t[]", codes),
            _buf("float[]", scales),
        ),
        "quantize_int8",
    )
    return codes, scales


def cosine_topk_int8(
    codes, scales, matrix, queries, k, pool=0, mask=None, threads=0
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k through the int8 copy, rescored exactly from the f32 matrix.

    codes/scales from quantize_int8(matrix); pool 0 = default_pool(k). Scores are
    exact float32 dots (bit-identical to cosine_topk with one query).
    """
    ids, scores, _ = _cosine_topk_int8(codes, scales, matrix, queries, k, pool, mask,
                                       threads, "auto")
    return ids, scores


def cosine_topk_int8_floor(
    codes, scales, matrix, queries, k, pool=0, mask=None, threads=0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """cosine_topk_int8, and per query the pool's floor: the lowest int8 ranking value
    ((float)(integer dot) * row scale) in the pool, which bounds that of every allowed row
    left out; -inf when the pool is not full, so that it holds every allowed row (kernel.h)."""
    return _cosine_topk_int8(codes, scales, matrix, queries, k, pool, mask, threads, "auto")


def _cosine_topk_int8(codes, scales, matrix, queries, k, pool, mask, threads, simd):
    lib = _need()
    c, s, m, q, k, pool, mk, t = _ref.check_int8(
        codes, scales, matrix, queries, k, pool, mask, threads, deep=False
    )
    ids = np.empty((q.shape[0], k), dtype=np.int64)
    scores = np.empty((q.shape[0], k), dtype=np.float32)
    floor = np.empty(q.shape[0], dtype=np.float32)
    _check(
        lib.bb_cosine_topk_int8(
            _buf("int8_t[]", c),
            _buf("float[]", s),
            _buf("float[]", m),
            m.shape[0],
            m.shape[1],
            _buf("float[]", q),
            q.shape[0],
            k,
            pool,
            _buf("uint8_t[]", mk),
            t,
            _simd(simd),
            _buf("int64_t[]", ids),
            _buf("float[]", scores),
            _buf("float[]", floor),
        ),
        "cosine_topk_int8",
    )
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
    """BM25 top-k over CSR postings; ids int64 [k], scores float32 [k].

    indptr int64 [T+1]; doc_ids int32 [nnz] (strictly increasing within a term);
    tfs float32 [nnz]; doc_len float32 [N]; idf float32 [T]; query_terms int32 [m];
    weights float32 [m] or None; avgdl None = mean(doc_len). k1 and b default to
    brainbot.text.lexical.BM25_K1 / BM25_B, the values measured for brainbot's chunks.
    """
    return _bm25_topk(
        indptr, doc_ids, tfs, doc_len, idf, query_terms, k, weights, k1, b, avgdl, mask, "auto"
    )


def _bm25_topk(
    indptr, doc_ids, tfs, doc_len, idf, query_terms, k, weights, k1, b, avgdl, mask, simd
):
    lib = _need()
    ip, ids, tf, dl, idf_, qt, k, w, k1_, b_, avgdl_, mk = _ref.check_bm25(
        indptr, doc_ids, tfs, doc_len, idf, query_terms, k, weights, k1, b, avgdl, mask, deep=False
    )
    out_ids = np.empty(k, dtype=np.int64)
    out_scores = np.empty(k, dtype=np.float32)
    _check(
        lib.bb_bm25_topk(
            _buf("int64_t[]", ip),
            idf_.shape[0],
            _buf("int32_t[]", ids),
            _buf("float[]", tf),
            ids.shape[0],
            _buf("float[]", dl),
            dl.shape[0],
            _buf("float[]", idf_),
            _buf("int32_t[]", qt),
            _buf("float[]", w),
            qt.shape[0],
            float(k1_),
            float(b_),
            float(avgdl_),
            k,
            _buf("uint8_t[]", mk),
            _simd(simd),
            _buf("int64_t[]", out_ids),
            _buf("float[]", out_scores),
        ),
        "bm25_topk",
    )
    return out_ids, out_scores


def fuse(
    ids_a, scores_a, ids_b, scores_b, k, *, method="rrf", rrf_k=60.0, weight_a=1.0, weight_b=1.0
) -> Fused:
    """Fuse two ranked legs into a final top-k with per-leg ranks and raw scores.

    method "rrf": w_a / (rrf_k + rank_a) + w_b / (rrf_k + rank_b) (rrf_k = 60, Cormack
    et al. 2009); "weighted": w_a * minmax(score_a) + w_b * minmax(score_b). Ids < 0
    are padding; an absent leg contributes 0 (rank 0, raw score NaN).
    """
    lib = _need()
    ia, sa, ib, sb, k, meth, rk, wa, wb = _ref.check_fuse(
        ids_a, scores_a, ids_b, scores_b, k, method, rrf_k, weight_a, weight_b
    )
    out = Fused(
        np.empty(k, np.int64),
        np.empty(k, np.float32),
        np.empty(k, np.int32),
        np.empty(k, np.float32),
        np.empty(k, np.int32),
        np.empty(k, np.float32),
    )
    _check(
        lib.bb_fuse(
            _buf("int64_t[]", ia),
            _buf("float[]", sa),
            ia.shape[0],
            _buf("int64_t[]", ib),
            _buf("float[]", sb),
            ib.shape[0],
            k,
            meth,
            float(rk),
            float(wa),
            float(wb),
            _buf("int64_t[]", out.ids),
            _buf("float[]", out.scores),
            _buf("int32_t[]", out.rank_a),
            _buf("float[]", out.score_a),
            _buf("int32_t[]", out.rank_b),
            _buf("float[]", out.score_b),
        ),
        "fuse",
    )
    return out


def stream_sum(x: np.ndarray, threads: int = 0, simd: str = "auto", streams: int = 0) -> float:
    """Read a float32 array once and return its sum: the memory-bandwidth probe of
    benchmarks/bench_search.py, with `streams` (2 or 4; 0 = 2) read streams a thread."""
    lib = _need()
    if not isinstance(x, np.ndarray) or x.dtype != np.float32 or not x.flags.c_contiguous:
        raise KernelError("stream_sum needs a C-contiguous float32 array")
    out = _ffi.new("double *")
    _check(
        lib.bb_stream_sum(
            _buf("float[]", x.reshape(-1)),
            x.size,
            _ref.check_threads(threads),
            _simd(simd),
            streams,
            out,
        ),
        "stream_sum",
    )
    return float(out[0])


def resolve_threads(threads: int, rows: int, bytes_: int) -> int:
    """The thread count the C kernels pick for `threads` (0 = auto) on such a scan."""
    return int(_need().bb_resolve_threads(threads, rows, bytes_))

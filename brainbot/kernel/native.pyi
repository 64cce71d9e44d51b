"""Type stub for brainbot.kernel.native (the typed wrapper over brainbot._kernel)."""

from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from .reference import Fused, default_pool

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

BUILD_HINT: str

_Ids = npt.NDArray[np.int64]
_F32s = npt.NDArray[np.float32]
_Mask = npt.NDArray[np.uint8] | npt.NDArray[np.bool_] | None

class SearchKernel(Protocol):
    """What `active()` returns; brainbot.kernel.native and brainbot.kernel.reference satisfy it."""

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
        k1: float = ...,
        b: float = ...,
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

def available() -> bool: ...
def active() -> SearchKernel: ...
def backend(simd: Literal["auto", "scalar"] = "auto") -> str: ...
def cosine_topk(
    matrix: npt.NDArray[np.float32],
    queries: npt.NDArray[np.float32],
    k: int,
    mask: npt.NDArray[np.uint8] | npt.NDArray[np.bool_] | None = None,
    threads: int = 0,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]: ...
def quantize_int8(
    matrix: npt.NDArray[np.float32],
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]: ...
def cosine_topk_int8(
    codes: npt.NDArray[np.int8],
    scales: npt.NDArray[np.float32],
    matrix: npt.NDArray[np.float32],
    queries: npt.NDArray[np.float32],
    k: int,
    pool: int = 0,
    mask: npt.NDArray[np.uint8] | npt.NDArray[np.bool_] | None = None,
    threads: int = 0,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]: ...
def cosine_topk_int8_floor(
    codes: npt.NDArray[np.int8],
    scales: npt.NDArray[np.float32],
    matrix: npt.NDArray[np.float32],
    queries: npt.NDArray[np.float32],
    k: int,
    pool: int = 0,
    mask: npt.NDArray[np.uint8] | npt.NDArray[np.bool_] | None = None,
    threads: int = 0,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32], npt.NDArray[np.float32]]: ...
def bm25_topk(
    indptr: npt.NDArray[np.int64],
    doc_ids: npt.NDArray[np.int32],
    tfs: npt.NDArray[np.float32],
    doc_len: npt.NDArray[np.float32],
    idf: npt.NDArray[np.float32],
    query_terms: npt.NDArray[np.int32],
    k: int,
    *,
    weights: npt.NDArray[np.float32] | None = None,
    k1: float = ...,
    b: float = ...,
    avgdl: float | None = None,
    mask: npt.NDArray[np.uint8] | npt.NDArray[np.bool_] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]: ...
def fuse(
    ids_a: npt.NDArray[np.int64],
    scores_a: npt.NDArray[np.float32],
    ids_b: npt.NDArray[np.int64],
    scores_b: npt.NDArray[np.float32],
    k: int,
    *,
    method: Literal["rrf", "weighted"] = "rrf",
    rrf_k: float = 60.0,
    weight_a: float = 1.0,
    weight_b: float = 1.0,
) -> Fused: ...
def stream_sum(
    x: npt.NDArray[np.float32],
    threads: int = 0,
    simd: Literal["auto", "scalar"] = "auto",
    streams: Literal[0, 2, 4] = 0,
) -> float: ...
def resolve_threads(threads: int, rows: int, bytes_: int) -> int: ...

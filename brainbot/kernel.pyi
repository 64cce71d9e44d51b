"""Type stub for brainbot.kernel (the typed wrapper over brainbot._kernel)."""

import types
from typing import Literal

import numpy as np
import numpy.typing as npt

from brainbot.reference import Fused as Fused
from brainbot.reference import default_pool as default_pool

BUILD_HINT: str

def available() -> bool: ...
def active() -> types.ModuleType: ...
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
    x: npt.NDArray[np.float32], threads: int = 0, simd: Literal["auto", "scalar"] = "auto"
) -> float: ...
def resolve_threads(threads: int, rows: int, bytes_: int) -> int: ...

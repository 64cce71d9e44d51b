"""The model in plain numpy (float64): the oracle every ONNX export is checked against.

``numpy_forward`` is the fp32 graph of ``model/graph.py``; ``numpy_forward_int8`` the int8
graph of ``model/int8_graph.py``, its integer products computed exactly and its
per-token quantization in float32 as onnxruntime does it. Both take token ids and the
attention mask [B, S] and return L2-normalised [B, 384] vectors. Slow (erf runs in
Python, ~0.1 us an element): meant for a few texts, never for indexing.
"""

from __future__ import annotations

from math import erf

import numpy as np

from .e5s1 import word_rows
from .graph import HEAD_DIM, HEADS, HIDDEN, INTERMEDIATE, LAYER_NORM_EPS, MASK_FILL, layer_count
from .int8_graph import ACTIVATION_MAX, GELU_FLOOR, TINY, ZERO_POINT, layer_weights


def np_gelu(x: np.ndarray) -> np.ndarray:
    flat = (x / np.sqrt(2.0)).ravel().tolist()
    return 0.5 * x * (1.0 + np.fromiter(map(erf, flat), np.float64, len(flat)).reshape(x.shape))


def np_layer_norm(x: np.ndarray, w: dict, p: str) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + LAYER_NORM_EPS) * w[f"{p}.weight"] + w[f"{p}.bias"]


def np_embeddings(w: dict, ids: np.ndarray) -> np.ndarray:
    """word + position + token type 0, then LayerNorm: [B, S, 384]."""
    h = (word_rows(w, ids) + w["embeddings.position_embeddings.weight"][: ids.shape[1]]
         + w["embeddings.token_type_embeddings.weight"][0])
    return np_layer_norm(h, w, "embeddings.LayerNorm")


def np_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Heads [B, 12, S, 32] and the mask [B, S] -> the context [B, S, 384]."""
    b, _, s, _ = q.shape
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(HEAD_DIM) + ((1.0 - mask) * MASK_FILL)[:, None, None, :]
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, HIDDEN)


def _pooled(h: np.ndarray, mask: np.ndarray) -> np.ndarray:
    m = mask[:, :, None].astype(np.float64)
    mean = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)


def numpy_forward(w: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The fp32 model in float64: the oracle for the fp32 graph. [B,S]->[B,384]"""
    return _forward(_float64(w), ids, mask, {})


def calibration_maxima(w: dict[str, np.ndarray], batches) -> dict[str, np.ndarray]:
    """Each smoothed int8 input's largest |value| per channel over the real tokens of
    ``batches`` ((ids, mask) pairs): ``{p}.attention`` (what enters query, key and value)
    and ``{p}.up`` (the first feed-forward matrix), for model/int8_graph.py."""
    w64 = _float64(w)
    out: dict[str, np.ndarray] = {}
    for ids, mask in batches:
        seen: dict[str, np.ndarray] = {}
        _forward(w64, ids, mask, seen)
        out = {k: np.maximum(out[k], v) if k in out else v for k, v in seen.items()}
    return out


def _float64(w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The float32 weights in float64; a compact word table as it is (word_rows reads it)."""
    return {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in w.items()}


def _forward(w: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray,
             seen: dict[str, np.ndarray]) -> np.ndarray:
    lin = lambda x, p: x @ w[f"{p}.weight"].T + w[f"{p}.bias"]  # noqa: E731
    b, s = ids.shape
    h = np_embeddings(w, ids)
    real = mask.astype(bool)
    for i in range(layer_count(w)):
        p = f"encoder.layer.{i}"
        seen[f"{p}.attention"] = np.abs(h[real]).max(0)
        q, k, v = (lin(h, f"{p}.attention.self.{n}").reshape(b, s, HEADS, HEAD_DIM).transpose(0, 2, 1, 3)
                   for n in ("query", "key", "value"))
        h = np_layer_norm(lin(np_attention(q, k, v, mask), f"{p}.attention.output.dense") + h, w,
                          f"{p}.attention.output.LayerNorm")
        seen[f"{p}.up"] = np.abs(h[real]).max(0)
        # GELU only at real tokens (erf in Python is the slow part); padded positions
        # are masked keys and excluded from pooling, so their values never matter.
        act = np.zeros((b, s, INTERMEDIATE))
        act[real] = np_gelu(lin(h[real], f"{p}.intermediate.dense"))
        h = np_layer_norm(lin(act, f"{p}.output.dense") + h, w, f"{p}.output.LayerNorm")
    return _pooled(h, mask)


def _quantize_rows(x: np.ndarray, gelu: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """int8_graph's per-row quantization, in float32 as onnxruntime computes it:
    (integers [M, K] centred on 0, scale [M, 1])."""
    x = x.astype(np.float32)
    amax = np.maximum(x.max(1, keepdims=True), np.float32(GELU_FLOOR)) if gelu else np.abs(x).max(1, keepdims=True)
    scale = np.maximum(amax, np.float32(TINY)) / np.float32(ACTIVATION_MAX)
    q = np.clip(np.rint(x / scale), -ZERO_POINT, 255 - ZERO_POINT)
    return q.astype(np.int64), scale.astype(np.float64)


def _int8_matmul(x: np.ndarray, weight: tuple, gelu: bool = False) -> np.ndarray:
    if weight[3] is not None:  # smoothed: a power of two, exact in float32 as in the graph
        x = x.astype(np.float32) * (np.float32(1.0) / weight[3])
    q, scale = _quantize_rows(x, gelu)
    out = (q @ weight[0].astype(np.int64)) * scale * weight[1].astype(np.float64)
    return out if weight[2] is None else out + weight[2]


def numpy_forward_int8(w: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray,
                       maxima: dict[str, np.ndarray], layers: int | None = None) -> np.ndarray:
    """The int8 model: integer products exact, the rest in float64. [B,S]->[B,384]

    Only the real tokens' rows are computed past the attention: every other step works
    row by row, and padded rows are masked keys, so they never reach a real one.
    Quantization is discontinuous, so the last bits in which float64 and onnxruntime's
    float32 differ flip a few rounded values and each layer amplifies them: measured
    against the graph on CHECK_TEXTS, min cosine 0.999998 after one layer, 0.99991 after
    two, 0.9955 after six (int8 against fp32 is 0.992 there). Hold the graph to it layer
    by layer (``layers``)."""
    b, s = ids.shape
    real = mask.astype(bool)
    w64 = _float64(w)
    h: np.ndarray = np_embeddings(w64, ids).reshape(b * s, HIDDEN)
    for i in range(layer_count(w) if layers is None else layers):
        p = f"encoder.layer.{i}"
        lw = layer_weights(w, p, maxima)  # from the float32 weights, exactly as the export does
        q, k, v = (_int8_matmul(h, lw[n]).reshape(b, s, HEADS, HEAD_DIM).transpose(0, 2, 1, 3)
                   for n in ("query", "key", "value"))
        h = h.reshape(b, s, HIDDEN)
        context = np_attention(q, k, v, mask)[real]
        h[real] = np_layer_norm(_int8_matmul(context, lw["output"]) + h[real], w64,
                                f"{p}.attention.output.LayerNorm")
        up = np_gelu(_int8_matmul(h[real], lw["up"]))
        h[real] = np_layer_norm(_int8_matmul(up, lw["down"], gelu=True) + h[real], w64,
                                f"{p}.output.LayerNorm")
        h = h.reshape(b * s, HIDDEN)
    return _pooled(h.reshape(b, s, HIDDEN), mask)

"""all-MiniLM-L6-v2 as an ONNX graph, built from model.safetensors without torch.

The graph is written node by node with ``onnx.helper`` (opset 17): BERT embeddings
(word + absolute position + token type 0), six post-LayerNorm encoder layers with exact
erf GELU, then mean pooling over the attention mask and L2 normalisation, as
sentence-transformers does. Inputs ``input_ids`` and ``attention_mask`` (int64
[batch, seq], seq <= 512); output ``sentence_embedding`` (float32 [batch, 384]).

Exports are cached in ``$BRAINBOT_CACHE_DIR`` (else ``$XDG_CACHE_HOME/brainbot``, else
``~/.cache/brainbot``), keyed by the weights' sha256, the precision and
``EXPORT_VERSION``. A new export is checked before it is cached: fixed texts are run
through onnxruntime and compared with a numpy forward pass of the same weights and with
values stored from sentence-transformers. A cached file is checked against the sha256
recorded beside it, and rebuilt when they differ.

This module does not tokenize or batch (see ``model/embed.py``) and never touches the network.
``precision="int8"`` is onnxruntime's dynamic quantization of the fp32 graph: faster, but
less accurate, and a text's vector depends on the other texts of its batch (activations
are quantized per batch), so an index built with it is not reproducible.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from brainbot.errors import ExportError, InputError

from .files import (
    DIMENSION,
    MODEL_ID,
    cache_dir,
    sha256_file,
    sha256_matches,
    verified_model_dir,
    weights_sha256,
)

# Bump when the graph changes: old cache files are then ignored, never reused.
EXPORT_VERSION = 1
PRECISIONS = ("fp32", "int8")
OPSET = 17
IR_VERSION = 8  # the IR of opset 17; keeps the file loadable by onnxruntime >= 1.13

# BERT hyper-parameters of all-MiniLM-L6-v2 (its config.json, checked at export time).
LAYERS, HIDDEN, HEADS, INTERMEDIATE, MAX_POSITIONS = 6, 384, 12, 1536, 512
HEAD_DIM = HIDDEN // HEADS
LAYER_NORM_EPS = 1e-12
# transformers' extended attention mask adds finfo(float32).min at padded keys.
MASK_FILL = float(np.finfo(np.float32).min)

# Texts run through every new export before it is cached (short, long, unicode, code).
CHECK_TEXTS = (
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "Straße, Grüße aus München! 机器学习 🚀",
    "def embed(texts):\n    return [tok.encode(t) for t in texts]  # " + "note " * 40,
)
# sentence-transformers' embedding of "hello world", first 8 of 384 dimensions
# (../shared/reference/minilm_reference.jsonl, rounded to 6 decimals).
HELLO_WORLD_HEAD = (-0.034477, 0.031023, 0.006735, 0.026109,
                    -0.039362, -0.160302, 0.066924, -0.006441)
# fp32 vs the numpy forward pass: measured max abs difference ~3e-7.
FP32_ATOL = 1e-5
# int8 vs the numpy fp32 forward pass on CHECK_TEXTS, as one batch: measured min cosine
# 0.986 here; the floor catches a broken quantization, not a merely imprecise one.
INT8_MIN_COSINE = 0.90


# -- cache -------------------------------------------------------------------------


def _check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise InputError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")


def cache_name(precision: str = "fp32") -> str:
    _check_precision(precision)
    return f"minilm-l6-{weights_sha256()[:16]}-{precision}-v{EXPORT_VERSION}.onnx"


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def cached_file_ok(path: Path) -> bool:
    """True when ``path`` and its sidecar exist and the file's sha256 matches.

    Hashed once, then trusted by stat (model.sha256_matches): hashing this 90 MB file
    cost about 45 ms in every process that embedded a query (measured, SHA-NI).
    """
    try:
        meta = json.loads(_sidecar(path).read_text())
    except (OSError, ValueError):
        return False
    expected = meta.get("sha256") if isinstance(meta, dict) else None
    if not isinstance(expected, str):
        return False
    return sha256_matches(path, expected)


def onnx_path(precision: str = "fp32") -> Path:
    """The cached, verified ONNX file for ``precision``, exported first if needed.

    A cached file whose sha256 does not match its sidecar (truncated, edited, half
    written) is exported again.
    """
    path = cache_dir() / cache_name(precision)
    if not cached_file_ok(path):
        export(path, precision)
    return path


# -- export --------------------------------------------------------------------------


def export(out_path: Path | str, precision: str = "fp32") -> dict:
    """Build, verify and atomically write the ONNX graph; return what was recorded.

    Raises ExportError when the graph cannot be built or fails verification; nothing is
    left at ``out_path`` in that case.
    """
    import tempfile

    _check_precision(precision)
    out_path = Path(out_path)
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create the ONNX cache folder {out_path.parent}: {exc}") from exc
    started = time.perf_counter()
    weights = load_weights()
    with tempfile.TemporaryDirectory(dir=out_path.parent, prefix=".export-") as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        _save(build_graph(weights), fp32)
        final = fp32
        if precision == "int8":
            final = Path(tmp) / "int8.onnx"
            _quantize(fp32, final)
        report = verify(final, precision, weights)
        report.update(
            model=MODEL_ID, weights_sha256=weights_sha256(), precision=precision,
            export_version=EXPORT_VERSION, opset=OPSET, sha256=sha256_file(final),
            export_seconds=round(time.perf_counter() - started, 3),
        )
        sidecar_tmp = Path(tmp) / "meta.json"
        sidecar_tmp.write_text(json.dumps(report, indent=2) + "\n")
        # The model first, then its sidecar: a crash in between leaves a file without
        # a matching sidecar, which onnx_path() treats as missing.
        os.replace(final, out_path)
        os.replace(sidecar_tmp, _sidecar(out_path))
    return report


def load_weights() -> dict[str, np.ndarray]:
    """The verified safetensors weights as float32 numpy arrays."""
    from safetensors.numpy import load_file

    folder = verified_model_dir()
    config = json.loads((folder / "config.json").read_text())
    expected = {"num_hidden_layers": LAYERS, "hidden_size": HIDDEN,
                "num_attention_heads": HEADS, "intermediate_size": INTERMEDIATE,
                "hidden_act": "gelu", "position_embedding_type": "absolute"}
    wrong = {k: config.get(k) for k, v in expected.items() if config.get(k) != v}
    if wrong:
        raise ExportError(f"config.json does not describe all-MiniLM-L6-v2: {wrong}")
    return load_file(str(folder / "model.safetensors"))


def _save(model, path: Path) -> None:
    import onnx

    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        raise ExportError(f"the built ONNX graph is invalid: {exc}") from exc
    onnx.save(model, str(path))


def _quantize(src: Path, dst: Path) -> None:
    """Dynamic int8 quantization of the weight MatMuls of the fp32 graph.

    Options measured against the reference vectors on this machine (AVX2, no VNNI),
    min / mean cosine, one text at a time: the defaults 0.857 / 0.933; per-channel
    weights 0.970 / 0.990; per-channel with reduce_range (7-bit weights, which avoid
    int16 saturation in AVX2's u8*s8 multiply-add) 0.978 / 0.990, and as fast.
    Quantizing the Gather of the word embeddings only shrinks the file, so it is left out.
    """
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    # quantize_dynamic warns on the root logger that the graph was not "pre-processed";
    # pre-processing (shape inference, fusions) changed neither speed nor accuracy here.
    root = logging.getLogger()
    quiet = _DropMessage("pre-processing")
    root.addFilter(quiet)
    try:
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8,
                         op_types_to_quantize=["MatMul"], per_channel=True, reduce_range=True)
    except Exception as exc:  # onnxruntime raises plain Exceptions of many kinds
        raise ExportError(f"dynamic int8 quantization failed: {exc}") from exc
    finally:
        root.removeFilter(quiet)


class _DropMessage:
    def __init__(self, needle: str) -> None:
        self.needle = needle

    def filter(self, record) -> bool:
        return self.needle not in record.getMessage()


# -- the graph -----------------------------------------------------------------------


class _Graph:
    """A tiny builder over onnx.helper: named initializers and nodes in order."""

    def __init__(self) -> None:
        self.nodes: list = []
        self.inits: list = []
        self._n = 0

    def const(self, name: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, op_type: str, *inputs: str, **attrs) -> str:
        from onnx import helper

        self._n += 1
        out = f"{op_type.lower()}_{self._n}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out],
                                           name=f"{op_type}_{self._n}", **attrs))
        return out

    def linear(self, x: str, w: dict, prefix: str) -> str:
        # torch Linear stores weight as [out, in]; MatMul wants [in, out].
        weight = self.const(f"{prefix}.weight_t", w[f"{prefix}.weight"].T)
        return self.op("Add", self.op("MatMul", x, weight), self.const(f"{prefix}.bias", w[f"{prefix}.bias"]))

    def layer_norm(self, x: str, w: dict, prefix: str) -> str:
        return self.op("LayerNormalization", x, self.const(f"{prefix}.weight", w[f"{prefix}.weight"]),
                       self.const(f"{prefix}.bias", w[f"{prefix}.bias"]), axis=-1,
                       epsilon=LAYER_NORM_EPS)


def _embeddings(g: _Graph, w: dict) -> str:
    """word + position + token-type-0 embeddings, then LayerNorm: [B, S, 384]."""
    words = g.op("Gather", g.const("word_embeddings", w["embeddings.word_embeddings.weight"]),
                 "input_ids", axis=0)
    # Position ids as a Slice of a constant table: Range + Gather was mis-optimised by
    # onnxruntime at its default optimisation level (measured on this machine). Token
    # type 0 is folded into the same table (every type id is 0).
    table = (w["embeddings.position_embeddings.weight"]
             + w["embeddings.token_type_embeddings.weight"][0])
    seq_len = g.op("Shape", "input_ids", start=1, end=2)
    positions = g.op("Slice", g.const("position_table", table.astype(np.float32)),
                     g.const("zero_1d", np.array([0], np.int64)), seq_len,
                     g.const("axis0_1d", np.array([0], np.int64)))
    return g.layer_norm(g.op("Add", words, positions), w, "embeddings.LayerNorm")


def _attention(g: _Graph, h: str, mask_bias: str, w: dict, p: str) -> str:
    """Multi-head self-attention of layer prefix ``p``: [B, S, 384] -> [B, S, 384]."""
    split = g.const(f"{p}.split_shape", np.array([0, 0, HEADS, HEAD_DIM], np.int64))

    def heads(name: str, perm: list[int]) -> str:  # [B, S, 384] -> [B, 12, ., .]
        x = g.linear(h, w, f"{p}.attention.self.{name}")
        return g.op("Transpose", g.op("Reshape", x, split), perm=perm)

    q = heads("query", [0, 2, 1, 3])  # [B, 12, S, 32]
    k = heads("key", [0, 2, 3, 1])  # [B, 12, 32, S]
    v = heads("value", [0, 2, 1, 3])  # [B, 12, S, 32]
    scale = g.const(f"{p}.scale", np.array(1.0 / np.sqrt(HEAD_DIM), np.float32))
    scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), mask_bias)  # [B,12,S,S]
    context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)  # [B, 12, S, 32]
    merged = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]),
                  g.const(f"{p}.merge_shape", np.array([0, 0, HIDDEN], np.int64)))
    out = g.linear(merged, w, f"{p}.attention.output.dense")
    return g.layer_norm(g.op("Add", out, h), w, f"{p}.attention.output.LayerNorm")


def _feed_forward(g: _Graph, h: str, w: dict, p: str) -> str:
    x = g.linear(h, w, f"{p}.intermediate.dense")  # [B, S, 1536]
    # exact GELU: 0.5 x (1 + erf(x / sqrt 2)); opset 17 has no Gelu op.
    erf = g.op("Erf", g.op("Div", x, g.const(f"{p}.sqrt2", np.array(np.sqrt(2.0), np.float32))))
    gelu = g.op("Mul", g.op("Mul", x, g.op("Add", erf, g.const(f"{p}.one", np.array(1.0, np.float32)))),
                g.const(f"{p}.half", np.array(0.5, np.float32)))
    out = g.linear(gelu, w, f"{p}.output.dense")
    return g.layer_norm(g.op("Add", out, h), w, f"{p}.output.LayerNorm")


def _pool(g: _Graph, h: str, mask_f: str) -> str:
    """Mean over unmasked tokens, then L2 normalisation: [B, S, 384] -> [B, 384]."""
    axis1 = g.const("axis1_1d", np.array([1], np.int64))
    m = g.op("Unsqueeze", mask_f, g.const("axis2_1d", np.array([2], np.int64)))  # [B,S,1]
    summed = g.op("ReduceSum", g.op("Mul", h, m), axis1, keepdims=0)  # [B, 384]
    counts = g.op("Clip", g.op("ReduceSum", m, axis1, keepdims=0),
                  g.const("min_count", np.array(1e-9, np.float32)))  # [B, 1]
    mean = g.op("Div", summed, counts)
    norm = g.op("Max", g.op("ReduceL2", mean, axes=[1], keepdims=1),
                g.const("min_norm", np.array(1e-12, np.float32)))
    return g.op("Div", mean, norm)


def build_graph(w: dict[str, np.ndarray]):
    """The onnx.ModelProto of all-MiniLM-L6-v2 with pooling and normalisation."""
    from onnx import TensorProto, helper

    g = _Graph()
    mask_f = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)  # [B, S]
    # (1 - mask) * finfo.min, broadcast over heads and queries: [B, 1, 1, S]
    keep = g.op("Sub", g.const("one", np.array(1.0, np.float32)), mask_f)
    mask_bias = g.op("Unsqueeze", g.op("Mul", keep, g.const("mask_fill", np.array(MASK_FILL, np.float32))),
                     g.const("axes12", np.array([1, 2], np.int64)))
    h = _embeddings(g, w)
    for i in range(LAYERS):
        h = _attention(g, h, mask_bias, w, f"encoder.layer.{i}")
        h = _feed_forward(g, h, w, f"encoder.layer.{i}")
    pooled = _pool(g, h, mask_f)
    g.nodes.append(helper.make_node("Identity", [pooled], ["sentence_embedding"], name="output"))
    graph = helper.make_graph(
        g.nodes, "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", DIMENSION])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="brainbot.export", producer_version=str(EXPORT_VERSION))
    model.ir_version = IR_VERSION
    model.doc_string = f"{MODEL_ID}, weights sha256 {weights_sha256()}, mean pooled, L2 normalised"
    return model


# -- the numpy twin, and verification ---------------------------------------------


def _np_layer_norm(x: np.ndarray, w: dict, p: str) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + LAYER_NORM_EPS) * w[f"{p}.weight"] + w[f"{p}.bias"]


def numpy_forward(w: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The same model in plain numpy (float64): the oracle for the ONNX graph. [B,S]->[B,384]"""
    from math import erf

    w = {k: v.astype(np.float64) for k, v in w.items() if v.dtype == np.float32}
    lin = lambda x, p: x @ w[f"{p}.weight"].T + w[f"{p}.bias"]  # noqa: E731
    erf_ = np.frompyfunc(erf, 1, 1)  # exact erf; numpy has none (~0.1 us an element)
    gelu = lambda x: 0.5 * x * (1.0 + erf_(x / np.sqrt(2.0)).astype(np.float64))  # noqa: E731
    b, s = ids.shape
    h = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:s]
         + w["embeddings.token_type_embeddings.weight"][0])
    h = _np_layer_norm(h, w, "embeddings.LayerNorm")
    bias = ((1.0 - mask) * MASK_FILL)[:, None, None, :]  # [B, 1, 1, S]
    real = mask.astype(bool)
    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        q, k, v = (lin(h, f"{p}.attention.self.{n}").reshape(b, s, HEADS, HEAD_DIM).transpose(0, 2, 1, 3)
                   for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(HEAD_DIM) + bias
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, HIDDEN)
        h = _np_layer_norm(lin(ctx, f"{p}.attention.output.dense") + h, w, f"{p}.attention.output.LayerNorm")
        # GELU only at real tokens (erf in Python is the slow part); padded positions
        # are masked keys and excluded from pooling, so their values never matter.
        act = np.zeros((b, s, INTERMEDIATE))
        act[real] = gelu(lin(h[real], f"{p}.intermediate.dense"))
        ff = lin(act, f"{p}.output.dense")
        h = _np_layer_norm(ff + h, w, f"{p}.output.LayerNorm")
    m = mask[:, :, None].astype(np.float64)
    mean = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)


def check_batch() -> tuple[np.ndarray, np.ndarray]:
    """CHECK_TEXTS tokenized and padded into one batch (padding is exercised too)."""
    from .files import load_tokenizer

    encodings = load_tokenizer().encode_batch(list(CHECK_TEXTS))
    seq = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), seq), np.int64)
    mask = np.zeros_like(ids)
    for row, e in enumerate(encodings):
        ids[row, : len(e.ids)] = e.ids
        mask[row, : len(e.ids)] = 1
    return ids, mask


def run_session(path: Path, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})[0]


def verify(path: Path, precision: str, weights: dict | None = None,
           runner: Callable[[Path, np.ndarray, np.ndarray], np.ndarray] = run_session) -> dict:
    """Check an exported file on fixed texts; raise ExportError when it is wrong.

    Checks: shape, finite, unit norm, agreement with ``numpy_forward`` (fp32: max abs
    difference; int8: minimum cosine) and, for fp32, the stored sentence-transformers
    values of "hello world". Returns the measured figures.
    """
    weights = load_weights() if weights is None else weights
    ids, mask = check_batch()
    try:
        got = runner(path, ids, mask)
    except Exception as exc:  # onnxruntime's errors carry no common base class
        raise ExportError(f"the exported graph {path.name} does not run: {exc}") from exc
    expected = numpy_forward(weights, ids, mask)
    problems = []
    if got.shape != expected.shape or got.dtype != np.float32:
        raise ExportError(f"exported graph returned {got.dtype}{got.shape}, expected float32{expected.shape}")
    if not np.isfinite(got).all():
        problems.append("non-finite values")
    norms = np.linalg.norm(got.astype(np.float64), axis=1)
    if np.abs(norms - 1.0).max() > 1e-4:
        problems.append(f"norms {norms.min():.6f}..{norms.max():.6f}, not 1")
    max_abs = float(np.abs(got - expected).max())
    min_cos = float((got * expected).sum(1).min())
    if precision == "fp32":
        if not max_abs <= FP32_ATOL:
            problems.append(f"max abs difference {max_abs:.2e} from the numpy forward pass")
        head = float(np.abs(got[0, : len(HELLO_WORLD_HEAD)] - HELLO_WORLD_HEAD).max())
        if not head <= 2e-5:
            problems.append(f"'hello world' is {head:.2e} away from sentence-transformers")
    elif not min_cos >= INT8_MIN_COSINE:
        problems.append(f"min cosine {min_cos:.4f} to the fp32 forward pass, below {INT8_MIN_COSINE}")
    if problems:
        raise ExportError(f"the {precision} export failed verification: {'; '.join(problems)}")
    return {"verified": {"texts": len(CHECK_TEXTS), "max_abs_vs_numpy": max_abs,
                         "min_cosine_vs_numpy": min_cos}}

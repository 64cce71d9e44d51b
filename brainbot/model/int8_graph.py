"""all-MiniLM-L6-v2 in int8, with each text's vector a function of that text alone.

Issue #33. onnxruntime's dynamic quantization (what `--precision int8` ran before) takes
one activation scale over the whole batch tensor, so a text's vector moved with the texts
padded beside it (up to 0.027 an element, min cosine to fp32 0.979). Here every scale
belongs to one token or one weight column:

- the six layers' weight matrices (query, key, value, attention output, the two
  feed-forward ones) are int8 with one scale per output channel, at most ±63
  (``WEIGHT_MAX``);
- the activations entering them are quantized per token (per row) at run time: a token's
  scale is the largest |value| of its own row / 127, computed by the graph
  (ReduceMax, QuantizeLinear with a per-row scale), so it depends on nothing else in the
  batch;
- the products accumulate in int32, which is exact, and are scaled back by the token's
  and the channel's scales in com.microsoft MatMulIntegerToFloat. Every float step
  (LayerNorm, GELU, softmax) works row by row, so a text's bytes do not depend on the
  other rows of its batch nor on the thread count (tests/test_int8.py).

What stays float: the embeddings, LayerNorm, GELU, the attention itself (com.microsoft
MultiHeadAttention: scores, mask and softmax in one kernel), pooling. Two exact
rewrites save work: the key bias is dropped (it adds the same number to every score of a
query, which softmax ignores) and the value bias is folded into the attention output's
bias (each row of attention weights sums to 1).

Race on this machine (AMD EPYC Zen 5, AVX-512 VNNI, 2 threads, benchmarks/results/
int8_race.json): see ``benchmarks/bench_int8_race.py`` for what was tried and lost.

Its numpy twin is ``model/twin.py``'s ``numpy_forward_int8``. This module builds the
graph; it does not verify or cache it (``model/onnx_export.py``).
"""

from __future__ import annotations

import numpy as np

from .graph import HEADS, HIDDEN, LAYERS, Graph, embeddings, mask_inputs, model_proto, pool

# 7-bit weights: with 8-bit ones (±127), AVX2's u8 x s8 multiply-add (vpmaddubsw, CPUs
# without VNNI) saturates its int16 pair sums: measured under `qemu-x86_64 -cpu Haswell`,
# MatMulInteger of 0/255 activations against ±127 weights was off by up to 640,034,
# against ±63 exact. With ±63 every CPU computes the same exact integer products.
# Cost: min cosine to fp32 on 96 rust-book chunks 0.9950 against 0.9973 with ±127.
WEIGHT_MAX = 63
ACTIVATION_MAX = 127  # symmetric: uint8 with zero point 128
ZERO_POINT = 128
# GELU(x) >= -0.16997 (at x = -0.7518): a row of GELU outputs needs only its maximum,
# floored at this, to bound every |value| (no Abs pass over the widest activation).
GELU_FLOOR = 0.17
TINY = 1e-30  # the scale of an all-zero row, so that nothing divides by zero
MS = "com.microsoft"
# onnxruntime fuses Add + LayerNormalization into SkipLayerNormalization, whose CPU kernel
# ran 3-5x slower than the two ops it replaces here (measured on [8, 256, 384]).
DISABLED_OPTIMIZERS = ("SkipLayerNormFusion",)
DOMAINS = (MS,)


def quantize_weight(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A [in, out] float matrix as int8 in [-WEIGHT_MAX, WEIGHT_MAX] and one float32 scale
    per output column: w ~= q * scale."""
    scale = (np.maximum(np.abs(w).max(0), TINY) / WEIGHT_MAX).astype(np.float32)
    q = np.clip(np.rint(w / scale), -WEIGHT_MAX, WEIGHT_MAX).astype(np.int8)
    return q, scale


def layer_weights(w: dict, p: str) -> dict[str, tuple]:
    """Layer ``p``'s int8 matrices with their scales, and its float biases after the two
    exact rewrites (no key bias; the value bias inside the attention output's)."""
    f64 = lambda name: w[f"{p}.{name}"].astype(np.float64)  # noqa: E731
    out_bias = (f64("attention.output.dense.bias")
                + f64("attention.self.value.bias") @ f64("attention.output.dense.weight").T)
    names = {"query": "attention.self.query", "key": "attention.self.key",
             "value": "attention.self.value", "output": "attention.output.dense",
             "up": "intermediate.dense", "down": "output.dense"}
    layer = {key: quantize_weight(w[f"{p}.{name}.weight"].T) for key, name in names.items()}
    biases = {"query": f64("attention.self.query.bias"), "output": out_bias,
              "up": f64("intermediate.dense.bias"), "down": f64("output.dense.bias")}
    return {k: (*v, biases[k].astype(np.float32) if k in biases else None) for k, v in layer.items()}


class Int8Graph(Graph):
    """The builder, with per-row quantization and the int8 matrix product."""

    def quantize_rows(self, x: str, gelu: bool = False) -> tuple[str, str]:
        """x [M, K] float -> (uint8 [M, K] with zero point 128, scale [M, 1])."""
        from onnx import TensorProto, helper

        if gelu:
            top = self.op("ReduceMax", x, axes=[1], keepdims=1)
            amax = self.op("Max", top, self.const(f"gelu_floor_{self._n}", np.array(GELU_FLOOR, np.float32)))
        else:
            amax = self.op("ReduceMax", self.op("Abs", x), axes=[1], keepdims=1)
        scale = self.op("Div", self.op("Max", amax, self.const(f"tiny_{self._n}", np.array(TINY, np.float32))),
                        self.const(f"act_max_{self._n}", np.array(ACTIVATION_MAX, np.float32)))
        per_row = self.op("Reshape", scale, self.const(f"flat_{self._n}", np.array([-1], np.int64)))
        points = self.op("ConstantOfShape", self.op("Shape", per_row),
                         value=helper.make_tensor("zp", TensorProto.UINT8, [1], [ZERO_POINT]))
        return self.op("QuantizeLinear", x, per_row, points, axis=0), scale

    def matmul(self, q: str, scale: str, weight: tuple, name: str) -> str:
        """(q - 128) @ weight, exact in int32, times each row's and column's scale."""
        w8, w_scale = weight[0], weight[1]
        return self.op("MatMulIntegerToFloat", q, self.const(f"{name}.w8", w8), scale,
                       self.const(f"{name}.w_scale", w_scale),
                       self.const(f"{name}.zero_point", np.array(ZERO_POINT, np.uint8)), domain=MS)

    def bias(self, x: str, weight: tuple, name: str) -> str:
        return self.op("Add", x, self.const(f"{name}.bias", weight[2]))


def _layer(g: Int8Graph, h: str, shape3: str, mask: str, w: dict, p: str) -> str:
    """One encoder layer on h [M, 384] (M = batch x sequence): -> [M, 384]."""
    lw = layer_weights(w, p)
    q, scale = g.quantize_rows(h)  # one quantization feeds query, key and value
    as3 = lambda x: g.op("Reshape", x, shape3)  # noqa: E731 - [M, 384] -> [B, S, 384]
    query = as3(g.bias(g.matmul(q, scale, lw["query"], f"{p}.query"), lw["query"], f"{p}.query"))
    key = as3(g.matmul(q, scale, lw["key"], f"{p}.key"))
    value = as3(g.matmul(q, scale, lw["value"], f"{p}.value"))
    context = g.op("MultiHeadAttention", query, key, value, "", mask, num_heads=HEADS, domain=MS)
    flat = g.op("Reshape", context, g.const(f"{p}.flat", np.array([-1, HIDDEN], np.int64)))
    q, scale = g.quantize_rows(flat)
    out = g.bias(g.matmul(q, scale, lw["output"], f"{p}.output"), lw["output"], f"{p}.output")
    h = g.layer_norm(g.op("Add", out, h), w, f"{p}.attention.output.LayerNorm")
    q, scale = g.quantize_rows(h)
    x = g.bias(g.matmul(q, scale, lw["up"], f"{p}.up"), lw["up"], f"{p}.up")  # [M, 1536]
    # exact GELU, as the fp32 graph writes it (onnxruntime fuses it with the bias Add)
    erf = g.op("Erf", g.op("Div", x, g.const(f"{p}.sqrt2", np.array(np.sqrt(2.0), np.float32))))
    gelu = g.op("Mul", g.op("Mul", x, g.op("Add", erf, g.const(f"{p}.one", np.array(1.0, np.float32)))),
                g.const(f"{p}.half", np.array(0.5, np.float32)))
    q, scale = g.quantize_rows(gelu, gelu=True)
    out = g.bias(g.matmul(q, scale, lw["down"], f"{p}.down"), lw["down"], f"{p}.down")
    return g.layer_norm(g.op("Add", out, h), w, f"{p}.output.LayerNorm")


def build_int8_graph(w: dict[str, np.ndarray], version: int, layers: int = LAYERS):
    """The onnx.ModelProto of the int8 model, same inputs and output as the fp32 one
    (``layers`` below 6 only to hold a part of it to its twin, tests/test_int8.py)."""
    from onnx import TensorProto

    g = Int8Graph()
    mask_f, _ = mask_inputs(g)
    mask = g.op("Cast", "attention_mask", to=TensorProto.INT32)  # MultiHeadAttention's key padding mask
    h3 = embeddings(g, w)  # [B, S, 384]
    shape3 = g.op("Shape", h3)
    h = g.op("Reshape", h3, g.const("flat", np.array([-1, HIDDEN], np.int64)))
    for i in range(layers):
        h = _layer(g, h, shape3, mask, w, f"encoder.layer.{i}")
    pooled = pool(g, g.op("Reshape", h, shape3), mask_f)
    return model_proto(g, pooled, "all-MiniLM-L6-v2 int8, per-token scales", version, DOMAINS)


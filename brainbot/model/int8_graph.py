"""A model record's graph in int8 (all-MiniLM-L6-v2 first), with each text's vector a
function of that text alone.

Issue #33. onnxruntime's dynamic quantization (what `--precision int8` ran before) takes
one activation scale over the whole batch tensor, so a text's vector moved with the texts
padded beside it (up to 0.027 an element, min cosine to fp32 0.979). Here every scale
belongs to one token or one weight column:

- the six layers' weight matrices (query, key, value, attention output, the two
  feed-forward ones) are int8 with one scale per output channel (``quantize_weight``);
- the activations entering them are quantized per token (per row) at run time: a token's
  scale is the largest |value| of its own row / 127, computed by the graph
  (ReduceMax, QuantizeLinear with a per-row scale), so it depends on nothing else in the
  batch;
- the products accumulate in int32, which is exact, and are scaled back by the token's
  and the channel's scales in com.microsoft MatMulIntegerToFloat. Every float step
  (LayerNorm, GELU, softmax) works row by row, so a text's bytes do not depend on the
  other rows of its batch nor on the thread count (tests/test_int8.py).

The LayerNorm outputs that feed query/key/value and the first feed-forward matrix carry a
few channels ~14x larger than the rest (channel 99 reaches 28 where the median channel
reaches 2), and a row's scale follows its largest value. So those inputs are smoothed
(Xiao et al. 2023, "SmoothQuant", alpha 0.5): each channel divided by a power of two
(exact in float) and the weight rows multiplied by it, which leaves the product as it
was. The powers come from the channels' maxima over CALIBRATION_TEXTS, measured by the
numpy fp32 model at export (``model/twin.py``): they are constants of the graph.

What stays float: the embeddings, LayerNorm, GELU, the attention itself (com.microsoft
MultiHeadAttention: scores and softmax in one kernel), pooling. Two exact rewrites save
work: the key bias is dropped (it adds the same number to every score of a query, which
softmax ignores) and the value bias is folded into the attention output's bias (each row
of attention weights sums to 1).

One text a run (export version 3). The graph takes ``input_ids`` alone, no attention
mask: every row is one whole text, and the Embedder runs each text by itself at its own
length, two (its threads) at once on one onnxruntime thread each (``Embedder._run_alone``).
Profiled on 160 Rust-book chunks (AMD EPYC Zen 5): with a key padding mask,
MultiHeadAttention took its general path (a [B, S, S] mask, per-head GEMMs) and 26-33 % of
a run; without one it takes its flash-attention kernel. The float steps between the
products (GELU, quantize, LayerNorm) ran on one thread whatever the intra-op count, so
two single-threaded runs side by side use both cores where one run on two threads left
one idle; and no text is padded. In one race (``benchmarks/bench_int8_race.py``, x fp32
in batches of 8): version 2 (padded batches of 4 under a mask) 1.66x, two such batches
side by side 1.96x, one text at a time on two threads 1.56x, two texts at once 2.47x.

What was raced and lost: ``benchmarks/bench_int8_race.py`` and its results JSON. Its numpy
twin is ``model/twin.py``'s ``numpy_forward_int8``. This module builds the graph; it does
not verify or cache it (``model/onnx_export.py``).
"""

from __future__ import annotations

import platform

import numpy as np

from .graph import HEADS, HIDDEN, Graph, embeddings, layer_count, mean_pool, model_proto

WEIGHT_MAX = 127  # int8 weights, symmetric
ACTIVATION_MAX = 127  # symmetric: uint8 with zero point 128
ZERO_POINT = 128
# GELU(x) >= -0.16997 (at x = -0.7518): a row of GELU outputs needs only its maximum,
# floored at this, to bound every |value| (no Abs pass over the widest activation).
GELU_FLOOR = 0.17
TINY = 1e-30  # the scale of an all-zero row, so that nothing divides by zero
SMOOTHING = 0.5  # SmoothQuant's alpha: the channel's maximum moved half into the weights
MS = "com.microsoft"
# onnxruntime fuses Add + LayerNormalization into SkipLayerNormalization, whose CPU kernel
# ran 3-5x slower than the two ops it replaces here (measured on [8, 256, 384]).
DISABLED_OPTIMIZERS = ("SkipLayerNormFusion",)
DOMAINS = (MS,)
# Measured with the numpy fp32 model to find each smoothed channel's maximum: prose, a
# query, code, a table, notes, scripts other than Latin (494 wordpieces). The powers of two
# they give match those of 128 longer texts (64 Rust-book chunks, 64 NFCorpus queries) for
# 89-99 % of the channels of each matrix, and embed as closely (mean cosine to fp32 on 300
# held-out queries 0.99874 against 0.99867).
CALIBRATION_TEXTS = (
    "hello world",
    "how do I reset a forgotten password",
    "vitamin D deficiency and bone health in older adults",
    "The quick brown fox jumps over the lazy dog.",
    "Straße, Grüße aus München! Ça va? naïve café, Ελληνικά, русский текст 机器学习 🚀",
    "def embed(texts):\n    \"\"\"Vectors.\"\"\"\n    return [tok.encode(t).ids for t in texts if t]\n",
    "# Meeting notes\n\n| who | what |\n|---|---|\n| Ana | budget: $4,200 |\n\n- [ ] send the "
    "invoice by Friday",
    "Ownership is Rust's most unique feature, and it enables Rust to make memory safety guarantees "
    "without needing a garbage collector. Each value in Rust has a variable that's called its owner. "
    "There can only be one owner at a time. When the owner goes out of scope, the value will be "
    "dropped. References allow you to refer to some value without taking ownership of it, and the "
    "borrow checker makes sure that every reference is valid for as long as it is used.",
    "Sourdough needs a lively starter: feed it equal weights of flour and water, keep it warm, and "
    "use it when it has doubled and smells sweet rather than sharp. The bulk ferment takes four to "
    "six hours at room temperature; stretch and fold the dough every half hour for the first two hours.",
    "Background: Dietary fiber intake has been associated with a lower risk of cardiovascular "
    "disease. Methods: We conducted a prospective cohort study of 45,000 adults followed for 12 "
    "years. Results: Participants in the highest quintile of fiber intake had a 23% lower risk "
    "(HR 0.77, 95% CI 0.68-0.87).",
    "2024-03-14 standup: deploy blocked on the flaky integration test; Ben pairs with Kim on the "
    "cache invalidation bug; release notes due Thursday. Action items: rotate the API keys, update "
    "the runbook.",
    "https://example.com/a?b=1&c=%20 v2.3.4 42 °C 3.14e-10 !!!???... [[wikilink]] #tag @mention",
)
NAMES = {"query": "attention.self.query", "key": "attention.self.key",
         "value": "attention.self.value", "output": "attention.output.dense",
         "up": "intermediate.dense", "down": "output.dense"}
# Which calibration maximum smooths which matrices: the input of query, key and value
# (``{p}.attention``) and of the first feed-forward matrix (``{p}.up``).
SMOOTHED = {"query": "attention", "key": "attention", "value": "attention", "up": "up"}


def unsigned_weights() -> bool:
    """Whether this CPU needs its int8 weights stored as uint8 with zero point 128.

    On x86 without VNNI, onnxruntime's u8 x s8 kernel multiplies with vpmaddubsw, whose
    int16 pair sums saturate: measured under `qemu-x86_64 -cpu Haswell`, 0/255 activations
    against ±127 weights came out up to 24 % wrong; its u8 x u8 kernel (vpmaddwd) is exact.
    Both give the same integer products (on one CPU, the same bytes: tests/test_int8.py);
    on a CPU with VNNI the u8 x u8 kernel ran 2.1x slower than u8 x s8 (2048 x 384 x 1536,
    one thread), so signed weights stay where they are exact (VNNI, and ARM's kernels)."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686", "x86"):
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            flags = next((line.split(":", 1)[1].split() for line in handle if line.startswith("flags")), [])
    except OSError:
        flags = []  # not Linux: unknown, so the kernel that is exact everywhere
    return not {"avx512_vnni", "avx_vnni"} & set(flags)


def quantize_weight(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A [in, out] float matrix as int8 in [-WEIGHT_MAX, WEIGHT_MAX] and one float32 scale
    per output column: w ~= q * scale."""
    scale = (np.maximum(np.abs(w).max(0), TINY) / WEIGHT_MAX).astype(np.float32)
    q = np.clip(np.rint(w / scale), -WEIGHT_MAX, WEIGHT_MAX).astype(np.int8)
    return q, scale


def smoothing(activation_max: np.ndarray, mats: list[np.ndarray]) -> np.ndarray:
    """Per input channel k: sqrt(max |x_k| / max |w_k.|) (alpha 0.5), scaled to a geometric
    mean of 1 and rounded to a power of two, so that x / s is exact in float."""
    weight_max = np.max([np.abs(m).max(1) for m in mats], 0)
    s = np.maximum(activation_max, 1e-5) ** SMOOTHING / np.maximum(weight_max, 1e-5) ** (1 - SMOOTHING)
    return (2.0 ** np.round(np.log2(s) - np.log2(s).mean())).astype(np.float32)


def layer_weights(w: dict, p: str, maxima: dict[str, np.ndarray]) -> dict[str, tuple]:
    """Layer ``p``'s matrices: name -> (int8 [in, out], scale per column, float bias or None,
    the input's smoothing divisor or None). The biases after the two exact rewrites (no
    key bias; the value bias inside the attention output's); ``maxima``: the calibration
    maximum of each smoothed input (``{p}.attention``, ``{p}.up``)."""
    f64 = lambda name: w[f"{p}.{name}"].astype(np.float64)  # noqa: E731
    biases = {"query": f64("attention.self.query.bias"), "up": f64("intermediate.dense.bias"),
              "down": f64("output.dense.bias"),
              "output": f64("attention.output.dense.bias")
              + f64("attention.self.value.bias") @ f64("attention.output.dense.weight").T}
    mats = {k: w[f"{p}.{name}.weight"].T for k, name in NAMES.items()}
    divisors = {}
    for group in set(SMOOTHED.values()):
        members = [k for k, g in SMOOTHED.items() if g == group]
        divisors[group] = smoothing(maxima[f"{p}.{group}"], [mats[k] for k in members])
    out = {}
    for k, mat in mats.items():
        s = divisors[SMOOTHED[k]] if k in SMOOTHED else None
        q, scale = quantize_weight(mat if s is None else mat * s[:, None])
        out[k] = (q, scale, biases[k].astype(np.float32) if k in biases else None, s)
    return out


class Int8Graph(Graph):
    """The builder, with per-row quantization and the int8 matrix product."""

    def __init__(self, unsigned: bool = False) -> None:
        super().__init__()
        self.unsigned = unsigned  # weights as uint8 with zero point 128 (unsigned_weights)
        self.tiny = self.const("q.tiny", np.array(TINY, np.float32))
        self.act_max = self.const("q.act_max", np.array(ACTIVATION_MAX, np.float32))
        self.gelu_floor = self.const("q.gelu_floor", np.array(GELU_FLOOR, np.float32))
        self.flat = self.const("q.flat", np.array([-1], np.int64))
        self.zero_point = self.const("q.zero_point", np.array(ZERO_POINT, np.uint8))
        self.points = ""  # [M] zero points of a row quantization: set_rows()

    def set_rows(self, h: str) -> None:
        """The per-row zero points QuantizeLinear takes, made once for h's M rows."""
        from onnx import TensorProto, helper

        rows = self.op("Slice", self.op("Shape", h), self.const("q.zero", np.array([0], np.int64)),
                       self.const("q.one", np.array([1], np.int64)))
        self.points = self.op("ConstantOfShape", rows,
                              value=helper.make_tensor("zp", TensorProto.UINT8, [1], [ZERO_POINT]))

    def quantize_rows(self, x: str, gelu: bool = False) -> tuple[str, str]:
        """x [M, K] float -> (uint8 [M, K] with zero point 128, scale [M, 1])."""
        if gelu:
            amax = self.op("Max", self.op("ReduceMax", x, axes=[1], keepdims=1), self.gelu_floor)
        else:
            amax = self.op("ReduceMax", self.op("Abs", x), axes=[1], keepdims=1)
        scale = self.op("Div", self.op("Max", amax, self.tiny), self.act_max)
        per_row = self.op("Reshape", scale, self.flat)
        return self.op("QuantizeLinear", x, per_row, self.points, axis=0), scale

    def smooth(self, x: str, divisor: np.ndarray, name: str) -> str:
        return self.op("Mul", x, self.const(f"{name}.smooth", (1.0 / divisor).astype(np.float32)))

    def matmul(self, q: str, scale: str, weight: tuple, name: str) -> str:
        """(q - 128) @ weight, exact in int32, times each row's and column's scale."""
        w8, w_scale = weight[0], weight[1]
        if self.unsigned:
            stored = self.const(f"{name}.w8", (w8.astype(np.int16) + ZERO_POINT).astype(np.uint8))
            return self.op("MatMulIntegerToFloat", q, stored, scale, self.const(f"{name}.w_scale", w_scale),
                           self.zero_point, self.zero_point, domain=MS)
        return self.op("MatMulIntegerToFloat", q, self.const(f"{name}.w8", w8), scale,
                       self.const(f"{name}.w_scale", w_scale), self.zero_point, domain=MS)

    def bias(self, x: str, weight: tuple, name: str) -> str:
        return self.op("Add", x, self.const(f"{name}.bias", weight[2]))


def _layer(g: Int8Graph, h: str, shape3: str, lw: dict, w: dict, p: str) -> str:
    """One encoder layer on h [M, 384] (M = batch x sequence): -> [M, 384]."""
    # one quantization of the smoothed input feeds query, key and value
    q, scale = g.quantize_rows(g.smooth(h, lw["query"][3], f"{p}.attention"))
    as3 = lambda x: g.op("Reshape", x, shape3)  # noqa: E731 - [M, 384] -> [B, S, 384]
    query = as3(g.bias(g.matmul(q, scale, lw["query"], f"{p}.query"), lw["query"], f"{p}.query"))
    key = as3(g.matmul(q, scale, lw["key"], f"{p}.key"))
    value = as3(g.matmul(q, scale, lw["value"], f"{p}.value"))
    # no key padding mask: onnxruntime runs its flash attention kernel only without one
    context = g.op("MultiHeadAttention", query, key, value, num_heads=HEADS, domain=MS)
    flat = g.op("Reshape", context, g.const(f"{p}.flat", np.array([-1, HIDDEN], np.int64)))
    q, scale = g.quantize_rows(flat)
    out = g.bias(g.matmul(q, scale, lw["output"], f"{p}.output"), lw["output"], f"{p}.output")
    h = g.layer_norm(g.op("Add", out, h), w, f"{p}.attention.output.LayerNorm")
    q, scale = g.quantize_rows(g.smooth(h, lw["up"][3], f"{p}.up"))
    x = g.bias(g.matmul(q, scale, lw["up"], f"{p}.up"), lw["up"], f"{p}.up")  # [M, 1536]
    # exact GELU, as the fp32 graph writes it (onnxruntime fuses it with the bias Add)
    erf = g.op("Erf", g.op("Div", x, g.const(f"{p}.sqrt2", np.array(np.sqrt(2.0), np.float32))))
    gelu = g.op("Mul", g.op("Mul", x, g.op("Add", erf, g.const(f"{p}.one", np.array(1.0, np.float32)))),
                g.const(f"{p}.half", np.array(0.5, np.float32)))
    q, scale = g.quantize_rows(gelu, gelu=True)
    out = g.bias(g.matmul(q, scale, lw["down"], f"{p}.down"), lw["down"], f"{p}.down")
    return g.layer_norm(g.op("Add", out, h), w, f"{p}.output.LayerNorm")


def build_int8_graph(w: dict[str, np.ndarray], version: int, maxima: dict[str, np.ndarray],
                     unsigned: bool = False, layers: int | None = None,
                     doc: str = "all-MiniLM-L6-v2"):
    """The onnx.ModelProto of the int8 model: input ``input_ids`` [B, S], each row one whole
    text (no padding, no mask), output ``sentence_embedding`` as the fp32 one's.

    ``maxima``: the smoothed inputs' calibration maxima (twin.calibration_maxima);
    ``unsigned``: weights stored as uint8 (unsigned_weights()); ``layers`` below the
    model's only to hold a part of the model to its twin (tests/test_int8.py); ``doc``
    names the model and its weights."""
    g = Int8Graph(unsigned)
    h3 = embeddings(g, w)  # [B, S, 384]
    shape3 = g.op("Shape", h3)
    h = g.op("Reshape", h3, g.const("flat", np.array([-1, HIDDEN], np.int64)))
    g.set_rows(h)
    for i in range(layer_count(w) if layers is None else layers):
        p = f"encoder.layer.{i}"
        h = _layer(g, h, shape3, layer_weights(w, p, maxima), w, p)
    pooled = mean_pool(g, g.op("Reshape", h, shape3))
    return model_proto(g, pooled, f"{doc} int8, per-token scales", version, DOMAINS,
                       masked=False)

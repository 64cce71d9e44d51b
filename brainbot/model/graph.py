"""The BERT sentence-embedding graph of every model record (all-MiniLM-L6-v2,
multilingual-e5-small), written node by node with ``onnx.helper`` (opset 17).

BERT embeddings (word + absolute position + token type 0), the record's post-LayerNorm
encoder layers (6 or 12) with exact erf GELU, then mean pooling over the attention mask
and L2 normalisation, as sentence-transformers does. A word table given compact (int8
values and one scale per block of 32, ``model/e5s1.py``) is gathered compact and scaled
in the graph, which gives exactly the dequantised rows. Inputs ``input_ids`` and
``attention_mask`` (int64 [batch, seq], seq <= 512); output ``sentence_embedding``
(float32 [batch, 384]). The int8 graph takes ``input_ids`` alone, unpadded texts
(``mean_pool``, ``model_proto(masked=False)``).

This module builds the fp32 graph and the pieces the int8 graph (``model/int8_graph.py``)
shares with it. It does not load weights, verify or cache (``model/onnx_export.py``).
"""

from __future__ import annotations

import numpy as np

from .e5s1 import QK

OPSET = 17
IR_VERSION = 8  # the IR of opset 17; keeps the file loadable by onnxruntime >= 1.13

# BERT hyper-parameters both records share (MiniLM's config.json and the E5S1 header,
# checked when the weights are read); the layer count is the record's (6 for MiniLM).
LAYERS, HIDDEN, HEADS, INTERMEDIATE, MAX_POSITIONS = 6, 384, 12, 1536, 512
DIMENSION = HIDDEN  # mean pooling keeps the hidden width
HEAD_DIM = HIDDEN // HEADS
LAYER_NORM_EPS = 1e-12
# transformers' extended attention mask adds finfo(float32).min at padded keys.
MASK_FILL = float(np.finfo(np.float32).min)

class Graph:
    """A tiny builder over onnx.helper: named initializers and nodes in order."""

    def __init__(self) -> None:
        self.nodes: list = []
        self.inits: list = []
        self._n = 0

    def const(self, name: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, op_type: str, *inputs: str, domain: str | None = None, **attrs) -> str:
        """One node; ``domain`` for a contrib op (com.microsoft), else the default one."""
        from onnx import helper

        self._n += 1
        out = f"{op_type.lower()}_{self._n}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], domain=domain,
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


def layer_count(w: dict) -> int:
    """How many encoder layers the weights hold."""
    n = 0
    while f"encoder.layer.{n}.attention.self.query.weight" in w:
        n += 1
    return n


def word_embeddings(g: Graph, w: dict) -> str:
    """The rows of input_ids: [B, S, 384]; from a compact table, values times block
    scales (exact: a 4-bit value times an fp16 scale is a float32 without rounding)."""
    if "embeddings.word_embeddings.weight" in w:
        return g.op("Gather", g.const("word_embeddings", w["embeddings.word_embeddings.weight"]),
                    "input_ids", axis=0)
    from onnx import TensorProto

    values = g.op("Gather", g.const("word_values", w["embeddings.word_embeddings.q"]),
                  "input_ids", axis=0)  # int8 [B, S, 384]
    scales = g.op("Gather", g.const("word_scales", w["embeddings.word_embeddings.scale"]),
                  "input_ids", axis=0)  # [B, S, 12]
    blocked = g.op("Reshape", g.op("Cast", values, to=TensorProto.FLOAT),
                   g.const("word_blocks", np.array([0, 0, HIDDEN // QK, QK], np.int64)))
    scaled = g.op("Mul", blocked, g.op("Unsqueeze", scales, g.const("axis3_1d", np.array([3], np.int64))))
    return g.op("Reshape", scaled, g.const("word_shape", np.array([0, 0, HIDDEN], np.int64)))


def embeddings(g: Graph, w: dict) -> str:
    """word + position + token-type-0 embeddings, then LayerNorm: [B, S, 384]."""
    words = word_embeddings(g, w)
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


def _attention(g: Graph, h: str, mask_bias: str, w: dict, p: str) -> str:
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


def _feed_forward(g: Graph, h: str, w: dict, p: str) -> str:
    x = g.linear(h, w, f"{p}.intermediate.dense")  # [B, S, 1536]
    # exact GELU: 0.5 x (1 + erf(x / sqrt 2)); opset 17 has no Gelu op.
    erf = g.op("Erf", g.op("Div", x, g.const(f"{p}.sqrt2", np.array(np.sqrt(2.0), np.float32))))
    gelu = g.op("Mul", g.op("Mul", x, g.op("Add", erf, g.const(f"{p}.one", np.array(1.0, np.float32)))),
                g.const(f"{p}.half", np.array(0.5, np.float32)))
    out = g.linear(gelu, w, f"{p}.output.dense")
    return g.layer_norm(g.op("Add", out, h), w, f"{p}.output.LayerNorm")


def pool(g: Graph, h: str, mask_f: str) -> str:
    """Mean over unmasked tokens, then L2 normalisation: [B, S, 384] -> [B, 384]."""
    axis1 = g.const("axis1_1d", np.array([1], np.int64))
    m = g.op("Unsqueeze", mask_f, g.const("axis2_1d", np.array([2], np.int64)))  # [B,S,1]
    summed = g.op("ReduceSum", g.op("Mul", h, m), axis1, keepdims=0)  # [B, 384]
    counts = g.op("Clip", g.op("ReduceSum", m, axis1, keepdims=0),
                  g.const("min_count", np.array(1e-9, np.float32)))  # [B, 1]
    return normalize(g, g.op("Div", summed, counts))


def mean_pool(g: Graph, h: str) -> str:
    """Mean over every token (rows that hold one whole text each, no padding), then L2
    normalisation: [B, S, 384] -> [B, 384]."""
    return normalize(g, g.op("ReduceMean", h, axes=[1], keepdims=0))


def normalize(g: Graph, mean: str) -> str:
    """[B, 384] rows divided by their L2 norm (floored at 1e-12, as torch's normalize)."""
    norm = g.op("Max", g.op("ReduceL2", mean, axes=[1], keepdims=1),
                g.const("min_norm", np.array(1e-12, np.float32)))
    return g.op("Div", mean, norm)


def build_graph(w: dict[str, np.ndarray], version: int = 1, doc: str = "all-MiniLM-L6-v2"):
    """The onnx.ModelProto of a model's weights with pooling and normalisation; ``doc``
    names the model and its weights in the file."""
    g = Graph()
    mask_f, mask_bias = mask_inputs(g)
    h = embeddings(g, w)
    for i in range(layer_count(w)):
        h = _attention(g, h, mask_bias, w, f"encoder.layer.{i}")
        h = _feed_forward(g, h, w, f"encoder.layer.{i}")
    return model_proto(g, pool(g, h, mask_f), doc, version)


def mask_inputs(g: Graph) -> tuple[str, str]:
    """The attention mask as float [B, S], and as the additive bias the fp32 attention
    takes: (1 - mask) * finfo.min, broadcast over heads and queries: [B, 1, 1, S]."""
    from onnx import TensorProto

    mask_f = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    keep = g.op("Sub", g.const("one", np.array(1.0, np.float32)), mask_f)
    mask_bias = g.op("Unsqueeze", g.op("Mul", keep, g.const("mask_fill", np.array(MASK_FILL, np.float32))),
                     g.const("axes12", np.array([1, 2], np.int64)))
    return mask_f, mask_bias


def model_proto(g: Graph, pooled: str, doc: str, version: int, domains: tuple[str, ...] = (),
                masked: bool = True):
    """Close the graph on ``pooled`` as ``sentence_embedding`` and wrap it in a model of
    opset 17 (and opset 1 of each contrib ``domains``); ``doc`` names it (the model and
    its weights); ``masked`` False: a graph of unpadded texts, whose only input is
    ``input_ids``."""
    from onnx import TensorProto, helper

    g.nodes.append(helper.make_node("Identity", [pooled], ["sentence_embedding"], name="output"))
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
              for name in ("input_ids", "attention_mask")[: 2 if masked else 1]]
    graph = helper.make_graph(
        g.nodes, doc.split(",")[0], inputs,
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", DIMENSION])],
        g.inits)
    opsets = [helper.make_opsetid("", OPSET)] + [helper.make_opsetid(d, 1) for d in domains]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="brainbot.export",
                              producer_version=str(version))
    model.ir_version = IR_VERSION
    model.doc_string = f"{doc}, mean pooled, L2 normalised"
    return model

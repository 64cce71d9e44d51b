"""The race of int8 graphs for issue #33: each against fp32, its losers recorded too.

Every candidate is checked before it is timed (karpathy's kernel lab):

- **same bytes**: the chunks embedded the candidate's own way, each alone, shuffled (in
  batches of 5 where it batches), and on 1 thread instead of 2: bit-identical or not;
- **closeness**: cosine to fp32 on the same chunks, min and mean.

Then the candidates embed the chunks in interleaved rounds (the order rotates each round;
the machine is shared), and the median round's chunks/s and the median of the per-round
ratios to fp32 are reported, in wall time and in this process's CPU time.

Two ways to run a graph. **Batches** (fp32's: ``model/embed.py``'s length buckets of 16,
a filler row beside a text alone, one run at a time on 2 intra-op threads). **Alone**
(int8's since export version 3: each text its own run at its own length, no padding and
no attention mask, 2 runs at once on 1 intra-op thread each: ``Embedder._run_alone``).

Candidates:

- ``fp32``: brainbot's fp32 export, in batches of 8: the anchor.
- ``fp32_alone``: the same graph run alone (its mask all ones), 2 at once. Not shipped:
  it changes fp32's vectors in the last bits, so every fp32 index would need a rebuild;
  it is here so that int8 is also held against the fastest fp32 found.
- ``int8_dynamic``: what `--precision int8` ran before #33: onnxruntime's
  ``quantize_dynamic`` of the fp32 graph (per-channel 7-bit weights, one activation scale
  per batch tensor, so a vector depends on its batch), batches of 8.
- ``int8_rows``: brainbot's int8 export (``model/int8_graph.py``, version 3): per-token
  activation scales, 8-bit per-channel weights, the LayerNorm outputs smoothed,
  MatMulIntegerToFloat, com.microsoft MultiHeadAttention without a mask (its flash
  kernel), SkipLayerNormFusion off; run alone.
- ``int8_rows_one_at_a_time``: the same, one text at a time on 2 intra-op threads.
- ``int8_rows_v2`` (export version 2, shipped before: the same graph with an attention
  mask, batches of 4, one at a time on 2 threads) and ``int8_rows_v2_concurrent`` (two
  such batches side by side).
- losers built from the same pieces, each run alone: ``rows_skip_ln`` (onnxruntime's
  SkipLayerNormFusion left on), ``rows_unsigned_weights`` (weights stored as uint8, what
  a CPU without VNNI gets), ``rows_unsmoothed`` (no smoothing), ``rows_7bit_unsmoothed``
  (±63 weights, no smoothing: the first version, exact on AVX2's u8 x s8 kernel too),
  ``rows_unfused_attention`` (the fp32 graph's attention ops, one Q|K|V product split by
  Slice), ``rows_mha_bias`` (query/key/value biases inside MultiHeadAttention instead of
  the two exact rewrites), ``rows_fast_gelu`` (tanh GELU, com.microsoft FastGelu),
  ``rows_scale_by_mul`` (the rows' scales applied by a Mul after the product, not inside
  MatMulIntegerToFloat: the same bytes);
- ``nbits8`` (com.microsoft MatMulNBits in the fp32 graph, 8-bit weights in blocks of 32,
  int8 activations quantized per block inside the kernel: accuracy_level 4, batches of
  8), ``fp32_batch4``, ``fp32_concurrent`` (two fp32 batches side by side), and
  ``fp32_spinning`` / ``int8_rows_spinning`` (onnxruntime's pool spinning, which brainbot
  turns off: model/session.py).

Data: ~200-word rust-book chunks (bench_embed.load_chunks). Not measured: tokenizing
differences (the Embedder's own; the same for every candidate), session creation.

    flock /tmp/brainbot-bench.lock .venv/bin/python benchmarks/bench_int8_race.py [--chunks 160] [--rounds 5] \
        [--nfcorpus-db nf.db]

JSON to benchmarks/results/int8_race.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_chunking import cpu_family  # noqa: E402
from bench_embed import MaskedSession, _cpu_name, _has_vnni, dynamic_int8, load_chunks  # noqa: E402

from brainbot.model import int8_graph as i8  # noqa: E402
from brainbot.model import session as model_session  # noqa: E402
from brainbot.model.embed import BATCH_SIZES, Embedder  # noqa: E402
from brainbot.model.files import load_tokenizer  # noqa: E402
from brainbot.model.records import MINILM  # noqa: E402

MAX_TOKENS = MINILM.max_tokens
from brainbot.model.graph import (  # noqa: E402
    HEADS,
    HIDDEN,
    LAYERS,
    Graph,
    embeddings,
    mask_inputs,
    mean_pool,
    model_proto,
    pool,
)
from brainbot.model.onnx_export import (  # noqa: E402
    EXPORT_VERSIONS,
    calibration_maxima,
    load_weights,
    onnx_path,
)

RESULTS = ROOT / "benchmarks" / "results" / "int8_race.json"
NFCORPUS = ROOT.parent / "shared" / "data" / "nfcorpus"
SKIP_LN = ("SkipLayerNormFusion",)


# -- the candidates ------------------------------------------------------------------


def _gelu(g: Graph, x: str, p: str, fast: bool) -> str:
    if fast:
        return g.op("FastGelu", x, domain=i8.MS)
    erf = g.op("Erf", g.op("Div", x, g.const(f"{p}.sqrt2", np.array(np.sqrt(2.0), np.float32))))
    return g.op("Mul", g.op("Mul", x, g.op("Add", erf, g.const(f"{p}.one", np.array(1.0, np.float32)))),
                g.const(f"{p}.half", np.array(0.5, np.float32)))


def _attention_unfused(g, q, scale, lw, w, p, shape3, mask_bias: str | None) -> str:
    """One Q|K|V product, Slice, and the fp32 graph's MatMul / Softmax attention."""
    qkv_w = tuple(np.concatenate([lw[n][k] for n in ("query", "key", "value")], -1) for k in (0, 1))
    qkv = g.matmul(q, scale, qkv_w, f"{p}.qkv")
    bias = np.concatenate([lw["query"][2], np.zeros(2 * HIDDEN, np.float32)])
    qkv = g.op("Add", qkv, g.const(f"{p}.qkv.bias", bias))
    split = g.const(f"{p}.split", np.array([0, 0, HEADS, HIDDEN // HEADS], np.int64))
    whole = g.op("Reshape", qkv, g.op("Concat", g.op("Slice", shape3, g.const(f"{p}.z", np.array([0], np.int64)),
                                                     g.const(f"{p}.t", np.array([2], np.int64))),
                                      g.const(f"{p}.w", np.array([3 * HIDDEN], np.int64)), axis=0))

    def part(j: int, perm: list[int]) -> str:
        x = g.op("Slice", whole, g.const(f"{p}.s{j}", np.array([j * HIDDEN], np.int64)),
                 g.const(f"{p}.e{j}", np.array([(j + 1) * HIDDEN], np.int64)),
                 g.const(f"{p}.a{j}", np.array([2], np.int64)))
        return g.op("Transpose", g.op("Reshape", x, split), perm=perm)

    scale_ = g.const(f"{p}.scale", np.array(1.0 / np.sqrt(HIDDEN // HEADS), np.float32))
    scores = g.op("Mul", g.op("MatMul", part(0, [0, 2, 1, 3]), part(1, [0, 2, 3, 1])), scale_)
    if mask_bias is not None:
        scores = g.op("Add", scores, mask_bias)
    context = g.op("MatMul", g.op("Softmax", scores, axis=-1), part(2, [0, 2, 1, 3]))
    return g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]),
                g.const(f"{p}.flat", np.array([-1, HIDDEN], np.int64)))


def _attention_mha(g, q, scale, lw, w, p, shape3, mask: str | None, mha_bias: bool) -> str:
    as3 = lambda x: g.op("Reshape", x, shape3)  # noqa: E731
    masked = () if mask is None else (mask,)
    if mha_bias:  # the three biases inside the op: no rewrite
        heads = [as3(g.matmul(q, scale, lw[n], f"{p}.{n}")) for n in ("query", "key", "value")]
        bias = np.concatenate([w[f"{p}.attention.self.{n}.bias"] for n in ("query", "key", "value")])
        context = g.op("MultiHeadAttention", *heads, g.const(f"{p}.qkv_bias", bias), *masked,
                       num_heads=HEADS, domain=i8.MS)
    else:
        query = as3(g.bias(g.matmul(q, scale, lw["query"], f"{p}.query"), lw["query"], f"{p}.query"))
        key, value = (as3(g.matmul(q, scale, lw[n], f"{p}.{n}")) for n in ("key", "value"))
        context = g.op("MultiHeadAttention", query, key, value, *(("", mask) if mask else ()),
                       num_heads=HEADS, domain=i8.MS)
    return g.op("Reshape", context, g.const(f"{p}.flat", np.array([-1, HIDDEN], np.int64)))


def _unsmoothed(lw: dict, w: dict, p: str) -> dict:
    """The layer's weights quantized without the smoothing."""
    return {k: (*i8.quantize_weight(w[f"{p}.{i8.NAMES[k]}.weight"].T), v[2], None) for k, v in lw.items()}


def rows_variant(w: dict, maxima: dict, *, attention: str = "mha", fast_gelu: bool = False,
                 smooth: bool = True, masked: bool = False):
    """The int8_rows graph with one piece swapped (see the module docstring); ``masked``:
    padded batches under an attention mask, as export version 2 ran."""
    from onnx import TensorProto

    g = i8.Int8Graph()
    mask_f = mask_bias = mask = None
    if masked:
        mask_f, mask_bias = mask_inputs(g)
        mask = g.op("Cast", "attention_mask", to=TensorProto.INT32)
    h3 = embeddings(g, w)
    shape3 = g.op("Shape", h3)
    h = g.op("Reshape", h3, g.const("flat", np.array([-1, HIDDEN], np.int64)))
    g.set_rows(h)
    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        lw = i8.layer_weights(w, p, maxima)
        if not smooth:
            lw = _unsmoothed(lw, w, p)
        if attention == "mha_bias":  # no value-bias fold either
            lw["output"] = (*lw["output"][:2], w[f"{p}.attention.output.dense.bias"], None)
        x = h if lw["query"][3] is None else g.smooth(h, lw["query"][3], f"{p}.attention")
        q, scale = g.quantize_rows(x)
        if attention == "unfused":
            flat = _attention_unfused(g, q, scale, lw, w, p, shape3, mask_bias)
        else:
            flat = _attention_mha(g, q, scale, lw, w, p, shape3, mask, attention == "mha_bias")
        q, scale = g.quantize_rows(flat)
        out = g.bias(g.matmul(q, scale, lw["output"], f"{p}.output"), lw["output"], f"{p}.output")
        h = g.layer_norm(g.op("Add", out, h), w, f"{p}.attention.output.LayerNorm")
        q, scale = g.quantize_rows(h if lw["up"][3] is None else g.smooth(h, lw["up"][3], f"{p}.up"))
        up = _gelu(g, g.bias(g.matmul(q, scale, lw["up"], f"{p}.up"), lw["up"], f"{p}.up"), p, fast_gelu)
        q, scale = g.quantize_rows(up, gelu=True)
        out = g.bias(g.matmul(q, scale, lw["down"], f"{p}.down"), lw["down"], f"{p}.down")
        h = g.layer_norm(g.op("Add", out, h), w, f"{p}.output.LayerNorm")
    h3 = g.op("Reshape", h, shape3)
    pooled = pool(g, h3, mask_f) if masked else mean_pool(g, h3)
    return model_proto(g, pooled, "race variant", 0, i8.DOMAINS, masked=masked)


def nbits8(w: dict, block: int = 32):
    """The fp32 graph with every weight MatMul as MatMulNBits (8-bit, accuracy_level 4)."""
    from brainbot.model import graph

    class NBits(Graph):
        def linear(self, x: str, weights: dict, prefix: str) -> str:
            mat = weights[f"{prefix}.weight"]  # [out, in]
            n, k = mat.shape
            blocks = mat.reshape(n, k // block, block)
            scale = np.maximum(np.abs(blocks).max(-1), 1e-30) / 127
            q = (np.clip(np.rint(blocks / scale[..., None]), -127, 127) + 128).astype(np.uint8)
            y = self.op("MatMulNBits", x, self.const(f"{prefix}.q", q),
                        self.const(f"{prefix}.s", scale.astype(np.float32).reshape(-1)),
                        K=k, N=n, bits=8, block_size=block, accuracy_level=4, domain=i8.MS)
            return self.op("Add", y, self.const(f"{prefix}.bias", weights[f"{prefix}.bias"]))

    original = graph.Graph
    graph.Graph = NBits  # build_graph instantiates graph.Graph
    try:
        model = graph.build_graph(w, 0)
    finally:
        graph.Graph = original
    model.opset_import.append(__import__("onnx").helper.make_opsetid(i8.MS, 1))
    return model


class ScaleByMul(i8.Int8Graph):
    """MatMulIntegerToFloat with a scalar activation scale of 1 (no per-row ScaleOutput,
    a single-threaded pass inside the op), then a Mul by the rows' scales (the same two
    float products in the same order: the same bytes)."""

    def matmul(self, q, scale, weight, name):
        one = self.const(f"{name}.one", np.array(1.0, np.float32))
        y = self.op("MatMulIntegerToFloat", q, self.const(f"{name}.w8", weight[0]), one,
                    self.const(f"{name}.w_scale", weight[1]), self.zero_point, domain=i8.MS)
        return self.op("Mul", y, scale)


def scale_by_mul(w: dict, maxima: dict):
    original = i8.Int8Graph
    i8.Int8Graph = ScaleByMul  # build_int8_graph instantiates i8.Int8Graph
    try:
        return i8.build_int8_graph(w, 0, maxima)
    finally:
        i8.Int8Graph = original


def build_candidates(folder: Path) -> dict[str, dict]:
    """name -> {"path", "disabled", "batch_size", and how it runs: "alone" (each text
    alone, unpadded, ``workers`` runs at once on ``intra`` threads each: the Embedder's
    int8 way), "concurrent" (batches side by side), "spin"}."""
    import onnx

    w = load_weights()
    maxima = calibration_maxima(w)
    alone = {"alone": True, "disabled": SKIP_LN}
    out = {"fp32": {"path": onnx_path("fp32"), "disabled": ()},
           "int8_dynamic": {"path": dynamic_int8(folder / "dynamic.onnx"), "disabled": ()},
           "int8_rows": {"path": onnx_path("int8")} | alone}
    out["int8_rows_one_at_a_time"] = out["int8_rows"] | {"workers": 1, "intra": None}
    onnx.save(rows_variant(w, maxima, masked=True), folder / "v2.onnx")
    out["int8_rows_v2"] = {"path": folder / "v2.onnx", "disabled": SKIP_LN, "batch_size": 4}
    out["int8_rows_v2_concurrent"] = out["int8_rows_v2"] | {"concurrent": True}
    out["rows_skip_ln"] = out["int8_rows"] | {"disabled": ()}
    onnx.save(i8.build_int8_graph(w, 0, maxima, unsigned=True), folder / "unsigned.onnx")
    out["rows_unsigned_weights"] = {"path": folder / "unsigned.onnx"} | alone
    saved = i8.WEIGHT_MAX
    i8.WEIGHT_MAX = 63
    try:
        onnx.save(rows_variant(w, maxima, smooth=False), folder / "7bit.onnx")
    finally:
        i8.WEIGHT_MAX = saved
    out["rows_7bit_unsmoothed"] = {"path": folder / "7bit.onnx"} | alone
    for name, model in (("rows_unsmoothed", rows_variant(w, maxima, smooth=False)),
                        ("rows_unfused_attention", rows_variant(w, maxima, attention="unfused")),
                        ("rows_mha_bias", rows_variant(w, maxima, attention="mha_bias")),
                        ("rows_fast_gelu", rows_variant(w, maxima, fast_gelu=True)),
                        ("rows_scale_by_mul", scale_by_mul(w, maxima))):
        onnx.save(model, folder / f"{name}.onnx")
        out[name] = {"path": folder / f"{name}.onnx"} | alone
    onnx.save(nbits8(w), folder / "nbits8.onnx")
    out["nbits8"] = {"path": folder / "nbits8.onnx", "disabled": SKIP_LN}
    for c in out.values():  # batched ones at the Embedder's fp32 batch size unless named
        c.setdefault("batch_size", BATCH_SIZES["fp32"])
    out["fp32_alone"] = out["fp32"] | {"alone": True}
    out["fp32_spinning"] = out["fp32"] | {"spin": True}
    out["int8_rows_spinning"] = out["int8_rows"] | {"spin": True}
    out["fp32_concurrent"] = out["fp32"] | {"concurrent": True}
    out["fp32_batch4"] = out["fp32"] | {"batch_size": 4}
    return out


class Concurrent(Embedder):
    """The Embedder's fp32 batches run side by side on ``workers`` threads, each a
    single-threaded onnxruntime run (session.run releases the GIL), instead of one run at
    a time on ``workers`` intra-op threads."""

    workers = 2

    def embed(self, texts):
        from concurrent.futures import ThreadPoolExecutor

        from brainbot.model.embed import _batches

        texts = list(texts)
        out = np.empty((len(texts), 384), np.float32)
        ids = [e.ids for e in self._tokenizer.encode_batch(texts)]

        def run(batch) -> None:
            rows, batch_ids, mask = batch
            out[rows] = self._session.run(["sentence_embedding"],
                                          {"input_ids": batch_ids, "attention_mask": mask})[0][: len(rows)]

        with ThreadPoolExecutor(self.workers) as pool:
            list(pool.map(run, _batches(ids, self.batch_size)))
        return out


def embedder(candidate: dict, threads: int, batch_size: int | None = None) -> Embedder:
    """An Embedder (its tokenizing and batching) over the candidate's own session."""
    import onnxruntime as ort

    alone = candidate.get("alone", False)
    concurrent = candidate.get("concurrent", False)
    if alone:
        e = Embedder("int8", threads=candidate.get("workers", threads))
        intra = candidate.get("intra", 1) or threads
    else:
        e = (Concurrent if concurrent else Embedder)("fp32", threads=threads,
                                                     batch_size=batch_size or candidate["batch_size"])
        intra = 1 if concurrent else threads
    e._tokenizer = load_tokenizer(max_length=MAX_TOKENS, truncate=True)
    options = model_session.session_options(intra, True)
    if candidate.get("spin"):  # the same options, spinning left at onnxruntime's default
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = intra, 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    e._session = ort.InferenceSession(str(candidate["path"]), options, providers=["CPUExecutionProvider"],
                                      disabled_optimizers=list(candidate["disabled"]))
    if alone and any(i.name == "attention_mask" for i in e._session.get_inputs()):
        e._session = MaskedSession(e._session)
    return e


# -- measurements ---------------------------------------------------------------------


def same_bytes(candidate: dict, chunks: list[str], threads: int) -> dict:
    """The chunks in the candidate's own batches; each alone; shuffled in batches of 5; on 1 thread."""
    base_e = embedder(candidate, threads)
    base = base_e.embed(chunks)
    order = list(range(len(chunks)))
    random.Random(33).shuffle(order)
    shuffled = np.empty_like(base)
    shuffled[order] = embedder(candidate, threads, 5).embed([chunks[i] for i in order])
    ways = {"alone": np.stack([base_e.embed([c])[0] for c in chunks]), "shuffled_batches_of_5": shuffled,
            "one_thread": embedder(candidate, 1).embed(chunks)}
    out = {k: bool(np.array_equal(v, base)) for k, v in ways.items()}
    out["max_abs"] = float(max(np.abs(v - base).max() for v in ways.values()))
    return out | {"bit_identical": all(out[k] for k in ways)}


def race(embedders: dict[str, Embedder], chunks: list[str], rounds: int, min_idle: float = 0.0) -> dict:
    from bench_coldstart import wait_for_idle

    for e in embedders.values():
        e.embed(chunks[:16])  # warm-up
    names = list(embedders)
    times: dict[str, list[float]] = {n: [] for n in embedders}
    cpu: dict[str, list[float]] = {n: [] for n in embedders}
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            wait_for_idle(min_idle, timeout=60.0)
            start, start_cpu = time.perf_counter(), time.process_time()
            embedders[name].embed(chunks)
            times[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    ratio = lambda a, b: round(statistics.median(x / y for x, y in zip(a, b, strict=True)), 3)  # noqa: E731
    # CPU seconds of this process (both threads) as well: another process on the cores
    # stretches the wall time of whichever candidate it overlaps, far less the CPU time.
    return {n: {"chunks_per_s_median": round(len(chunks) / statistics.median(t), 1),
                "chunks_per_s_best": round(len(chunks) / min(t), 1),
                "vs_fp32_median_of_rounds": ratio(times["fp32"], t),
                "vs_fp32_per_round": [round(f / x, 3) for f, x in zip(times["fp32"], t, strict=True)],
                "cpu_s_median": round(statistics.median(cpu[n]), 3),
                "vs_fp32_cpu_median_of_rounds": ratio(cpu["fp32"], cpu[n])}
            for n, t in times.items()}


def nfcorpus_vector(db: Path, embedders: dict[str, Embedder], names: list[str]) -> dict:
    """NFCorpus vector-mode nDCG@10 of each named candidate, as `brainbot eval` computes it
    (exact scan of every chunk, a document scores as its best chunk): the chunk texts of
    ``db`` (an index `brainbot eval --beir` built) embedded again by the candidate, and the
    test queries; also int8 chunks with fp32 queries and the reverse."""
    import sqlite3

    from brainbot.evaluate import load_qrels, ndcg_at

    con = sqlite3.connect(db)
    rows = con.execute("SELECT d.path, c.retrieval_text FROM chunks c JOIN documents d "
                       "ON d.id = c.document_id ORDER BY c.id").fetchall()
    con.close()
    paths, texts = np.array([r[0] for r in rows]), [r[1] for r in rows]
    distinct = sorted(set(texts))
    qrels = load_qrels(NFCORPUS, "test")
    queries = {str(q["_id"]): q["text"] for q in map(json.loads, (NFCORPUS / "queries.jsonl").open())}
    qids = [q for q in qrels if q in queries]

    def vectors(e: Embedder) -> tuple[np.ndarray, np.ndarray]:
        by_text = dict(zip(distinct, e.embed(distinct), strict=True))
        return np.stack([by_text[t] for t in texts]), e.embed([queries[q] for q in qids])

    def ndcg(chunks: np.ndarray, qv: np.ndarray) -> float:
        scores = []
        for i, qid in enumerate(qids):
            ranked = list(dict.fromkeys(paths[np.argsort(-(chunks @ qv[i]), kind="stable")[:300]]))
            scores.append(ndcg_at(ranked, qrels[qid], 10))
        return round(float(np.mean(scores)), 4)

    fp32 = vectors(embedders["fp32"])
    out = {"queries": len(qids), "chunks": len(texts), "fp32": ndcg(*fp32)}
    for name in names:
        chunks, qv = vectors(embedders[name])
        out[name] = {"ndcg@10": ndcg(chunks, qv), "its_chunks_fp32_queries": ndcg(chunks, fp32[1]),
                     "fp32_chunks_its_queries": ndcg(fp32[0], qv)}
        print("nfcorpus", name, out[name], flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=160)
    ap.add_argument("--check-chunks", type=int, default=48, help="chunks for the same-bytes checks")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-idle", type=float, default=0.0,
                    help="start each timed run once the CPUs were this idle (0.8)")
    ap.add_argument("--only", help="comma-separated candidates (fp32 always runs); the JSON is not written")
    ap.add_argument("--nfcorpus-db", type=Path,
                    help="an index `brainbot eval --beir` built: vector nDCG@10 of the main candidates")
    args = ap.parse_args()
    chunks = load_chunks(args.chunks)
    result = {"benchmark": "int8 graphs against fp32, issue #33", "cpu": _cpu_name(),
              "cpu_family": cpu_family(), "vnni": _has_vnni(),
              "machine": platform.machine(), "threads": args.threads, "chunks": len(chunks),
              "rounds": args.rounds, "min_idle": args.min_idle, "export_versions": EXPORT_VERSIONS,
              "load_before": os.getloadavg()[0], "candidates": {}}
    with tempfile.TemporaryDirectory(prefix="int8-race-") as tmp:
        candidates = build_candidates(Path(tmp))
        if args.only:
            keep = {"fp32", *args.only.split(",")}
            candidates = {n: c for n, c in candidates.items() if n in keep}
        embedders = {n: embedder(c, args.threads) for n, c in candidates.items()}
        reference = embedders["fp32"].embed(chunks)
        for name, c in candidates.items():
            vectors = embedders[name].embed(chunks)
            cos = (vectors.astype(np.float64) * reference).sum(1)
            result["candidates"][name] = {
                "disabled_optimizers": list(c["disabled"]), "batch_size": embedders[name].batch_size,
                "cosine_to_fp32": {"min": round(float(cos.min()), 5), "mean": round(float(cos.mean()), 5)},
                "same_bytes": same_bytes(c, chunks[: args.check_chunks], args.threads)}
            print(name, json.dumps(result["candidates"][name]), flush=True)
        if args.nfcorpus_db:
            names = [n for n in ("int8_dynamic", "int8_rows", "rows_unsmoothed", "rows_7bit_unsmoothed")
                     if n in embedders]
            result["nfcorpus_vector"] = nfcorpus_vector(args.nfcorpus_db, embedders, names)
        speed = race(embedders, chunks, args.rounds, args.min_idle)
    for name, figures in speed.items():
        result["candidates"][name]["speed"] = figures
        print(f"{name:24s} {figures['chunks_per_s_median']:7.1f} chunks/s  x{figures['vs_fp32_median_of_rounds']}"
              f"  cpu x{figures['vs_fp32_cpu_median_of_rounds']}")
    result["load_after"] = os.getloadavg()[0]
    if not args.only:
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Static int8 (QDQ, scales fixed at export) against fp32 and today's dynamic int8.

Issue #22 part 5. The experiment lives here, not in the package: the static graph is
built from the same fp32 export brainbot caches (model/onnx_export.py), quantized with
onnxruntime's ``quantize_static``:

- QDQ format, QUInt8 activations, QInt8 weights, per-tensor weights, MinMax calibration;
- only the weight MatMuls (the attention's activation x activation MatMuls stay fp32);
- calibration inputs: ``--calibration`` chunks (default 300) of the project's own example
  notes (examples/notes + examples/vault, ``retrieval_text`` as the indexer embeds it),
  spread evenly, batched exactly as the Embedder batches them;
- ``reduce_range`` (7-bit weights) from ``--reduce-range auto|on|off``; auto: on when the
  CPU has no VNNI, onnxruntime's x86 guidance.

Measured, in one process:

- **determinism of the build**: two builds, sha256 compared;
- **alone vs batch**: every calibration-free text (rust-book chunks) embedded alone and
  in batches of 8 through the Embedder (same padding buckets, as an index uses it), and
  raw through onnxruntime with different padding lengths (a text padded to its own
  length, and to 256); max abs difference and whether bit-identical;
- **cosine to fp32** of the two int8 graphs;
- **chunks/s** of fp32, dynamic int8 and static int8 through the Embedder, rounds
  interleaved (the machine is shared), the median round and ratios to fp32 of the
  same round;
- with ``--nfcorpus``: `brainbot eval --beir ../shared/data/nfcorpus` on an index embedded
  with the static graph (every mode; the graph replaces int8's session in this process);
- with ``--questions``: `brainbot eval --questions FILE -k 5` for examples/questions*.jsonl,
  on static-int8 indexes of their folders.

    nice .venv/bin/python benchmarks/bench_static_int8.py [--rounds 5] [--nfcorpus] [--questions]

JSON to benchmarks/results/static_int8.json (parts not run keep their earlier values).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_embed import MaskedSession, dynamic_int8, load_chunks  # noqa: E402

from brainbot.model import session as model_session  # noqa: E402
from brainbot.model.embed import DEFAULT_BATCH_SIZE, Embedder, _batches, physical_cores  # noqa: E402
from brainbot.model.files import cache_dir, load_tokenizer  # noqa: E402
from brainbot.model.onnx_export import cache_name, onnx_path  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "static_int8.json"
SHARED = ROOT.parent / "shared"
NFCORPUS = SHARED / "data" / "nfcorpus"
CALIBRATION_ROOTS = [ROOT / "examples" / "notes", ROOT / "examples" / "vault"]
QUESTION_SETS = {  # question file -> the folder its expected paths are relative to
    "questions.jsonl": ROOT / "examples" / "notes",
    "questions-holdout.jsonl": ROOT / "examples" / "notes",
    "questions-vault.jsonl": ROOT / "examples" / "vault",
    "questions-cjk.jsonl": ROOT / "examples" / "vault",
    "questions-rust.jsonl": SHARED / "data" / "corpora" / "rust-book",
    "questions-rust-holdout.jsonl": SHARED / "data" / "corpora" / "rust-book",
}


# -- building the static graph ----------------------------------------------------------


def has_vnni() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False
    return "avx512_vnni" in flags or "avx_vnni" in flags


def calibration_texts(n: int) -> list[str]:
    """n retrieval texts of the example notes' chunks, spread evenly, in a fixed order."""
    from brainbot.text.documents import chunk_paths
    from brainbot.text.tokens import TokenCounter

    texts = [c.to_record()["retrieval_text"] for item in chunk_paths(CALIBRATION_ROOTS, TokenCounter())
             for c in getattr(item, "chunks", ())]
    if len(texts) < n:
        raise SystemExit(f"only {len(texts)} chunks in the examples, asked for {n}")
    step = len(texts) / n
    return [texts[int(i * step)] for i in range(n)]


class _Reader:
    """onnxruntime's CalibrationDataReader over the Embedder's own batches."""

    def __init__(self, texts: list[str]) -> None:
        ids = [e.ids for e in load_tokenizer().encode_batch(texts)]
        self._feeds = iter([{"input_ids": b, "attention_mask": m}
                            for _, b, m in _batches(ids, DEFAULT_BATCH_SIZE)])

    def get_next(self):
        return next(self._feeds, None)


def weight_matmuls(path: Path) -> list[str]:
    import onnx

    model = onnx.load(str(path))
    weights = {i.name for i in model.graph.initializer}
    return [n.name for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in weights]


def build_static(out: Path, texts: list[str], reduce_range: bool) -> dict:
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    fp32 = onnx_path("fp32")
    started = time.perf_counter()
    quantize_static(str(fp32), str(out), _Reader(texts), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    per_channel=False, reduce_range=reduce_range,
                    nodes_to_quantize=weight_matmuls(fp32),
                    calibrate_method=CalibrationMethod.MinMax,
                    extra_options={"CalibTensorRangeSymmetric": False})
    return {"seconds": round(time.perf_counter() - started, 2),
            "sha256": hashlib.sha256(out.read_bytes()).hexdigest()}


def static_session(path: Path, threads: int):
    import onnxruntime as ort

    return ort.InferenceSession(str(path), model_session.session_options(threads, True),
                                providers=["CPUExecutionProvider"])


def embedder_over(session) -> Embedder:
    """An Embedder with fp32's padded batches over a session of a graph that takes a mask
    (the static and the dynamic int8 graphs are quantized copies of the fp32 one)."""
    e = Embedder(precision="fp32")
    e._tokenizer = load_tokenizer()
    e._session = session
    return e


# -- measurements ---------------------------------------------------------------------


def alone_vs_batch(embedder: Embedder, session, texts: list[str]) -> dict:
    """Through the Embedder (as an index uses it), and raw with other padding lengths."""
    batched = embedder.embed(texts)
    alone = np.stack([embedder.embed([t])[0] for t in texts])
    # The Embedder in order of input, batches of texts of mixed buckets: reversed order.
    reverse = embedder.embed(texts[::-1])[::-1]
    ids = [e.ids for e in load_tokenizer().encode_batch(texts)]
    raw_diff = 0.0
    for row in ids[:40]:
        own = _run(session, [row], len(row))
        padded = _run(session, [row, [101, 102]], 256)[:1]
        raw_diff = max(raw_diff, float(np.abs(own - padded).max()))
    return {"texts": len(texts),
            "embedder_alone_vs_batch_max_abs": float(np.abs(alone - batched).max()),
            "embedder_bit_identical": bool(np.array_equal(alone, batched)
                                           and np.array_equal(reverse, batched)),
            "raw_own_length_vs_padded_256_max_abs": raw_diff,
            "raw_texts": min(40, len(ids)),
            "raw_bit_identical": raw_diff == 0.0}


def _run(session, rows: list[list[int]], width: int) -> np.ndarray:
    ids = np.zeros((len(rows), width), np.int64)
    mask = np.zeros_like(ids)
    for j, r in enumerate(rows):
        ids[j, : len(r)] = r
        mask[j, : len(r)] = 1
    return session.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})[0]


def throughput(embedders: dict[str, Embedder], texts: list[str], rounds: int) -> dict:
    for e in embedders.values():
        e.embed(texts[:16])  # warm-up
    times: dict[str, list[float]] = {name: [] for name in embedders}
    for r in range(rounds):
        names = list(embedders) if r % 2 == 0 else list(embedders)[::-1]
        for name in names:
            t0 = time.perf_counter()
            embedders[name].embed(texts)
            times[name].append(time.perf_counter() - t0)
    out = {}
    for name, ts in times.items():
        ratios = [f / t for f, t in zip(times["fp32"], ts)]
        out[name] = {"chunks_per_s_median": round(len(texts) / statistics.median(ts), 1),
                     "chunks_per_s_best": round(len(texts) / min(ts), 1),
                     "speedup_vs_fp32_median": round(statistics.median(ratios), 3),
                     "speedup_vs_fp32_per_round": [round(x, 3) for x in ratios]}
    return out


def cosines(reference: np.ndarray, other: np.ndarray) -> dict:
    cos = (reference * other).sum(1)
    return {"min": round(float(cos.min()), 5), "mean": round(float(cos.mean()), 5)}


# -- evals with the static graph in place of int8's session ------------------------------


def use_static_for_int8(path: Path) -> None:
    original = model_session.open_session

    def open_session(precision: str, threads: int):
        if precision != "int8":
            return original(precision, threads)
        return MaskedSession(static_session(path, threads))  # run as int8 runs: each text alone

    model_session.open_session = open_session


def nfcorpus_eval(db: Path) -> dict:
    from brainbot.evaluate import run_beir

    return run_beir(NFCORPUS, db=str(db), modes=["bm25", "vector", "hybrid", "rerank"],
                    precision="int8")


def question_evals(folder: Path) -> dict:
    from brainbot.evaluate import run_questions
    from brainbot.index.indexer import Indexer

    out, dbs = {}, {}
    for name, notes in QUESTION_SETS.items():
        if notes not in dbs:
            dbs[notes] = folder / f"q-{len(dbs)}.db"
            with Indexer(dbs[notes], precision="int8") as ix:
                ix.index_paths([str(notes)])
        result = run_questions(ROOT / "examples" / name, db=str(dbs[notes]), k=5)
        out[name] = {mode: {k: v for k, v in m.items() if k.startswith(("hit@", "recall@", "mrr"))}
                     for mode, m in result["modes"].items()}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calibration", type=int, default=300)
    ap.add_argument("--reduce-range", choices=["auto", "on", "off"], default="auto")
    ap.add_argument("--chunks", type=int, default=160)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--nfcorpus", action="store_true")
    ap.add_argument("--questions", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    args = ap.parse_args()
    reduce_range = {"on": True, "off": False}.get(args.reduce_range, not has_vnni())
    threads = physical_cores()
    result = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    result.update(cpu=platform.processor() or platform.machine(), vnni=has_vnni(),
                  threads=threads, calibration_chunks=args.calibration, reduce_range=reduce_range)
    folder = cache_dir() / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    graph = folder / cache_name("fp32").replace("fp32", f"static-rr{int(reduce_range)}")
    texts = calibration_texts(args.calibration)
    first = build_static(graph, texts, reduce_range)
    again = build_static(graph.with_suffix(".again.onnx"), texts, reduce_range)
    result["build"] = first | {"deterministic": first["sha256"] == again["sha256"]}
    print("build", result["build"], flush=True)
    static = static_session(graph, threads)
    dynamic = static_session(dynamic_int8(folder / "dynamic.onnx"), threads)  # before #33
    embedders = {"fp32": Embedder("fp32"), "dynamic_int8": embedder_over(dynamic),
                 "static_int8": embedder_over(static)}
    chunks = load_chunks(args.chunks)
    vectors = {name: e.embed(chunks) for name, e in embedders.items()}
    result["cosine_to_fp32"] = {n: cosines(vectors["fp32"], v) for n, v in vectors.items() if n != "fp32"}
    result["alone_vs_batch"] = {
        "static_int8": alone_vs_batch(embedders["static_int8"], static, chunks),
        "dynamic_int8": alone_vs_batch(embedders["dynamic_int8"], dynamic, chunks),
        "fp32": alone_vs_batch(embedders["fp32"], model_session.open_session("fp32", threads), chunks)}
    print(json.dumps({k: result[k] for k in ("cosine_to_fp32", "alone_vs_batch")}, indent=1), flush=True)
    if not args.skip_speed:
        result["throughput"] = throughput(embedders, chunks, args.rounds) | {
            "chunks": args.chunks, "rounds": args.rounds, "load_before": os.getloadavg()[0]}
        print(json.dumps(result["throughput"], indent=1), flush=True)
    use_static_for_int8(graph)
    if args.questions:
        with tempfile.TemporaryDirectory(prefix="static-q-") as tmp:
            result["questions"] = question_evals(Path(tmp))
        print(json.dumps(result["questions"], indent=1), flush=True)
    if args.nfcorpus:
        with tempfile.TemporaryDirectory(prefix="static-nf-") as tmp:
            nf = nfcorpus_eval(Path(tmp) / "nf.db")
        result["nfcorpus"] = {"modes": nf["modes"], "index": nf["index"]}
        print(json.dumps(result["nfcorpus"], indent=1), flush=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

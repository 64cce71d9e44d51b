"""Embedding throughput: brainbot's Embedder against the limit, fp32 against both int8s.

What is measured, in one run on one machine:

- **Embedder** — ``brainbot.Embedder("fp32").embed(chunks)``: tokenizing, sorting by
  length, padding, onnxruntime, reordering. Session already created (one warm-up call).
- **limit** — the same ONNX file and session options driven alone by onnxruntime over
  inputs tokenized, sorted and padded beforehand, the same batch size: only
  ``session.run`` is timed. Embedder / limit is the overhead brainbot adds.
- **int8** — ``Embedder("int8")``, the per-token int8 graph (model/int8_graph.py, issue
  #33; each text run alone, two at once), and **int8_dynamic**, what `--precision int8`
  ran before it (onnxruntime's dynamic quantization, one activation scale per batch,
  through fp32's batches): speed, cosine to fp32 on the chunks and to
  sentence-transformers' reference vectors, one text at a time and in batches, and
  whether a chunk alone gives the bytes it gives in a batch.
- **fp32_alone** — the fp32 graph run the int8 way (``fp32_alone``): not shipped, the
  fastest fp32 found, so that int8 is held against it too.
- **sentence-transformers** on torch, only when importable (brainbot never imports it).
- Export time (fp32, int8) into an empty cache, and session creation time.

Data: ~200-word chunks of the Rust book (../shared/data/corpora/rust-book/src, paragraphs
grouped until they reach 200 words). Many exceed 256 wordpieces and are truncated, as
they would be by any MiniLM pipeline. Each round runs limit, fp32, int8, int8_dynamic and
fp32_alone once, the order rotating from round to round (the machine is shared); the best round of
each is reported, the median too, and the int8 speed-ups are the median of the per-round
ratios to fp32 (and best against best). The load average is recorded before and after.

Not measured: file reading, chunking, SQLite writes, query-time search.

    flock /tmp/brainbot-bench.lock .venv/bin/python benchmarks/bench_embed.py [--chunks 160] [--rounds 5] \
        [--min-idle 0.8]
"""

from __future__ import annotations

import argparse
import importlib.util
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

from bench_chunking import cpu_family  # noqa: E402

from brainbot.model import onnx_export as export  # noqa: E402
from brainbot.model.embed import DEFAULT_BATCH_SIZE, Embedder, physical_cores  # noqa: E402
from brainbot.model.files import load_tokenizer, verified_model_dir  # noqa: E402
from brainbot.model.records import MINILM  # noqa: E402

MAX_TOKENS, MODEL_ID = MINILM.max_tokens, MINILM.model_id

SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "data" / "corpora" / "rust-book" / "src"
REFERENCE = SHARED / "reference" / "minilm_reference.jsonl"
RESULTS = ROOT / "benchmarks" / "results" / "embed.json"
CHUNK_WORDS = 200
QUERIES = ["how do I borrow a mutable reference twice", "what is a trait object",
           "ownership rules", "error handling with Result and the ? operator"]


def load_chunks(n: int) -> list[str]:
    """n chunks of 150-200 words, paragraphs kept whole, spread over the whole book."""
    chunks: list[str] = []
    for path in sorted(CORPUS.glob("*.md")):
        current: list[str] = []
        words = 0
        for para in (p.strip() for p in path.read_text(encoding="utf-8").split("\n\n")):
            size = len(para.split())
            if current and words + size > CHUNK_WORDS:
                if words >= CHUNK_WORDS * 3 // 4:
                    chunks.append("\n\n".join(current))
                current, words = [], 0
            if 0 < size <= CHUNK_WORDS:
                current.append(para)
                words += size
    if len(chunks) < n:
        raise SystemExit(f"only {len(chunks)} chunks in {CORPUS}, asked for {n}")
    step = len(chunks) / n
    return [chunks[int(i * step)] for i in range(n)]


def session_for(path: Path, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def pad(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids padded to the longest row only (the least work onnxruntime can be given;
    the Embedder pads to 16-token buckets, so that cost shows in its ratio)."""
    width = max(len(r) for r in rows)
    ids = np.zeros((len(rows), width), np.int64)
    mask = np.zeros((len(rows), width), np.int64)
    for j, r in enumerate(rows):
        ids[j, : len(r)] = r
        mask[j, : len(r)] = 1
    return ids, mask


def prebatched(chunks: list[str], batch_size: int):
    """The limit's input: tokenized, sorted by length, padded; and the row order."""
    ids = [e.ids for e in load_tokenizer().encode_batch(chunks)]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    batches = [(order[b:b + batch_size], pad([ids[i] for i in order[b:b + batch_size]]))
               for b in range(0, len(order), batch_size)]
    return batches, ids


def run_limit(session, batches, n: int) -> np.ndarray:
    out = np.empty((n, 384), np.float32)
    for rows, (ids, mask) in batches:
        out[rows] = session.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})[0]
    return out


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def measure_export() -> dict:
    """Export fp32 and int8 into an empty cache folder; time them and a session."""
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["BRAINBOT_CACHE_DIR"] = tmp
        try:
            t_fp32, path = timed(lambda: export.onnx_path("fp32"))
            t_int8, path8 = timed(lambda: export.onnx_path("int8"))
            t_sess, _ = timed(lambda: session_for(path, physical_cores()))
            t_sess8, _ = timed(lambda: session_for(path8, physical_cores()))
            verified = json.loads(Path(str(path) + ".json").read_text())["verified"]
            sizes = {"fp32": path.stat().st_size, "int8": path8.stat().st_size}
        finally:
            del os.environ["BRAINBOT_CACHE_DIR"]
    return {"export_seconds": {"fp32": round(t_fp32, 2), "int8_after_fp32": round(t_int8, 2)},
            "session_seconds": {"fp32": round(t_sess, 3), "int8": round(t_sess8, 3)},
            "file_bytes": sizes, "fp32_max_abs_vs_numpy": verified["max_abs_vs_numpy"]}


def measure_reference(embedders: dict) -> dict:
    if not REFERENCE.is_file():
        return {"skipped": f"{REFERENCE} absent"}
    rows = [json.loads(line) for line in REFERENCE.read_text(encoding="utf-8").splitlines() if line]
    texts, ref = [r["text"] for r in rows], np.array([r["embedding"] for r in rows])
    out = {}
    for name, emb in embedders.items():
        alone = cosines(np.stack([emb.embed_query(t) for t in texts]), ref)
        batched = cosines(emb.embed(texts), ref)
        out[name] = {"texts": len(texts),
                     "min_cosine_one_at_a_time": float(alone.min()),
                     "mean_cosine_one_at_a_time": float(alone.mean()),
                     "min_cosine_batched": float(batched.min()),
                     "mean_cosine_batched": float(batched.mean())}
    return out


def sentence_transformers_column(chunks: list[str], batch_size: int) -> dict:
    if importlib.util.find_spec("sentence_transformers") is None or importlib.util.find_spec("torch") is None:
        return {"status": "not installed"}
    t_import, _ = timed(lambda: __import__("sentence_transformers"))
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(verified_model_dir()), device="cpu")
    model.max_seq_length = MAX_TOKENS
    model.encode(chunks[:batch_size], batch_size=batch_size)
    seconds, _ = timed(lambda: model.encode(chunks, batch_size=batch_size, normalize_embeddings=True))
    return {"status": "measured", "import_seconds": round(t_import, 2),
            "chunks_per_s": round(len(chunks) / seconds, 2)}


def query_latency_ms(emb: Embedder) -> float:
    times = [timed(lambda q=q: emb.embed_query(q))[0] for q in QUERIES * 5]
    return round(statistics.median(times) * 1000, 2)


def dynamic_int8(out: Path) -> Path:
    """What `--precision int8` ran before issue #33: onnxruntime's dynamic quantization of
    the fp32 export (per-channel 7-bit weights, MatMul only; one activation scale per
    batch tensor)."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # its "pre-processing" advice
    quantize_dynamic(str(export.onnx_path("fp32")), str(out), weight_type=QuantType.QInt8,
                     op_types_to_quantize=["MatMul"], per_channel=True, reduce_range=True)
    return out


def embedder_over(path: Path, threads: int, batch_size: int) -> Embedder:
    """An Embedder (its tokenizing and fp32's padded batches) over a session of another
    ONNX file, one that takes an attention mask."""
    import onnxruntime as ort

    from brainbot.model.session import session_options

    e = Embedder("fp32", threads=threads, batch_size=batch_size)
    e._tokenizer = load_tokenizer(max_length=MAX_TOKENS, truncate=True)
    e._session = ort.InferenceSession(str(path), session_options(threads, True),
                                      providers=["CPUExecutionProvider"])
    return e


class MaskedSession:
    """A session of a masked graph (fp32) run the int8 way, a text alone: its mask all ones."""

    def __init__(self, session) -> None:
        self.session = session

    def run(self, names, feed):
        return self.session.run(names, feed | {"attention_mask": np.ones_like(feed["input_ids"])})


def fp32_alone(threads: int) -> Embedder:
    """The fp32 graph run as int8 runs (``Embedder._run_alone``): each text alone, unpadded,
    ``threads`` runs at once on one intra-op thread each. Not what fp32 ships (it would
    move fp32's vectors in the last bits, so every fp32 index would need a rebuild); it is
    the fastest fp32 found, so int8 is held against it too."""
    import onnxruntime as ort

    from brainbot.model.session import session_options

    e = Embedder("int8", threads=threads)  # its way of running; the graph is fp32's
    e._tokenizer = load_tokenizer(max_length=MAX_TOKENS, truncate=True)
    e._session = MaskedSession(ort.InferenceSession(str(export.onnx_path("fp32")), session_options(1, True),
                                                    providers=["CPUExecutionProvider"]))
    return e


def race(runs: dict, rounds: int, min_idle: float = 0.0) -> dict[str, list[float]]:
    """Each run once a round, the order rotating, each started once the CPUs were
    ``min_idle`` idle (bench_coldstart.wait_for_idle; 0: at once); name -> seconds."""
    from bench_coldstart import wait_for_idle

    names, times = list(runs), {name: [] for name in runs}
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            wait_for_idle(min_idle, timeout=60.0)
            seconds, runs[name][1] = timed(runs[name][0])
            times[name].append(seconds)
    return times


def closeness(vectors: np.ndarray, fp32: np.ndarray, alone: np.ndarray) -> dict:
    cos = cosines(vectors, fp32)
    return {"min_cosine": round(float(cos.min()), 5), "mean_cosine": round(float(cos.mean()), 5),
            "batched_vs_alone_min_cosine": round(float(cosines(vectors[: len(alone)], alone).min()), 6),
            "batched_vs_alone_max_abs": float(np.abs(vectors[: len(alone)] - alone).max()),
            "alone_bit_identical": bool(np.array_equal(vectors[: len(alone)], alone))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=160)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-idle", type=float, default=0.0,
                        help="start each timed run once the CPUs were this idle (0.8)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="one batch size for all (default: each embedder's own)")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    chunks = load_chunks(args.chunks)
    threads = physical_cores()
    setup = measure_export()
    fp32, int8 = Embedder("fp32", batch_size=args.batch_size), Embedder("int8", batch_size=args.batch_size)
    limit = session_for(export.onnx_path("fp32"), threads)
    batches, ids = prebatched(chunks, fp32.batch_size)
    full = [e.ids for e in load_tokenizer(truncate=False).encode_batch(chunks)]
    tokens = [min(len(i), MAX_TOKENS) for i in full]

    with tempfile.TemporaryDirectory() as tmp:
        dynamic = embedder_over(dynamic_int8(Path(tmp) / "dynamic.onnx"), threads,
                                args.batch_size or DEFAULT_BATCH_SIZE)  # as it ran
    # Verify before timing: the Embedder and the bare session must agree exactly.
    ours, bare = fp32.embed(chunks[:16]), run_limit(limit, prebatched(chunks[:16], fp32.batch_size)[0], 16)
    assert np.abs(ours - bare).max() < 1e-5, "Embedder and the bare session disagree"
    alone32 = fp32_alone(threads)
    assert np.abs(alone32.embed(chunks[:16]) - ours).max() < 1e-5, "fp32 alone and in batches disagree"
    int8.embed(chunks[:8])
    dynamic.embed(chunks[:8])

    runs = {"limit": [lambda: run_limit(limit, batches, len(chunks)), None],
            "embedder_fp32": [lambda: fp32.embed(chunks), None],
            "embedder_int8": [lambda: int8.embed(chunks), None],
            "embedder_int8_dynamic": [lambda: dynamic.embed(chunks), None],
            "embedder_fp32_alone": [lambda: alone32.embed(chunks), None]}
    times = race(runs, args.rounds, args.min_idle)
    out = {name: run[1] for name, run in runs.items()}
    assert np.abs(out["embedder_fp32"] - out["limit"]).max() < 1e-5

    alone = {name: np.stack([e.embed_query(c) for c in chunks[:48]])
             for name, e in (("int8", int8), ("int8_dynamic", dynamic))}
    results = {
        "benchmark": "embedding throughput, ~200-word chunks",
        "model": MODEL_ID,
        "machine": {"cpu": _cpu_name(), "cpu_family": cpu_family(), "vnni": _has_vnni(),
                    "physical_cores": threads,
                    "python": platform.python_version(),
                    "onnxruntime": __import__("onnxruntime").__version__, "numpy": np.__version__},
        "data": {"corpus": "rust-book/src", "chunks": len(chunks), "words_per_chunk": [CHUNK_WORDS * 3 // 4, CHUNK_WORDS],
                 "mean_tokens_before_truncation": round(float(np.mean([len(i) for i in full])), 1),
                 "mean_tokens_after_truncation": round(float(np.mean(tokens)), 1),
                 "truncated_at_256": int(sum(len(i) > MAX_TOKENS for i in full))},
        "settings": {"batch_size": {"fp32": fp32.batch_size, "int8": int8.batch_size,
                                    "int8_dynamic": dynamic.batch_size}, "min_idle": args.min_idle,
                     "intra_op_threads": threads, "rounds": args.rounds,
                     "graph_optimization": "ORT_ENABLE_ALL", "execution_mode": "sequential"},
        "load_average": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        "chunks_per_s": {name: _rate(chunks, t) for name, t in times.items()},
        "embedder_vs_limit": round(min(times["limit"]) / min(times["embedder_fp32"]), 4),
        "embedder_vs_limit_median_of_rounds": _median_ratio(times["limit"], times["embedder_fp32"]),
        "int8_speedup_vs_fp32": _median_ratio(times["embedder_fp32"], times["embedder_int8"]),
        "int8_speedup_vs_fp32_best": round(min(times["embedder_fp32"]) / min(times["embedder_int8"]), 3),
        "int8_speedup_vs_fp32_per_round": [round(f / i, 3) for f, i in
                                           zip(times["embedder_fp32"], times["embedder_int8"], strict=True)],
        "int8_dynamic_speedup_vs_fp32": _median_ratio(times["embedder_fp32"], times["embedder_int8_dynamic"]),
        "fp32_alone_speedup_vs_fp32": _median_ratio(times["embedder_fp32"], times["embedder_fp32_alone"]),
        "int8_speedup_vs_fp32_alone": _median_ratio(times["embedder_fp32_alone"], times["embedder_int8"]),
        "query_latency_ms_p50": {"fp32": query_latency_ms(fp32), "int8": query_latency_ms(int8),
                                 "int8_dynamic": query_latency_ms(dynamic)},
        "int8_vs_fp32_on_chunks": closeness(out["embedder_int8"], out["embedder_fp32"], alone["int8"]),
        "int8_dynamic_vs_fp32_on_chunks": closeness(out["embedder_int8_dynamic"], out["embedder_fp32"],
                                                    alone["int8_dynamic"]),
        "reference": measure_reference({"fp32": fp32, "int8": int8, "int8_dynamic": dynamic}),
        "sentence_transformers": sentence_transformers_column(chunks, fp32.batch_size),
        **setup,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))


def _median_ratio(a: list[float], b: list[float]) -> float:
    return round(statistics.median(x / y for x, y in zip(a, b, strict=True)), 3)


def _has_vnni() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace").split()
    except OSError:
        return False
    return "avx512_vnni" in flags or "avx_vnni" in flags


def _rate(chunks, times) -> dict:
    return {"best": round(len(chunks) / min(times), 2), "median": round(len(chunks) / statistics.median(times), 2)}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cos(ref: dict, precision: str, key: str) -> str:
    value = ref.get(precision, {}).get(key)
    return "—" if value is None else f"{value:.7f}"


def markdown(r: dict) -> str:
    cps, ref = r["chunks_per_s"], r["reference"]
    st = r["sentence_transformers"]
    st_cell = f"{st['chunks_per_s']}" if st["status"] == "measured" else st["status"]
    row = lambda name, key, precision: (  # noqa: E731
        f"| {name} | {cps[key]['best']} | {cps[key]['median']} | {cps[key]['best'] / cps['limit']['best']:.3f} | "
        f"{_cos(ref, precision, 'min_cosine_one_at_a_time')} (batched {_cos(ref, precision, 'min_cosine_batched')}) |")
    i8, dyn = r["int8_vs_fp32_on_chunks"], r["int8_dynamic_vs_fp32_on_chunks"]
    lines = [
        f"Embedding {r['data']['chunks']} chunks of 150-200 words ({r['data']['mean_tokens_after_truncation']} "
        f"wordpieces on average after truncation, {r['data']['truncated_at_256']} truncated), batch {r['settings']['batch_size']}, {r['settings']['intra_op_threads']} "
        f"threads, {r['machine']['cpu']}, load {r['load_average']['before']} / {r['load_average']['after']}",
        "",
        "| engine | chunks/s (best) | chunks/s (median) | vs limit | min cosine vs reference |",
        "|---|---|---|---|---|",
        f"| limit: onnxruntime alone, pre-batched | {cps['limit']['best']} | {cps['limit']['median']} | 1.00 | — |",
        row("brainbot Embedder fp32", "embedder_fp32", "fp32"),
        row("brainbot Embedder int8", "embedder_int8", "int8"),
        row("int8 before #33 (dynamic)", "embedder_int8_dynamic", "int8_dynamic"),
        row("fp32 run as int8 runs (alone, 2 at once; not shipped)", "embedder_fp32_alone", "fp32"),
        f"| sentence-transformers (torch) | {st_cell} | | | |",
        "",
        f"Embedder / limit: best {r['embedder_vs_limit']:.3f}, median of paired rounds "
        f"{r['embedder_vs_limit_median_of_rounds']:.3f}.",
        f"int8: {r['int8_speedup_vs_fp32']}x fp32 (median of rounds; best/best {r['int8_speedup_vs_fp32_best']}); "
        f"cosine to fp32 on chunks min {i8['min_cosine']} mean {i8['mean_cosine']}; alone vs in a batch "
        f"bit-identical: {i8['alone_bit_identical']}.",
        f"int8 against fp32 run alone: {r['int8_speedup_vs_fp32_alone']}x (that fp32: "
        f"{r['fp32_alone_speedup_vs_fp32']}x fp32).",
        f"int8 before #33: {r['int8_dynamic_speedup_vs_fp32']}x; cosine min {dyn['min_cosine']} mean "
        f"{dyn['mean_cosine']}; alone vs in a batch max abs {dyn['batched_vs_alone_max_abs']:.4f}.",
        f"Query latency p50: fp32 {r['query_latency_ms_p50']['fp32']} ms, int8 {r['query_latency_ms_p50']['int8']} ms. "
        f"Export: fp32 {r['export_seconds']['fp32']} s, int8 +{r['export_seconds']['int8_after_fp32']} s; "
        f"session {r['session_seconds']['fp32']} s.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()

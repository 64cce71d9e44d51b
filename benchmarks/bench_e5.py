"""multilingual-e5-small against all-MiniLM-L6-v2, side by side (issue 41): embedding
throughput on the same texts at int8 and fp32, the embed of one query, a whole
`brainbot query` process (wall time and peak RSS), and each model's size on disk.

    flock /tmp/brainbot-bench.lock python benchmarks/bench_e5.py --rounds 5 --min-idle 0.5

Texts: --texts (160) chunks of 150-200 words of the Rust book (../shared/data), the same
texts for both models (each tokenizes them its own way: the token counts are reported).
Each round embeds them with every model and precision in turn, interleaved, each run
started once the CPUs were --min-idle idle; the ratio e5 / MiniLM is taken per round and
its median reported, so the load of the moment falls on both sides. The Embedders are
loaded (and their graphs exported and pre-optimized) before the first round.

One query: the median of 40 `embed_query` calls of short queries, per model and precision,
in this process after a warm-up. A query process: `python -m brainbot query Q --db DB
--mode MODE` (hybrid, bm25) over examples/notes indexed with each model at int8,
--queries times each, the two models one after the other within each round: median wall
time, CPU time (user + system) and peak RSS (GNU time), and the median of the per-round
ratios e5 / MiniLM.
Size: the weights file each model's package installs, e5's piece table, its cached ONNX
exports (int8, fp32) and the pre-optimized graphs a session maps (graph + data file).

Writes benchmarks/results/e5.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from bench_chunking import machine  # noqa: E402
from bench_coldstart import wait_for_idle  # noqa: E402
from bench_embed import load_chunks  # noqa: E402

from brainbot.model.embed import Embedder  # noqa: E402
from brainbot.model.records import E5_SMALL, MINILM  # noqa: E402

RESULTS = HERE / "results" / "e5.json"
MODELS = (MINILM, E5_SMALL)
PRECISIONS = ("int8", "fp32")
QUERIES = ["how do I borrow a mutable reference twice", "Wie lange muss der Teig gehen?",
           "南瓜的家常做法", "¿cómo se declara una variable?", "ownership rules",
           "Comment réparer un pneu crevé ?", "ファイルを開く方法", "error handling with Result"]
NOTES = ROOT / "examples" / "notes"


def throughput(texts: list[str], rounds: int, min_idle: float) -> dict:
    embedders = {(m.name, p): Embedder(p, model=m) for m in MODELS for p in PRECISIONS}
    for e in embedders.values():
        e.embed(texts[:4])  # export, optimize, load
    runs: dict[str, list[float]] = {f"{m}|{p}": [] for m, p in embedders}
    loads = []
    for _ in range(rounds):
        for (m, p), e in embedders.items():
            wait_for_idle(min_idle)
            loads.append(os.getloadavg()[0])
            start = time.perf_counter()
            e.embed(texts)
            runs[f"{m}|{p}"].append(len(texts) / (time.perf_counter() - start))
    out = {"texts": len(texts), "rounds": rounds, "load_averages": [round(x, 2) for x in loads],
           "texts_per_s": {k: [round(x, 2) for x in v] for k, v in runs.items()},
           "median_texts_per_s": {k: round(statistics.median(v), 2) for k, v in runs.items()}}
    for p in PRECISIONS:
        ratios = [a / b for a, b in zip(runs[f"{E5_SMALL.name}|{p}"], runs[f"{MINILM.name}|{p}"])]
        out[f"e5_over_minilm_{p}"] = round(statistics.median(ratios), 3)
    out["tokens_per_text"] = {}
    for m in MODELS:
        tok = embedders[(m.name, "int8")]._tokenizer
        counts = [len(e.ids) for e in tok.encode_batch([m.passage_prefix + t for t in texts])]
        out["tokens_per_text"][m.name] = round(statistics.mean(counts), 1)
    out["query_embed_ms"] = {}
    for (m, p), e in embedders.items():
        for q in QUERIES:
            e.embed_query(q)
        times = []
        for _ in range(5):
            for q in QUERIES:
                start = time.perf_counter()
                e.embed_query(q)
                times.append((time.perf_counter() - start) * 1000)
        out["query_embed_ms"][f"{m}|{p}"] = round(statistics.median(times), 2)
    return out


def _process(argv: list[str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds user + system, peak RSS in MB) of one process, by GNU
    time: a child forked from this big process would report this one's RSS as its own peak
    (Linux keeps the high-water mark across fork and exec)."""
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "rusage %U %S %M", *argv], capture_output=True,
                          text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr}")
    line = next(x for x in done.stderr.splitlines() if x.startswith("rusage "))
    user, system, peak_kb = line.split()[1:]
    return seconds, float(user) + float(system), int(peak_kb) // 1024


QUERY_MODES = ("hybrid", "bm25")


def query_processes(count: int, min_idle: float) -> dict:
    """Whole `brainbot query` processes per model and mode, interleaved model by model
    within each round, so that a round's ratio e5 / MiniLM sees one load."""
    with tempfile.TemporaryDirectory() as tmp:
        dbs = {}
        for m in MODELS:
            db = Path(tmp) / f"{m.name}.db"
            subprocess.run([sys.executable, "-m", "brainbot", "index", str(NOTES), "--db", str(db),
                            "--model", m.name, "--json"], check=True, capture_output=True, cwd=ROOT)
            dbs[m.name] = db
        runs = {(m.name, mode): [] for m in MODELS for mode in QUERY_MODES}
        loads = []
        for i in range(count + 1):
            for mode in QUERY_MODES:
                for m in MODELS:
                    wait_for_idle(min_idle)
                    loads.append(os.getloadavg()[0])
                    got = _process([sys.executable, "-m", "brainbot", "query",
                                    QUERIES[i % len(QUERIES)], "--db", str(dbs[m.name]),
                                    "--mode", mode, "--json"])
                    if i:  # the first of each warms the page cache and the cache folder
                        runs[(m.name, mode)].append(got)
    out = {"queries": count, "db": "examples/notes at int8", "modes": list(QUERY_MODES),
           "load_averages": [round(x, 2) for x in loads[2 * len(QUERY_MODES):]]}
    for what, col in (("wall_s", 0), ("cpu_s", 1), ("peak_rss_mb", 2)):
        out[what] = {f"{m}|{mode}": round(statistics.median(r[col] for r in v), 3)
                     for (m, mode), v in runs.items()}
    e5, minilm = E5_SMALL.name, MINILM.name
    for mode in QUERY_MODES:
        for what, col in (("wall", 0), ("cpu", 1)):
            ratios = [a[col] / b[col] for a, b in zip(runs[(e5, mode)], runs[(minilm, mode)])]
            out[f"e5_over_minilm_{what}_{mode}"] = round(statistics.median(ratios), 2)
    return out


def sizes() -> dict:
    from brainbot.model import piece_table, session
    from brainbot.model.files import cache_dir, verified_model_dir
    from brainbot.model.onnx_export import cache_name

    out = {}
    for m in MODELS:
        folder = verified_model_dir(m)
        row = {"weights_file_mb": round((folder / m.weights_file).stat().st_size / 1e6, 1),
               "files_mb": round(sum((folder / f).stat().st_size for f in m.files) / 1e6, 1)}
        for p in PRECISIONS:
            export = cache_dir() / cache_name(p, m)
            opt = cache_dir() / session.optimized_name(p, m)
            data = opt.with_name(opt.name + ".data")
            row[f"onnx_{p}_mb"] = round(export.stat().st_size / 1e6, 1)
            if opt.exists() and data.exists():
                row[f"optimized_{p}_mb"] = round((opt.stat().st_size + data.stat().st_size) / 1e6, 1)
        table = cache_dir() / piece_table.table_name(m)
        if m.tokenizer == "unigram" and table.exists():
            row["piece_table_mb"] = round(table.stat().st_size / 1e6, 1)
        out[m.name] = row
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--texts", type=int, default=160)
    parser.add_argument("--queries", type=int, default=7)
    parser.add_argument("--min-idle", type=float, default=0.0)
    parser.add_argument("--keep-throughput", action="store_true",
                        help="keep the throughput part of the last results file")
    args = parser.parse_args(argv)
    result = {"machine": machine(), "min_idle": args.min_idle,
              "load_before": [round(x, 2) for x in os.getloadavg()]}
    if args.keep_throughput:
        result["throughput"] = json.loads(RESULTS.read_text())["throughput"]
    else:
        result["throughput"] = throughput(load_chunks(args.texts), args.rounds, args.min_idle)
    result["query_process"] = query_processes(args.queries, args.min_idle)
    result["size"] = sizes()
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    RESULTS.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

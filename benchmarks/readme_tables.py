"""Regenerate docs/benchmarks.md and the README's headline table from benchmarks/results/*.json.

    python benchmarks/readme_tables.py          # write docs/benchmarks.md and README's table
    python benchmarks/readme_tables.py --check  # exit 1, naming the file, when either is stale
    python benchmarks/readme_tables.py --print  # print the page instead

Every number on the page and in the headline table comes from a JSON file written by a
benchmark or by `brainbot eval --json`; nothing here measures anything. `make docs` runs
this; tests/test_docs.py fails when either is not what this writes now.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import before_after_tables
import language_tables
from bench_first_run_ab import docs_section as _first_run_ab_section
from bench_languages import docs_section as _languages_section
from bench_precision_fusion import docs_section as _precision_fusion_section
from e5_tables import e5_section
from eval_tables import answers_section, followups_section
from headline import cpu_name as _cpu
from markdown_tables import RESULTS, read_result, table

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
PAGE = HERE.parent / "docs" / "benchmarks.md"
BEGIN, END = "<!-- headline:begin -->", "<!-- headline:end -->"


def eval_section() -> str:
    nf = read_result("eval_nfcorpus.json")
    if not nf:
        return ""
    anchors = {"bm25": "Pyserini BM25-flat 0.3218", "vector": "MTEB all-MiniLM-L6-v2 0.3159",
               "hybrid": "BM25+TAS-B hybrid 0.346 (OpenSearch)",
               "rerank": "BM25 + cross-encoder 0.350 (BEIR)"}
    targets = {"bm25": "≥ 0.32", "vector": "≥ 0.31", "hybrid": "≥ 0.34", "rerank": "≥ 0.35"}
    rows = []
    for mode, m in nf["modes"].items():
        rows.append([mode, f"**{m['ndcg@10']:.4f}**", anchors.get(mode, ""),
                     targets.get(mode, ""), f"{m['recall@10']:.4f}", f"{m['recall@100']:.4f}",
                     f"{m['mrr@10']:.4f}", f"{m['p50_ms']:.1f}", f"{m['p95_ms']:.1f}"])
    text = ["### Retrieval quality: BEIR NFCorpus",
            f"`brainbot eval --beir ../shared/data/nfcorpus` — {nf['queries']} test queries, "
            "nDCG@10 as trec_eval (linear gain); each document indexed as `title + \"\\n\\n\" + "
            f"text` and chunked like a note ({nf['index']['chunks']:,} chunks); a document "
            "scores as its best chunk. Latency per query includes embedding the query "
            "in every mode but bm25 (rerank also embeds the candidates' sentences).", "",
            table(["mode", "nDCG@10", "published anchor", "target", "recall@10",
                   "recall@100", "MRR@10", "p50 ms", "p95 ms"], rows)]
    i8 = read_result("eval_nfcorpus_int8.json")
    if i8:
        parts = [f"{mode} {m['ndcg@10']:.4f} ({m['ndcg@10'] - nf['modes'][mode]['ndcg@10']:+.4f})"
                 for mode, m in i8["modes"].items() if mode in nf["modes"]]
        text += ["", "The table is fp32 (`--precision fp32`). The same eval at int8, the default "
                 "precision of a new index since issue #33 (`brainbot eval --beir …`: chunks and "
                 "queries embedded by the per-token int8 graph), against fp32 (target: within "
                 "0.003 in vector and hybrid mode): " + ", ".join(parts) + "."]
    qrows = []
    for name in ("eval_questions.json", "eval_questions_holdout.json", "eval_questions_rust.json",
                 "eval_questions_rust_holdout.json", "eval_questions_vault.json",
                 "eval_questions_cjk.json"):
        q = read_result(name)
        if not q:
            continue
        k = q["k"]
        dataset = f"`examples/{Path(q['dataset']).name}` ({q['answerable']})"
        qrows += [[dataset if i == 0 else "", mode, m[f"hit@{k}"], m["hit@1"], m[f"recall@{k}"],
                   m["mrr"]] for i, (mode, m) in enumerate(q["modes"].items())]
    if qrows:
        text += ["", "Question sets over notes (answerable questions in brackets; the rust sets "
                 "over ../shared/data/corpora/rust-book, vault and CJK over examples/vault), "
                 "`brainbot eval --questions FILE -k 5`:", "",
                 table(["question set", "mode", "hit@5", "hit@1", "recall@5", "MRR"], qrows)]
    return "\n".join(text + answers_section() + followups_section())


def embed_section() -> str:
    e = read_result("embed.json")
    if not e:
        return ""
    cps, ref, m = e["chunks_per_s"], e["reference"], e["machine"]
    if "embedder_int8_dynamic" not in cps:  # a file from before issue #33
        return ""
    closeness = {"int8": e["int8_vs_fp32_on_chunks"], "int8_dynamic": e["int8_dynamic_vs_fp32_on_chunks"]}

    def row(label: str, key: str, precision: str) -> list:
        c = closeness.get(precision)
        return [label, cps[key]["median"], f"{cps[key]['median'] / cps['embedder_fp32']['median']:.2f}",
                f"{ref[precision]['min_cosine_one_at_a_time']:.4f}",
                f"{c['min_cosine']:.4f} / {c['mean_cosine']:.4f}" if c else "1 / 1",
                ("yes" if c["alone_bit_identical"] else f"no ({c['batched_vs_alone_max_abs']:.3f})")
                if c else "yes", f"{e['query_latency_ms_p50'][precision]}"]

    rows = [["onnxruntime alone, fp32 (the limit)", cps["limit"]["median"],
             f"{cps['limit']['median'] / cps['embedder_fp32']['median']:.2f}", "", "", "", ""],
            row("brainbot Embedder fp32", "embedder_fp32", "fp32"),
            row("brainbot Embedder int8 (per-token scales, #33)", "embedder_int8", "int8"),
            row("int8 before #33 (dynamic quantization)", "embedder_int8_dynamic", "int8_dynamic")]
    if "embedder_fp32_alone" in cps:
        rows.append(row("fp32 run as int8 runs: each text alone, 2 at once (not shipped)",
                        "embedder_fp32_alone", "fp32")[:-1] + ["—"])  # its queries: fp32's
    alone = (f" Against fp32 run as int8 runs (each text alone, two at once: the fastest fp32 "
             f"found, {e['fp32_alone_speedup_vs_fp32']}× fp32 as shipped, not shipped because it "
             f"would move fp32's vectors in the last bits): **{e['int8_speedup_vs_fp32_alone']}×**."
             if "int8_speedup_vs_fp32_alone" in e else "")
    return "\n".join([
        "### Embedding throughput", f"`python benchmarks/bench_embed.py` — "
        f"{e['data']['chunks']} real chunks of ~200 words from the Rust book, {_runs(e['settings'])}, "
        f"{_cpu(m)}, load average "
        f"{e['load_average']['before']} before, {e['load_average']['after']} after; median of "
        f"{e['settings']['rounds']} interleaved rounds. int8 / fp32: "
        f"**{e['int8_speedup_vs_fp32']}×** (median of the per-round ratios; per round "
        f"{', '.join(f'{x:.2f}' for x in e['int8_speedup_vs_fp32_per_round'])}; the int8 "
        f"before #33: {e['int8_dynamic_speedup_vs_fp32']}×).{alone} Cosine to "
        "sentence-transformers' vectors (`../shared/reference`, one text at a time) and to "
        "fp32 on the chunks; \"alone = in a batch\": the same bytes for a chunk embedded "
        "alone and in a batch.", "",
        table(["engine", "chunks/s", "× fp32", "min cosine vs reference",
               "cosine to fp32 (min / mean)", "alone = in a batch", "query p50 ms"], rows),
        *_race_part()])


def _runs(settings: dict) -> str:
    """How each embedder ran: fp32's batches on the intra-op threads, int8 text by text."""
    threads, sizes = settings["intra_op_threads"], settings["batch_size"]
    parts = [f"{k} in batches of {v} on {threads} threads" for k, v in sizes.items()
             if not (k == "int8" and v == 1)]
    if sizes.get("int8") == 1:  # export version 3: each text alone, `threads` at once
        parts.insert(1, f"int8 each text alone, {threads} at once on one thread each")
    return ", ".join(parts)


def _race_part() -> list[str]:
    r = read_result("int8_race.json")
    if not r:
        return []
    rows = []
    for name, c in r["candidates"].items():
        sb, sp = c["same_bytes"], c["speed"]
        rows.append([f"`{name}`", sp["chunks_per_s_median"], f"{sp['vs_fp32_median_of_rounds']:.2f}",
                     f"{sp['vs_fp32_cpu_median_of_rounds']:.2f}",
                     f"{c['cosine_to_fp32']['min']:.4f} / {c['cosine_to_fp32']['mean']:.4f}",
                     "yes" if sb["bit_identical"] else f"no ({sb['max_abs']:.3f})"])
    return ["", f"`python benchmarks/bench_int8_race.py` — the int8 graphs raced (what was "
            f"tried, the losers too; the script's docstring says what each is): {r['chunks']} "
            f"chunks, median of {r['rounds']} interleaved rounds, {_cpu(r)}, load average "
            f"{r['load_before']:.1f} before, {r['load_after']:.1f} after. × fp32 in wall time and in "
            "CPU seconds of the process; \"same bytes\": alone, shuffled (in batches of 5 where it "
            "batches) and on one thread, as run its own way on two.", "",
            table(["graph", "chunks/s", "× fp32", "× fp32 (CPU s)", "cosine to fp32 (min / mean)",
                   "same bytes"], rows)]


def chunking_section() -> str:
    c = read_result("chunking.json")
    if not c:
        return ""
    rows = [[r["corpus"], r["files"], r["chunks"], r["mean_retrieval_tokens"],
             r["max_retrieval_tokens"], r["quality_score"], f"{100 * r['boundary_share']:.2f} %",
             r["hard"]["over_limit"], r["hard"]["heading_only"], r["hard"]["cut_fences"],
             r["mb_per_second"], r["files_per_second"]] for r in c["corpora"]]
    sweep = c.get("target_sweep", {}).get("rows", [])
    text = ["### Chunking", "`python benchmarks/bench_chunking.py` — parse + chunk + count "
            "tokens with MiniLM's tokenizer (cold cache), on `../shared/data/corpora`.", "",
            table(["corpus", "files", "chunks", "mean tokens", "max tokens", "quality",
                   "boundary", "over limit", "heading-only", "cut fences", "MB/s", "files/s"],
                  rows)]
    text += _parallel_rows(c.get("serial_vs_parallel"))
    if sweep:
        text += ["", "Choosing the target size (NFCorpus, vector only, nDCG@10): " + ", ".join(
            f"{r['target_tokens']} → {r['ndcg_at_10']}" for r in sweep) + "."]
    return "\n".join(text)


def _parallel_rows(sp: dict | None) -> list[str]:
    if not sp:
        return []
    rows = [[v["vault"], v["files"], v["megabytes"], v["chunks"], r["mode"], r["seconds"],
             r["chunks_per_second"], r["mb_per_second"]] for v in sp["vaults"] for r in v["rows"]]
    big = sp["vaults"][-1]
    stages = ", ".join(f"{k} {v} s" for k, v in big["stages_seconds"].items())
    return ["", "`python benchmarks/bench_chunking.py --big --baseline DIR --min-idle 0.5` — "
            "read + parse + chunk of every note, whole passes (DIR: the code before the "
            f"word-sum token counts), {sp['machine']['cpu']}, load average "
            f"{sp['machine']['load_average_1min']}.", "",
            table(["vault", "files", "MB", "chunks", "mode", "s", "chunks/s", "MB/s"], rows),
            "", f"Stages of one serial pass over the big vault: {stages}."
            + (f" {sp['note']}" if sp.get("note") else "")]


def _host(machine: dict) -> str:
    """The host a result file names, as the README says it."""
    cpu = _cpu(machine)
    cores = machine.get("cores")
    return f"{cpu}, {cores} cores" if cores else cpu


def _projected(p) -> str:
    """A projection in seconds, or one per precision (since issue #33)."""
    if isinstance(p, dict):
        return ", ".join(f"{k} {v:,.0f} s" for k, v in p.items())
    return f"{p:,.0f}"


def _vault_name(v: dict) -> str:
    """A first-run row's vault, with its precision when embedded (rows before #33: fp32)
    and its model when not the default (issue 41)."""
    model = f", {v['model']}" if v.get("model") else ""
    if v.get("embed"):
        return f"{v['vault']} ({v.get('precision') or 'fp32'}{model})"
    return f"{v['vault']} ({v['model']})" if model else v["vault"]


def _embedded_cell(v: dict) -> str:
    """Seconds to fully embedded: measured, measured end to end (with the peak RSS), or
    projected (the big vault's lexical-only rows)."""
    if v.get("end_to_end"):
        return f"{v['fully_embedded_s']:,} (measured end to end; peak RSS {v['peak_rss_mb']:,} MB)"
    if v.get("embed"):
        return f"{v['fully_embedded_s']}"
    return (f"not run (projected {_projected(v['projected_embed_s'])})"
            if v.get("projected_embed_s") else "not run")


def first_run_section() -> str:
    f = read_result("first_run.json")
    if not f:
        return ""
    hosts = {json.dumps(v.get("host", f["machine"]), sort_keys=True) for v in f["vaults"]}

    def host_of(v: dict) -> list[str]:  # a column only when the rows ran on several hosts
        return [_host(v.get("host") or f["machine"])] if len(hosts) > 1 else []

    rows = []
    for v in f["vaults"]:
        rows.append([_vault_name(v), v["files"], v["megabytes"], f"{v['chunks']:,}",
                     v["to_last_bm25_hit_s"], _embedded_cell(v), v.get("embedder_alone_s", ""),
                     f"{v['semantic_vs_alone']}×" if "semantic_vs_alone" in v else "",
                     f"{v['index_vs_alone']}×" if "index_vs_alone" in v else "",
                     max(r["index_load"] for r in v["rounds"]), *host_of(v)])
    stage_rows = [[_vault_name(v), *(v["stages_seconds"].get(k, "") for k in (
        "discover", "read", "chunk", "write", "links")), v["to_lexical_end_s"],
        min((r["index_cpu_s"] for r in v["rounds"] if "index_cpu_s" in r), default="")]
        for v in f["vaults"]]
    return "\n".join([
        "### First run",
        "`python benchmarks/bench_first_run.py --big --min-idle 0.5` (`--model NAME` for "
        "another model's rows, `--big-embedded` to index the big vault end to end too) — a "
        "fresh `brainbot "
        "index` as one process: seconds until the note written last is a BM25 hit (lexical "
        "phase done, plus a cold `brainbot query --mode bm25` that finds it), until every "
        "chunk is embedded, and the embedder alone on the same distinct texts (model load "
        "included). Ratios: semantic phase / embedder alone (target ≤ 1.05×) and whole "
        "index / embedder alone. The big vault's embedding is projected from the fastest "
        "embedder-alone rate measured on the other vaults with that model, precision and "
        "host, unless a row says it was measured end to end. "
        f"{_host(f['machine']) if len(hosts) == 1 else 'Each row names its host'}; the "
        "load average at the start of "
        "each index is shown (on a shared machine the ratios swung from 0.4× to 1.1× "
        "between runs: only a quiet run, load below 2 on the 2 cores, is a verdict on the "
        "1.05× target).",
        "", table(["vault", "files", "MB", "chunks", "to last BM25 hit s", "fully embedded s",
                   "embedder alone s", "semantic / alone", "index / alone", "load",
                   *(["host"] if len(hosts) > 1 else [])], rows),
        "", "The lexical phase by stage (seconds in the indexing process; chunk = the wait "
        "for the chunking workers, reading excluded), and the CPU seconds of the whole index "
        "process with its workers (user + system; the load inflates them far less):", "",
        table(["vault", "discover", "read", "chunk", "write", "links", "to lexical end",
               "index CPU s"], stage_rows), *_lexical_steps()])


def _lexical_steps() -> list[str]:
    """How the big vault's lexical phase got to its figure, step by step (one host)."""
    f = read_result("first_run_lexical.json")
    if not f:
        return []
    rows = [[r["code"], r["lexical_s"], r["write_s"], r["user_s"], r["sys_s"],
             r["max_rss_mb"], r["load"]] for r in f["runs"]]
    return ["", f"The big vault's lexical phase, step by step: {f['what']}; "
            f"{_host(f['machine'])}, {f['date']}. {f['content']}.", "",
            table(["code", "lexical s", "write s", "user CPU s", "system CPU s",
                   "max RSS MB", "load"], rows)]


def search_section() -> str:
    s = read_result("search.json")
    if not s or not s.get("markdown"):
        return ""
    # bench_search.py renders its own tables (it knows which rows it verified and timed)
    zen1, here = search_zen1_section(), search_targets_section(s)
    return ("### Search kernels\n`python benchmarks/bench_search.py` — random L2-normalised "
            "vectors and a synthetic Zipfian BM25 corpus, fixed seeds; every engine's results "
            "are checked against the numpy reference before it is timed; engines timed "
            "round-robin in one process.\n\n" + s["markdown"].replace("\n### ", "\n#### ")
            + ("\n\n" + here if here else "") + ("\n\n" + zen1 if zen1 else ""))


def _single(s: dict, n: int, threads: int) -> dict:
    sec = next((c for c in s["cosine"] if c["n"] == n), None)
    if not sec:
        return {}
    rows = {r["engine"]: r for r in sec["single"] if r["threads"] == threads and "ms" in r}
    return {"bound": sec["bandwidth"][str(threads)]["c_stream_ms"] if str(threads) in
            sec["bandwidth"] else sec["bandwidth"][threads]["c_stream_ms"], **rows}


def search_targets_section(s: dict) -> str:
    """Issue #24's targets against search.json (the host above), search_xeon_1core.json
    and vector_leg.json (the app's leg)."""
    rows = []
    for n in (100_000, 1_000_000):
        for t in (1, 2):
            r = _single(s, n, t)
            if not r:
                continue
            f32, npy = r["brainbot C f32"]["ms"], r["numpy (matmul+argpartition)"]["ms"]
            i8 = r["brainbot C int8+rescore"]["ms"]
            rows.append([f"{n:,}", t, f"{r['bound']:.2f}", f"{f32:.2f}", f"{npy:.2f}",
                         _ratio(npy / f32), _ratio(f32 / r["bound"]), f"{i8:.2f}"])
    if not rows:
        return ""
    vs_numpy = [float(r[5]) for r in rows]
    vs_bound = [float(r[6]) for r in rows]
    npy_bound = [float(r[4]) / float(r[2]) for r in rows]
    text = ["#### Issue #24 targets on this host", "",
            f"From the tables above ({s['machine']['cpu']}; one query, top-10, median ms; the "
            "bound is the f32 matrix read once with as many threads, the faster of two and four "
            "prefetched streams each):", "",
            table(["N", "threads", "bound", "C f32", "numpy", "numpy / C f32 (target ≥ 1.3)",
                   "C f32 / bound (target ≤ 1.1)", "C int8 + rescore"], rows), "",
            "What changed, measured on this host: (1) numpy's OpenBLAS workers spun for ~0.1 s "
            "after each call and took the second core from the engine raced next (C f32 on two "
            "threads at 100k: 5.16 ms alone, 8.57 right after numpy); the benchmarks now let "
            "them sleep at once. (2) The hardware prefetcher alone does not keep enough lines in "
            "flight for one core: reading 1M x 384 f32 once took 91-100 ms as four streams, "
            "80-81 as one stream with a software prefetch 3 KB ahead into L2, 74-76 as two "
            "such streams (2 KB, 4.5 KB and 6 KB ahead were slower). The bound is the faster of "
            f"that read and four such streams ({_streams_won(s)}), and a one-query scan reads two lanes a thread, four rows stepped together, each "
            "row prefetched 3 KB ahead (the same float bits as before): 1M on one thread 86.7 "
            "ms against 98.9 for the build before, numpy 108.5, raced. (3) Heaps of 1,024 and "
            "more (the int8 pool) buffer entries and select in batches, and the int8 kernel "
            "returns the pool's floor, so the proof needs no sort of the pool: the 1M int8 scan "
            "with the app's pool went from 22.1 to 16.2 ms.", "",
            f"Verdicts. numpy / C f32 is {min(vs_numpy):.2f}-{max(vs_numpy):.2f} here (target "
            f"1.3); C f32 / bound is {min(vs_bound):.2f}-{max(vs_bound):.2f} (target 1.1). "
            f"Neither has much room: numpy's own matmul + argpartition runs at "
            f"{min(npy_bound):.2f}-{max(npy_bound):.2f}× the bound, and the scan's rows cost "
            "it a few per cent over a flat read of the same bytes (a C loop reading 1M rows "
            "two at a time with per-row accumulators: 80 ms against 74-76 for the flat read; "
            "fully unrolled rows and two rows side by side were no faster). So at 1M rows, "
            "where numpy runs closest to the bound, 1.3× numpy would take a scan faster than "
            "the fastest read found; across this stop's runs numpy / C f32 at 1M was "
            "1.24-1.32, and C f32 / bound at 100k on two threads 1.07-1.12. At 10,000 rows (15 MB, cache-resident) the "
            "bound is a cache figure, not a memory one. The 12 MB two-thread rule holds here "
            "as on the Zen hosts (the cut-off table above: two f32 threads lose at 5,000 rows, "
            "7.7 MB, and win from 10,000, 15 MB; int8 is about even at 20,000, 7.7 MB, 0.92-1.14× "
            "across runs, and wins from 50,000)."]
    leg = read_result("vector_leg.json")
    if leg:
        lrows = [[f"{r['chunks']:,}", r["f32_ms"], r["int8 + proof_ms"], r["numpy_ms"],
                  _ratio(r["numpy_over_int8"]), f"{r['proof']['proved']} / {r['proof']['widened']}"
                  f" / {r['proof']['f32']}"] for r in leg["rows"]]
        text += ["", f"The app's vector leg (`{leg['command']}`, {leg['cpu']}): the SQLite "
                 "store's warm leg over embedding-like synthetic vectors (a shared direction, 30 "
                 "topics, noise), k = 100, wall ms medians, ids and scores checked equal to the "
                 "f32 scan's (target at 1M: ≥ 3× numpy):", "",
                 table(["chunks", "f32 scan", "int8 + proof", "numpy", "numpy / int8",
                        "proved / widened / f32"], lrows)]
    return "\n".join(text + _one_core_part(read_result("search_xeon_1core.json"), "search_xeon_1core"))


def _streams_won(s: dict) -> str:
    """Where four read streams a thread beat two, from search.json's bandwidth rows."""
    won = [f"{sec['n']:,} on {t} thread{'s' if str(t) != '1' else ''}, "
           f"{bw['ms_by_streams']['4']:.2f} against {bw['ms_by_streams']['2']:.2f} ms"
           for sec in s["cosine"] for t, bw in sec["bandwidth"].items()
           if bw.get("streams") == 4 and "ms_by_streams" in bw]
    return "four won at " + "; ".join(won) if won else "two won at every size"


def _ratio(x) -> str:
    return f"{x:.2f}"


def search_zen1_section() -> str:
    """Issue #24 on the Zen 1 host: search_zen1_loaded.json (its --cutoff), search_1core.json,
    search_app.json (the app's vector leg) and search_zen1_session.json (session scripts)."""
    loaded, one, app = read_result("search_zen1_loaded.json"), read_result("search_1core.json"), \
        read_result("search_app.json")
    ses = read_result("search_zen1_session.json")
    if not loaded or not ses:
        return ""
    mc = loaded["machine"]
    smt = "none" if not mc.get("smt_siblings") else ", ".join(mc["smt_siblings"])
    text = [
        "#### Issue #24 on a second host: Zen 1, oversubscribed", "",
        "The tables above are from the host they name. The figures below are from "
        f"{ses['cpu']} (`{mc['cpu']}`, {mc['usable_cpus']} usable CPUs, SMT siblings from "
        f"sysfs: {smt}; `lscpu -e` shows CORE 0 and CORE 1 with separate L1/L2, one L3). That "
        "machine was shared with other jobs throughout (load averages below), so wall times "
        "there are scheduling noise; the comparisons use per-call CPU time, builds raced in the "
        "same interleaved rounds.", "",
        "**The f32 one-query scan was memory-bound there, and stayed as it was then** (the "
        "prefetched two-lane scan above came later and was measured on the Xeon only). "
        f"`{ses['f32_variants']['command']}`; the same race is `bench_search.py --anchor "
        "OLD.so`:", "",
        table(["f32 one-query scan", "CPU time vs current"], ses["f32_variants"]["rows"]), "",
        "Interleaving two rows costs the same with either accumulator order: it is the two read "
        "streams, not the arithmetic. None of the variants was kept (`csrc/simd_avx2.c` "
        "records them).", "",
        "**Float bits.** The AVX2+FMA path fuses each multiply-add; the scalar twin (any CPU "
        "without AVX2/FMA, or `BRAINBOT_SIMD=scalar`) rounds the product and the sum "
        "separately. So their f32 cosine scores agree to rounding (~1e-7), **not bit for "
        "bit**, and a near-tie may order differently across CPUs. Within one path, scores are "
        "bit-identical for any thread count, with or without a mask, and equal rows score "
        "equal (tests/test_kernel.py)."]
    text += _cutoff_part(loaded) + _one_core_part(one, "search_1core") + _app_part(app, ses)
    return "\n".join(text)


def _cutoff_part(loaded: dict) -> list[str]:
    rows = [[f"{r['n']:,}", f"{r['f32_mb']:.1f}", f"{r['f32_t1_ms']:.3f}",
             f"{r['f32_t2_ms']:.3f}", f"{r['f32_t2_over_t1']:.2f}", f"{r['int8_t1_ms']:.3f}",
             f"{r['int8_t2_ms']:.3f}", f"{r['int8_t2_over_t1']:.2f}",
             f"{r['auto_threads_f32']} / {r['auto_threads_int8']}", f"{r['loadavg']:.1f}"]
            for r in loaded["cutoff"]["rows"]]
    return ["", "**When a second thread pays.** `bench_search.py --cutoff` (one query, 1 vs 2 "
            "threads raced round-robin; median ms; `benchmarks/results/search_zen1_loaded.json`):",
            "", table(["N", "f32 MB", "f32 1 thread", "f32 2 threads", "2 / 1",
                       "int8 1 thread", "int8 2 threads", "2 / 1", "auto picks f32 / int8",
                       "load avg"], rows), "",
            "On a machine whose both cores are busy, a second thread waits for a core. The "
            "kernel's own rule (12 MB, `csrc/dispatch.c`) was measured on quiet hosts, so the "
            "app asks for one thread for scans below 32 MB while the 1-minute load average is "
            "at least the CPU count (`brainbot/kernel/load.py`; above 32 MB two threads still "
            "paid under load, here and through `brainbot mcp` at 100k chunks)."]


def _one_core_part(one: dict | None, name: str = "search_1core") -> list[str]:
    if not one:
        return []
    rows = []
    for sec in one["cosine"]:
        eng = {e["engine"]: e for e in sec["single"] if e["threads"] == 1}
        f32, np_, i8 = (eng.get(n) for n in ("brainbot C f32", "numpy (matmul+argpartition)",
                                              "brainbot C int8+rescore"))
        if f32 and np_ and i8:
            rows.append([f"{sec['n']:,}", _ratio(f32["x_bound"]), _ratio(np_["ms"] / f32["ms"]),
                         _ratio(i8["x_bound"])])
    load = one["machine"]["loadavg_start"][0], one["machine"]["loadavg_end"][0]
    return ["", "One core (`taskset -c 0 python benchmarks/bench_search.py --threads 1`, load "
            f"average {load[0]:.1f} to {load[1]:.1f}; `benchmarks/results/{name}.json`), "
            "median ms as ratios (numpy's OpenBLAS still starts 2 threads on the one CPU "
            "there):", "",
            table(["N", "C f32 / one-thread streaming read", "numpy / C f32",
                   "C int8 + rescore / read"], rows)]


def _app_part(app: dict | None, ses: dict) -> list[str]:
    text = ["", "**The app's vector leg scans int8 from 50,000 chunks on, with the f32 answer.** "
            "`brainbot/kernel/int8_scan.py` (used by `store/sqlite/arrays.py`): the int8 kernel "
            "ranks every row, rescores a pool of max(2048, 16 k, n / 128) rows in exact f32, and "
            "then *proves* that the pool holds the f32 top-k: a row outside the pool ranks at "
            "most t in int8 (the pool's floor, its lowest int8 value, which the kernel "
            "returns), so its exact score is at "
            "most t + |x|_1 s_q / 2 + |q^|_1 s_x / 2 plus float rounding (s: the int8 scales). "
            "When that is below the k-th exact score in the pool, strictly, no row outside can "
            "enter or tie into the top-k, so the ids, the scores (bit for bit) and the order of "
            "ties are the f32 scan's. Otherwise the pool grows 4x once, then the f32 scan "
            "answers. The int8 copy is made in memory (not stored in the file) once a loaded "
            "index has answered `INT8_AFTER_SCANS` (24) vector queries with the f32 scan, and "
            "dropped when the index changes: a one-shot `brainbot query` never pays for it. "
            "Tests: `tests/test_kernel_int8_scan.py`."]
    if app:
        text += _app_tables(app)
    m, nf = ses["int8_leg_1m"], ses["nfcorpus_proof"]
    text += ["", f"At 1M x 384 (`{m['command']}`): k = 100: numpy {m['k100']['numpy']}, f32 scan "
             f"{m['k100']['f32']}, int8 + proof {m['k100']['int8']} ms; k = 10: "
             f"{m['k10']['numpy']} / {m['k10']['f32']} / {m['k10']['int8']}; "
             f"{m['proved_first_pool']} queries proved by the first pool; the copy "
             f"{m['copy_s']} s CPU. NFCorpus (`{nf['command']}`): {nf['queries']} test queries, "
             f"int8 forced on, pools {nf['pools']} rows (k = 10 / 50): {nf['identical']} of "
             f"{nf['answers']} answers identical to the f32 scan, ids and scores, "
             f"{nf['proved']} proved. NFCorpus itself is below the 50,000 cut-off.", "",
             "**`make asan`** builds the C core with `-fsanitize=address,undefined,"
             "float-cast-overflow` into `build/asan/` and runs `tests/test_kernel.py` against it "
             "(`csrc/asan.py`); any report fails the run."]
    return text


def _app_tables(app: dict) -> list[str]:
    copy = [[f"{int(n):,}", r["copy"]["load_vectors_ms"], r["copy"]["copy_ms"],
             r["copy"]["f32_scan_ms"], r["copy"]["int8_scan_ms"],
             r["copy"]["pays_after_queries"] or "never"] for n, r in app["sizes"].items()]
    cold = []
    for n, r in app["sizes"].items():
        for mode in ("hybrid", "vector"):
            c = r["cold"][mode]
            first, rule = (c[k] for k in c if k != "paired_cpu_diff_ms")
            cold.append([f"{int(n):,}", mode, f"{first['cpu_ms']:.0f} ({first['wall_ms']:.0f})",
                         f"{rule['cpu_ms']:.0f} ({rule['wall_ms']:.0f})",
                         f"{c['paired_cpu_diff_ms']:+.0f}",
                         f"{r['cold']['load_start']:.1f} / {r['cold']['load_max']:.1f}"])
    mcp = app["mcp"]
    st = [[name, v["cpu_50_ms"], v["cpu_95_ms"], v["wall_50_ms"], v["wall_95_ms"]]
          for name, v in mcp["stages"].items()]
    cut = [[f"{r['n']:,}", r["f32_ms"], r["int8_ms"], f"{r['int8_over_f32']:.2f}"]
           for r in app.get("cut_off", [])]
    return ["", f"`{app['command']}` ({app['cpu']}). Where int8 starts to pay (random unit "
            "rows, one query, k = 100, one thread, CPU ms, medians; `INT8_SCAN_MIN_ROWS`):", "",
            table(["rows", "f32 scan", "int8 scan + proof", "int8 / f32"], cut), "",
            "On synthetic indexes (random unit vectors, written through the store), in one "
            "process, CPU ms (median; scans k = 100, the search pool):", "",
            table(["chunks", "load vectors", "int8 copy", "f32 scan", "int8 scan + proof",
                   "copy pays after queries"], copy), "",
            "`brainbot query` as whole processes, interleaved, CPU ms (wall ms) medians: the "
            "copy made at the first query against the rule above, and the median paired "
            "difference:", "",
            table(["chunks", "mode", "copy at the 1st query", "f32 (the rule)",
                   "CPU difference ms", "load start / max"], cold), "",
            f"Warm MCP `search` at {mcp['chunks']:,} chunks (the official client over stdio, "
            f"hybrid, {mcp['queries']} queries after 5 warm-ups): client p50 "
            f"{mcp['client_p50_ms']} ms, p95 {mcp['client_p95_ms']} ms, load average "
            f"{mcp['load_start']:.1f} to {mcp['load_end']:.1f} on {app['cpus']} CPUs; garbage "
            f"collections during the measured searches: {mcp['gc_runs_in_measured_searches']}. "
            "Stages inside the server (thread CPU and wall ms; tool = the tool's body, search = "
            "the Searcher call in it, embed = the query embedding, bm25 = the BM25 leg, scan = "
            "the vector scan; the rest of the client's time is the MCP SDK's, both ends):",
            "", table(["stage", "CPU p50", "CPU p95", "wall p50", "wall p95"], st)]


def index_section() -> str:
    ix = read_result("index.json")
    dw = read_result("index_dwarves-brain.json")
    if not ix:
        return ""
    text = ["### Indexing",
            f"`python benchmarks/bench_index.py` — no-op re-index of {ix['files']:,} files: "
            f"{ix['noop_library_s']} s in the library, {ix['noop_cli_process_s']} s as a "
            f"fresh `brainbot index` process (target ≤ {ix['target_s']} s)."]
    if dw:
        text.append(
            f"All of `dwarves-brain` ({dw['files']} notes): first index {dw['seconds']} s, "
            f"{dw['chunks']:,} chunks, {dw['db_mb']} MB database; no-op re-index "
            f"{dw['noop_cli_s']} s (`brainbot index`, whole process).")
    return "\n".join(text)


def cjk_section() -> str:
    c = read_result("cjk.json")
    if not c:
        return ""
    rows = []
    for name, v in c["variants"].items():
        cjk, en = v["cjk"], v["vault-en"]
        rows.append([name, f"{cjk['bm25']['hit@5']:.3f} / {cjk['bm25']['mrr']:.3f}",
                     f"{cjk['hybrid']['hit@5']:.3f} / {cjk['hybrid']['mrr']:.3f}",
                     f"{cjk['vector']['hit@5']:.3f} / {cjk['vector']['mrr']:.3f}",
                     f"{en['hybrid']['hit@5']:.3f} / {en['hybrid']['mrr']:.3f}"])
    both = c["variants"]["per-language"]["cjk_weights"]
    sweep = ", ".join(f"{w} → {v['hit@5']:.3f} / {v['mrr']:.3f}" for w, v in both.items())
    return "\n".join([
        "### CJK", "`python benchmarks/bench_cjk.py` — examples/vault (36 notes in Chinese, "
        "Japanese and Korean beside 49 English ones) indexed with the English-only analyzer "
        "(every CJK run as characters and bigrams) and with per-language analysis (Japanese "
        "without its grammar, Chinese without its function characters: text/cjk.py); "
        "hit@5 / MRR on examples/questions-cjk.jsonl (62 answerable questions asked in those "
        "languages, not used to choose the rules) and, as a check on English, "
        "examples/questions-vault.jsonl. The hybrid column weighs the vector leg by the "
        "query's language (below).", "",
        table(["analyzer", "CJK bm25", "CJK hybrid", "CJK vector", "English hybrid"], rows),
        "", "Hybrid (bm25 : vector) weights for a query in Chinese, Japanese or Korean, with "
        f"per-language analysis: {sweep}. The English model's vectors only hurt there, so "
        "such a query is carried by BM25 alone (and not embedded: search/weights.py)."])


def coldstart_section() -> str:
    cs = read_result("coldstart.json")
    if not cs:
        return ""
    wp = cs["whole_process"]
    ms = lambda s: "—" if s is None else f"{1000 * s:.0f}"  # noqa: E731
    branch = cs.get("branch_run", {}).get("whole_process", {})
    rows = []
    for mode in ("hybrid", "bm25"):  # before: d26c361, in the cold-start branch's run
        before = (branch.get(f"{mode} (baseline)") or wp.get(f"{mode} (baseline)") or {})
        after = branch.get(mode, {}).get("median_s")
        rows.append([f"`brainbot query --mode {mode}`", ms(before.get("median_s")), ms(after),
                     f"**{ms(wp[mode]['median_s'])}**", f"≤ {ms(cs['targets_s'][mode])}"])
    if "ask, no key" in wp:
        rows.append(["`brainbot ask` (no key)",
                     ms(wp.get("ask, no key (baseline)", {}).get("median_s")), "",
                     f"**{ms(wp['ask, no key']['median_s'])}**", ""])
    for anchor in ("python -c 'import numpy, onnxruntime'", "python -c pass"):
        rows.append([f"`{anchor}`", "", ms(branch.get(anchor, {}).get("median_s")),
                     ms(wp[anchor]["median_s"]), ""])
    stages = cs["breakdown"]["current"]["median_s"]
    base = (cs.get("branch_run", {}).get("breakdown", {}).get("baseline")
            or cs["breakdown"].get("baseline", {})).get("median_s", {})
    names = list(dict.fromkeys(list(base) + list(stages)))
    brk = [[name, ms(base.get(name)), ms(stages.get(name))] for name in names]
    load = cs["load_average_start"][0], cs["load_average_end"][0]
    before = cs.get("baseline", {}).get("label") or "the baseline checkout"
    return "\n".join([
        "### Cold start",
        f"`python benchmarks/bench_coldstart.py --baseline DIR` — `brainbot query` as whole "
        f"processes on an index of {cs['chunks']:,} chunks (NFCorpus + Rust design-meeting "
        f"minutes), median of {cs['runs']} runs each, interleaved, "
        f"each run started once the CPUs had been ≥ {cs.get('min_idle', 0):.0%} idle for "
        f"0.5 s. Load average {load[0]} at the start, {load[1]} at the end.", "",
        table(["command", "before ms", "after, same run ms", "main now ms", "target ms"],
              rows), "",
        "Before and after: one run on the cold-start branch, the earlier checkout "
        "(d26c361) and the branch interleaved on its own ~9.7k-chunk index; main now: "
        "a later run of the merged code, on an index built by it. `brainbot ask` (no key): "
        f"before is {cs.get('baseline', {}).get('label') or 'the baseline'} in the same run "
        "as main now, where finding that there is no key imported the Anthropic SDK.",
        _same_run_line(cs), "",
        "Where a hybrid query's time goes, stage by stage in one fresh process (median ms; "
        "before: d26c361 in the branch's run; "
        "\"session\" now includes finding and checking the pre-optimized graph, see "
        "`brainbot/model/session.py`):", "", table(["stage", "before", "now"], brk)])


def _same_run_line(cs: dict) -> str:
    """The baseline checkout of the latest run against main, hybrid and bm25, same run."""
    wp, label = cs["whole_process"], cs.get("baseline", {}).get("label")
    if not label or "bm25 (baseline)" not in wp:
        return ""
    ms = {k: f"{1000 * wp[k]['median_s']:.0f}" for k in
          ("hybrid", "bm25", "hybrid (baseline)", "bm25 (baseline)")}
    return (f"In the same run ({cs.get('machine', {}).get('cpu', 'this host')}), {label} "
            f"(the tree before the stage packages, issue 21) on its own index: hybrid "
            f"{ms['hybrid (baseline)']} ms against main's {ms['hybrid']}, bm25 "
            f"{ms['bm25 (baseline)']} against {ms['bm25']}.")


def serve_section() -> str:
    sv = read_result("serve.json")
    if not sv:
        return ""
    base = sv.get("baseline")
    rows = [[f"{int(n):,}", v["p50_ms"], v["p95_ms"]]
            + ([v["baseline"]["p50_ms"], v["baseline"]["p95_ms"]] if base else [])
            for n, v in sv["search"].items()]
    header = ["chunks", "p50 ms", "p95 ms"]
    if base:
        header += [f"{base['label'] or 'baseline'} p50 ms", f"{base['label'] or 'baseline'} p95 ms"]
    w = sv["watch"]
    return "\n".join([
        "### Serving: MCP and watch",
        "`python benchmarks/bench_serve.py` — warm `search` through a real MCP client session "
        "(the SDK's stdio client spawning `brainbot mcp`), hybrid including the query "
        "embedding, 60 queries after 5 warm-up calls, on synthetic indexes (random unit "
        "vectors, Zipf texts written through the store: a search's latency does not depend "
        "on what the vectors mean), each search after the CPUs had been "
        f"{sv.get('min_idle', 0):.0%} idle over 0.5 s (`--min-idle`). "
        f"{sv.get('cpu', 'AMD EPYC')}. Target (issue 24): p95 ≤ 30 ms at 100k. "
        "The server warms up before its first call (`serve/warmup.py`): the postings of the "
        "terms in at least 5 % of the chunks, in one SQL (a common term's first use, which "
        "read its postings, had been the tail), and from 50,000 chunks the int8 copy of the "
        "vectors (made by the 25th query before). onnxruntime's pool does not spin "
        "(`model/session.py`): its idle thread no longer takes a core from the scan and the "
        "event loop after each embedding, which shortens the tail and costs the median a "
        "little (each run wakes its thread)."
        + (f" The {base['label'] or 'baseline'} columns: that package, its server and this "
           "tree's open at once on the same index, called query by query in alternating "
           "order (`--baseline`)." if base else ""), "",
        table(header, rows), "",
        f"Save to searchable through `brainbot mcp --watch` on a vault of "
        f"{sv['watch_chunks']:,} chunks, {w['edits']} edits each (a note gets a sentence "
        f"with a new word): median {w['mcp_median_s']} s (max {w['mcp_max_s']} s) polled "
        f"through MCP `search`, median {w['cli_median_s']} s (max {w['cli_max_s']} s) with "
        "`brainbot query` as a new process each time. Target: median ≤ 2 s. Load average "
        f"{sv['load_start']:.2f} at the start, {sv['load_end']:.2f} at the end. A pass that "
        "finds the writer lock held (by the background embedding of the edit before) retries "
        "after 20 ms, doubling up to 0.5 s (`serve/watch.py`); with a flat 0.5 s wait, the MCP "
        "median was 0.652 s (max 0.814 s) in the run of 6b559ea."])


def watch_first_section() -> str:
    w = read_result("watch_first.json")
    if not w:
        return ""
    rows = [[f"{name} ({r['notes']:,} notes)", r["handshake_s"], r["last_note_bm25_hit_s"],
             r["edit_to_bm25_hit_s"], r["embedded_at_edit_hit"],
             r.get("fully_embedded_s", f"not waited for ({r['embedded_at_end']} at "
                                       f"{r['seconds_at_end']} s)"),
             f"{r['load_start']:.1f} / {r['load_end']:.1f}"]
            for name, r in w["runs"].items()]
    return "\n".join([
        "`python benchmarks/bench_watch_first.py --vault DIR` — `brainbot mcp --watch` on "
        "a vault it has never indexed, through the official MCP client over stdio: seconds "
        "from the spawn to the handshake, to the first bm25 hit on the last note, and to "
        "every chunk embedded; and from saving an edit (a new word) during the background "
        "semantic phase to its bm25 hit (before it, that edit's pass waited for the whole "
        "embedding). " + next(iter(w["runs"].values()))["cpu"] + ".", "",
        table(["vault", "handshake s", "last note a bm25 hit s", "edit to bm25 hit s",
               "embedded then", "all embedded s", "load average start / end"], rows)])


def static_int8_section() -> str:
    s = read_result("static_int8.json")
    if not s or "throughput" not in s:
        return ""
    names = {"fp32": "fp32", "dynamic_int8": "dynamic int8 (`--precision int8` before #33)",
             "static_int8": "static int8 QDQ (experiment)"}
    rows = []
    for key, label in names.items():
        t, ab = s["throughput"][key], s["alone_vs_batch"][key]
        cos = s["cosine_to_fp32"].get(key, {"min": 1.0, "mean": 1.0})
        rows.append([label, t["chunks_per_s_median"], f"{t['speedup_vs_fp32_median']:.2f}",
                     f"{cos['min']:.4f} / {cos['mean']:.4f}",
                     "yes" if ab["embedder_bit_identical"] else
                     f"no ({ab['embedder_alone_vs_batch_max_abs']:.1e})"])
    text = ["### Static int8 (issue #22, not adopted)",
            f"`python benchmarks/bench_static_int8.py` — QDQ, QUInt8 activations, QInt8 "
            f"per-tensor weights, reduce_range={s['reduce_range']} (CPU without VNNI), MinMax "
            f"over {s['calibration_chunks']} chunks of examples/; {s['throughput']['chunks']} "
            f"Rust-book chunks through the Embedder, median of {s['throughput']['rounds']} "
            "interleaved rounds, ratio to fp32 within each round.", "",
            table(["graph", "chunks/s", "× fp32", "cosine to fp32 (min / mean)",
                   "alone = in a batch"], rows)]
    if "questions" in s:
        rows = [[f"`{name}`"] + [m.get("hit@5", "") for m in modes.values()]
                for name, modes in s["questions"].items()]
        text += ["", "hit@5 on static-int8 indexes (`brainbot eval --questions FILE -k 5`):", "",
                 table(["question set", "bm25", "vector", "hybrid"], rows)]
    return "\n".join(text)


def _load_verdict(start: float, end: float) -> str:
    """Whether a latency table is the transports' or the machine's queueing."""
    if max(start, end) < 2:
        return "The machine was otherwise idle: the differences are the transports'."
    return ("Other jobs shared the 2 cores: these latencies are the machine's queueing, not "
            "the transports', and show no target either way.")


def serve_http_section() -> str:
    sv = read_result("serve_http.json")
    if not sv:
        return ""
    names = list(next(iter(sv["search"].values())))
    rows = [[name] + [f"{sv['search'][n][name]['p50_ms']} ({sv['search'][n][name]['p95_ms']})"
                      for n in sv["search"]] for name in names]
    mem = [[n, f"{m['mcp_rss_mb']} / {m['mcp_pss_mb']}", f"{m['serve_rss_mb']} / "
            f"{m['serve_pss_mb']}"] for n, m in sv["memory"].items()]
    text = [
        "### Serving: HTTP against stdio",
        "`python benchmarks/bench_serve.py --transports` — the same warm hybrid search "
        "(query embedding included) through `brainbot mcp` over stdio (raw JSON-RPC lines), "
        "`brainbot serve`'s `POST /api/search` and its `/mcp` (one keep-alive connection), "
        "the three calls interleaved query by query, 60 queries after 5 warm-ups, on the "
        "synthetic indexes above. " + sv["cpu"] + f", load average {sv['load_start']:.1f} at "
        f"the start and {sv['load_end']:.1f} at the end; each round waited until the CPUs "
        f"had been {sv.get('min_idle', 0):.0%} idle over 0.5 s (`--min-idle`). "
        + _load_verdict(sv["load_start"], sv["load_end"]), "",
        table(["transport"] + [f"{int(n):,} chunks p50 (p95) ms" for n in sv["search"]],
              rows), "",
        f"Memory with {sv['memory_chunks']:,} chunks loaded (each server warm: one hybrid "
        "search done), MB RSS / PSS (PSS splits shared pages, such as the libraries', "
        "between the processes):", "",
        table(["clients", "N × `brainbot mcp` (stdio)", "one `brainbot serve`"], mem)]
    cold = sv.get("cold")
    if cold:
        text += ["", f"Cold `brainbot query --json` as a new process on {cold['chunks']:,} "
                 f"chunks, median of {cold['runs']} interleaved (`--cold`): "
                 f"{cold['daemon_median_ms']} ms with a `serve` of the index running, "
                 f"{cold['in-process_median_ms']} ms in-process (load average "
                 f"{cold['load_start']:.1f} to {cold['load_end']:.1f})."]
    return "\n".join(text)


def related_section() -> str:
    r = read_result("related.json")
    if not r:
        return ""
    names = {"mean": "mean: best chunk vs the note's mean vector (default)",
             "max": "max: best chunk-to-chunk pair", "centroid": "centroid: mean vs mean"}
    rows = []
    for v in r["vaults"]:
        for key, label in names.items():
            m = v["methods"][key]
            rows.append([f"{v['vault']} ({v['notes_with_links']} notes, {v['links']} links)",
                         label, f"{m['links_in_top5']:.3f}", f"{m['links_in_top10']:.3f}",
                         f"{m['notes_with_a_link_in_top5']:.3f}",
                         f"{m['notes_with_a_link_in_top10']:.3f}", m.get("ms_per_note", "")])
    return "\n".join([
        "### Related notes",
        "`python benchmarks/bench_related.py` — for every note with a resolved link to or "
        "from another note, the share of its linked notes among its `brainbot related` top "
        "5 / top 10, and the share of such notes with at least one linked note there. Links "
        "are a proxy for relatedness, not the truth. " + r["cpu"] + ".", "",
        table(["vault", "method", "links in top 5", "links in top 10",
               "notes with one in top 5", "in top 10", "ms per note"], rows)])


def build() -> str:
    parts = [p for p in (eval_section(), _precision_fusion_section(RESULTS), cjk_section(),
                         language_tables.final_section(), _languages_section(RESULTS),
                         language_tables.section(), search_section(), embed_section(),
                         static_int8_section(), e5_section(),
                         chunking_section(), first_run_section(),
                         _first_run_ab_section(RESULTS), index_section(),
                         coldstart_section(), serve_section(), serve_http_section(),
                         watch_first_section(), before_after_tables.section(),
                         related_section()) if p]
    return "# Benchmarks and evals\n\n" \
           "Generated by `python benchmarks/readme_tables.py` (`make docs`) from " \
           "`benchmarks/results/*.json`, which the benchmarks and `brainbot eval --json` " \
           "write; the README's headline table comes from the same files. Do not edit by " \
           "hand.\n\n" \
           "Machines: 2-vCPU VMs with 24 GB, shared and noisy. Until " \
           "2026-12-01 every run was on AMD EPYC VMs (the kernel sections say which: Zen 1 " \
           "has AVX2 and FMA, no AVX-512); " \
           "the serving tables are from an Intel Xeon (KVM, AVX-512 and VNNI), " \
           "2026-12-02; the embedding (int8, issue 33) and first-run tables from an AMD " \
           "EPYC family 26 (Zen 5, AVX-512 VNNI), 2026-12-05; each section names its host. " \
           "No CPU without VNNI was timed: the int8 graph's AVX2 path was run only under " \
           "qemu (tests/test_int8.py), which checks its vectors, not its speed. " \
           "Every figure is from one run " \
           "of the command named, anchors side by side.\n\n" + \
           re.sub(r"(?m)^#(##+ )", r"\1", "\n\n".join(parts)) + "\n"


def readme_with(headline: str) -> str:
    text = README.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{headline}\n{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--print", action="store_true")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    import headline

    page = build()
    if args.print:
        print(page)
        return 0
    readme = readme_with(headline.build())
    if args.check:
        stale = [p.name for p, want in ((PAGE, page), (README, readme))
                 if p.read_text(encoding="utf-8") != want]
        if stale:
            print(f"stale: {', '.join(stale)}; run `make docs`", file=sys.stderr)
        return 1 if stale else 0
    PAGE.write_text(page, encoding="utf-8")
    README.write_text(readme, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

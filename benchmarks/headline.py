"""The README's headline figures: one small table, each row from the same
benchmarks/results/*.json that docs/benchmarks.md's full tables come from, and a link to
the full table (issue 35). Nothing here measures anything; `readme_tables.py` writes it
between the README's headline markers.
"""

from __future__ import annotations

import re

from markdown_tables import read_result

PAGE = "docs/benchmarks.md"


# AMD's family numbers: a VM may name its CPU only "AMD EPYC" (/proc/cpuinfo).
ZEN = {23: "Zen 1/2", 25: "Zen 3/4", 26: "Zen 5"}


def cpu_name(m: dict) -> str:
    """A result's CPU as the README names it: model name, family (Zen generation) and
    whether it has VNNI, where the benchmark recorded them (bench_chunking.machine)."""
    name, family, vnni = m.get("cpu", "unknown CPU"), m.get("cpu_family"), m.get("vnni")
    if family is not None:
        zen = ZEN.get(family) if name.startswith("AMD") else None
        name += f" family {family}" + (f" ({zen})" if zen else "")
    if vnni is not None:
        name += ", AVX-512 VNNI" if vnni else ", no VNNI"
    return name


def slug(heading: str) -> str:
    """GitHub's anchor for a markdown heading's text."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _link(heading: str) -> str:
    return f"[table]({PAGE}#{slug(heading)})"


def _retrieval() -> list[str] | None:
    nf = read_result("eval_nfcorpus.json")
    if not nf:
        return None
    m = {k: v["ndcg@10"] for k, v in nf["modes"].items()}
    return ["Retrieval, BEIR NFCorpus nDCG@10 "
            f"({nf['queries']} queries)",
            f"hybrid **{m['hybrid']:.3f}** · vector {m['vector']:.3f} · BM25 {m['bm25']:.3f}",
            "published: BM25 0.322 (Pyserini), this model alone 0.316 (MTEB), "
            "BM25 + dense 0.346",
            _link("Retrieval quality: BEIR NFCorpus")]


def _answers() -> list[str] | None:
    a = read_result("eval_answers.json")
    pooled = (a or {}).get("pooled", {}).get("answers", {})
    if "tuning" not in pooled:
        return None

    def figures(r: dict) -> str:
        x = r["rates"]
        return (f"correct {x['answered_correct']:.0%}, wrong {x['answered_wrong']:.0%} "
                f"({x['answered_in_gold_note']:.0%} in a gold note)")

    test = pooled.get("test")
    return ["Answers with no API key (extractive)",
            f"test sets ({test['answerable']} questions): **{figures(test)}**" if test else "—",
            f"tuning sets ({pooled['tuning']['answerable']}): {figures(pooled['tuning'])}; "
            "targets: correct ≥ 60 %, wrong ≤ 5 %",
            _link("Answers: `brainbot ask`")]


def _followups() -> list[str] | None:
    f = read_result("eval_followups.json")
    pooled = (f or {}).get("pooled", {}).get("follow-ups", {})
    if "tuning" not in pooled:
        return None

    def found(r: dict, side: str = "within", part: str = "follow_ups") -> str:
        g = r[part][side]
        return f"{round(g['found'] * g['n'])}/{g['n']}"

    test = pooled.get("test")
    return ["Follow-up questions found within their conversation",
            f"test sets **{found(test)}** (asked alone {found(test, 'alone')}); first questions "
            f"inside another conversation {found(test, 'inside_unrelated', 'first')}"
            + (f" (alone {found(test, 'alone_paired', 'first')})"
               if "alone_paired" in test["first"] else "") if test else "—",
            f"tuning sets {found(pooled['tuning'])}; target ≥ 85 % on test sets",
            _link("Follow-up questions")]


def _kernel() -> list[str] | None:
    s = read_result("search.json")
    sec = next((c for c in (s or {}).get("cosine", []) if c["n"] == 1_000_000), None)
    if not sec:
        return None
    rows = {r["engine"]: r["ms"] for r in sec["single"] if r["threads"] == 1 and "ms" in r}
    c, npy = rows["brainbot C f32"], rows["numpy (matmul+argpartition)"]
    bound = sec["bandwidth"]["1"]["c_stream_ms"]
    return ["C cosine top-10 over 1M vectors, one thread",
            f"**{npy / c:.2f}×** numpy's speed; {c / bound:.2f}× the memory-bandwidth bound",
            "numpy matmul + argpartition", _link("Issue #24 targets on this host")]


def _embedding() -> list[str] | None:
    e = read_result("embed.json")
    if not e:
        return None
    cos = e["int8_vs_fp32_on_chunks"]
    return [f"Embedding, int8 (the default) against fp32, on {cpu_name(e['machine'])}",
            f"**{e['int8_speedup_vs_fp32']:.2f}×** the throughput; min cosine to fp32 "
            f"{cos['min_cosine']:.4f}",
            f"fp32 on the same texts, raced (target 2×: {'met' if e['int8_speedup_vs_fp32'] >= 2 else 'not met'})",
            _link("Embedding throughput")]


def _first_run() -> list[str] | None:
    f = read_result("first_run.json")
    big = next((v for v in (f or {}).get("vaults", []) if v["vault"].startswith("big")
                and not v.get("model") and not v.get("embed")), None)  # the default model's
    if not big:
        return None
    minutes = {p: s / 60 for p, s in big["projected_embed_s"].items()}  # per precision
    return [f"First run, {big['files']:,} notes ({big['chunks']:,} chunks)",
            f"searchable by BM25 after **{big['to_last_bm25_hit_s']:.0f} s**; embedded in "
            f"~{minutes['int8']:.0f} min (int8, projected) in the background",
            f"fp32: ~{minutes['fp32']:.0f} min" if "fp32" in minutes else "", _link("First run")]


def _serving() -> list[str] | None:
    s = read_result("serve_http.json")
    row = (s or {}).get("search", {}).get("100000", {}).get("HTTP /api/search")
    if not row:
        return None
    return ["`brainbot serve`, /api/search over 100k chunks",
            f"p50 **{row['p50_ms']:.0f} ms**, p95 {row['p95_ms']:.0f} ms",
            "stdio MCP p50 " + f"{s['search']['100000']['stdio MCP']['p50_ms']:.0f} ms",
            _link("Serving: HTTP against stdio")]


def _languages() -> list[str] | None:
    """The test set's union of questions, each language with the model a new index of it
    gets (language_tables.automatic_models): its hybrid hit@5 over English's."""
    import language_tables

    runs = {m: read_result(f"languages_test_all_{name}.json")
            for m, name in language_tables.FINAL_RUNS.items()}
    if not all(runs.values()):
        return None
    first = next(iter(runs.values()))
    auto = language_tables.automatic_models(first["source"], list(first["languages"]))

    def hybrid(model: str, lang: str) -> float:
        return runs[model]["languages"][lang]["modes"]["hybrid"]["hit@5"]

    english = hybrid(auto["en"], "en")
    shares = {lang: hybrid(m, lang) / english for lang, m in auto.items() if lang != "en"}
    alone = {lang: hybrid(auto["en"], lang) / english for lang in shares}
    low = min(shares.values())
    return [f"Notes in {', '.join(shares)} with no flags: hybrid hit@5 as a share of "
            f"English's (test set: {first['title']}, "
            f"{first['languages']['en']['answerable']} questions a language)",
            f"**{low:.2f}–{max(shares.values()):.2f}** (lowest: "
            f"{', '.join(lang for lang, v in shares.items() if v == low)})",
            f"target ≥ 0.9; {auto['en']} for every language: "
            f"{min(alone.values()):.2f}–{max(alone.values()):.2f}",
            _link("Languages: final figures (issue 41)")]


def build() -> str:
    rows = [r for r in (_retrieval(), _answers(), _followups(), _languages(), _kernel(),
                        _embedding(), _first_run(), _serving()) if r]
    out = ["| | brainbot | against | |", "|---|---|---|---|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)

"""The before/after section of docs/benchmarks.md (issue 40, "nothing gets slower"), from
benchmarks/results/serve_before_after.json and first_index_before_after.json, which
benchmarks/bench_before_after.py writes. readme_tables.py puts it on the page; nothing here
measures anything or judges a ratio.
"""

from __future__ import annotations

from pathlib import Path

from markdown_tables import RESULTS, read_result, table

SERVE_NAMES = {"p50_ms": "p50 ms", "p95_ms": "p95 ms", "mcp_median_s": "median s, MCP",
               "mcp_max_s": "max s, MCP", "cli_median_s": "median s, `brainbot query`",
               "cli_max_s": "max s, `brainbot query`"}


PAIRED = ("\"after / before\" divides the two medians; \"paired\" is the median over the "
          "rounds of each round's own after / before, whose two runs were next to each other "
          "in time (a load that came and went between rounds cancels out of it).")


def _idle(min_idle: float, what: str) -> str:
    if min_idle <= 0:
        return "no wait for a quiet moment (`--min-idle 0`): the alternation is the control"
    return f"{what} after the CPUs had been {min_idle:.0%} idle over 0.5 s (`--min-idle`)"


def _ratio(x) -> str:
    return "" if x is None else f"{x:.2f}"


def _measure_name(key: str) -> str:
    """``search 10000 p50_ms`` -> ``warm search, 10,000 chunks, p50 ms``."""
    parts = key.split()
    if parts[0] == "search":
        return f"warm search, {int(parts[1]):,} chunks, {SERVE_NAMES.get(parts[2], parts[2])}"
    return f"save to searchable, {SERVE_NAMES.get(parts[1], parts[1])}"


def _loads(data: dict, runs: list[dict]) -> str:
    """The 1-minute load averages seen at the starts of the runs: their range."""
    ones = [r["loads_start"][0] for r in runs if r.get("loads_start")]
    seen = f"{min(ones):.2f}–{max(ones):.2f}" if ones else "not recorded"
    return (f"1-minute load average {seen} at the starts of the runs "
            f"({data['loads_start'][0]:.2f} before the first, "
            f"{data['loads_end'][0]:.2f} after the last)")


def _runs_each(runs: list[dict]) -> str:
    """How many runs each tree had (the same, or "before N, after M" when a run was cut)."""
    n = {t: sum(r["tree"] == t for r in runs) for t in ("before", "after")}
    return str(n["before"]) if n["before"] == n["after"] else \
        f"before {n['before']}, after {n['after']}"


def _labels(data: dict) -> tuple[str, str]:
    t = data["trees"]
    return f"before ({t['before']['commit']})", f"after ({t['after']['commit']})"


def _serve_lines(sv: dict | None) -> list[str]:
    if not sv:
        return []
    before, after = _labels(sv)
    med, ratio = sv["medians"], sv["ratios"]
    paired = sv.get("paired_ratios", {})
    rows = [[_measure_name(k), med["before"][k], med["after"][k], f"{ratio[k]:.2f}",
             _ratio(paired.get(k))] for k in med["after"] if k in ratio]
    return [
        f"`{sv['command']}` — each tree's own `benchmarks/bench_serve.py`"
        + (" `--quick`" if sv.get("quick") else "")
        + f" with its own venv, {_runs_each(sv['runs'])} runs each, the two alternating "
        "(before then after, then after then before); the median of each measure over its "
        f"runs; {_idle(sv.get('min_idle', 0), 'each search')}. {sv['cpu']}, "
        f"{_loads(sv, sv['runs'])}. Each tree builds its own synthetic indexes: "
        "`bench_serve.py --baseline` (both servers open at once on one index) cannot span "
        "these trees when the index format changed between them (the before tree refuses an "
        "index built with a newer analyzer and asks for `--rebuild`).", "",
        PAIRED, "",
        table(["measure", before, after, "after / before", "paired"], rows)]


def _index_lines(ix: dict | None) -> list[str]:
    if not ix:
        return []
    before, after = _labels(ix)
    runs = [r for v in ix["vaults"].values() for r in v["runs"]]
    runs_each = _runs_each(next(iter(ix["vaults"].values()))["runs"])
    rows = []
    for vault, v in ix["vaults"].items():
        med, ratio, paired = v["medians"], v["ratios"], v.get("paired_ratios", {})
        rows.append([f"`{vault}`", med["before"]["wall_s"], med["after"]["wall_s"],
                     f"{ratio['wall_s']:.2f}", _ratio(paired.get("wall_s")),
                     med["before"]["peak_rss_mb"], med["after"]["peak_rss_mb"],
                     f"{ratio['peak_rss_mb']:.2f}", _ratio(paired.get("peak_rss_mb"))])
    return [
        f"`{ix['command']}` — a first index of each vault into a new database "
        "(`brainbot index VAULT --db NEW.db --precision int8`, the default precision) under "
        f"`/usr/bin/time`, {runs_each} runs of each tree a vault after one untimed run of each, "
        f"alternating as above; medians; {_idle(ix.get('min_idle', 0), 'each run')}. "
        f"{ix['cpu']}, {_loads(ix, runs)}. What a first index "
        "does differently in the after tree: it reads a sample of the notes (up to 200) to "
        "choose the model (a vault of mostly non-English notes takes multilingual-e5-small; "
        "these vaults keep all-MiniLM-L6-v2), names each note's language and analyses its "
        "chunks for BM25 in that language (Snowball stemmer and stop words; English as "
        "before), chunks with chunker 4, and embeds in a thread of its own a batch ahead, "
        "starting on the first texts during the lexical phase (issue 43), where the before "
        "tree embedded after the lexical phase, in the main thread.", "",
        PAIRED, "",
        table(["vault", f"{before} wall s", f"{after} wall s", "after / before", "paired",
               f"{before} peak RSS MB", f"{after} peak RSS MB", "after / before", "paired"],
              rows)]


def section(results: Path = RESULTS) -> str:
    """The page's section, or "" when neither result file exists."""
    lines = _serve_lines(read_result("serve_before_after.json", results))
    index = _index_lines(read_result("first_index_before_after.json", results))
    lines += ([""] if lines and index else []) + index
    if not lines:
        return ""
    return "\n".join(["### Before and after: serving and a first index (issue 40)", *lines])

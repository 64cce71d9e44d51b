"""First run, two builds side by side: a clean `brainbot index` by another checkout (before)
and by this one (after), each against embedding the same texts alone.

    git worktree add --detach /tmp/before main   # (its C kernel: copy brainbot/_kernel*.so)
    python benchmarks/bench_first_run_ab.py --before /tmp/before \\
        --vault ../shared/data/corpora/rust-book --rounds 3 --min-idle 0.5

Issue 43: at int8 a clean index took 1.25x and 1.32x the time of embedding its texts alone
on held-out data (1.01x at fp32): the lexical phase, the writes and the bookkeeping around
the model showed once the model was twice as fast. Each round runs, every one a whole
process into a fresh database, started once the CPUs are --min-idle idle: the before
build's `brainbot index VAULT --json --precision P`, this build's, and the embedder alone
(bench_first_run.py's anchor: the index's distinct retrieval texts in chunk order, 256 a
call, import and model load included). The order of the two builds alternates by round.
Per vault: each round's wall-clock and CPU seconds (the process with its chunking
workers) and the load average, each build's ratio to the anchor of its round, and the
median of the rounds' ratios. On a loaded host the CPU ratio says what a build adds in
work; the wall ratio, what the user waits. Both builds run with this checkout's
interpreter and packages, each with its own code on PYTHONPATH.

Writes benchmarks/results/first_run_ab.json (merged by vault and precision).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_chunking import machine  # noqa: E402
from bench_coldstart import wait_for_idle  # noqa: E402
from bench_first_run import _ALONE, DEFAULT_MODEL  # noqa: E402

RESULTS = HERE / "results" / "first_run_ab.json"


def _run(argv: list[str], code: Path, min_idle: float) -> tuple[float, float, float, str]:
    """(wall s, CPU s with children, load average, stdout) of one process run with
    ``code`` first on its path."""
    wait_for_idle(min_idle)
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=code,
                          env={**os.environ, "PYTHONPATH": str(code)})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return round(wall, 2), round(cpu, 2), round(load, 2), done.stdout


def one_round(vault: Path, builds: dict[str, Path], precision: str, min_idle: float,
              flip: bool) -> dict:
    row: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(builds, reverse=flip):
            db = Path(tmp) / f"{name}.db"
            wall, cpu, load, out = _run([sys.executable, "-m", "brainbot", "index", str(vault),
                                         "--db", str(db), "--json", "--precision", precision],
                                        builds[name], min_idle)
            stats = json.loads(out)
            row[name] = {"wall_s": wall, "cpu_s": cpu, "load": load,
                         "lexical_s": stats["lexical_seconds"],
                         "semantic_s": stats["embed_seconds"], "chunks": stats["chunks"]}
        wall, cpu, load, _ = _run([sys.executable, "-c", _ALONE, str(Path(tmp) / "after.db"),
                                   precision, DEFAULT_MODEL], builds["after"], min_idle)
        row["alone"] = {"wall_s": wall, "cpu_s": cpu, "load": load}
    for name in builds:
        row[name]["vs_alone"] = round(row[name]["wall_s"] / wall, 3)
        row[name]["cpu_vs_alone"] = round(row[name]["cpu_s"] / cpu, 3)
    return row


def bench(vault: Path, builds: dict[str, Path], precision: str, rounds: int,
          min_idle: float) -> dict:
    runs = []
    for r in range(rounds):
        runs.append(one_round(vault, builds, precision, min_idle, flip=bool(r % 2)))
        print(vault.name, precision, json.dumps(runs[-1]), flush=True)
    name = f"{vault.parent.name}/{vault.name}" if vault.parent.name == "examples" else vault.name
    out = {"vault": name, "precision": precision, "rounds": runs,
           "files": sum(1 for _ in vault.rglob("*.md")), "chunks": runs[0]["after"]["chunks"]}
    for name in builds:
        out[f"{name}_vs_alone"] = statistics.median(r[name]["vs_alone"] for r in runs)
        out[f"{name}_cpu_vs_alone"] = statistics.median(r[name]["cpu_vs_alone"] for r in runs)
    return out


def docs_section(results: Path) -> str:
    """docs/benchmarks.md's section (benchmarks/readme_tables.py): first_run_ab.json."""
    path = results / "first_run_ab.json"
    if not path.is_file():
        return ""
    r = json.loads(path.read_text(encoding="utf-8"))
    rows = ["| vault | precision | files | chunks | rounds | before / alone | after / alone "
            "| before CPU / alone | after CPU / alone | load |", "|---|---|" + "---:|" * 8]
    for v in r["vaults"]:
        loads = [x[k]["load"] for x in v["rounds"] for k in ("before", "after", "alone")]
        rows.append(f"| {v['vault']} | {v['precision']} | {v['files']} | {v['chunks']:,} | "
                    f"{len(v['rounds'])} | {v['before_vs_alone']}× | {v['after_vs_alone']}× | "
                    f"{v['before_cpu_vs_alone']}× | {v['after_cpu_vs_alone']}× | "
                    f"{min(loads):.1f}–{max(loads):.1f} |")
    return "\n".join([
        "### First run, before and after issue 43",
        "`python benchmarks/bench_first_run_ab.py --before CHECKOUT --vault DIR --rounds N` — "
        "a clean `brainbot index` by the build before issue 43 (the model in line, after the "
        "lexical phase) and by this one (the model in its own thread, a batch ahead of the "
        "writes, started during the lexical phase), each a whole process, against the "
        "embedder alone on the same texts; the median of the rounds' ratios, wall-clock and "
        f"CPU (the process with its workers). {r['machine']['cpu']}, "
        f"{r['machine'].get('cores')} cores, shared: the load average at each process's "
        "start is shown; on a loaded host the CPU ratio is the steadier figure. "
        "rust-book is where the overlap was profiled; the other folders were not looked at "
        "while building it. On two cores the int8 embedder alone keeps both busy (two texts "
        "at once), so the rest of the indexer has no idle core to hide in: the CPU ratio is "
        "about the floor of the wall ratio.", "", *rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True,
                        help="a checkout of the build to compare with (its kernel built)")
    parser.add_argument("--vault", type=Path, action="append", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--precision", default="int8")
    parser.add_argument("--min-idle", type=float, default=0.0)
    args = parser.parse_args(argv)
    builds = {"before": args.before.resolve(), "after": REPO}
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    rows = {f"{v['vault']}|{v['precision']}": v for v in results.get("vaults", [])}
    for vault in args.vault:
        row = bench(vault.resolve(), builds, args.precision, args.rounds, args.min_idle)
        rows[f"{row['vault']}|{row['precision']}"] = row
        results = {"machine": machine(), "min_idle": args.min_idle,
                   "measured": "whole processes into fresh databases; median of rounds",
                   "vaults": list(rows.values())}
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({v["vault"]: {k: v[k] for k in v if k.endswith("alone")}
                      for v in results["vaults"]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

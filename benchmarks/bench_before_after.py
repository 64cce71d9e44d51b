"""Before and after, side by side: two checkouts of brainbot, each with its own `make install`
venv, timed in alternating rounds so that whatever else the machine runs falls on both.

1. ``serve``: each tree's own ``benchmarks/bench_serve.py`` (warm MCP search p50/p95 at 10k
   and 100k chunks, save-to-searchable through MCP and through `brainbot query`), run with
   that tree's ``.venv/bin/python``, before then after in one round, after then before in the
   next; the median of each measure over the rounds and the after/before ratio, into
   ``benchmarks/results/serve_before_after.json``.
2. ``index``: a first index of each vault into a new database, ``TREE/.venv/bin/brainbot
   index VAULT --db NEW.db --precision int8`` under ``/usr/bin/time`` (wall seconds, peak
   RSS, CPU seconds), the trees alternating the same way; one untimed round first (the page
   cache, the model files); into ``benchmarks/results/first_index_before_after.json``.

What it does not do: build either tree (run `make install` in each), or judge the ratios;
benchmarks/before_after_tables.py puts them on docs/benchmarks.md. Hold the benchmark lock:

    flock /tmp/brainbot-bench.lock python benchmarks/bench_before_after.py serve \\
        --before /tmp/before [--after .] [--rounds 3] [--quick] [--min-idle 0.8]
    flock /tmp/brainbot-bench.lock python benchmarks/bench_before_after.py index \\
        --before /tmp/before --vault examples/vault [--vault DIR] [--rounds 3] [--min-idle 0.8]
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

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_chunking import machine  # noqa: E402 - after the path
from bench_coldstart import wait_for_idle  # noqa: E402

TREES = ("before", "after")


def order(rounds: int) -> list[tuple[int, str]]:
    """(round, tree) in running order: before first in even rounds, after first in odd ones."""
    return [(r, t) for r in range(rounds) for t in (TREES if r % 2 == 0 else TREES[::-1])]


def flatten(serve: dict) -> dict[str, float]:
    """bench_serve.py's JSON as flat measures: ``search 10000 p50_ms``, ``watch mcp_median_s``."""
    out = {f"search {n} {k}": v[k] for n, v in serve["search"].items()
           for k in ("p50_ms", "p95_ms")}
    out |= {f"watch {k}": v for k, v in serve["watch"].items() if k != "edits"}
    return out


def summarise(runs: list[dict]) -> dict:
    """Per tree the median of each measure over its runs, after/before of the medians, and
    the median over the rounds of each round's own after/before ("paired_ratios": the two
    runs of a round are next to each other in time, so a load that comes and goes between
    rounds cancels out of it)."""
    medians = {}
    for tree in TREES:
        mine = [r["measures"] for r in runs if r["tree"] == tree]
        medians[tree] = {k: round(statistics.median(m[k] for m in mine), 3) for k in mine[0]}
    ratios = {k: round(medians["after"][k] / medians["before"][k], 3)
              for k in medians["after"] if medians["before"].get(k)}
    rounds: dict[int, dict[str, dict]] = {}
    for r in runs:
        rounds.setdefault(r["round"], {})[r["tree"]] = r["measures"]
    pairs = [p for p in rounds.values() if set(p) == set(TREES)]
    paired = {k: round(statistics.median(p["after"][k] / p["before"][k] for p in pairs), 3)
              for k in ratios if pairs and all(p["before"][k] for p in pairs)}
    return {"medians": medians, "ratios": ratios, "paired_ratios": paired}


def resummarise(path: Path) -> dict:
    """A result file's medians and ratios derived again from its runs (after this module's
    summary changed): the runs are what was measured, the rest is arithmetic on them."""
    data = json.loads(path.read_text(encoding="utf-8"))
    for part in data.get("vaults", {}).values() if "vaults" in data else [data]:
        part.update(summarise(part["runs"]))
    return data


def tree_info(tree: Path) -> dict:
    commit = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {"dir": str(tree), "commit": commit or "unknown"}


def env() -> dict[str, str]:
    """No API key and no PYTHONPATH: each tree's venv finds its own package."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("ANTHROPIC") and k != "PYTHONPATH"}


def loads() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def serve_run(tree: Path, quick: bool, min_idle: float) -> dict:
    """One run of ``tree``'s own bench_serve.py with its own venv; its JSON and the loads."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "serve.json"
        argv = [str(tree / ".venv/bin/python"), str(tree / "benchmarks/bench_serve.py"),
                "--out", str(out), "--min-idle", str(min_idle)] + (["--quick"] if quick else [])
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, cwd=tree, env=env(), stdout=subprocess.DEVNULL)
        data = json.loads(out.read_text())
    return {"measures": flatten(data), "seconds": round(time.perf_counter() - t0, 1),
            "loads_start": data.get("loads_start"), "loads_end": data.get("loads_end")}


def index_run(tree: Path, vault: Path, min_idle: float) -> dict:
    """A first index of ``vault`` into a new database: wall seconds, peak RSS and CPU
    seconds (user + system: the work done, which other processes' load changes less than
    the wall time)."""
    with tempfile.TemporaryDirectory() as tmp:
        db, timing = Path(tmp) / "new.db", Path(tmp) / "time.txt"
        wait_for_idle(min_idle)
        start = loads()
        done = subprocess.run(["/usr/bin/time", "-f", "%e %M %U %S", "-o", str(timing),
                               str(tree / ".venv/bin/brainbot"), "index", str(vault),
                               "--db", str(db), "--precision", "int8"],
                              cwd=tmp, env=env(), capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{tree}: brainbot index exited {done.returncode}: "
                               f"{done.stderr.strip()[-500:]}")
        wall, kb, user, system = timing.read_text().split()[-4:]
    return {"measures": {"wall_s": float(wall), "peak_rss_mb": round(int(kb) / 1024, 1),
                         "cpu_s": round(float(user) + float(system), 2)},
            "summary": done.stdout.strip().splitlines()[-1:], "loads_start": start,
            "loads_end": loads()}


def header(args) -> dict:
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    return {"cpu": machine()["cpu"], "rounds": args.rounds, "min_idle": args.min_idle,
            "command": " ".join(["python", "benchmarks/bench_before_after.py", *sys.argv[1:]]),
            "trees": {t: tree_info(p) for t, p in trees.items()},
            "loads_start": loads()}, trees


def main_serve(args, save) -> dict:
    """The serve rounds; ``save(data)`` after each run, so that a run cut short keeps
    what it measured."""
    out, trees = header(args)
    out["quick"] = args.quick
    runs = []
    for r, tree in order(args.rounds):
        run = {"round": r, "tree": tree, **serve_run(trees[tree], args.quick, args.min_idle)}
        print(f"round {r} {tree}: {run['measures']} ({run['seconds']} s)", flush=True)
        runs.append(run)
        if {x["tree"] for x in runs} == set(TREES):
            save(out | {"runs": runs, **summarise(runs), "loads_end": loads()})
    return out | {"runs": runs, **summarise(runs), "loads_end": loads()}


def main_index(args, save) -> dict:
    """The index rounds, vault by vault; ``save(data)`` after each vault."""
    out, trees = header(args)
    out["vaults"] = {}
    for vault in args.vault:
        for tree in TREES:  # untimed: the page cache and the model files warm for both
            index_run(trees[tree], vault.resolve(), 0.0)
        runs = []
        for r, tree in order(args.rounds):
            run = {"round": r, "tree": tree, **index_run(trees[tree], vault.resolve(),
                                                          args.min_idle)}
            print(f"{vault} round {r} {tree}: {run['measures']} {run['summary']}", flush=True)
            runs.append(run)
        out["vaults"][_vault_label(vault)] = {"runs": runs, **summarise(runs)}
        save(out | {"loads_end": loads()})
    return out | {"loads_end": loads()}


def _vault_label(vault: Path) -> str:
    """The vault as the page names it: its path under the repository or the shared data."""
    path = vault.resolve()
    for base, prefix in ((REPO, ""), (REPO.parent / "shared", "../shared/"),
                         (Path("/work/shared"), "../shared/")):
        if path.is_relative_to(base):
            return prefix + str(path.relative_to(base))
    return path.name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["serve", "index", "summarise"],
                        help="summarise: derive --out's medians and ratios again from its runs")
    parser.add_argument("--before", type=Path, default=None,
                        help="the earlier checkout (with its own .venv from `make install`)")
    parser.add_argument("--after", type=Path, default=REPO, help="the later one (this tree)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each tree (default 3)")
    parser.add_argument("--quick", action="store_true", help="serve: bench_serve.py --quick")
    parser.add_argument("--vault", type=Path, action="append", default=[],
                        help="index: a folder to index (repeatable)")
    parser.add_argument("--min-idle", type=float, default=0.0,
                        help="wait before each timed run (each search, for serve) until the "
                             "CPUs were this idle over 0.5 s (e.g. 0.8)")
    parser.add_argument("--out", type=Path, help="default benchmarks/results/"
                        "serve_before_after.json or first_index_before_after.json")
    args = parser.parse_args()
    if args.what == "summarise":
        if args.out is None:
            parser.error("summarise needs --out (the result file)")
        data = resummarise(args.out)
        args.out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        return 0
    if args.before is None:
        parser.error(f"{args.what} needs --before")
    if args.what == "index" and not args.vault:
        parser.error("index needs at least one --vault")
    name = "serve_before_after.json" if args.what == "serve" else "first_index_before_after.json"
    path = args.out or RESULTS / name

    def save(data: dict) -> None:
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")

    data = (main_serve if args.what == "serve" else main_index)(args, save)
    save(data)
    print(json.dumps({k: data[k] for k in ("ratios",) if k in data}
                     or {v: d["ratios"] for v, d in data.get("vaults", {}).items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

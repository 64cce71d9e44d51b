"""Cold start: `brainbot query` as a whole process, and where its time goes.

What is measured, in one run on one machine:

- **whole process** — ``brainbot query TEXT --db DB --mode hybrid`` and ``--mode bm25``
  (text output to /dev/null), each a fresh interpreter: the wall time a user waits. The
  median of --runs runs each, interleaved with the anchors so that load on a shared
  machine hits all of them alike, and each started only once the CPUs have been at least
  90 % idle for 0.5 s (--min-idle; the machine is shared). One warm-up round first, not counted (page cache, and
  the one-time creation of cached files such as the pre-optimized graph).
- **anchors** — ``python -c pass`` and ``python -c 'import numpy, onnxruntime'``: the
  floor any brainbot built on them pays.
- **breakdown** — one fresh interpreter timing each stage of a hybrid query in order:
  imports (numpy, onnxruntime, brainbot.cli, the searcher's module), opening the index, loading
  its vectors, the bm25 search, the model files check, the tokenizer, the onnxruntime
  session (before model/session.py: the export's sha256 check, then the session), the first
  query embedding and the hybrid search after it; and, by the wall clock, interpreter
  start before the first stage and the exit after the last. The median of --runs such
  processes.
- **importtime** — ``python -X importtime -m brainbot query … --mode hybrid``, one run:
  the import time of each package (the sum of its modules' own times), and each brainbot
  module's own and cumulative time.

Data: an index of BEIR NFCorpus (title + text, 7.9k chunks) plus the Rust lang-team
design meeting minutes (markdown, 1.7k chunks): 9.7k chunks, built once with the real
embedder (about 10 min on 2 cores) and kept under the brainbot cache folder; --db takes
another index.

- **ask, no key** — ``brainbot ask TEXT --db DB`` with no Anthropic credentials (no
  ANTHROPIC_* variables, an empty home for the SDK's config lookup): the extractive answer,
  as a whole process, interleaved like the rest.

Not measured: the Claude path, re-ranking, a warm process (see bench_search.py).
It runs whatever `brainbot` is installed next to this interpreter, so it stays usable
while the modules it times are being changed. With --baseline DIR the brainbot package
in DIR (say ``git archive BEFORE brainbot | tar -x -C DIR``, plus the built
``_kernel*.so``) is timed too, interleaved run by run: before/after under the same load.

    .venv/bin/python benchmarks/bench_coldstart.py [--db DB] [--runs 7] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
NFCORPUS = SHARED / "nfcorpus"
MINUTES = SHARED / "corpora" / "rust-lang-team-minutes" / "design-meeting-minutes"
RESULTS = ROOT / "benchmarks" / "results" / "coldstart.json"
QUERY = "does vitamin D supplementation reduce the risk of breast cancer"
NO_KEY_HOME = Path(os.environ.get("TMPDIR", "/tmp")) / "brainbot-coldstart-home"
# Issue targets (median of 7 whole-process runs, idle machine, ~10k chunks).
TARGETS = {"hybrid": 0.35, "bm25": 0.15}


def python_cmd(*args: str) -> list[str]:
    return [sys.executable, *args]


def brainbot_cmd() -> list[str]:
    """The installed console script beside this interpreter, else ``python -m``."""
    script = Path(sys.executable).with_name("brainbot")
    return [str(script)] if script.is_file() else python_cmd("-m", "brainbot")


# -- the index -----------------------------------------------------------------------


def default_db() -> Path:
    """Under the cache folder, named by the index identity of the code under test: an
    index built by other code (another chunker or analyzer) is never reused."""
    from brainbot.model.onnx_export import cache_dir

    try:
        from brainbot.store.identity import current
        tag = "-" + current().fingerprint()
    except ImportError:  # a checkout from before store/identity.py
        tag = ""
    return cache_dir() / "bench" / f"coldstart-nfcorpus-design-minutes{tag}.db"


def chunk_count(db: Path) -> int:
    import sqlite3

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    finally:
        con.close()


def ensure_index(db: Path) -> int:
    """Build the NFCorpus + minutes index unless a complete one is there already."""
    done = db.with_name(db.name + ".complete")
    if db.is_file() and done.is_file():
        return chunk_count(db)
    for folder in (NFCORPUS, MINUTES):
        if not folder.is_dir():
            raise SystemExit(f"{folder} is absent; pass --db with an index of ~10k chunks")
    db.parent.mkdir(parents=True, exist_ok=True)
    print(f"building {db} (about 10 min on 2 cores; resumable)", file=sys.stderr)
    code = ("import sys; from pathlib import Path; from brainbot.evaluate import index_beir; "
            "index_beir(Path(sys.argv[1]), Path(sys.argv[2]))")
    subprocess.run(python_cmd("-c", code, str(NFCORPUS), str(db)), check=True)
    subprocess.run(brainbot_cmd() + ["index", str(MINUTES), "--db", str(db)], check=True,
                   stdout=subprocess.DEVNULL)
    n = chunk_count(db)
    done.write_text(json.dumps({"chunks": n}) + "\n")
    return n


# -- whole processes -----------------------------------------------------------------
# Children run in a folder without a brainbot/ in it, so that the '' that `python -c`
# puts first on sys.path cannot shadow the brainbot under test; PYTHONPATH picks the
# baseline (a `git archive` of an earlier commit) when one is given.


def child_env(baseline: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if baseline is not None:
        env["PYTHONPATH"] = str(baseline)
    return env


def no_key(env: dict[str, str]) -> dict[str, str]:
    """``env`` with nothing the Anthropic SDK could authenticate with (brainbot's own cache
    stays where it was)."""
    out = {k: v for k, v in env.items() if not k.startswith("ANTHROPIC_")}
    out["XDG_CACHE_HOME"] = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    out["HOME"] = str(NO_KEY_HOME)
    NO_KEY_HOME.mkdir(parents=True, exist_ok=True)
    return out


def commands(dbs: dict[str, Path], query: str, baseline: Path | None
             ) -> dict[str, tuple[list[str], dict]]:
    """The timed commands; ``dbs`` holds the index of "current" and of "baseline" (the
    same file, or one the baseline's own code built when the schema moved)."""
    def query_cmd(who: str) -> list[str]:
        return brainbot_cmd() + ["query", query, "--db", str(dbs[who]), "-k", "10"]

    def ask_cmd(who: str) -> list[str]:
        return brainbot_cmd() + ["ask", query, "--db", str(dbs[who])]

    ours, theirs = child_env(None), child_env(baseline)
    cmds = {"hybrid": (query_cmd("current") + ["--mode", "hybrid"], ours),
            "bm25": (query_cmd("current") + ["--mode", "bm25"], ours)}
    if baseline is not None:
        cmds["hybrid (baseline)"] = (query_cmd("baseline") + ["--mode", "hybrid"], theirs)
        cmds["bm25 (baseline)"] = (query_cmd("baseline") + ["--mode", "bm25"], theirs)
    cmds["ask, no key"] = (ask_cmd("current"), no_key(ours))
    if baseline is not None:
        cmds["ask, no key (baseline)"] = (ask_cmd("baseline"), no_key(theirs))
    cmds["python -c pass"] = (python_cmd("-c", "pass"), ours)
    cmds["python -c 'import numpy, onnxruntime'"] = (
        python_cmd("-c", "import numpy, onnxruntime"), ours)
    return cmds


IDLE_SEEN: list[float] = []  # the idle share measured before each timed run


def _cpu_times() -> tuple[int, int]:
    """(idle, total) jiffies of all CPUs since boot, from /proc/stat (Linux)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[3] + fields[4], sum(fields)  # idle + iowait


def wait_for_idle(min_idle: float, window: float = 0.5, timeout: float = 120.0) -> float:
    """Block until the CPUs were at least ``min_idle`` idle over ``window`` seconds.

    On a shared machine this takes each sample in a quiet moment instead of averaging
    over whatever else runs. Returns the idle share seen (lower when timed out).
    """
    if min_idle <= 0 or not Path("/proc/stat").is_file():
        return float("nan")
    deadline = time.monotonic() + timeout
    while True:
        idle0, total0 = _cpu_times()
        time.sleep(window)
        idle1, total1 = _cpu_times()
        share = (idle1 - idle0) / max(1, total1 - total0)
        if share >= min_idle or time.monotonic() > deadline:
            IDLE_SEEN.append(share)
            return share


def run_once(argv: list[str], env: dict, cwd: Path, min_idle: float = 0.0) -> float:
    wait_for_idle(min_idle)
    t0 = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=env, cwd=cwd)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return seconds


def whole_processes(cmds: dict[str, tuple[list[str], dict]], runs: int, cwd: Path,
                    min_idle: float) -> dict:
    for argv, env in cmds.values():  # warm-up round, not counted
        run_once(argv, env, cwd)
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(runs):
        for name, (argv, env) in cmds.items():
            times[name].append(run_once(argv, env, cwd, min_idle))
    return {name: {"median_s": round(statistics.median(ts), 4),
                   "runs_s": [round(t, 4) for t in ts]} for name, ts in times.items()}


# -- the breakdown, in a fresh interpreter -------------------------------------------

# Runs in a child process; prints one JSON object of stage -> seconds. Written against
# the public pieces (model, export, embed, search) so it survives refactors; a stage
# that the installed brainbot cannot do is reported as null.
BREAKDOWN = r"""
import json, sys, time
started = time.time()
db, query = sys.argv[1], sys.argv[2]
out = {}
def stage(name, fn):
    t0 = time.perf_counter()
    try:
        value = fn()
    except Exception as exc:
        out[name] = None; out.setdefault("errors", {})[name] = repr(exc)[:200]; return None
    out[name] = time.perf_counter() - t0
    return value
import importlib, importlib.util
if importlib.util.find_spec("brainbot.search").submodule_search_locations:  # issue #21's packages
    SEARCH, MODEL, SESSION, EXPORT = ("brainbot.search.searcher", "brainbot.model.files",
                                      "brainbot.model.session", "brainbot.model.onnx_export")
    EMBED = "brainbot.model.embed"
else:  # a checkout from before them (flat modules)
    SEARCH, MODEL, SESSION, EXPORT, EMBED = ("brainbot.search", "brainbot.model",
                                             "brainbot.session", "brainbot.export",
                                             "brainbot.embed")
for name in [m for m in sys.modules if m.startswith("brainbot")]:
    del sys.modules[name]  # find_spec imported the (empty) packages: time them below
stage("import numpy", lambda: __import__("numpy"))
stage("import onnxruntime", lambda: __import__("onnxruntime"))
stage("import brainbot.cli", lambda: __import__("brainbot.cli"))
stage("import brainbot.search", lambda: importlib.import_module(SEARCH))
embed, model = importlib.import_module(EMBED), importlib.import_module(MODEL)
Searcher = importlib.import_module(SEARCH).Searcher
searcher = stage("open index", lambda: Searcher(db))
stage("load vectors", lambda: searcher._load() if hasattr(searcher, "_load") else (
    searcher.store.refresh(), searcher.store.index.ensure_matrix()))
stage("bm25 search", lambda: searcher.search(query, 10, mode="bm25"))
stage("model files check", model.verified_model_dir)
tok = stage("tokenizer", lambda: model.load_tokenizer(truncate=True))
try:
    open_session = importlib.import_module(SESSION).open_session
except ImportError:  # before session.py: the export, hashed on every load, optimized at load
    open_session = None
    onnx_path = importlib.import_module(EXPORT).onnx_path
    stage("export check", lambda: onnx_path("fp32"))
def session():
    if open_session is not None:
        return open_session("fp32", embed.physical_cores())
    import onnxruntime as ort
    o = ort.SessionOptions()
    o.intra_op_num_threads = embed.physical_cores(); o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(onnx_path("fp32")), o, providers=["CPUExecutionProvider"])
sess = stage("session", session)
e = embed.Embedder("fp32")  # the session above is fp32's
e._tokenizer, e._session = tok, sess
qvec = stage("first embedding", lambda: e.embed_query(query))
stage("hybrid search", lambda: searcher.search(query, 10, mode="hybrid", qvec=qvec))
out["started_at"] = started
out["ended_at"] = time.time()
print(json.dumps(out), flush=True)
"""


def breakdown(dbs: dict[str, Path], query: str, runs: int, envs: dict[str, dict], cwd: Path,
              min_idle: float) -> dict:
    """Median seconds of each stage over ``runs`` fresh interpreters, per environment."""
    samples: dict[str, list[dict]] = {name: [] for name in envs}
    for _ in range(runs):
        for name, env in envs.items():
            wait_for_idle(min_idle)
            launched = time.time()
            done = subprocess.run(python_cmd("-c", BREAKDOWN, str(dbs[name]), query),
                                  capture_output=True,
                                  text=True, check=True, env=env, cwd=cwd)
            finished = time.time()
            row = json.loads(done.stdout.strip().splitlines()[-1])
            # Wall clock across processes: interpreter start before the first stage, and
            # the teardown (onnxruntime, numpy, sqlite) after the last.
            row = {"interpreter start": row.pop("started_at") - launched, **row}
            row["exit"] = finished - row.pop("ended_at")
            samples[name].append(row)
    out = {}
    for name, rows in samples.items():
        stages = [k for k in rows[0] if k != "errors"]
        medians = {}
        for k in stages:
            values = [r[k] for r in rows if r.get(k) is not None]
            medians[k] = round(statistics.median(values), 4) if values else None
        out[name] = {"median_s": medians, **({"errors": rows[0]["errors"]}
                                             if rows[0].get("errors") else {})}
    return out


def importtime(db: Path, query: str, env: dict, cwd: Path) -> dict:
    """Import seconds by package (each module's own time), and brainbot's modules."""
    argv = python_cmd("-X", "importtime", "-m", "brainbot", "query", query, "--db", str(db),
                      "--mode", "hybrid")
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=env, cwd=cwd)
    packages: dict[str, float] = {}
    ours: dict[str, dict] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        own, cumulative, name = line[len("import time:"):].split("|")
        name = name.strip()
        package = name.split(".")[0]
        packages[package] = packages.get(package, 0.0) + int(own) / 1e6
        if package == "brainbot":
            ours[name] = {"own": round(int(own) / 1e6, 4),
                          "cumulative": round(int(cumulative) / 1e6, 4)}
    top = sorted(packages.items(), key=lambda kv: -kv[1])[:20]
    return {"command": " ".join(argv[1:]), "total_s": round(sum(packages.values()), 4),
            "own_by_package_s": {k: round(v, 4) for k, v in top},
            "brainbot_modules_s": dict(sorted(ours.items(), key=lambda kv: -kv[1]["own"]))}


def machine() -> dict:
    import numpy
    import onnxruntime

    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
               platform.processor()) if Path("/proc/cpuinfo").is_file() else platform.processor()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": numpy.__version__, "onnxruntime": onnxruntime.__version__,
            "brainbot_commit": commit}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", type=Path, help="an existing index (default: build NFCorpus + minutes)")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--query", default=QUERY)
    ap.add_argument("--baseline", type=Path, metavar="DIR",
                    help="also time the brainbot package in DIR (e.g. `git archive` of an "
                         "earlier commit), interleaved, under the same load")
    ap.add_argument("--baseline-db", type=Path, metavar="DB",
                    help="the baseline's own index, when its schema differs (default: --db)")
    ap.add_argument("--baseline-label", default="", metavar="TEXT",
                    help="what the baseline is (say, its commit), recorded in the results")
    ap.add_argument("--min-idle", type=float, default=0.9, metavar="SHARE",
                    help="before each timed run, wait (up to 2 min) until the CPUs were this "
                         "idle over 0.5 s; 0 to not wait (default 0.9)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--build-only", action="store_true")
    args = ap.parse_args()
    db = (args.db or default_db()).resolve()
    chunks = chunk_count(db) if args.db else ensure_index(db)
    if args.build_only:
        print(f"{db}: {chunks} chunks")
        return
    baseline = args.baseline.resolve() if args.baseline else None
    result = {"query": args.query, "db": str(db), "chunks": chunks, "runs": args.runs,
              "machine": machine(), "load_average_start": [round(x, 2) for x in os.getloadavg()]}
    dbs = {"current": db, "baseline": (args.baseline_db or db).resolve()}
    cmds = commands(dbs, args.query, baseline)
    result["commands"] = {k: " ".join(argv) + (" (PYTHONPATH=baseline)" if "baseline" in k else "")
                          for k, (argv, _) in cmds.items()}
    result["min_idle"] = args.min_idle
    result["whole_process"] = whole_processes(cmds, args.runs, db.parent, args.min_idle)
    envs = {"current": child_env(None)} | ({"baseline": child_env(baseline)} if baseline else {})
    result["breakdown"] = breakdown(dbs, args.query, args.runs, envs, db.parent, args.min_idle)
    result["importtime"] = {name: importtime(dbs[name], args.query, env, db.parent)
                            for name, env in envs.items()}
    if baseline:
        result["baseline"] = {"dir": str(baseline), "label": args.baseline_label,
                              "db": str(dbs["baseline"])}
    if IDLE_SEEN:
        result["idle_share_before_runs"] = {
            "min": round(min(IDLE_SEEN), 3), "median": round(statistics.median(IDLE_SEEN), 3),
            "runs_started_below_min_idle": sum(1 for x in IDLE_SEEN if x < args.min_idle)}
    result["targets_s"] = TARGETS
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    if args.out.is_file():  # the cold-start branch's before/after run, kept for the README
        kept = json.loads(args.out.read_text()).get("branch_run")
        if kept:
            result["branch_run"] = kept
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(result, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()

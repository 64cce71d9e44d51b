"""The app's vector leg at 20k-100k chunks: when the int8 copy pays, and warm MCP search.

    python benchmarks/bench_vector_leg.py [--sizes 20000,100000] [--runs 7] [--queries 60]

On synthetic indexes (bench_serve.build_synthetic: Zipf texts, random unit vectors,
written through the store; kept under --work and reused):

- **cut-off**: one query over random unit rows at 20k-100k, f32 against int8 + proof,
  k = 100, one thread, CPU ms: where int8 starts to pay (INT8_SCAN_MIN_ROWS).
- **copy**: in one process, CPU ms of loading the vectors, making the int8 copy
  (kernel/int8_scan.py), one f32 scan and one int8 scan with its proof (k = 100, the
  search pool, median of 30 queries), and the queries after which the copy has paid.
- **cold**: `brainbot query --mode hybrid|vector` as whole processes with the int8 copy
  made at the first query (INT8_AFTER_SCANS = 0, the rule before) and with the rule of
  store/sqlite/arrays.py (f32 for a one-shot query), interleaved; median wall and CPU
  (user + system of the child) and the median of the paired CPU differences.
- **mcp** (the largest size): warm `search` through the official MCP client (stdio,
  `brainbot mcp` in a wrapper that times its stages: the searcher's search, the query
  embedding, the BM25 leg, the vector scan, the tool's body around the search; thread
  CPU and wall), 5 warm-ups then
  --queries; client p50/p95 and each stage's p50/p95, the garbage collector's runs
  during the measured searches.

The machine is shared: the load average is recorded beside each part, and CPU times are
the figures to compare. Writes benchmarks/results/search_app.json.

    python benchmarks/bench_vector_leg.py --leg 100000,1000000

- **leg** alone: the store's warm vector leg (KernelIndex.cosine, k = 100) over
  embedding-like synthetic vectors, wall ms: the f32 scan, the int8 copy with its proof,
  numpy on the same matrix; ids and scores checked equal. Writes
  benchmarks/results/vector_leg.json.
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

# numpy's OpenBLAS workers sleep at once instead of spinning on the other core after
# each call (bench_search.py has the measurement).
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402 - after the environment it reads at load

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_serve import _cpu, build_synthetic, words  # noqa: E402

WRAP = ("import sys; import brainbot.store.sqlite.arrays as a; {patch}; "
        "from brainbot.cli import main; sys.exit(main(sys.argv[1:]))")
RULES = {"copy at the 1st query": "a.INT8_AFTER_SCANS = 0", "arrays.py rule": "pass"}
SERVER = '''
import atexit, gc, json, os, sys, time
from brainbot.search import searcher as S
from brainbot.store.sqlite import arrays as A
from brainbot.model import embed as E
rec = {"gc": 0}
def timed(obj, name, key):
    f = getattr(obj, name)
    def w(*a, **k):
        t, c, g = time.perf_counter(), time.thread_time(), rec["gc"]
        try:
            return f(*a, **k)
        finally:
            rec.setdefault(key, []).append(((time.perf_counter() - t) * 1e3,
                                            (time.thread_time() - c) * 1e3, rec["gc"] - g))
    setattr(obj, name, w)
timed(S.Searcher, "search", "search"); timed(S.Searcher, "bm25", "bm25")
timed(E.Embedder, "embed_query", "embed"); timed(A.KernelIndex, "cosine", "scan")
from brainbot.serve import mcp as M
timed(M.Service, "search", "tool")
gc.callbacks.append(lambda phase, info: rec.__setitem__("gc", rec["gc"] + (phase == "stop")))
atexit.register(lambda: open(os.environ["BENCH_REC"], "w").write(json.dumps(rec)))
from brainbot.cli import main
sys.exit(main(sys.argv[1:]))
'''


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC")}


def ms(values) -> float:
    return round(1000 * statistics.median(values), 2)


def pct(values, p) -> float:
    return round(float(np.percentile(values, p)), 2)


def copy_costs(db: Path) -> dict:
    from brainbot.kernel.int8_scan import Int8Scan
    from brainbot.store.target import open_store

    with open_store(db) as store:
        index = store.index
        index.sync(store.generation())
        t = time.process_time()
        m = index.ensure_matrix()
        load = time.process_time() - t
        builds, f32, i8 = [], [], []
        for _ in range(5):
            t = time.process_time()
            scan = Int8Scan(index.kernel, m)
            builds.append(time.process_time() - t)
        rng = np.random.default_rng(3)
        for _ in range(30):
            q = rng.standard_normal((1, m.shape[1])).astype(np.float32)
            q /= np.linalg.norm(q)
            t = time.process_time()
            want = index.kernel.cosine_topk(m, q, 100)
            f32.append(time.process_time() - t)
            t = time.process_time()
            got = scan.topk(m, q, 100)
            i8.append(time.process_time() - t)
            assert (want[0] == got[0]).all() and (want[1] == got[1]).all()
    out = {"load_vectors_ms": round(1000 * load, 1), "copy_ms": ms(builds),
           "f32_scan_ms": ms(f32), "int8_scan_ms": ms(i8), "proof": scan.stats}
    saved = out["f32_scan_ms"] - out["int8_scan_ms"]
    out["pays_after_queries"] = round(out["copy_ms"] / saved, 1) if saved > 0 else None
    return out


def cut_off(sizes=(20_000, 30_000, 50_000, 100_000), rounds: int = 40) -> list[dict]:
    """Where int8 starts to win: random unit rows, one query, k = 100, one thread, CPU ms
    (medians), the two scans alternating."""
    from brainbot.kernel import native as K
    from brainbot.kernel.int8_scan import Int8Scan

    rng, out = np.random.default_rng(1), []
    for n in sizes:
        m = rng.standard_normal((n, 384)).astype(np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        scan, f32, i8 = Int8Scan(K, m), [], []
        for _ in range(rounds):
            q = rng.standard_normal((1, 384)).astype(np.float32)
            q /= np.linalg.norm(q)
            for fn, acc in ((lambda: K.cosine_topk(m, q, 100, threads=1), f32),  # noqa: B023 - called at once
                            (lambda: scan.topk(m, q, 100, threads=1), i8)):  # noqa: B023
                t = time.process_time()
                fn()
                acc.append(time.process_time() - t)
        out.append({"n": n, "f32_ms": ms(f32), "int8_ms": ms(i8),
                    "int8_over_f32": round(statistics.median(i8) / statistics.median(f32), 2),
                    "proof": scan.stats})
    return out


def one_query(db: Path, patch: str, mode: str, text: str) -> tuple[float, float]:
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, "-c", WRAP.format(patch=patch), "query", text, "--db",
                    str(db), "--mode", mode], check=True, stdout=subprocess.DEVNULL, env=env(),
                   cwd=tempfile.gettempdir())
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def cold(db: Path, runs: int, modes=("hybrid", "vector")) -> dict:
    times: dict = {m: {r: [] for r in RULES} for m in modes}
    load = [os.getloadavg()[0]]
    for i in range(runs + 1):  # round 0 warms the page cache, not counted
        for mode in modes:
            for rule in list(RULES)[:: 1 - 2 * (i % 2)]:
                wall, cpu = one_query(db, RULES[rule], mode, f"w{i + 3} w{i + 17} w{2 * i + 40}")
                if i:
                    times[mode][rule].append((wall, cpu))
        load.append(os.getloadavg()[0])
    out = {"runs": runs, "load_start": load[0], "load_max": max(load)}
    for mode, by_rule in times.items():
        row = {rule: {"wall_ms": ms([w for w, _ in v]), "cpu_ms": ms([c for _, c in v])}
               for rule, v in by_rule.items()}
        first, rule = (by_rule[r] for r in RULES)
        row["paired_cpu_diff_ms"] = ms([a[1] - b[1] for a, b in zip(first, rule)])
        out[mode] = row
    return out


def mcp(db: Path, queries: int) -> dict:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    with tempfile.TemporaryDirectory() as tmp:
        wrapper, rec_path = Path(tmp) / "server.py", Path(tmp) / "rec.json"
        wrapper.write_text(SERVER)
        params = StdioServerParameters(command=sys.executable,
                                       args=[str(wrapper), "mcp", "--db", str(db)],
                                       env={**env(), "BENCH_REC": str(rec_path)})
        rng = np.random.default_rng(11)
        texts = [" ".join(words(rng, 6)) for _ in range(queries + 5)]

        async def body():
            out = []
            with open(os.devnull, "w") as err:
                async with stdio_client(params, errlog=err) as (read, write):
                    async with ClientSession(read, write) as s:
                        await s.initialize()
                        for text in texts:
                            t0 = time.perf_counter()
                            result = await s.call_tool("search", {"query": text, "k": 10})
                            out.append((time.perf_counter() - t0) * 1000)
                            assert not result.is_error, result.content
            return out[5:]

        load0 = os.getloadavg()[0]
        client = anyio.run(body)
        for _ in range(50):  # the server writes its timers as it exits
            if rec_path.is_file() and rec_path.stat().st_size:
                break
            time.sleep(0.1)
        rec = json.loads(rec_path.read_text())
    out = {"queries": len(client), "load_start": load0, "load_end": os.getloadavg()[0],
           "client_p50_ms": pct(client, 50), "client_p95_ms": pct(client, 95),
           "stages": {}}
    rec.pop("gc")
    out["gc_runs_in_measured_searches"] = sum(x[2] for x in rec["search"][-len(client):])
    for stage, v in rec.items():
        v = v[-len(client):]  # the measured calls (after the warm-ups)
        out["stages"][stage] = {f"{kind}_{p}_ms": pct([x[j] for x in v], p)
                                for j, kind in enumerate(("wall", "cpu")) for p in (50, 95)}
    return out


def leg_store(work: Path, n: int) -> Path:
    """A synthetic store of n chunks for the leg: bench_serve's builder, with two-word
    texts from 1M on (the vector leg reads no text; 120-word texts would write ~120M
    postings) and embedding-like vectors (a shared direction, 30 topics, noise: the
    generator of tests/test_kernel_int8_scan.py, where int8 needs its widest pools)."""
    import bench_serve

    db = work / f"leg-{n}.db"
    if db.is_file():
        return db
    rng = np.random.default_rng(11)
    shared, centres = 0.8 * rng.standard_normal(384), rng.standard_normal((30, 384))

    def clustered(count, rng):
        x = shared + centres[rng.integers(0, 30, count)] + 0.6 * rng.standard_normal((count, 384))
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    saved = bench_serve.WORDS_PER_CHUNK, bench_serve.fake_vectors
    bench_serve.WORDS_PER_CHUNK = 2 if n >= 1_000_000 else saved[0]
    bench_serve.fake_vectors = clustered
    try:
        build_synthetic(db.with_suffix(".part"), n)
    finally:
        bench_serve.WORDS_PER_CHUNK, bench_serve.fake_vectors = saved
    db.with_suffix(".part").rename(db)
    return db


def leg(db: Path, queries: int = 24, k: int = 100) -> dict:
    """The SQLite store's vector leg, warm, wall ms: the f32 scan, the int8 copy with its
    proof (KernelIndex.cosine both, with the kernel's thread rule and the load rule of
    kernel/load.py), and numpy's matmul + argpartition on the same matrix; each query's
    ids and scores checked equal first, then timed round-robin."""
    from brainbot.kernel import reference as R
    from brainbot.kernel.int8_scan import Int8Scan
    from brainbot.store.target import open_store

    with open_store(db) as store:
        index = store.index
        index.sync(store.generation())
        m = index.ensure_matrix()
        scan = Int8Scan(index.kernel, m)
        rng = np.random.default_rng(5)
        qs = m[rng.integers(0, len(m), queries)] + 0.3 * rng.standard_normal((queries, 384))
        qs = (qs / np.linalg.norm(qs, axis=1, keepdims=True)).astype(np.float32)

        def f32(q):
            index.int8 = None
            index.f32_scans = 0
            return index.cosine(q, k)

        def int8(q):
            index.int8 = scan
            return index.cosine(q, k)

        fns = {"f32": f32, "int8 + proof": int8,
               "numpy": lambda q: R.cosine_topk(m, q.reshape(1, -1), k)}
        for q in qs:
            a, b = f32(q), int8(q)
            assert (a[0] == b[0]).all() and (a[1] == b[1]).all()
        times: dict = {name: [] for name in fns}
        for q in qs:
            for name, fn in fns.items():
                t = time.perf_counter()
                fn(q)
                times[name].append(time.perf_counter() - t)
    out = {"chunks": len(m), "k": k, "queries": queries, "proof": scan.stats,
           "loadavg": os.getloadavg()}
    out.update({f"{name}_ms": ms(t) for name, t in times.items()})
    out["numpy_over_int8"] = round(out["numpy_ms"] / out["int8 + proof_ms"], 2)
    out["numpy_over_f32"] = round(out["numpy_ms"] / out["f32_ms"], 2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--leg", default="", help="only the warm vector leg at these sizes "
                    "(comma-separated), written to results/vector_leg.json")
    ap.add_argument("--sizes", default="20000,100000")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bench_vector_leg")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "search_app.json")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.leg:
        rows = [leg(leg_store(args.work, int(n))) for n in args.leg.split(",")]
        for row in rows:
            print(json.dumps(row), flush=True)
        res = {"cpu": _cpu(), "cpus": os.cpu_count(), "rows": rows,
               "command": "python benchmarks/bench_vector_leg.py " + " ".join(sys.argv[1:])}
        (HERE / "results" / "vector_leg.json").write_text(json.dumps(res, indent=2) + "\n")
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    out = {"cpu": _cpu(), "cpus": os.cpu_count(),
           "command": "python benchmarks/bench_vector_leg.py " + " ".join(sys.argv[1:]),
           "cut_off": cut_off(), "sizes": {}}
    print(json.dumps(out["cut_off"]), flush=True)
    for n in sizes:
        db = args.work / f"synthetic-{n}.db"
        if not db.is_file():
            build_synthetic(db, n)
        row = {"copy": copy_costs(db), "cold": cold(db, args.runs)}
        print(n, json.dumps(row), flush=True)
        out["sizes"][str(n)] = row
    n = sizes[-1]
    out["mcp"] = {"chunks": n, **mcp(args.work / f"synthetic-{n}.db", args.queries)}
    print(json.dumps(out["mcp"]), flush=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

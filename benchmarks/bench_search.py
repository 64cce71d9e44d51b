"""Benchmark of brainbot's C search core against numpy and, when installed, other engines.

What is measured (medians of repeated calls, wall clock, in one process and one run):
  - the memory-bandwidth bound: reading the f32 matrix once (C streaming sum; numpy's
    sum is reported beside it), per thread count;
  - cosine top-10 over N x 384 random unit vectors (N = 10k, 100k, 1M; --quick: 10k,
    100k), one query and batches of 64, on 1 and 2 threads: brainbot C f32, C int8 with
    exact rescoring, numpy (matmul + argpartition, brainbot.kernel.reference), and when
    importable FAISS IndexFlatIP, usearch exact search, sqlite-vec vec0 (N <= 100k);
    the 64-query batch is compared with numpy's sgemm `Q @ M.T` alone;
  - BM25 top-10 over 100k synthetic docs of ~200 tokens with a Zipfian vocabulary, for
    3-6 term queries: C, numpy, bm25s and SQLite FTS5 bm25();
  - fusion of two legs (100 and 1000 candidates) into a top-10, and a hybrid query end
    to end (BM25 top-N + cosine top-N + fusion), query embedding excluded;
  - bytes per vector, f32 and int8.
Every engine is checked against brainbot.kernel.reference before it is timed.

What is not measured: index build times (only reported for information), the cost of
loading vectors from SQLite, query embedding, recall of approximate (graph) indexes --
every engine here is exact except brainbot's int8 stage, whose recall is reported.

Results go to benchmarks/results/search.json and a markdown table on stdout.
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE: numpy's OpenBLAS is slower with them set; to
compare against a current numpy, run `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE
python benchmarks/bench_search.py`. The JSON records what was set and which OpenBLAS
kernel ran.

Usage: python benchmarks/bench_search.py [--quick] [--out PATH] [--bm25-docs N]
         [--threads 1,2] [--sizes 100000,1000000] [--cosine-only] [--min-idle SHARE]
         [--anchor OLD/_kernel.abi3.so] [--cutoff]
--threads: the thread counts timed (each against the streaming-read bound with as many
threads: the "x bound" column). --min-idle: before each timed race, wait (up to 2 min)
until the CPUs were that share idle for 0.5 s (the machine may be shared); the idle
shares seen are recorded in the JSON. --anchor: another build of the C core (say, a copy
of brainbot/_kernel.abi3.so made before a change) raced in the same rounds as this one, as
the engine "brainbot C f32, anchor build": a before/after ratio that the machine's load
hits alike. --cutoff: also sweep N = 2k..100k for where a second thread starts to pay
(one query, f32 and int8, 1 against 2 threads, with what the automatic rule picks).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

# numpy's OpenBLAS keeps its worker threads spinning for 2^28 cycles (~0.1 s) after each
# call. In a round-robin race they took the second core from whatever ran next: C f32 on
# two threads right after numpy took 8.57 ms against 5.16 alone (100k x 384, Intel Xeon
# host); with a timeout of 2^4 cycles the workers sleep at once and it took 5.46, while
# numpy itself went from 6.10 to 6.22 ms. OpenMP engines (FAISS) likewise.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402 - after the environment it reads at load

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from brainbot.kernel import native as K  # noqa: E402
from brainbot.kernel import reference as R  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_coldstart import IDLE_SEEN, wait_for_idle  # noqa: E402

MIN_IDLE = 0.0  # --min-idle: set once in main()
THREADS = (1, 2)  # --threads: set once in main()

DIM = 384
TOPK = 10
BATCH = 64
BOUND_STREAMS = (2, 4)  # read streams a thread tried for the bound (bb_stream_sum)
SEED = 20240611


# ------------------------------------------------------------------ environment


class Blas:
    """numpy's OpenBLAS, found in the process maps, for its thread count and kernel."""

    def __init__(self) -> None:
        self.lib = None
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
        for path in sorted(paths):
            try:
                self.lib = ctypes.CDLL(path)
                break
            except OSError:
                continue

    def _fn(self, *names):
        for name in names:
            fn = getattr(self.lib, name, None) if self.lib else None
            if fn is not None:
                return fn
        return None

    def set_threads(self, n: int) -> None:
        fn = self._fn(
            "scipy_openblas_set_num_threads64_",
            "openblas_set_num_threads64_",
            "openblas_set_num_threads",
        )
        if fn:
            fn(ctypes.c_int(n))

    def corename(self) -> str:
        fn = self._fn(
            "scipy_openblas_get_corename64_", "openblas_get_corename64_", "openblas_get_corename"
        )
        if not fn:
            return "unknown"
        fn.restype = ctypes.c_char_p
        return fn().decode()


def machine_info(blas: Blas) -> dict:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "openblas_core": blas.corename(),
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE"),
        "OPENBLAS_THREAD_TIMEOUT": os.environ.get("OPENBLAS_THREAD_TIMEOUT"),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
        "brainbot_backend": K.backend(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "smt_siblings": smt_siblings(),
        "loadavg_start": os.getloadavg(),
    }


def smt_siblings() -> list[str]:
    """The CPU groups that share one core (SMT threads), from sysfs; [] when every CPU
    is its own core (or on a system without that file)."""
    groups = set()
    for cpu in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology/thread_siblings_list"):
        text = cpu.read_text().strip()
        if "," in text or "-" in text:
            groups.add(text)
    return sorted(groups)


# ---------------------------------------------------------------------- timing


def bench(fn, calls, min_reps=7, min_time=0.3, max_reps=400) -> float:
    """Median seconds per call of fn(*args), cycling through calls (after one warm-up)."""
    fn(*calls[0])
    times: list[float] = []
    start = time.perf_counter()
    i = 0
    while len(times) < max_reps and (
        len(times) < min_reps or time.perf_counter() - start < min_time
    ):
        args = calls[i % len(calls)]
        i += 1
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def race(fns: dict, calls, min_rounds=9, min_time=1.0, max_rounds=200) -> dict:
    wait_for_idle(MIN_IDLE)
    return _race(fns, calls, min_rounds, min_time, max_rounds)


def _race(fns: dict, calls, min_rounds, min_time, max_rounds) -> dict:
    """Median and min seconds per call of each fn, called round-robin (one call of each
    per round, cycling through calls) so that load from other processes hits all alike."""
    for fn in fns.values():
        fn(*calls[0])
    times: dict = {name: [] for name in fns}
    start = time.perf_counter()
    r = 0
    while r < max_rounds and (r < min_rounds or time.perf_counter() - start < min_time):
        args = calls[r % len(calls)]
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn(*args)
            times[name].append(time.perf_counter() - t0)
        r += 1
    return {name: (statistics.median(t), min(t)) for name, t in times.items()}


def unit_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    out = np.empty((n, d), dtype=np.float32)
    for i in range(0, n, 65536):  # in slices, to keep the float64 temporaries small
        x = rng.standard_normal((min(65536, n - i), d), dtype=np.float32)
        out[i : i + x.shape[0]] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def recall(ids: np.ndarray, ref_ids: np.ndarray, ref_scores: np.ndarray, scores_of) -> float:
    """recall@k of ids against ref; a miss whose true score ties the k-th (1e-5) counts."""
    hits = 0
    total = 0
    for row, ref_row, ref_s in zip(
        np.atleast_2d(ids), np.atleast_2d(ref_ids), np.atleast_2d(ref_scores), strict=True
    ):
        kth = ref_s[-1]
        for i in row:
            total += 1
            if i in ref_row or (i >= 0 and scores_of(i) >= kth - 1e-5):
                hits += 1
    return hits / max(total, 1)


# ---------------------------------------------------------------- other engines


def optional(name: str):
    try:
        return __import__(name)
    except ImportError:
        return None


class Faiss:
    name = "faiss IndexFlatIP"

    def __init__(self, m: np.ndarray) -> None:
        import faiss

        self.faiss = faiss
        self.index = faiss.IndexFlatIP(m.shape[1])
        self.index.add(m)

    def threads(self, t: int) -> None:
        self.faiss.omp_set_num_threads(t)

    def search(self, q: np.ndarray, k: int):
        s, i = self.index.search(np.atleast_2d(q), k)
        return i, s


class USearch:
    name = "usearch exact"

    def __init__(self, m: np.ndarray) -> None:
        from usearch.index import MetricKind, search

        self.m, self.fn, self.metric, self.t = m, search, MetricKind.IP, 1

    def threads(self, t: int) -> None:
        self.t = t

    def search(self, q: np.ndarray, k: int):
        res = self.fn(self.m, np.atleast_2d(q), k, self.metric, exact=True, threads=self.t)
        return np.atleast_2d(res.keys).astype(np.int64), 1 - np.atleast_2d(res.distances)


class Anchor:
    """Another build of brainbot's C core (--anchor PATH to its _kernel*.so, e.g. the
    previous commit's), raced beside this one, interleaved: its f32 scan with the same
    thread count."""

    name = "brainbot C f32, anchor build"
    path = ""  # --anchor: set once in main()

    def __init__(self, m: np.ndarray) -> None:
        import importlib.util

        spec = importlib.util.spec_from_file_location("brainbot._kernel", self.path)
        mod = importlib.util.module_from_spec(spec)  # not registered: this build stays K
        spec.loader.exec_module(mod)
        self.ffi, self.lib, self.m, self.t = mod.ffi, mod.lib, m, 1

    def threads(self, t: int) -> None:
        self.t = t

    def search(self, q: np.ndarray, k: int):
        q = np.ascontiguousarray(np.atleast_2d(q), dtype=np.float32)
        ids = np.empty((q.shape[0], k), np.int64)
        s = np.empty((q.shape[0], k), np.float32)
        f, (n, d) = self.ffi, self.m.shape
        status = self.lib.bb_cosine_topk(
            f.from_buffer("float[]", self.m),
            n,
            d,
            f.from_buffer("float[]", q),
            q.shape[0],
            k,
            f.NULL,
            self.t,
            0,
            f.from_buffer("int64_t[]", ids),
            f.from_buffer("float[]", s),
        )
        assert status == 0, status
        return ids, s


class SqliteVec:
    name = "sqlite-vec vec0"

    def __init__(self, m: np.ndarray) -> None:
        import sqlean
        import sqlite_vec

        self.db = sqlean.connect(":memory:")
        self.db.enable_load_extension(True)
        sqlite_vec.load(self.db)
        self.db.execute(
            f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{m.shape[1]}] distance_metric=cosine)"
        )
        with self.db:
            self.db.executemany(
                "INSERT INTO v(rowid, embedding) VALUES (?, ?)",
                ((i + 1, m[i].tobytes()) for i in range(m.shape[0])),
            )

    def threads(self, t: int) -> None:
        pass

    def search(self, q: np.ndarray, k: int):
        rows = self.db.execute(
            "SELECT rowid, distance FROM v WHERE embedding MATCH ? AND k = ?",
            (np.ascontiguousarray(q, dtype=np.float32).tobytes(), k),
        ).fetchall()
        return (
            np.array([[r[0] - 1 for r in rows]], dtype=np.int64),
            np.array([[1 - r[1] for r in rows]], dtype=np.float32),
        )


# ---------------------------------------------------------------------- cosine


def cosine_section(n: int, blas: Blas, with_sqlite: bool) -> dict:
    rng = np.random.default_rng(SEED + n)
    t0 = time.perf_counter()
    m = unit_rows(rng, n, DIM)
    queries = unit_rows(np.random.default_rng(SEED - 1), BATCH, DIM)
    codes, scales = K.quantize_int8(m)
    build = {"generate_and_quantize_s": time.perf_counter() - t0}
    print(f"\n== cosine N={n:,} x {DIM}", flush=True)

    blas.set_threads(2)
    ref_ids, ref_s = R.cosine_topk(m, queries, TOPK)  # the ground truth: numpy

    def check(ids) -> float:
        ids = np.atleast_2d(ids)
        return float(
            np.mean(
                [
                    recall(ids[j], ref_ids[j], ref_s[j], lambda i, j=j: float(m[i] @ queries[j]))
                    for j in range(len(ids))
                ]
            )
        )

    others = [Anchor(m)] if Anchor.path else []
    for cls, mod in ((Faiss, "faiss"), (USearch, "usearch")):
        if optional(mod):
            t = time.perf_counter()
            others.append(cls(m))
            build[cls.name + "_s"] = time.perf_counter() - t
    if with_sqlite and optional("sqlite_vec") and optional("sqlean"):
        t = time.perf_counter()
        others.append(SqliteVec(m))
        build["sqlite-vec_insert_s"] = time.perf_counter() - t

    flat = m.reshape(-1)
    singles = [(queries[j],) for j in range(16)]
    out = {
        "n": n,
        "dim": DIM,
        "k": TOPK,
        "build": build,
        "bandwidth": {},
        "single": [],
        "batch": [],
    }
    for threads in THREADS:
        blas.set_threads(threads)
        for eng in others:
            eng.threads(threads)
        # Single queries: every engine verified on 8 queries, then all timed round-robin.
        engines = {
            "numpy (matmul+argpartition)": lambda q: R.cosine_topk(m, q, TOPK),
            "brainbot C f32": lambda q, t=threads: K.cosine_topk(m, q, TOPK, threads=t),
            "brainbot C int8+rescore": lambda q, t=threads: K.cosine_topk_int8(
                codes, scales, m, q, TOPK, threads=t
            ),
        }
        for eng in others:
            if threads == 1 or not isinstance(eng, SqliteVec):
                engines[eng.name] = lambda q, e=eng: e.search(q, TOPK)
        # The bound: the faster of two ways to read the matrix once (2 or 4 streams a
        # thread); which one wins depends on the host and the size.
        rows, timed = [], {
            f"bound {s}": lambda q, t=threads, s=s: K.stream_sum(flat, threads=t, streams=s)
            for s in BOUND_STREAMS
        }
        for name, fn in engines.items():
            rec = check(np.vstack([fn(queries[j])[0] for j in range(8)]))
            row = {"engine": name, "threads": threads, "recall@10": rec}
            if rec < 1.0 and "int8" not in name:
                row["error"] = "verification failed: results differ from the reference"
                print(f"  {name}: VERIFICATION FAILED (recall {rec:.4f})", flush=True)
            else:
                timed[name] = fn
            rows.append(row)
        if threads == 1:
            timed["numpy sum (read once)"] = lambda q: flat.sum()
        res = race(timed, singles, min_rounds=9 if n < 1_000_000 else 5, min_time=2.0)
        streams = min(BOUND_STREAMS, key=lambda s: res[f"bound {s}"][0])
        bound = res[f"bound {streams}"][0] * 1e3
        out["bandwidth"][threads] = {
            "c_stream_ms": bound,
            "c_stream_min_ms": res[f"bound {streams}"][1] * 1e3,
            "gb_per_s": m.nbytes / res[f"bound {streams}"][0] / 1e9,
            "streams": streams,
            "ms_by_streams": {s: res[f"bound {s}"][0] * 1e3 for s in BOUND_STREAMS},
        }
        if "numpy sum (read once)" in res:
            out["bandwidth"][threads]["numpy_sum_ms"] = res["numpy sum (read once)"][0] * 1e3
        numpy_ms = res["numpy (matmul+argpartition)"][0] * 1e3
        for row in rows:
            if row["engine"] in res:
                med, low = res[row["engine"]]
                row.update(
                    ms=med * 1e3,
                    min_ms=low * 1e3,
                    x_bound=med * 1e3 / bound,
                    x_numpy=med * 1e3 / numpy_ms,
                )
            print(
                f"  1 query  t={threads} {row['engine']:<28} {row.get('ms', float('nan')):8.3f} ms"
                f"  x_bound {row.get('x_bound', float('nan')):5.2f}  x_numpy {row.get('x_numpy', float('nan')):5.2f}"
                f"  recall {row['recall@10']:.3f}",
                flush=True,
            )
        print(
            f"  bound t={threads}: {bound:.3f} ms ({out['bandwidth'][threads]['gb_per_s']:.1f} GB/s)"
        )
        out["single"] += rows

        # Batches of 64 queries: per-query time, against numpy's sgemm alone.
        batch = {"numpy sgemm Q @ M.T alone": lambda q: q @ m.T}
        brows = [{"engine": "numpy sgemm Q @ M.T alone", "threads": threads}]
        for name in ("numpy (matmul+argpartition)", "brainbot C f32", "brainbot C int8+rescore"):
            batch[name] = engines[name]
        for eng in others:
            if not isinstance(eng, SqliteVec):
                batch[eng.name] = engines[eng.name]
        for name, fn in list(batch.items())[1:]:
            rec = check(fn(queries)[0])
            row = {"engine": name, "threads": threads, "recall@10": rec}
            if rec < 1.0 and "int8" not in name:
                row["error"] = "verification failed"
                del batch[name]
            brows.append(row)
        res = race(batch, [(queries,)], min_rounds=3 if n < 1_000_000 else 2, min_time=2.0)
        sgemm = res["numpy sgemm Q @ M.T alone"][0] * 1e3 / BATCH
        for row in brows:
            if row["engine"] in res:
                row["ms_per_query"] = res[row["engine"]][0] * 1e3 / BATCH
                row["x_sgemm"] = row["ms_per_query"] / sgemm
            print(
                f"  64 batch t={threads} {row['engine']:<28} {row.get('ms_per_query', float('nan')):8.3f} ms/q"
                f"  x_sgemm {row.get('x_sgemm', float('nan')):5.2f}",
                flush=True,
            )
        out["batch"] += brows
    blas.set_threads(2)
    return out


# ------------------------------------------------------------------- threads


CUTOFF_SIZES = (2_000, 5_000, 10_000, 20_000, 50_000, 100_000)


def cutoff_section(sizes) -> dict:
    """Where a second thread starts to pay: one query, f32 and int8+rescore, on 1 and 2
    threads (raced round-robin), with the thread count the automatic rule picks."""
    print("\n== thread cut-off, one query", flush=True)
    rows = []
    for n in sizes:
        m = unit_rows(np.random.default_rng(SEED + n), n, DIM)
        codes, scales = K.quantize_int8(m)
        singles = [(q,) for q in unit_rows(np.random.default_rng(SEED - 1), 16, DIM)]
        fns = {}
        for t in (1, 2):
            fns[f"f32 t{t}"] = lambda q, t=t, m=m: K.cosine_topk(m, q, TOPK, threads=t)
            fns[f"int8 t{t}"] = lambda q, t=t, m=m, c=codes, s=scales: K.cosine_topk_int8(
                c, s, m, q, TOPK, threads=t
            )
        res = race(fns, singles, min_rounds=15, min_time=1.0, max_rounds=400)
        row = {
            "n": n,
            "f32_mb": m.nbytes / 1e6,
            "auto_threads_f32": K.resolve_threads(0, n, m.nbytes),
            "auto_threads_int8": K.resolve_threads(0, n, codes.nbytes),
            "loadavg": os.getloadavg()[0],
        }
        for name, (med, low) in res.items():
            row[name.replace(" ", "_") + "_ms"] = med * 1e3
            row[name.replace(" ", "_") + "_min_ms"] = low * 1e3
        for kind in ("f32", "int8"):
            row[f"{kind}_t2_over_t1"] = row[f"{kind}_t2_ms"] / row[f"{kind}_t1_ms"]
        print(
            f"  N={n:>8,} f32 t1 {row['f32_t1_ms']:7.3f} t2 {row['f32_t2_ms']:7.3f} "
            f"(x{row['f32_t2_over_t1']:.2f}) | int8 t1 {row['int8_t1_ms']:7.3f} "
            f"t2 {row['int8_t2_ms']:7.3f} (x{row['int8_t2_over_t1']:.2f}) | auto "
            f"{row['auto_threads_f32']}/{row['auto_threads_int8']}",
            flush=True,
        )
        rows.append(row)
    return {"rows": rows}


# ------------------------------------------------------------------------ BM25


def synth_corpus(n_docs: int, vocab: int = 50_000, zipf_s: float = 1.07, seed: int = SEED):
    """Doc token ids with a Zipfian vocabulary; lengths uniform in [150, 250]."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab + 1) ** zipf_s
    cdf = np.cumsum(p / p.sum())
    lens = rng.integers(150, 251, n_docs)
    tokens = np.minimum(np.searchsorted(cdf, rng.random(int(lens.sum()))), vocab - 1).astype(
        np.int32
    )
    return tokens, lens, cdf


def build_postings(tokens, lens, vocab):
    n_docs = lens.size
    doc = np.repeat(np.arange(n_docs, dtype=np.int64), lens)
    key, tf = np.unique(tokens.astype(np.int64) * n_docs + doc, return_counts=True)
    terms, docs = key // n_docs, key % n_docs
    indptr = np.zeros(vocab + 1, np.int64)
    np.add.at(indptr, terms + 1, 1)
    indptr = np.cumsum(indptr)
    return indptr, docs.astype(np.int32), tf.astype(np.float32), lens.astype(np.float32)


def queries_for(rng, cdf, vocab, n, skip_top):
    """n queries of 3-6 distinct terms drawn by corpus frequency from ranks >= skip_top."""
    out = []
    while len(out) < n:
        size = int(rng.integers(3, 7))
        terms = np.unique(np.searchsorted(cdf, rng.random(size * 3)))
        terms = terms[(terms >= skip_top) & (terms < vocab)]
        if terms.size >= size:
            out.append(rng.permutation(terms)[:size].astype(np.int32))
    return out


def bm25_section(n_docs: int, blas: Blas) -> dict:
    vocab, k1, b = 50_000, 0.9, 0.4
    print(f"\n== BM25 {n_docs:,} docs", flush=True)
    t0 = time.perf_counter()
    tokens, lens, cdf = synth_corpus(n_docs, vocab)
    indptr, doc_ids, tfs, doc_len = build_postings(tokens, lens, vocab)
    df = np.diff(indptr).astype(np.float64)
    idf = np.log1p((n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)  # Lucene's idf
    avgdl = float(doc_len.mean())
    post = (indptr, doc_ids, tfs, doc_len, idf)
    out = {
        "docs": n_docs,
        "vocab": vocab,
        "zipf_s": 1.07,
        "tokens": int(lens.sum()),
        "k1": k1,
        "b": b,
        "build_postings_s": time.perf_counter() - t0,
        "query_sets": {},
    }
    rng = np.random.default_rng(SEED + 7)
    sets = {
        "3-6 terms, top-100 words skipped": queries_for(rng, cdf, vocab, 200, 100),
        "3-6 terms, any word (stopwords kept)": queries_for(rng, cdf, vocab, 100, 0),
    }

    bm25s_ret = fts = None
    if optional("bm25s"):
        import bm25s

        t = time.perf_counter()
        bm25s_ret = bm25s.BM25(k1=k1, b=b, method="lucene")
        starts = np.concatenate([[0], np.cumsum(lens)])
        corpus = [tokens[starts[i] : starts[i + 1]].tolist() for i in range(n_docs)]
        bm25s_ret.index((corpus, {f"t{i}": i for i in range(vocab)}), show_progress=False)
        out["bm25s_index_s"] = time.perf_counter() - t
        del corpus
    if optional("sqlean"):
        import sqlean

        t = time.perf_counter()
        fts = sqlean.connect(":memory:")
        fts.execute("CREATE VIRTUAL TABLE d USING fts5(body)")
        starts = np.concatenate([[0], np.cumsum(lens)])
        with fts:
            fts.executemany(
                "INSERT INTO d(rowid, body) VALUES (?, ?)",
                (
                    (i + 1, " ".join(f"t{w}" for w in tokens[starts[i] : starts[i + 1]].tolist()))
                    for i in range(n_docs)
                ),
            )
        out["fts5_index_s"] = time.perf_counter() - t
    # FTS5's bm25(): k1 = 1.2, b = 0.75, idf = log((N - df + 0.5) / (df + 0.5)), floored at 1e-6.
    fts_idf = np.maximum(np.log((n_docs - df + 0.5) / (df + 0.5)), 1e-6).astype(np.float32)

    for label, qs in sets.items():
        calls = [(q,) for q in qs]
        rows = []
        postings = float(np.mean([np.sum(np.diff(indptr)[q]) for q in qs]))

        def c_fn(q):
            return K.bm25_topk(*post, q, TOPK, k1=k1, b=b, avgdl=avgdl)

        def np_fn(q):
            return R.bm25_topk(*post, q, TOPK, k1=k1, b=b, avgdl=avgdl)

        ref = [np_fn(q) for q in qs[:50]]
        same = all(np.array_equal(c_fn(q)[0], r[0]) for q, r in zip(qs[:50], ref, strict=True))
        fns = {
            "numpy (brainbot.kernel.reference)": np_fn,
            "brainbot C": c_fn,
            "brainbot C (kernel only, no wrapper)": raw_bm25(post, k1, b, avgdl),
        }
        agrees = {
            "numpy (brainbot.kernel.reference)": (True, None),
            "brainbot C": (same, None),
            "brainbot C (kernel only, no wrapper)": (same, None),
        }
        if bm25s_ret is not None:

            def s_fn(q):
                return bm25s_ret.retrieve(
                    [[f"t{t}" for t in q.tolist()]], k=TOPK, show_progress=False, n_threads=1
                )

            agree = float(
                np.mean(
                    [
                        len(set(s_fn(q)[0][0].tolist()) & set(r[0].tolist())) / TOPK
                        for q, r in zip(qs[:50], ref, strict=True)
                    ]
                )
            )
            fns["bm25s (numpy backend)"] = s_fn
            agrees["bm25s (numpy backend)"] = (agree >= 0.99, agree)
        res = race(fns, calls, min_rounds=len(calls), min_time=2.0)
        if fts is not None:

            def f_fn(q):
                return fts.execute(
                    "SELECT rowid - 1 FROM d WHERE d MATCH ? ORDER BY bm25(d) LIMIT ?",
                    (" OR ".join(f"t{t}" for t in q.tolist()), TOPK),
                ).fetchall()

            fref = [
                K.bm25_topk(
                    indptr, doc_ids, tfs, doc_len, fts_idf, q, TOPK, k1=1.2, b=0.75, avgdl=avgdl
                )
                for q in qs[:30]
            ]
            agree = float(
                np.mean(
                    [
                        len({r[0] for r in f_fn(q)} & set(fr[0].tolist())) / TOPK
                        for q, fr in zip(qs[:30], fref, strict=True)
                    ]
                )
            )
            res["SQLite FTS5 bm25()"] = (bench(f_fn, calls[:30], min_reps=10), None)
            agrees["SQLite FTS5 bm25()"] = (agree >= 0.99, agree)
        for name, (med, _) in res.items():
            ok, overlap = agrees[name]
            row = {"engine": name, "ms": med * 1e3, "agrees": bool(ok)}
            if overlap is not None:
                row["overlap@10"] = overlap
            rows.append(row)
        c_ms = rows[1]["ms"]
        for row in rows:
            row["x_brainbot_c"] = row["ms"] / c_ms
            print(
                f"  {label[:22]:<22} {row['engine']:<38} {row['ms']:8.3f} ms  agrees={row['agrees']}",
                flush=True,
            )
        out["query_sets"][label] = {
            "queries": len(qs),
            "mean_postings_per_query": postings,
            "results": rows,
        }
    out["_post"] = post  # for the fusion section; removed before writing JSON
    out["_avgdl"] = avgdl
    return out


def raw_bm25(post, k1, b, avgdl):
    """A direct call of bb_bm25_topk with pre-made cffi buffers: the kernel's own time."""
    from brainbot._kernel import ffi, lib

    indptr, doc_ids, tfs, doc_len, idf = post
    bufs = (
        ffi.from_buffer("int64_t[]", indptr),
        len(idf),
        ffi.from_buffer("int32_t[]", doc_ids),
        ffi.from_buffer("float[]", tfs),
        len(doc_ids),
        ffi.from_buffer("float[]", doc_len),
        len(doc_len),
        ffi.from_buffer("float[]", idf),
    )
    ids, scores = ffi.new("int64_t[]", TOPK), ffi.new("float[]", TOPK)

    def fn(q):
        st = lib.bb_bm25_topk(
            *bufs,
            ffi.from_buffer("int32_t[]", q),
            ffi.NULL,
            len(q),
            k1,
            b,
            avgdl,
            TOPK,
            ffi.NULL,
            0,
            ids,
            scores,
        )
        assert st == 0

    return fn


# ---------------------------------------------------------------------- fusion


def fusion_section(bm: dict, blas: Blas) -> dict:
    post, avgdl = bm["_post"], bm["_avgdl"]
    n = len(post[3])
    m = unit_rows(np.random.default_rng(SEED + n), n, DIM)
    queries = unit_rows(np.random.default_rng(SEED - 1), 32, DIM)
    rng = np.random.default_rng(SEED + 11)
    _, _, cdf = synth_corpus(1000, 50_000)
    terms = queries_for(rng, cdf, 50_000, 32, 100)
    out = {"n": n, "fuse": [], "hybrid": []}
    print(f"\n== fusion and hybrid, N={n:,}", flush=True)
    for legn in (100, 1000):
        legs = []
        for j in range(8):
            a = K.bm25_topk(*post, terms[j], legn, avgdl=avgdl)
            v = K.cosine_topk(m, queries[j], legn)
            legs.append((a[0], a[1], v[0][0], v[1][0]))
        for method in ("rrf", "weighted"):
            same = all(
                np.array_equal(
                    K.fuse(*lg, TOPK, method=method).ids, R.fuse(*lg, TOPK, method=method).ids
                )
                for lg in legs
            )
            c = bench(lambda *lg, mt=method: K.fuse(*lg, TOPK, method=mt), legs, min_time=0.3) * 1e3
            r = (
                bench(
                    lambda *lg, mt=method: R.fuse(*lg, TOPK, method=mt),
                    legs,
                    min_reps=5,
                    min_time=0.2,
                )
                * 1e3
            )
            out["fuse"].append(
                {"leg_size": legn, "method": method, "c_ms": c, "numpy_ms": r, "agrees": same}
            )
            print(
                f"  fuse {method:<8} legs of {legn:<5} C {c:7.4f} ms  numpy {r:7.3f} ms  agrees={same}"
            )
    for legn in (100, 1000):
        for threads in (1, 0):

            def hybrid(j, legn=legn, threads=threads):
                a = K.bm25_topk(*post, terms[j], legn, avgdl=avgdl)
                v = K.cosine_topk(m, queries[j], legn, threads=threads)
                return K.fuse(a[0], a[1], v[0][0], v[1][0], TOPK)

            times = []
            for _ in range(3):
                for j in range(len(terms)):
                    t0 = time.perf_counter()
                    hybrid(j)
                    times.append(time.perf_counter() - t0)
            row = {
                "candidates_per_leg": legn,
                "threads": threads or "auto",
                "p50_ms": float(np.percentile(times, 50) * 1e3),
                "p95_ms": float(np.percentile(times, 95) * 1e3),
            }
            out["hybrid"].append(row)
            print(
                f"  hybrid legs {legn:<5} threads {row['threads']!s:<4} p50 {row['p50_ms']:.2f} ms  "
                f"p95 {row['p95_ms']:.2f} ms"
            )
    return out


# ---------------------------------------------------------------------- report


def fmt(x, spec=".2f"):
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def host_note(res: dict) -> str:
    """Which host: usable CPUs, whether any are SMT siblings, the measured stream rate."""
    mc = res["machine"]
    smt = ", ".join(mc.get("smt_siblings") or []) or "none (every CPU is its own core)"
    rates = {}
    if res.get("cosine"):
        big = max(res["cosine"], key=lambda sec: sec["n"])
        rates = {t: bw["gb_per_s"] for t, bw in big["bandwidth"].items()}
        where = (f" (the {big['n']:,} x {DIM} f32 matrix read once, the faster of two and "
                 "four streams a thread, each prefetched 3 KB ahead on AVX2: the bound)")
    rate = ", ".join(
        f"{r:.1f} GB/s on {t} thread{'s' if int(t) > 1 else ''}" for t, r in rates.items()
    )
    return (
        f"Host: {mc['cpu']}, {mc.get('usable_cpus')} usable CPUs, SMT siblings: {smt}; "
        f"C backend {mc['brainbot_backend']}"
        + (f"; memory bandwidth {rate}{where}" if rate else "")
        + ". numpy's OpenBLAS workers sleep right after each call (OPENBLAS_THREAD_TIMEOUT="
        f"{mc.get('OPENBLAS_THREAD_TIMEOUT')}): spinning, they took the second core from "
        "the engine raced next. The f32 scores of the AVX2+FMA path and of the scalar twin (other CPUs) agree to "
        "rounding, not bit for bit (FMA fuses what the scalar path multiplies and adds "
        "separately); within one path they are bit-identical for any thread count."
    )


def cutoff_table(cut: dict) -> list[str]:
    lines = [
        "### When a second thread pays: one query, 1 vs 2 threads (median ms)",
        "",
        "| N | f32 MB | f32 1 thread | f32 2 threads | 2 / 1 | int8 1 thread | int8 2 threads | 2 / 1 | auto picks f32 / int8 | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in cut["rows"]:
        lines.append(
            f"| {r['n']:,} | {r['f32_mb']:.1f} | {r['f32_t1_ms']:.3f} | {r['f32_t2_ms']:.3f} | "
            f"{r['f32_t2_over_t1']:.2f} | {r['int8_t1_ms']:.3f} | {r['int8_t2_ms']:.3f} | "
            f"{r['int8_t2_over_t1']:.2f} | {r['auto_threads_f32']} / {r['auto_threads_int8']} | "
            f"{r['loadavg']:.1f} |"
        )
    return lines


def markdown(res: dict) -> str:
    mc = res["machine"]
    lines = [
        f"Machine: {mc['cpu']}, {mc['cores']} cores; numpy {mc['numpy']} (OpenBLAS core {mc['openblas_core']}, "
        f"OPENBLAS_CORETYPE={mc['OPENBLAS_CORETYPE']}); load average at start/end "
        f"{mc['loadavg_start'][0]:.1f} / {mc['loadavg_end'][0]:.1f}; k = {res['k']}.",
        "",
        host_note(res),
        "",
        "### Cosine top-10, one query (dim 384; median ms, min ms; median ratios to the bandwidth bound and to numpy)",
        "",
        "| N | threads | engine | ms | min ms | × bound | × numpy | recall@10 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for sec in res["cosine"]:
        for t, bw in sec["bandwidth"].items():
            how = f", {bw['streams']} streams a thread" if "streams" in bw else ""
            lines.append(
                f"| {sec['n']:,} | {t} | *bound: read f32 matrix once{how}* | "
                f"{bw['c_stream_ms']:.2f} | "
                f"{fmt(bw.get('c_stream_min_ms'))} | 1.00 | | |"
            )
            for row in sec["single"]:
                if row["threads"] == int(t):
                    lines.append(
                        f"| {sec['n']:,} | {t} | {row['engine']} | {fmt(row.get('ms'))} | {fmt(row.get('min_ms'))} | "
                        f"{fmt(row.get('x_bound'))} | {fmt(row.get('x_numpy'))} | {row['recall@10']:.3f} |"
                    )
    lines += [
        "",
        "### Cosine top-10, batches of 64 queries (ms per query; ratio to numpy sgemm alone)",
        "",
        "| N | threads | engine | ms/query | × sgemm |",
        "|---|---|---|---|---|",
    ]
    for sec in res["cosine"]:
        for row in sec["batch"]:
            lines.append(
                f"| {sec['n']:,} | {row['threads']} | {row['engine']} | {fmt(row.get('ms_per_query'), '.3f')} | "
                f"{fmt(row.get('x_sgemm'))} |"
            )
    if "cutoff" in res:
        lines += ["", *cutoff_table(res["cutoff"])]
    if "bm25" not in res:  # --cosine-only
        return "\n".join(lines)
    bm = res["bm25"]
    lines += [
        "",
        f"### BM25 top-10, {bm['docs']:,} docs of ~200 tokens (Zipf vocabulary), one thread",
        "",
        "| queries | mean postings | engine | ms | × brainbot C | agrees |",
        "|---|---|---|---|---|---|",
    ]
    for label, qs in bm["query_sets"].items():
        for row in qs["results"]:
            lines.append(
                f"| {label} | {qs['mean_postings_per_query']:,.0f} | {row['engine']} | {row['ms']:.3f} | "
                f"{row['x_brainbot_c']:.1f} | {row['agrees']} |"
            )
    fu = res["fusion"]
    lines += [
        "",
        f"### Fusion to top-10 and hybrid query, N = {fu['n']:,}",
        "",
        "| what | candidates per leg | C ms | numpy ms |",
        "|---|---|---|---|",
    ]
    for row in fu["fuse"]:
        lines.append(
            f"| fuse {row['method']} | {row['leg_size']} | {row['c_ms']:.4f} | {row['numpy_ms']:.3f} |"
        )
    for row in fu["hybrid"]:
        lines.append(
            f"| hybrid BM25 + cosine + RRF, p50 (p95), threads {row['threads']} | "
            f"{row['candidates_per_leg']} | {row['p50_ms']:.2f} ({row['p95_ms']:.2f}) | |"
        )
    mem = res["memory"]
    lines += [
        "",
        "| storage | bytes per vector scanned | resident bytes per vector |",
        "|---|---|---|",
        f"| f32 | {mem['f32_bytes']} | {mem['f32_bytes']} |",
        f"| int8 + scale (f32 kept for rescoring) | {mem['int8_bytes']} | {mem['int8_bytes'] + mem['f32_bytes']} "
        f"(int8 alone: {mem['int8_bytes']}, if the f32 rows stay on disk / mmap) |",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="N = 10k and 100k only")
    ap.add_argument("--bm25-docs", type=int, default=100_000)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "search.json"))
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    ap.add_argument("--sizes", default="", help="cosine N, comma-separated (overrides --quick)")
    ap.add_argument("--cosine-only", action="store_true", help="skip BM25 and fusion")
    ap.add_argument("--min-idle", type=float, default=0.0, help="idle CPU share to wait for")
    ap.add_argument("--anchor", default="", help="another build's _kernel*.so to race beside")
    ap.add_argument(
        "--cutoff", action="store_true", help="also sweep N for the 1- vs 2-thread cut-off"
    )
    args = ap.parse_args()
    Anchor.path = args.anchor
    global MIN_IDLE, THREADS
    MIN_IDLE = args.min_idle
    THREADS = tuple(int(t) for t in args.threads.split(","))
    if not K.available():
        sys.exit(f"brainbot._kernel is not built: {K.BUILD_HINT}")
    blas = Blas()
    started = time.perf_counter()
    res = {
        "machine": machine_info(blas),
        "k": TOPK,
        "dim": DIM,
        "seed": SEED,
        "method": "median wall time of repeated calls after a warm-up; one process, one run",
    }
    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    if args.sizes:
        sizes = [int(n) for n in args.sizes.split(",")]
    res["cosine"] = [cosine_section(n, blas, with_sqlite=n <= 100_000) for n in sizes]
    if args.cutoff:
        res["cutoff"] = cutoff_section(CUTOFF_SIZES)
    if not args.cosine_only:
        res["bm25"] = bm25_section(args.bm25_docs, blas)
        res["fusion"] = fusion_section(res["bm25"], blas)
        del res["bm25"]["_post"], res["bm25"]["_avgdl"]
    res["min_idle"] = {"wanted": args.min_idle, "seen": IDLE_SEEN}
    res["memory"] = {"dim": DIM, "f32_bytes": 4 * DIM, "int8_bytes": DIM + 4}
    res["machine"]["loadavg_end"] = os.getloadavg()
    res["elapsed_s"] = time.perf_counter() - started
    table = markdown(res)
    res["markdown"] = table
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2, default=float) + "\n")
    print("\n" + table)
    print(f"\nwrote {args.out} in {res['elapsed_s']:.0f} s")


if __name__ == "__main__":
    main()

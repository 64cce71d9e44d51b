"""No-op re-index time: how long `brainbot index` takes when nothing changed.

    python benchmarks/bench_index.py [--files 10000]
    python benchmarks/bench_index.py --corpus ../shared/data/corpora/dwarves-brain

Builds a vault of N small generated notes in a temporary folder, indexes it once with a
deterministic stand-in embedder (hash-seeded unit vectors: the first build is not what
is measured, and embedding 10,000 chunks for real would take minutes), then times the
second run, which must embed nothing: in-process (the library) and as a fresh
`python -m brainbot index` process (what a user waits for, interpreter start included).
Writes benchmarks/results/index.json. Target (README, "Indexing"): ≤ 2 s for 10,000 files.

With --corpus, a real vault with the real embedder instead: the first `brainbot index`
(chunk, embed, write) and three no-op re-runs, all as whole processes; writes
benchmarks/results/index_<name>.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


class HashEmbedder:
    """Unit vectors seeded by the text's hash: deterministic and instant."""

    def embed(self, texts):
        out = np.empty((len(texts), 384), np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


def make_vault(root: Path, n: int) -> None:
    for i in range(n):
        folder = root / f"d{i % 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note {i}.md").write_text(
            f"# Note {i}\n\nThis is note number {i}. It mentions topic {i % 37} and "
            f"project {i % 11}.\n", encoding="utf-8")


def cli_index(vault: Path, db: Path) -> tuple[float, dict]:
    """One `brainbot index --json` as a fresh process: (seconds, its summary)."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "brainbot", "index", str(vault), "--db",
                           str(db), "--json"], check=True, capture_output=True, text=True,
                          cwd=HERE.parent, env=dict(os.environ, PYTHONPATH=str(HERE.parent)))
    return time.perf_counter() - t0, json.loads(done.stdout)


def bench_corpus(corpus: Path, shown: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "b.db"
        first_s, first = cli_index(corpus, db)
        noop = [cli_index(corpus, db)[0] for _ in range(3)]
        size = sum(f.stat().st_size for f in Path(tmp).iterdir())
    return {"command": f"brainbot index {shown} --db DB (then the same again, three times)",
            "files": first["new"], "chunks": first["chunks"], "embedded": first["embedded"],
            "seconds": round(first_s, 1), "db_mb": round(size / 1e6, 1),
            "noop_cli_s": round(float(np.median(noop)), 2),
            "noop_cli_runs_s": [round(t, 2) for t in noop],
            "load_average": os.getloadavg(),
            "note": "whole processes, interpreter start and model load included"}


def main() -> int:
    from brainbot.index.indexer import Indexer

    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--corpus", type=Path, help="a real vault, with the real embedder")
    args = parser.parse_args()
    if args.corpus:
        result = bench_corpus(args.corpus.resolve(), args.corpus)
        out = HERE / "results" / f"index_{args.corpus.resolve().name}.json"
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        vault, db = Path(tmp) / "vault", Path(tmp) / "b.db"
        make_vault(vault, args.files)
        t0 = time.perf_counter()
        with Indexer(db, embedder=HashEmbedder()) as ix:
            first = ix.index_paths([vault])
        build_s = time.perf_counter() - t0
        runs_lib, runs_cli = [], []
        for _ in range(3):
            t0 = time.perf_counter()
            with Indexer(db, embedder=HashEmbedder()) as ix:
                stats = ix.index_paths([vault])
            runs_lib.append(time.perf_counter() - t0)
            assert stats.unchanged == args.files and stats.embedded == 0
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "brainbot", "index", str(vault), "--db",
                            str(db), "--json"], check=True, capture_output=True,
                           cwd=HERE.parent, env=dict(os.environ, PYTHONPATH=str(HERE.parent)))
            runs_cli.append(time.perf_counter() - t0)
    result = {"files": args.files, "chunks": first.chunks, "first_build_s": round(build_s, 2),
              "noop_library_s": round(float(np.median(runs_lib)), 3),
              "noop_cli_process_s": round(float(np.median(runs_cli)), 3),
              "target_s": 2.0, "load_average": os.getloadavg()}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "index.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""No-op re-index time: how long `brainbot index` takes when nothing changed.

    python benchmarks/bench_index.py [--files 10000]

Builds a vault of N small generated notes in a temporary folder, indexes it once with a
deterministic stand-in embedder (hash-seeded unit vectors: the first build is not what
is measured, and embedding 10,000 chunks for real would take minutes), then times the
second run, which must embed nothing: in-process (the library) and as a fresh
`python -m brainbot index` process (what a user waits for, interpreter start included).
Writes benchmarks/results/index.json. Target (DESIGN.md): ≤ 2 s for 10,000 files.
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


def main() -> int:
    from brainbot.indexer import Indexer

    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    args = parser.parse_args()
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

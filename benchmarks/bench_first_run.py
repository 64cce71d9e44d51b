"""First run: how long until a fresh `brainbot index` makes the last note a BM25 hit, and
until every chunk is embedded, as whole processes.

    python benchmarks/bench_first_run.py --min-idle 0.5          # examples/vault + corpora
    python benchmarks/bench_first_run.py --big --min-idle 0.5    # + the 10k-note vault
    python benchmarks/bench_first_run.py --vault examples/vault  # one vault (repeatable)
    python benchmarks/bench_first_run.py --big-only              # the 10k-note vault alone

Per vault, into a fresh database, each run started once the CPUs were --min-idle idle:

1. `brainbot index VAULT --db DB --json`, one process, both phases. Its wall time is the
   time to fully embedded. Its summary gives the lexical phase's end and the semantic phase's
   length, timed inside the process; "to lexical end" adds the process's own start-up (wall
   time less the in-process total: interpreter start, imports, opening the store; exit too).
   At that moment every note is committed and BM25-searchable.
2. `brainbot query TEXT --mode bm25 --json -k 50`, one process, TEXT the first words of the
   note written last: the hit proves it; its wall time is the cold query. "to last BM25 hit"
   = to lexical end + that query.
3. The embedder alone (the anchor): a process that embeds the index's distinct retrieval
   texts, in chunk order, 256 per call like the semantic phase, with the same Embedder;
   import and model load included (the semantic phase loads the model too). Ratio = semantic
   phase / embedder alone (target ≤ 1.05), and the whole index / embedder alone (issue 43:
   ≤ 1.1; the semantic phase starts during the lexical one, index/semantic.py, so the
   first ratio can be below 1). Its CPU seconds are kept too (alone_cpu_s), beside the
   index's: on a loaded host their ratio says what the index adds in work.
4. The lexical phase's stage breakdown (discover, read, chunk: the wait for the chunking
   workers, write, links), as the indexer counts it (`stages_seconds` in its --json).

--big adds the ~10k-note, ~70 MB vault of benchmarks/make_big_vault.py (built first if
absent) with `--no-embed`: the lexical phase only (embedding its ~121k chunks takes over an
hour here); its embedding time is projected, for each precision, from the embedder-alone
rate measured on the other vaults at that precision, and labelled a projection. --rounds N
repeats steps 1-3, interleaved, best kept. --precision int8,fp32 (the default) runs the
embedded vaults at each precision (`brainbot index --precision P`, the embedder alone at
P): a row per vault and precision. --model NAME indexes with that model
(`brainbot index --model NAME`, the embedder alone with it too): rows keyed by model as
well, and the big vault's projection uses that model's measured rates.
--big-embedded (with --big or --big-only) also indexes the big vault end to end, embedding
included, as one process under GNU time (wall, CPU user + system, peak RSS), at the first
--precision: a measured row beside the projection (no embedder-alone anchor: it would take
as long again). Every row records the host it ran on (rows from before carry the host the
file named then), and a projection only uses rates measured on this host.

The machine is shared: the load average is recorded with every run, and the CPU seconds
of the index process with its chunking workers (user + system), which the load inflates
far less than the wall time. Writes (merges into)
benchmarks/results/first_run.json; `python benchmarks/readme_tables.py` renders it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
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

DATA = REPO.parent / "shared" / "data" / "corpora"
VAULTS = (REPO / "examples" / "vault", DATA / "dwarves-brain", DATA / "rust-book",
          DATA / "rust-lang-team-minutes")
RESULTS = HERE / "results" / "first_run.json"
DEFAULT_MODEL = "all-MiniLM-L6-v2"
BIG = Path.home() / ".cache" / "brainbot" / "bench" / "big-vault"

_ALONE = """
import sqlite3, sys, time
rows = sqlite3.connect(sys.argv[1]).execute(
    "SELECT retrieval_text FROM chunks WHERE id IN "
    "(SELECT min(id) FROM chunks GROUP BY text_sha256) ORDER BY id").fetchall()
texts = [t for (t,) in rows]
start = time.perf_counter()
from brainbot.index.indexer import EMBED_CHUNKS
from brainbot.model.embed import Embedder
embedder = Embedder(sys.argv[2], model=sys.argv[3])
for i in range(0, len(texts), EMBED_CHUNKS):
    embedder.embed(texts[i:i + EMBED_CHUNKS])
print(time.perf_counter() - start, len(texts))
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO)}


CPU_SPENT: list[float] = []  # CPU seconds (user + system) of each process run, with its children


def _run(argv: list[str], min_idle: float) -> tuple[float, str, float]:
    """(wall seconds, stdout, load average) of one process started in a quiet moment."""
    wait_for_idle(min_idle)
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=_env())
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_SPENT.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
    return seconds, done.stdout, round(load, 2)


def _host() -> dict:
    """The CPU a row is measured on (a result file gathers rows from several sessions)."""
    m = machine()
    return {k: m[k] for k in ("cpu", "cpu_family", "vnni", "cores")}


def _brainbot(*args: str) -> list[str]:
    return [sys.executable, "-m", "brainbot", *args]


def last_note_query(db: Path) -> tuple[str, str]:
    """(path, query) for the note written last: the first words of its first chunk."""
    con = sqlite3.connect(db)
    path, text = con.execute(
        "SELECT d.path, c.source_text FROM documents d JOIN chunks c ON c.document_id = d.id "
        "WHERE d.id = (SELECT max(document_id) FROM chunks) ORDER BY c.chunk_index "
        "LIMIT 1").fetchone()
    con.close()
    words = [w for w in text.split() if any(ch.isalnum() for ch in w)]
    return path, " ".join(words[:12])


def bm25_hit(db: Path, min_idle: float) -> dict:
    path, text = last_note_query(db)
    seconds, out, load = _run(_brainbot("query", text, "--db", str(db), "--mode", "bm25",
                                        "--json", "-k", "50"), min_idle)
    paths = [h["path"] for h in json.loads(out)]
    return {"last_note": path, "query_s": round(seconds, 2), "query_load": load,
            "rank": paths.index(path) + 1 if path in paths else None}


def one_round(vault: Path, embed: bool, min_idle: float, precision: str, model: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "first.db"
        argv = _brainbot("index", str(vault), "--db", str(db), "--json", "--precision", precision,
                         "--model", model)
        seconds, out, load = _run(argv + ([] if embed else ["--no-embed"]), min_idle)
        stats = json.loads(out)
        startup = seconds - stats["seconds"]
        row = {"index_s": round(seconds, 2), "index_load": load,
               "index_cpu_s": round(CPU_SPENT[-1], 2),  # the process and its workers
               "to_lexical_end_s": round(startup + stats["lexical_seconds"], 2),
               "semantic_s": stats["embed_seconds"], "files": stats["new"],
               "chunks": stats["chunks"], "embedded": stats["embedded"],
               "vectors": stats["vectors"], "stages_seconds": stats["stages_seconds"]}
        row.update(bm25_hit(db, min_idle))
        row["to_last_bm25_hit_s"] = round(row["to_lexical_end_s"] + row["query_s"], 2)
        if embed:
            alone_s, out, alone_load = _run([sys.executable, "-c", _ALONE, str(db), precision,
                                             model], min_idle)
            row.update({"embedder_alone_s": round(alone_s, 2), "alone_load": alone_load,
                        "alone_cpu_s": round(CPU_SPENT[-1], 2),
                        "alone_texts": int(out.split()[1])})
    return row


def bench_vault(vault: Path, embed: bool, rounds: int, min_idle: float,
                precision: str = "int8", model: str = DEFAULT_MODEL) -> dict:
    runs = []
    for _ in range(rounds):
        runs.append(one_round(vault, embed, min_idle, precision, model))
        print(vault.name, precision, json.dumps(runs[-1]), flush=True)
    best = min(runs, key=lambda r: r["to_lexical_end_s"])
    out = {"vault": vault.name if vault.parent.name != "examples" else "examples/vault",
           "host": _host(), "precision": precision if embed else None,
           **({} if model == DEFAULT_MODEL else {"model": model}),
           "megabytes": round(sum(p.stat().st_size for p in vault.rglob("*.md")) / 1e6, 2),
           "embed": embed, "rounds": runs, **{k: best[k] for k in (
               "files", "chunks", "to_lexical_end_s", "to_last_bm25_hit_s", "rank",
               "stages_seconds")}}
    if embed:
        out["fully_embedded_s"] = min(r["index_s"] for r in runs)
        out["semantic_s"] = min(r["semantic_s"] for r in runs)
        out["embedder_alone_s"] = min(r["embedder_alone_s"] for r in runs)
        out["semantic_vs_alone"] = round(out["semantic_s"] / out["embedder_alone_s"], 3)
        out["index_vs_alone"] = round(out["fully_embedded_s"] / out["embedder_alone_s"], 3)
        out["alone_texts_per_s"] = round(runs[0]["alone_texts"] / out["embedder_alone_s"], 1)
        out["cpu_vs_alone"] = round(min(r["index_cpu_s"] for r in runs)
                                    / min(r["alone_cpu_s"] for r in runs), 3)
    return out


def _key(row: dict) -> str:
    """A vault's row, per precision (rows from before #33 were measured at fp32) and
    model (the default's rows carry none)."""
    model = f"|{row['model']}" if row.get("model") else ""
    return f"{row['vault']}|{row.get('precision', 'fp32') if row.get('embed') else ''}{model}"


def big_end_to_end(vault: Path, precision: str, model: str, min_idle: float) -> dict:
    """The big vault indexed for real, both phases, one process under GNU time: a measured
    first run (wall, CPU, peak RSS), beside the projection."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "first.db"
        timed = Path(tmp) / "time.txt"
        argv = ["/usr/bin/time", "-o", str(timed), "-f", "%U %S %M", *_brainbot(
            "index", str(vault), "--db", str(db), "--json", "--precision", precision,
            "--model", model)]
        loads = [round(os.getloadavg()[0], 2)]
        seconds, out, load = _run(argv, min_idle)
        loads.append(round(os.getloadavg()[0], 2))
        stats = json.loads(out)
        user, system, peak_kb = timed.read_text().split()[-3:]
        row = {"vault": "big vault (make_big_vault.py)", "host": _host(),
               "precision": precision, **({} if model == DEFAULT_MODEL else {"model": model}),
               "megabytes": round(sum(p.stat().st_size for p in vault.rglob("*.md")) / 1e6, 2),
               "embed": True, "end_to_end": True, "files": stats["new"],
               "chunks": stats["chunks"], "embedded": stats["embedded"],
               "vectors": stats["vectors"], "fully_embedded_s": round(seconds, 1),
               "semantic_s": stats["embed_seconds"],
               "to_lexical_end_s": round(seconds - stats["seconds"] + stats["lexical_seconds"], 2),
               "stages_seconds": stats["stages_seconds"],
               "index_cpu_s": round(CPU_SPENT[-1], 1),  # the process and its workers
               "load_start_end": loads, "peak_rss_mb": int(peak_kb) // 1024,
               "time_cpu_s": round(float(user) + float(system), 1)}
        row.update(bm25_hit(db, min_idle))
        row["to_last_bm25_hit_s"] = round(row["to_lexical_end_s"] + row["query_s"], 2)
        row["rounds"] = [{"index_load": load, "index_cpu_s": row["index_cpu_s"]}]
    return row


def save(by_name: dict, min_idle: float) -> dict:
    results = {"machine": machine(), "min_idle": min_idle,
               "measured": "whole processes into a fresh database; best of rounds",
               "vaults": list(by_name.values())}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vault", type=Path, action="append",
                        help="only this vault (repeatable); default examples/vault + corpora")
    parser.add_argument("--big", action="store_true", help="also the 10k-note vault, lexical")
    parser.add_argument("--big-only", action="store_true", help="only the 10k-note vault")
    parser.add_argument("--big-vault", type=Path, default=BIG)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--min-idle", type=float, default=0.0,
                        help="wait until the CPUs are this idle before each process (0.5)")
    parser.add_argument("--precision", default="int8,fp32",
                        help="embedding precisions of the embedded vaults, comma-separated")
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help=f"the embedding model (default {DEFAULT_MODEL})")
    parser.add_argument("--big-embedded", action="store_true",
                        help="also index the big vault end to end, embedding included")
    args = parser.parse_args(argv)
    precisions = [p.strip() for p in args.precision.split(",") if p.strip()]
    vaults = [v.resolve() for v in args.vault] if args.vault else [v for v in VAULTS
                                                                  if v.is_dir()]
    if args.big_only:
        args.big, vaults = True, []
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    earlier = results.get("machine", {})  # the host of the rows that name none
    by_name = {_key(v): {"host": {k: earlier.get(k) for k in ("cpu", "cpu_family", "vnni",
                                                              "cores")}, **v}
               for v in results.get("vaults", [])}
    for vault in vaults:
        for precision in precisions:
            row = bench_vault(vault, True, args.rounds, args.min_idle, precision, args.model)
            by_name[_key(row)] = row
            results = save(by_name, args.min_idle)  # after each vault: a long run keeps its part
    if args.big:
        import make_big_vault

        make_big_vault.build(args.big_vault, 10_000)
        row = bench_vault(args.big_vault, False, args.rounds, args.min_idle, model=args.model)
        row["vault"] = "big vault (make_big_vault.py)"
        row["projected_embed_s"] = {}
        for precision in ("int8", "fp32"):
            rates = [v["alone_texts_per_s"] for v in by_name.values()
                     if v.get("embed") and v.get("precision", "fp32") == precision
                     and v.get("model", DEFAULT_MODEL) == args.model
                     and v["host"] == row["host"] and "alone_texts_per_s" in v]
            if rates:  # the fastest measured rate: the projection is a lower bound
                row["projected_embed_s"][precision] = round(row["chunks"] / max(rates), 0)
        by_name[_key(row)] = row
        results = save(by_name, args.min_idle)
        if args.big_embedded:
            row = big_end_to_end(args.big_vault, precisions[0], args.model, args.min_idle)
            print(json.dumps(row), flush=True)
            by_name[_key(row)] = row
            results = save(by_name, args.min_idle)
    print(json.dumps({v["vault"]: {k: v.get(k) for k in (
        "to_last_bm25_hit_s", "fully_embedded_s", "semantic_vs_alone")} for v in
        results["vaults"]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

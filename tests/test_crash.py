"""Reliability, the crash lab: `brainbot index` killed with SIGKILL at many moments, and
readers and writers at once. (Storage faults: test_storage_faults.py; databases brainbot
did not write: test_foreign_db.py.)

The crash tests run the real CLI in subprocesses through a small harness (HARNESS below)
that may shrink BATCH_CHUNKS, so a small vault still has many commit points, and may
SIGKILL itself at an exact code point (inside a write transaction, during the removal of
vanished notes, right after a commit); the rest are killed from outside at times spread
over a run. After every kill the database must pass `PRAGMA integrity_check` and every
cross-table invariant, the next `brainbot index` must complete, and its result must equal
a clean index of the same notes: documents, chunk ids, vector bytes, postings and df.

Nothing here asserts a wall-clock time: kill times are spread over a calibrated run, and
where each kill landed (mid-run or after the run had finished) is recorded, not assumed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import sqlean
from conftest import REPO
from reliability_kit import (
    check_consistent,
    cli_env,
    connect,
    copy_db,
    db_files,
    one_line_error,
    run_cli,
    snapshot,
    write_harness,
)
from wait_kit import still_running, wait_until

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DWARVES = DATA / "corpora" / "dwarves-brain"
EXAMPLES = REPO / "examples" / "notes"
LAB_NOTES = 36  # 30-50 small real notes: ~70 chunks, a few seconds of embedding
MTIME_BASE = 1_700_000_000 * 10**9  # fixed mtimes, so every vault state is reproducible


# A reader loop for the concurrency test: `brainbot query` through cli.main (in-process,
# as many queries as possible) or through a new `python -m brainbot` process each time.
QUERY_WORKER = r'''
import contextlib, io, json, os, subprocess, sys, time
db, mode, how, out, stop = sys.argv[1:6]
queries = ["kubernetes deployment", "design persona research", "note taking zettelkasten",
           "reliability paragraph", "typescript react", "the", "team communication"]
from brainbot.cli import main
i = 0
with open(out, "a", encoding="utf-8") as log:
    while not os.path.exists(stop):
        q = queries[i % len(queries)]
        m = mode if mode != "mixed" else ("bm25", "hybrid")[i % 2]
        i += 1
        argv = ["query", q, "--db", db, "--json", "--mode", m, "-k", "8"]
        t0 = time.time()
        if how == "cli":
            r = subprocess.run([sys.executable, "-m", "brainbot", *argv], capture_output=True,
                               text=True)
            rc, stdout, stderr = r.returncode, r.stdout, r.stderr
        else:
            o, e = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
                try:
                    rc = main(argv)
                except BaseException as exc:  # anything escaping main is a failure
                    rc = "crash"
                    e.write(repr(exc))
            stdout, stderr = o.getvalue(), e.getvalue()
        log.write(json.dumps({"q": q, "mode": m, "rc": rc, "out": stdout, "err": stderr,
                              "t0": t0, "t1": time.time()}) + "\n")
        log.flush()
'''



# --- the crash lab: one vault folder, several reproducible states -------------------------


def _lab_source():
    """(name, notes of state 1, spare notes added in state 2), as (relpath, bytes)."""
    if DWARVES.is_dir():
        files = sorted(p for p in DWARVES.rglob("*.md") if p.is_file())
        small = [p for p in files if 150 <= p.stat().st_size <= 2000]
        picked = small[:: max(1, len(small) // LAB_NOTES)][:LAB_NOTES]
        spare = [p for p in small if p not in picked][:3]
        name, root = "dwarves", DWARVES
    else:  # the project's own sample vault: enough for the concurrency tests
        files = sorted(EXAMPLES.rglob("*.md"))
        picked, spare = files[:8], files[8:10]
        name, root = "examples", EXAMPLES

    def read(paths):
        return [(p.relative_to(root).as_posix(), p.read_bytes()) for p in paths]

    return name, read(picked), read(spare)


@dataclass
class Lab:
    """One vault folder and its reproducible states: 1 (the notes), 2 (edited), 3 (two
    thirds removed), with a clean index of each built on demand."""

    work: Path
    root: Path  # the vault: one path for every state, as documents.root records it
    harness: Path
    states: dict[int, dict[str, tuple[bytes, int]]] = field(default_factory=dict)
    cleans: dict[int, tuple[Path, float, dict]] = field(default_factory=dict)
    kills: list[dict] = field(default_factory=list)
    source: str = ""

    def apply(self, n: int) -> None:
        """Make the vault folder hold exactly state n: bytes and mtimes."""
        shutil.rmtree(self.root, ignore_errors=True)
        for rel, (data, mtime) in self.states[n].items():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            os.utime(path, ns=(mtime, mtime))

    def index(self, db: Path, *, batch: int | None = None, kill_at: str | None = None,
              pause: float = 0.0, embed_batch: int | None = None,
              command: str = "index") -> subprocess.Popen:
        env = cli_env(BB_TEST_PAUSE=str(pause))
        if batch:
            env["BB_TEST_BATCH"] = str(batch)
        if embed_batch:
            env["BB_TEST_EMBED_BATCH"] = str(embed_batch)
        if kill_at:
            env["BB_TEST_KILL_AT"] = kill_at
        return subprocess.Popen(
            [sys.executable, str(self.harness), command, str(self.root), "--db", str(db)],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def complete(self, db: Path, **kwargs) -> float:
        started = time.perf_counter()
        proc = self.index(db, **kwargs)
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err
        assert "error" not in err, err
        return time.perf_counter() - started

    def clean(self, n: int) -> tuple[Path, float, dict]:
        """A clean index of state n (built once), the seconds it took, its snapshot."""
        if n not in self.cleans:
            self.apply(n)
            db = self.work / f"clean{n}.db"
            seconds = self.complete(db)
            check_consistent(db)
            self.cleans[n] = (db, seconds, snapshot(db))
        return self.cleans[n]

    def kill_and_resume(self, label: str, want: dict, *, start: Path | None = None,
                        after: float | None = None, kill_at: str | None = None,
                        batch: int | None = None, embed_batch: int | None = None,
                        command: str = "index") -> dict:
        """One trial: a run killed at a moment, checked, then completed and compared."""
        db = self.work / "trial.db"
        if start is not None:
            copy_db(start, db)
        else:
            for f in db_files(db):
                f.unlink()
        before = check_consistent(db, complete=False)
        proc = self.index(db, batch=batch, kill_at=kill_at, embed_batch=embed_batch,
                          command=command)
        if after is not None:
            try:
                proc.wait(timeout=after)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=900)
        assert proc.returncode in (0, -signal.SIGKILL), err
        if kill_at is not None:  # the hook must have fired, or the trial proved nothing
            assert proc.returncode == -signal.SIGKILL, f"{kill_at} was never reached"
        after_kill = check_consistent(db, complete=False)
        vectors = _vector_count(db)
        self.complete(db)
        check_consistent(db)
        assert snapshot(db) == want, f"{label}: resumed index differs from a clean one"
        record = {"label": label, "moment": kill_at or f"{after:.2f}s", "batch": batch,
                  "landed": "mid-run" if proc.returncode else "after completion",
                  "documents_written_before_kill": len(after_kill - before),
                  "documents_removed_before_kill": len(before - after_kill),
                  "vectors_before_kill": vectors}
        self.kills.append(record)
        return record


def _vector_count(db: Path) -> int:
    """The vectors a killed run left, read from a copy (the next run must find the WAL
    hot, as the kill left it)."""
    if not db.exists():
        return 0
    probe = copy_db(db, db.with_name(db.name + ".count"))
    conn = connect(probe)
    try:
        return conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    except sqlean.OperationalError:  # killed before the schema was written
        return 0
    finally:
        conn.close()
        for f in db_files(probe):
            f.unlink()


def _edited(state: dict[str, tuple[bytes, int]], spare: list[tuple[str, bytes]]):
    """State 2: notes edited, touched, renamed, deleted and added."""
    out = dict(state)
    names = sorted(out)
    later = MTIME_BASE + 10**12
    for k, rel in enumerate(names[3::3]):  # appended paragraphs
        data, _ = out[rel]
        extra = f"\n\nAn added paragraph about reliability, number {k}, after an edit.\n"
        out[rel] = (data + extra.encode(), later + k)
    rel = names[1]  # a word changed in the middle
    data, _ = out[rel]
    cut = len(data) // 2
    out[rel] = (data[:cut] + b" (edited) " + data[cut:], later + 100)
    data, _ = out[names[5]]  # touched: same bytes, new mtime
    out[names[5]] = (data, later + 200)
    moved = out.pop(names[-2])  # renamed
    out["renamed/" + names[-2].rsplit("/", 1)[-1]] = moved
    for rel in names[-5:-3]:  # deleted
        out.pop(rel)
    for k, (rel, data) in enumerate(spare):  # added
        out["added/" + rel.rsplit("/", 1)[-1]] = (data, later + 300 + k)
    out["added/ünïcødé new note.md"] = ("# Ünïcødé\n\nA new note written during the "
                                        "edits, about résumé parsing.\n".encode(), later + 400)
    return out


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Path:
    return write_harness(tmp_path_factory.mktemp("harness"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory, harness) -> Lab:
    work = tmp_path_factory.mktemp("crashlab")
    source, picked, spare = _lab_source()
    state1 = {rel: (data, MTIME_BASE + i * 10**9) for i, (rel, data) in enumerate(picked)}
    state2 = _edited(state1, spare)
    state3 = {rel: v for i, (rel, v) in enumerate(sorted(state2.items())) if i % 3 == 0}
    lab = Lab(work=work, root=work / "vault", harness=harness,
              states={1: state1, 2: state2, 3: state3}, source=source)
    yield lab
    if lab.kills:
        mid = sum(k["landed"] == "mid-run" for k in lab.kills)
        print(f"\nSIGKILL trials: {len(lab.kills)} kills, {mid} mid-run, "
              f"{len(lab.kills) - mid} after completion")
        for k in lab.kills:
            print("  ", json.dumps(k, ensure_ascii=False))


def need_dwarves(lab: Lab) -> None:
    if lab.source != "dwarves":
        pytest.skip(f"{DWARVES} is absent: the crash tests run on a copy of real notes from "
                    "the shared data")


# --- 1. crashes ------------------------------------------------------------------------------


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_embedder_is_bit_for_bit_batch_independent(shared_embedder, precision):
    """What makes a resumed index byte-identical to a clean one: a text's vector does not
    depend on the texts batched with it, their order or the batch size, in either
    precision (the crash lab below runs the CLI's default, int8)."""
    from brainbot.model.embed import Embedder

    embedder = shared_embedder if precision == "fp32" else Embedder(precision)
    texts = [f"Note {i}: " + "the quick brown fox jumps over the lazy dog " * (i % 9 + 1)
             for i in range(21)] + ["", "ünïcødé 漢字 😀", "x " * 400]
    together = embedder.embed(texts)
    alone = np.stack([embedder.embed([t])[0] for t in texts])
    backwards = embedder.embed(texts[::-1])[::-1]
    small = Embedder(precision, batch_size=3, threads=3)  # int8 takes no batches: 3 at once
    small._tokenizer, small._session = embedder._load()
    in_threes = small.embed(texts)
    for other in (alone, backwards, in_threes):
        assert together.tobytes() == other.tobytes()


@pytest.mark.slow
@pytest.mark.corpus
def test_sigkill_during_first_index(lab):
    """16 kills of an index from scratch: 12 timed from 0.3 s to 95 % of a clean run (two
    thirds with 8-chunk batches, a third with the default 64), and 4 at exact points
    (inside the first and a middle write transaction, right after the identity commit and
    after the second batch's commit)."""
    need_dwarves(lab)
    _, seconds, want = lab.clean(1)
    lab.apply(1)
    n_docs = len(lab.states[1])
    calibrate = lab.work / "calibrate8.db"
    run_time = {None: seconds, 8: lab.complete(calibrate, batch=8)}  # small batches are slower
    assert snapshot(calibrate) == want  # and give the same index
    for k, share in enumerate(np.linspace(0, 1, 12)):
        batch = (8, 8, None)[k % 3]
        after = 0.3 + share * max(0.1, 0.95 * run_time[batch] - 0.3)
        lab.kill_and_resume("first index", want, after=float(after), batch=batch)
    for hook in ("insert:1", f"insert:{n_docs // 2}", "commit:1", "commit:3"):
        lab.kill_and_resume("first index", want, kill_at=hook, batch=8)
    trials = [k for k in lab.kills if k["label"] == "first index"]
    assert sum(k["landed"] == "mid-run" for k in trials) >= 5
    assert len({k["documents_written_before_kill"] for k in trials}) >= 3, trials


@pytest.mark.slow
@pytest.mark.corpus
def test_sigkill_during_reindex_after_edits(lab):
    """7 kills of an incremental run over edited, touched, renamed, deleted and added
    notes: 5 timed, 1 inside a write transaction, 1 while an edited note's old version is
    being deleted (before its new version is written)."""
    need_dwarves(lab)
    start, _, _ = lab.clean(1)
    _, _, want = lab.clean(2)
    lab.apply(2)
    db = copy_db(start, lab.work / "calibrate.db")
    seconds = lab.complete(db)  # an uninterrupted incremental run equals a clean index too
    assert snapshot(db) == want
    for after in np.linspace(0.3, max(0.4, 0.95 * seconds), 5):
        lab.kill_and_resume("re-index after edits", want, start=start, after=float(after),
                            batch=4)
    for hook in ("insert:1", "delete:1"):
        lab.kill_and_resume("re-index after edits", want, start=start, kill_at=hook, batch=4)


@pytest.mark.slow
@pytest.mark.corpus
def test_sigkill_in_the_semantic_phase(lab):
    """Kills in the semantic phase, 16 chunks a batch: inside the second batch's write
    (before its COMMIT), right after it committed (the lock held, between batches), and
    while the model runs for the third (the lock released, no transaction open); then
    `brainbot watch`, whose semantic phase runs in the background, inside its second
    batch's write. Each leaves every note written and exactly the committed batches'
    vectors, a DB check_consistent(complete=False) accepts; the next `brainbot index`
    embeds the rest and equals a clean index, bit for bit."""
    need_dwarves(lab)
    _, _, want = lab.clean(1)
    lab.apply(1)  # the vault as state 1, whatever the test before left it as
    notes, chunks = len(want["documents"]), len(want["chunks"])
    assert chunks > 3 * 16, "the lab needs more than three semantic batches"
    for hook, committed, command in (("vectors:2", 16, "index"),
                                     ("vectors-commit:2", 32, "index"),
                                     ("model:3", 32, "index"),
                                     ("vectors:2", 16, "watch")):
        record = lab.kill_and_resume("semantic phase", want, kill_at=hook, embed_batch=16,
                                     command=command)
        assert record["documents_written_before_kill"] == notes, record
        assert record["vectors_before_kill"] == committed, record


def test_sigkill_during_removal_phase(lab):
    """4 kills while two thirds of the notes are removed: after the first, a middle and
    the last deletion (all inside the one removal transaction) and right after it commits."""
    need_dwarves(lab)
    start, _, _ = lab.clean(2)
    _, _, want = lab.clean(3)
    lab.apply(3)
    gone = len(lab.states[2]) - len(lab.states[3])
    for hook in ("delete:1", f"delete:{gone // 2}", f"delete:{gone}", "commit:1"):
        lab.kill_and_resume("removal phase", want, start=start, kill_at=hook)
    trials = [k for k in lab.kills if k["label"] == "removal phase"]
    # killed inside the removal transaction: nothing is gone; right after it: all of it
    assert [k["documents_removed_before_kill"] for k in trials] == [0, 0, 0, gone]


# --- 3. concurrent use ---------------------------------------------------------------------


def _versions(snap: dict) -> dict[str, dict[str, tuple]]:
    """path -> chunk_id -> what a hit shows of it."""
    out: dict[str, dict[str, tuple]] = {}
    for row in snap["chunks"]:
        path, chunk_id, heading_path, source, start, end = row[0], row[1], row[3], row[4], row[6], row[7]
        out.setdefault(path, {})[chunk_id] = (json.loads(heading_path), source, start, end)
    return out


@pytest.mark.slow
def test_queries_during_an_index_see_consistent_states(lab):
    """Four query processes (bm25 and hybrid; cli.main in a loop, and a new `python -m
    brainbot` each time) while an index rewrites a third of the notes: no errors, no
    "database is locked", every hit a chunk of the old or the new version of its note, and
    never chunks of two versions of one note in the same answer."""
    start, _, old = lab.clean(1)
    _, _, new = lab.clean(2)
    lab.apply(2)
    db = copy_db(start, lab.work / "concurrent.db")
    stop = lab.work / "stop"
    stop.unlink(missing_ok=True)
    worker = lab.work / "query_worker.py"
    worker.write_text(QUERY_WORKER, encoding="utf-8")
    logs = [lab.work / f"queries{i}.jsonl" for i in range(4)]
    for log in logs:
        log.unlink(missing_ok=True)
    plan = [("bm25", "main"), ("bm25", "main"), ("hybrid", "main"), ("mixed", "cli")]
    workers = [subprocess.Popen([sys.executable, str(worker), str(db), mode, how, str(log),
                                 str(stop)], cwd=REPO, env=cli_env(),
                                stderr=subprocess.PIPE, text=True)
               for (mode, how), log in zip(plan, logs, strict=True)]
    try:
        _wait_for(lambda: all(log.exists() and log.stat().st_size for log in logs), workers)
        began = time.time()
        lab.complete(db, batch=4, pause=0.15)
        ended = time.time()
        seen = {log: len(log.read_text().splitlines()) for log in logs}
        _wait_for(lambda: all(len(log.read_text().splitlines()) > seen[log] for log in logs),
                  workers)
    finally:
        stop.touch()
        for w in workers:
            w.communicate(timeout=300)
    assert snapshot(db) == new
    versions = (_versions(old), _versions(new))
    during = 0
    for log in logs:
        for line in log.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            assert rec["rc"] == 0 and _without_partial_note(rec["err"]) == "", rec
            _check_answer(json.loads(rec["out"]), versions)
            during += rec["t0"] >= began and rec["t1"] <= ended
    print(f"\nqueries answered while the index ran: {during}")
    assert during >= 4


# While the semantic phase of the index runs, a vector or hybrid query rightly notes on stderr
# that some chunks have no vector yet; that note is the only stderr a query may print.
PARTIAL_NOTE = re.compile(r"^note: [\d,]+ of [\d,]+ chunks embedded; run `brainbot index` to finish "
                          r"\(the vector leg sees only embedded chunks\)\n", re.M)


def _without_partial_note(err: str) -> str:
    return PARTIAL_NOTE.sub("", err)


def _wait_for(condition, procs, limit: float = 300) -> None:
    wait_until(condition, "the workers' progress", timeout=limit, alive=still_running(*procs))


def _check_answer(hits: list[dict], versions) -> None:
    by_path: dict[str, list[dict]] = {}
    for h in hits:
        by_path.setdefault(h["path"], []).append(h)
    for path, group in by_path.items():
        shown = {h["chunk_id"]: (h["heading_path"], h["text"], h["start_line"], h["end_line"])
                 for h in group}
        assert any(all(v.get(path, {}).get(cid) == s for cid, s in shown.items())
                   for v in versions), f"{path}: hits from no single version of the note"
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.slow
def test_second_indexer_is_refused_cleanly_and_first_finishes(lab):
    """Two indexers at once: the second (also with --rebuild) is refused with one line
    while the first holds the file; the first completes and equals a clean index."""
    start, _, _ = lab.clean(1)
    _, _, want = lab.clean(2)
    lab.apply(2)
    db = copy_db(start, lab.work / "two.db")
    first = lab.index(db, batch=4, pause=1.0)
    try:
        _wait_for(lambda: _documents(db) not in (None, _documents(start)), [first])
        for extra in ((), ("--rebuild",)):
            second = run_cli("index", lab.root, "--db", db, *extra)
            line = one_line_error(second)
            assert "another brainbot writer" in line and "is writing" in line
            assert first.poll() is None, "the first indexer finished too early to test"
    finally:
        _, err = first.communicate(timeout=900)
    assert first.returncode == 0, err
    check_consistent(db)
    assert snapshot(db) == want


def _documents(db: Path) -> list | None:
    try:
        conn = connect(db)
        try:
            return conn.execute("SELECT path, sha256 FROM documents ORDER BY path").fetchall()
        finally:
            conn.close()
    except sqlean.Error:
        return None


def test_rebuild_keeps_the_writer_lock(tmp_path, vault, counting):
    """--rebuild deletes the file it had locked; the lock must follow to the new file, or
    a second indexer starting then would write beside it."""
    from brainbot.errors import StoreBusyError
    from brainbot.index.indexer import Indexer

    db = tmp_path / "b.db"
    with Indexer(db, embedder=counting) as ix:
        ix.index_paths([vault])
    with Indexer(db, embedder=counting, rebuild=True) as ix:
        with pytest.raises(StoreBusyError), Indexer(db, embedder=counting):
            pass
        ix.index_paths([vault])
    assert len(check_consistent(db)) == 3

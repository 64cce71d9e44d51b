"""Reliability: `brainbot index` killed with SIGKILL at many moments, storage faults (full
disk, write errors, read-only files and mounts, locks held by others), readers and writers
at once, and databases brainbot did not write.

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

import contextlib
import json
import os
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

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DWARVES = DATA / "corpora" / "dwarves-brain"
EXAMPLES = REPO / "examples" / "notes"
LAB_NOTES = 36  # 30-50 small real notes: ~70 chunks, a few seconds of embedding
MTIME_BASE = 1_700_000_000 * 10**9  # fixed mtimes, so every vault state is reproducible
DIM_BYTES = 384 * 4

# Runs `brainbot` (cli.main) with test hooks read from the environment:
#   BB_TEST_BATCH=n        chunks per write transaction (indexer.BATCH_CHUNKS)
#   BB_TEST_KILL_AT=where:n  SIGKILL this process at the n-th
#        insert  document inserted (inside its batch's transaction, before COMMIT)
#        delete  document deleted (removal phase, or an updated note's old version)
#        commit  committed transaction (the identity write counts when there is one)
#   BB_TEST_PAUSE=s        sleep s seconds after each commit (stretches a run)
#   BB_TEST_ANNOUNCE=1     print "bb-test: begin" on stderr before each write transaction
HARNESS = r'''
import os, signal, sys, time
from contextlib import contextmanager

import brainbot.indexer as ix
from brainbot import store

if os.environ.get("BB_TEST_BATCH"):
    ix.BATCH_CHUNKS = int(os.environ["BB_TEST_BATCH"])
where, _, n = os.environ.get("BB_TEST_KILL_AT", "").partition(":")
pause = float(os.environ.get("BB_TEST_PAUSE", "0"))
announce = bool(os.environ.get("BB_TEST_ANNOUNCE"))
seen = {"insert": 0, "delete": 0, "commit": 0}

def tick(kind):
    seen[kind] += 1
    if kind == where and seen[kind] == int(n):
        os.kill(os.getpid(), signal.SIGKILL)

insert = ix.Indexer._insert_document
def _insert(self, *args, **kwargs):
    insert(self, *args, **kwargs)
    tick("insert")
ix.Indexer._insert_document = _insert

delete = ix.Indexer._delete_documents
def _delete(self, ids):
    for doc_id in ids:
        delete(self, [doc_id])
        tick("delete")
ix.Indexer._delete_documents = _delete

transaction = store.transaction
@contextmanager
def _transaction(db, **kwargs):
    if announce:
        print("bb-test: begin", file=sys.stderr, flush=True)
    with transaction(db, **kwargs):
        yield
    tick("commit")
    if pause:
        time.sleep(pause)
store.transaction = _transaction

from brainbot.cli import main
sys.exit(main(sys.argv[1:]))
'''

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


# --- helpers ---------------------------------------------------------------------------------


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["NO_COLOR"] = "1"
    env.pop("BRAINBOT_DB", None)
    env.update(extra)
    return env


def run_cli(*argv: str, env: dict | None = None, timeout: float = 900,
            **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "brainbot", *map(str, argv)], cwd=REPO,
                          env=env or cli_env(), capture_output=True, text=True,
                          timeout=timeout, **kwargs)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The CLI's failure contract: non-zero exit, exactly one line on stderr, no traceback."""
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("brainbot: error: "), result.stderr
    return lines[0]


def db_files(db: Path) -> list[Path]:
    return [Path(str(db) + s) for s in ("", "-wal", "-shm") if Path(str(db) + s).exists()]


def copy_db(src: Path, dst: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(dst) + suffix)
    for suffix in ("", "-wal"):
        if Path(str(src) + suffix).exists():
            shutil.copyfile(str(src) + suffix, str(dst) + suffix)
    return dst


def connect(db: Path):
    return sqlean.connect(str(db), isolation_level=None)


def snapshot(db_path: Path) -> dict:
    """Everything that defines an index's content, independent of row ids."""
    db = connect(db_path)
    try:
        return {
            "documents": db.execute(
                "SELECT path, sha256, size, mtime_ns, title, front_matter FROM documents "
                "ORDER BY path").fetchall(),
            "chunks": db.execute(
                "SELECT d.path, c.chunk_id, c.chunk_index, c.heading_path, c.source_text, "
                "c.retrieval_text, c.start_line, c.end_line, c.start_char, c.end_char, "
                "c.source_tokens, c.retrieval_tokens, c.text_sha256, c.lexical_length, "
                "e.vector FROM chunks c JOIN documents d ON d.id = c.document_id "
                "JOIN embeddings e ON e.chunk = c.id ORDER BY d.path, c.chunk_index").fetchall(),
            "postings": db.execute(
                "SELECT t.term, c.chunk_id, p.tf FROM postings p JOIN terms t ON t.id = p.term "
                "JOIN chunks c ON c.id = p.chunk ORDER BY 1, 2").fetchall(),
            "df": db.execute("SELECT term, df FROM terms WHERE df > 0 ORDER BY term").fetchall(),
            "meta": db.execute("SELECT key, value FROM meta ORDER BY key").fetchall(),
        }
    finally:
        db.close()


def check_consistent(db_path: Path) -> set[tuple]:
    """integrity_check and every cross-table invariant; returns the committed documents
    as (path, sha256, mtime_ns) rows.

    Works on a copy of the database and its WAL, so the file the next run opens keeps
    its hot WAL and that run really goes through SQLite's recovery.
    """
    if not db_path.exists():
        return set()
    probe = copy_db(db_path, db_path.with_name(db_path.name + ".probe"))
    db = connect(probe)
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "chunks" not in tables:
            return set()

        def count(sql: str) -> int:
            return db.execute(sql).fetchone()[0]

        assert count("SELECT count(*) FROM chunks WHERE id NOT IN (SELECT chunk FROM embeddings)") == 0
        assert count("SELECT count(*) FROM embeddings WHERE chunk NOT IN (SELECT id FROM chunks)") == 0
        assert count(f"SELECT count(*) FROM embeddings WHERE length(vector) != {DIM_BYTES}") == 0
        assert count("SELECT count(*) FROM postings WHERE chunk NOT IN (SELECT id FROM chunks)") == 0
        assert count("SELECT count(*) FROM chunks WHERE document_id NOT IN "
                     "(SELECT id FROM documents)") == 0
        assert db.execute(
            "SELECT t.term, t.df, count(p.chunk) FROM terms t LEFT JOIN postings p "
            "ON p.term = t.id GROUP BY t.id HAVING t.df != count(p.chunk)").fetchall() == []
        assert count("SELECT count(*) FROM (SELECT document_id FROM chunks GROUP BY document_id "
                     "HAVING max(chunk_index) + 1 != count(*))") == 0
        return set(db.execute("SELECT path, sha256, mtime_ns FROM documents"))
    finally:
        db.close()
        for f in db_files(probe):
            f.unlink()


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
              pause: float = 0.0) -> subprocess.Popen:
        env = cli_env(BB_TEST_PAUSE=str(pause))
        if batch:
            env["BB_TEST_BATCH"] = str(batch)
        if kill_at:
            env["BB_TEST_KILL_AT"] = kill_at
        return subprocess.Popen(
            [sys.executable, str(self.harness), "index", str(self.root), "--db", str(db)],
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
                        batch: int | None = None) -> dict:
        """One trial: a run killed at a moment, checked, then completed and compared."""
        db = self.work / "trial.db"
        if start is not None:
            copy_db(start, db)
        else:
            for f in db_files(db):
                f.unlink()
        before = check_consistent(db)
        proc = self.index(db, batch=batch, kill_at=kill_at)
        if after is not None:
            try:
                proc.wait(timeout=after)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=900)
        assert proc.returncode in (0, -signal.SIGKILL), err
        if kill_at is not None:  # the hook must have fired, or the trial proved nothing
            assert proc.returncode == -signal.SIGKILL, f"{kill_at} was never reached"
        after_kill = check_consistent(db)
        self.complete(db)
        check_consistent(db)
        assert snapshot(db) == want, f"{label}: resumed index differs from a clean one"
        record = {"label": label, "moment": kill_at or f"{after:.2f}s", "batch": batch,
                  "landed": "mid-run" if proc.returncode else "after completion",
                  "documents_written_before_kill": len(after_kill - before),
                  "documents_removed_before_kill": len(before - after_kill)}
        self.kills.append(record)
        return record


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
    path = tmp_path_factory.mktemp("harness") / "harness.py"
    path.write_text(HARNESS, encoding="utf-8")
    return path


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


def test_embedder_is_bit_for_bit_batch_independent(shared_embedder):
    """What makes a resumed index byte-identical to a clean one: a text's vector does not
    depend on the texts batched with it, their order or the batch size."""
    from brainbot.embed import Embedder

    texts = [f"Note {i}: " + "the quick brown fox jumps over the lazy dog " * (i % 9 + 1)
             for i in range(21)] + ["", "ünïcødé 漢字 😀", "x " * 400]
    together = shared_embedder.embed(texts)
    alone = np.stack([shared_embedder.embed([t])[0] for t in texts])
    backwards = shared_embedder.embed(texts[::-1])[::-1]
    small = Embedder(batch_size=3)
    small._tokenizer, small._session = shared_embedder._load()
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
            assert rec["rc"] == 0 and rec["err"] == "", rec
            _check_answer(json.loads(rec["out"]), versions)
            during += rec["t0"] >= began and rec["t1"] <= ended
    print(f"\nqueries answered while the index ran: {during}")
    assert during >= 4


def _wait_for(condition, procs, limit: float = 300) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        for p in procs:
            assert p.poll() is None, p.communicate()[1]
        assert time.monotonic() < deadline, "workers made no progress"
        time.sleep(0.05)


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
            assert "another `brainbot index` is writing" in line
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
    from brainbot.indexer import Indexer

    db = tmp_path / "b.db"
    with Indexer(db, embedder=counting) as ix:
        ix.index_paths([vault])
    with Indexer(db, embedder=counting, rebuild=True) as ix:
        with pytest.raises(StoreBusyError), Indexer(db, embedder=counting):
            pass
        ix.index_paths([vault])
    assert len(check_consistent(db)) == 3


# --- 2. storage faults -----------------------------------------------------------------------


@pytest.fixture
def indexed(tmp_path, vault, shared_embedder):
    """The tiny vault indexed into tmp_path/b.db, and a long note added afterwards, so the
    next run has ~20 chunks (~150 KB of WAL) to write."""
    from brainbot.indexer import Indexer

    db = tmp_path / "b.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    paragraphs = [f"Paragraph {i} of the long note: the storage test writes the words "
                  f"alpha{i}, beta{i} and gamma{i} so every chunk is new. " * 3 for i in range(40)]
    (vault / "long.md").write_text("# Long\n\n" + "\n\n".join(paragraphs), encoding="utf-8")
    return db


def _clean_of(vault: Path, tmp: Path, embedder) -> dict:
    from brainbot.indexer import Indexer

    db = tmp / "reference.db"
    with Indexer(db, embedder=embedder) as ix:
        ix.index_paths([vault])
    return snapshot(db)


@contextlib.contextmanager
def mounted(*args: str, target: Path):
    target.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", *args, str(target)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount here ({r.stderr.strip() or 'not root'})")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def _fill(folder: Path, leave: int) -> Path:
    """Fill folder's filesystem until only ``leave`` bytes are free."""
    filler = folder / "filler"
    free = shutil.disk_usage(folder).free
    with open(filler, "wb") as f:
        with contextlib.suppress(OSError):
            f.write(b"\0" * max(0, free - leave))
    return filler


@pytest.mark.slow
def test_full_disk_refuses_cleanly_and_keeps_the_index(tmp_path, vault, indexed, shared_embedder):
    with mounted("-t", "tmpfs", "-o", "size=4m", "tmpfs", target=tmp_path / "small") as mnt:
        db = copy_db(indexed, mnt / "b.db")
        before, raw = snapshot(db), db.read_bytes()
        filler = _fill(mnt, leave=96 * 1024)  # room for the -shm file, not for the batch
        line = one_line_error(run_cli("index", vault, "--db", db))
        assert "disk full" in line and "free some space" in line
        assert db.read_bytes() == raw and snapshot(db) == before
        assert len(check_consistent(db)) == 3
        filler.unlink()
        assert run_cli("index", vault, "--db", db).returncode == 0
        assert snapshot(db) == _clean_of(vault, tmp_path, shared_embedder)


@pytest.mark.slow
def test_write_errors_refuse_cleanly_and_keep_the_index(tmp_path, vault, indexed, shared_embedder):
    """Write errors injected without root: RLIMIT_FSIZE caps every file the run writes
    (the WAL cannot grow past 64 KB), so write() fails with EFBIG mid-batch."""
    import resource

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (65_536, 65_536))

    before, raw = snapshot(indexed), indexed.read_bytes()
    result = run_cli("index", vault, "--db", indexed, preexec_fn=limit)
    line = one_line_error(result)
    assert "I/O error" in line or "disk full" in line
    assert indexed.read_bytes() == raw and snapshot(indexed) == before
    assert run_cli("index", vault, "--db", indexed).returncode == 0
    assert snapshot(indexed) == _clean_of(vault, tmp_path, shared_embedder)


@pytest.mark.slow
def test_immutable_db_file_refuses_cleanly(tmp_path, vault, indexed):
    """chmod 444 does not stop root; `chattr +i` does. Queries still work."""
    if subprocess.run(["chattr", "+i", str(indexed)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not possible here (not root, or the filesystem has no "
                    "immutable flag)")
    try:
        before, raw = snapshot(indexed), indexed.read_bytes()
        line = one_line_error(run_cli("index", vault, "--db", indexed))
        assert "read-only" in line and "chattr -i" in line
        assert indexed.read_bytes() == raw and snapshot(indexed) == before
        query = run_cli("query", "tomatoes", "--db", indexed, "--json", "--mode", "bm25")
        assert query.returncode == 0 and json.loads(query.stdout)
        (vault / "long.md").unlink()  # the vault as indexed: nothing to write, so no error
        assert run_cli("index", vault, "--db", indexed).returncode == 0
        assert indexed.read_bytes() == raw
    finally:
        subprocess.run(["chattr", "-i", str(indexed)], capture_output=True)


def test_read_only_mount_refuses_index_and_still_answers(tmp_path, vault, indexed):
    """A read-only bind mount: the index refuses with one line; queries still work (the
    file is read as immutable, since SQLite cannot create its -shm file there)."""
    folder = tmp_path / "dbs"
    folder.mkdir()
    original = copy_db(indexed, folder / "b.db")
    raw = original.read_bytes()
    with mounted("--bind", str(folder), target=tmp_path / "ro") as mnt:
        r = subprocess.run(["mount", "-o", "remount,ro,bind", str(mnt)], capture_output=True)
        if r.returncode != 0:
            pytest.skip("cannot remount read-only here")
        db = mnt / "b.db"
        line = one_line_error(run_cli("index", vault, "--db", db))
        assert "read-only" in line
        query = run_cli("query", "tomatoes sun", "--db", db, "--json")
        assert query.returncode == 0, query.stderr
        assert json.loads(query.stdout)[0]["path"] == "sub/beta.md"
    assert original.read_bytes() == raw and sorted(folder.iterdir()) == [original]


HOLD_SQLITE = r'''
import sys, sqlean
db = sqlean.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
sys.stdin.read()
db.execute("ROLLBACK")
'''
HOLD_WRITER = r'''
import sys
from brainbot.indexer import WriterLock
with WriterLock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
'''


@contextlib.contextmanager
def holding(script: str, db: Path):
    holder = subprocess.Popen([sys.executable, "-c", script, str(db)], cwd=REPO, env=cli_env(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)


@pytest.mark.slow
def test_db_locked_by_another_sqlite_writer(tmp_path, vault, indexed, shared_embedder,
                                            harness):
    """Another process inside BEGIN EXCLUSIVE: the index waits BRAINBOT_BUSY_TIMEOUT_MS,
    then refuses with one line and leaves the file alone; readers are not blocked. When
    the lock is released while the index waits, the index goes on and completes."""
    before, raw = snapshot(indexed), indexed.read_bytes()
    quick = cli_env(BRAINBOT_BUSY_TIMEOUT_MS="300")
    with holding(HOLD_SQLITE, indexed):
        line = one_line_error(run_cli("index", vault, "--db", indexed, env=quick))
        assert "locked by another process" in line and "try again" in line
        query = run_cli("query", "alpha project", "--db", indexed, "--json", "--mode", "bm25",
                        env=quick)
        assert query.returncode == 0 and "locked" not in query.stderr
    assert indexed.read_bytes() == raw and snapshot(indexed) == before
    with holding(HOLD_SQLITE, indexed):
        waiting = subprocess.Popen(
            [sys.executable, str(harness), "index", str(vault), "--db", str(indexed)],
            cwd=REPO, env=cli_env(BB_TEST_ANNOUNCE="1", BRAINBOT_BUSY_TIMEOUT_MS="600000"),
            stderr=subprocess.PIPE, text=True)
        assert waiting.stderr.readline().strip() == "bb-test: begin"  # now at BEGIN IMMEDIATE
        time.sleep(0.5)
        assert waiting.poll() is None  # still waiting for the lock, not failed
    _, err = waiting.communicate(timeout=900)
    assert waiting.returncode == 0, err
    assert snapshot(indexed) == _clean_of(vault, tmp_path, shared_embedder)


def test_db_held_by_another_indexer(vault, indexed):
    before, raw = snapshot(indexed), indexed.read_bytes()
    with holding(HOLD_WRITER, indexed):
        line = one_line_error(run_cli("index", vault, "--db", indexed))
        assert "another `brainbot index` is writing" in line
    assert indexed.read_bytes() == raw and snapshot(indexed) == before


def test_busy_timeout_override_is_validated(monkeypatch, tmp_path):
    from brainbot import store
    from brainbot.errors import InputError

    monkeypatch.setenv("BRAINBOT_BUSY_TIMEOUT_MS", "250")
    db = store.connect(tmp_path / "x.db")
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] == 250
    db.close()
    monkeypatch.setenv("BRAINBOT_BUSY_TIMEOUT_MS", "soon")
    with pytest.raises(InputError, match="BRAINBOT_BUSY_TIMEOUT_MS"):
        store.connect(tmp_path / "x.db")


# --- 5. foreign databases --------------------------------------------------------------------


@pytest.fixture(scope="module")
def base_index(tmp_path_factory, shared_embedder) -> tuple[Path, Path]:
    from brainbot.indexer import Indexer

    root = tmp_path_factory.mktemp("foreign")
    vault = root / "vault"
    vault.mkdir()
    (vault / "a.md").write_text("# Alpha\n\nThe alpha project ships in March.\n", "utf-8")
    (vault / "b.md").write_text("# Beta\n\nTomatoes need full sun.\n", "utf-8")
    db = root / "base.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    return db, vault


def _poke(db: Path, *sql: str) -> None:
    conn = connect(db)
    for statement in sql:
        conn.execute(statement)
    conn.close()


def _newer_schema(db):
    _poke(db, "PRAGMA user_version = 2")


def _other_model(db):
    _poke(db, "UPDATE meta SET value = 'intfloat/e5-small-v2' WHERE key = 'model'")


def _other_chunker(db):
    _poke(db, "UPDATE meta SET value = 'chunker0-max512' WHERE key = 'chunker'")


def _other_embedder(db):
    _poke(db, "UPDATE meta SET value = value || ':int8' WHERE key = 'embedder'")


def _truncated(fraction):
    def cut(db):
        data = db.read_bytes()
        db.write_bytes(data[: max(4096, int(len(data) * fraction) // 4096 * 4096)])
    return cut


def _not_sqlite(db):
    db.write_bytes(b"# My shopping list\n\n- eggs\n- milk\n" * 200)


def _random_bytes(db):
    db.write_bytes(np.random.default_rng(7).bytes(64 * 1024))


def _other_app(user_version, wal):
    def make(db):
        db.unlink()
        conn = connect(db)
        if wal:
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE recipes (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO recipes(name) VALUES ('gulasch')")
        conn.execute(f"PRAGMA user_version = {user_version}")
        conn.close()
    return make


FOREIGN = {
    "newer schema": (_newer_schema, "upgrade brainbot"),
    "other model": (_other_model, "--rebuild"),
    "other chunker": (_other_chunker, "--rebuild"),
    "other embedder": (_other_embedder, "--rebuild"),
    "truncated to 1 page": (_truncated(0), "--rebuild"),
    "truncated to half": (_truncated(0.5), "--rebuild"),
    "truncated to 90%": (_truncated(0.9), "--rebuild"),
    "not SQLite (text)": (_not_sqlite, "another --db"),
    "not SQLite (random)": (_random_bytes, "another --db"),
    "other app, rollback journal": (_other_app(0, wal=False), "another --db"),
    "other app, user_version 5": (_other_app(5, wal=False), "another --db"),
    "other app, WAL": (_other_app(3, wal=True), "another --db"),
}


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _main(capsys, *argv) -> subprocess.CompletedProcess:
    """cli.main in this process, as a CompletedProcess (cheaper than a subprocess)."""
    from brainbot.cli import main

    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(argv, code, out, err)


@pytest.mark.parametrize("case", list(FOREIGN))
def test_foreign_database_refused_untouched(case, base_index, tmp_path, capsys):
    make, fix = FOREIGN[case]
    src, vault = base_index
    folder = tmp_path / "dbs"
    folder.mkdir()
    db = copy_db(src, folder / "x.db")
    make(db)
    before = _listing(folder)
    line = one_line_error(_main(capsys, "index", vault, "--db", db))
    assert fix in line and str(db) in line, line
    assert _listing(folder) == before  # not a byte changed, no -wal/-shm left behind
    if case == "other model":  # a reader refuses vectors of another model
        one_line_error(_main(capsys, "query", "alpha", "--db", db))
        assert _listing(folder) == before
    if case in ("other model", "other chunker", "other embedder"):
        return  # status/doctor still describe such a file; the writer refuses it above
    for argv in (("query", "alpha", "--mode", "bm25"), ("status",), ("doctor",)):
        result = _main(capsys, *argv, "--db", db)
        assert result.returncode != 0
        if argv[0] != "doctor":
            one_line_error(result)
        assert _listing(folder) == before


def test_cli_index_refusal_in_a_real_process(base_index, tmp_path):
    """The same contract through `python -m brainbot`: exit status 1, one line, no
    traceback, file untouched."""
    src, vault = base_index
    db = copy_db(src, tmp_path / "x.db")
    _other_app(0, wal=False)(db)
    raw = db.read_bytes()
    line = one_line_error(run_cli("index", vault, "--db", db))
    assert "not a brainbot index" in line and db.read_bytes() == raw

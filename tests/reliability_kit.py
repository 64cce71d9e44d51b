"""Shared by the reliability tests: run the CLI in a subprocess, snapshot a database and
check its cross-table invariants."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import sqlean
from conftest import REPO

DIM_BYTES = 384 * 4

# Runs `brainbot` (cli.main) with test hooks read from the environment:
#   BB_TEST_BATCH=n        chunks per write transaction (indexer.BATCH_CHUNKS and _MAX_CHUNKS)
#   BB_TEST_KILL_AT=where:n  SIGKILL this process at the n-th
#        insert  document inserted (inside its batch's transaction, before COMMIT)
#        delete  document deleted (removal phase, or an updated note's old version)
#        commit  committed transaction (the identity write counts when there is one)
#        the semantic phase's points (its batches: BB_TEST_EMBED_BATCH):
#        vectors  semantic batch written (inside its transaction, before COMMIT)
#        vectors-commit  semantic batch committed (between two batches, lock held)
#        model    writer lock released for the model (between batches, no transaction)
#        swap     a rebuild's move, just before os.replace: the new file closed and whole,
#                 the old one's WAL checkpointed and its -wal and -shm unlinked
#   BB_TEST_EMBED_BATCH=n  chunks per semantic batch (indexer.EMBED_CHUNKS, and the
#                          watch's background BACKGROUND_EMBED_CHUNKS)
#   BB_TEST_HOLD_EMBED=k:PATH  the semantic phase runs k batches, then, each time it has
#        released the lock for the model, writes PATH.held and waits until PATH exists or
#        the run is stopped (a server's semantic phase held mid-way, without timing)
#   BB_TEST_HOLD_COMMIT=n:PATH  after the n-th commit, write PATH.held and wait until PATH
#        exists (an index held between two committed batches, without timing)
#   BB_TEST_PAUSE=s        sleep s seconds after each commit (stretches a run)
#   BB_TEST_ANNOUNCE=1     print "bb-test: begin" on stderr before each write transaction
#   BB_TEST_WORKERS=n      chunking processes (text/parallel.usable_cpus), whatever the host
#   BB_TEST_CHILDREN=PATH  before BB_TEST_KILL_AT kills, write this process's children's
#                          pids to PATH, one a line (the chunking workers, multiprocessing's
#                          resource tracker)
HOOKS = r'''
import os, signal, sys, time
from contextlib import contextmanager

import brainbot.index.indexer as ix
import brainbot.serve.background as background
from brainbot.store.sqlite import file as store
from brainbot.store.sqlite.store import SQLiteStore

if os.environ.get("BB_TEST_BATCH"):
    ix.BATCH_CHUNKS = ix.BATCH_MAX_CHUNKS = int(os.environ["BB_TEST_BATCH"])
if os.environ.get("BB_TEST_EMBED_BATCH"):
    ix.EMBED_CHUNKS = background.BACKGROUND_EMBED_CHUNKS = int(os.environ["BB_TEST_EMBED_BATCH"])
where, _, n = os.environ.get("BB_TEST_KILL_AT", "").partition(":")
hold_after, _, hold_path = os.environ.get("BB_TEST_HOLD_EMBED", "").partition(":")
hold_commit, _, hold_commit_path = os.environ.get("BB_TEST_HOLD_COMMIT", "").partition(":")
pause = float(os.environ.get("BB_TEST_PAUSE", "0"))
announce = bool(os.environ.get("BB_TEST_ANNOUNCE"))
seen = {"insert": 0, "delete": 0, "commit": 0, "vectors": 0, "vectors-commit": 0,
        "model": 0, "swap": 0}
in_tx = {"vectors": False}

if os.environ.get("BB_TEST_WORKERS"):
    import brainbot.text.parallel as parallel
    parallel.usable_cpus = lambda: int(os.environ["BB_TEST_WORKERS"])

def children():
    me, out = str(os.getpid()), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me:
            out.append(pid)
    return out

def tick(kind):
    seen[kind] += 1
    if kind == where and seen[kind] == int(n):
        if os.environ.get("BB_TEST_CHILDREN"):
            with open(os.environ["BB_TEST_CHILDREN"], "w") as f:
                f.write("".join(p + "\n" for p in children()))
        os.kill(os.getpid(), signal.SIGKILL)

insert = SQLiteStore.add_document
def _insert(self, *args, **kwargs):
    out = insert(self, *args, **kwargs)
    tick("insert")
    return out
SQLiteStore.add_document = _insert

delete = SQLiteStore.delete_documents
def _delete(self, ids):
    for doc_id in ids:
        delete(self, [doc_id])
        tick("delete")
SQLiteStore.delete_documents = _delete

add_vectors = SQLiteStore.add_vectors
def _add_vectors(self, rows):
    add_vectors(self, rows)
    in_tx["vectors"] = True
    tick("vectors")
SQLiteStore.add_vectors = _add_vectors

try:
    import brainbot.store.sqlite.rebuild as rebuild
except ImportError:  # a checkout from before atomic rebuilds: no such point
    rebuild = None
if rebuild is not None:
    quiesce = rebuild._quiesce
    def _quiesce(target):
        quiesce(target)
        tick("swap")
    rebuild._quiesce = _quiesce

release = ix.Indexer._release
def _release(self):
    release(self)
    tick("model")
    if hold_path and seen["model"] > int(hold_after):
        open(hold_path + ".held", "w").close()
        while not os.path.exists(hold_path) and not (self.stop and self.stop.is_set()):
            time.sleep(0.05)
ix.Indexer._release = _release

transaction = store.transaction
@contextmanager
def _transaction(db, **kwargs):
    if announce:
        print("bb-test: begin", file=sys.stderr, flush=True)
    in_tx["vectors"] = False
    with transaction(db, **kwargs):
        yield
    tick("commit")
    if in_tx["vectors"]:
        tick("vectors-commit")
    if hold_commit_path and seen["commit"] == int(hold_commit):
        open(hold_commit_path + ".held", "w").close()
        while not os.path.exists(hold_commit_path):
            time.sleep(0.05)
    if pause:
        time.sleep(pause)
store.transaction = _transaction
'''
# The guard: chunking workers are spawned, and a spawned process imports the main script
# again (as __mp_main__); without it each worker ran the CLI anew instead of chunking.
HARNESS = HOOKS + r'''
if __name__ == "__main__":
    from brainbot.cli import main
    sys.exit(main(sys.argv[1:]))
'''


def write_harness(folder: Path) -> Path:
    path = folder / "harness.py"
    path.write_text(HARNESS, encoding="utf-8")
    return path


def hooked_env(folder: Path, **hooks: str) -> dict[str, str]:
    """Environment variables that give every Python process started with them (a server
    spawned by the official MCP client, a `brainbot serve`) the harness's hooks, through
    a sitecustomize.py in ``folder``; ``hooks``: the BB_TEST_* settings."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(HOOKS, encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(folder), str(REPO), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path, **hooks}


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


def meta_value(db: Path, key: str) -> str | None:
    """One entry of an index's meta table (None when it has none)."""
    conn = sqlean.connect(str(db))
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    finally:
        conn.close()
    return row and row[0]


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
            # generation counts commits, so a resumed run's differs from a clean one's;
            # every index has an index_id of its own; languages counts the chunks written
            # in each language since the last rebuild (text/analyzers.py: counts only
            # grow, so an edited note's chunks count twice), history and not content
            "meta": db.execute("SELECT key, value FROM meta WHERE key NOT IN "
                               "('generation', 'index_id', 'languages') "
                               "ORDER BY key").fetchall(),
        }
    finally:
        db.close()


def check_consistent(db_path: Path, *, complete: bool = True) -> set[tuple]:
    """integrity_check and every cross-table invariant; returns the committed documents
    as (path, sha256, mtime_ns) rows. ``complete=False`` is an index a kill may have left
    between its two phases: chunks without a vector yet are allowed (nothing else is).

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

        if complete:
            assert count("SELECT count(*) FROM chunks WHERE id NOT IN "
                         "(SELECT chunk FROM embeddings)") == 0
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

"""Reliability, databases brainbot did not write (newer schema, other model or chunker,
truncated, not SQLite, another app's): each is refused with the fix named, untouched."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from reliability_kit import (
    connect,
    copy_db,
    one_line_error,
    run_cli,
)

# --- 5. foreign databases --------------------------------------------------------------------


@pytest.fixture(scope="module")
def base_index(tmp_path_factory, shared_embedder) -> tuple[Path, Path]:
    from brainbot.index.indexer import Indexer

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
    from brainbot.store.sqlite.file import SCHEMA_VERSION

    _poke(db, f"PRAGMA user_version = {SCHEMA_VERSION + 1}")


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

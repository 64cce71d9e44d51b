"""A moved vault (M8): `brainbot index` reports the old root's notes, kept; suggested
commands name only roots that exist; `brainbot index --prune` removes them, exactly."""

from __future__ import annotations

import json
import sqlite3

from pg_kit import store_snapshot
from reliability_kit import snapshot

from brainbot.cli import main
from brainbot.doctor import run_checks, status
from brainbot.index.freshness import missing_roots, out_of_date_note, present_roots
from brainbot.store.target import open_store

TABLES = ("documents", "chunks", "embeddings", "postings", "links", "tags")


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def counts(db) -> dict[str, int]:
    with sqlite3.connect(db) as con:
        out = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
        out["dated"] = con.execute("SELECT count(*) FROM documents WHERE date IS NOT NULL"
                                   ).fetchone()[0]
    return out


def test_a_moved_vault_is_reported_then_pruned(capsys, tmp_path, vault):
    (vault / "delta.md").write_text("---\ndate: 2024-05-01\ntags: [x]\n---\n# Delta\n\n"
                                    "See [[alpha]] about the migration.\n", encoding="utf-8")
    db = str(tmp_path / "m.db")
    assert run_cli(capsys, "index", str(vault), "--db", db)[0] == 0
    one = counts(db)
    moved = tmp_path / "Documents" / "notes"
    moved.parent.mkdir()
    vault.rename(moved)

    code, out, err = run_cli(capsys, "index", str(moved), "--db", db, "--json")
    assert code == 0
    old = vault.absolute().as_posix()
    assert json.loads(out)["missing_roots"] == {old: 4}
    assert counts(db) == {t: 2 * n for t, n in one.items()}  # kept: both copies
    code, _, err = run_cli(capsys, "index", str(moved), "--db", db)
    assert f"root {old} is not present: its 4 notes are kept; " \
           f"`brainbot index --prune --db {db}` removes them" in err

    with open_store(db) as store:  # what is suggested names only the present root
        assert missing_roots(store) == {old: 4}
        assert present_roots(store) == [moved.absolute().as_posix()]
        note = out_of_date_note(store)
        assert note and old not in note and note.endswith("--prune`")
    assert status(db)["missing_roots"][old]["notes"] == 4
    fixes = " ".join(c.get("fix", "") for c in run_checks(db))
    assert old not in fixes and "--prune" in fixes

    code, out, err = run_cli(capsys, "index", "--prune", "--db", db, "--json")
    assert code == 0
    result = json.loads(out)
    assert result["pruned_roots"] == {old: 4} and result["removed"] == 4
    assert result["missing_roots"] == {}
    assert counts(db) == one
    clean = tmp_path / "clean.db"
    assert run_cli(capsys, "index", str(moved), "--db", str(clean))[0] == 0
    assert snapshot(db) == snapshot(clean)
    assert store_snapshot(db) == store_snapshot(clean)  # roots, dates, tags, links too
    with open_store(db) as store:
        assert missing_roots(store) == {} and out_of_date_note(store) is None
    code, _, err = run_cli(capsys, "index", str(moved), "--db", db)
    assert "not present" not in err


def test_index_without_paths_needs_prune(capsys, tmp_path):
    code, _, err = run_cli(capsys, "index", "--db", str(tmp_path / "e.db"))
    assert code != 0 and "--prune" in err and "Traceback" not in err

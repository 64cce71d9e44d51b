"""`brainbot index --prune` on Postgres (M8): a moved vault's old root is reported, then
removed with everything it held; the same contract as on SQLite (tests/test_prune.py)."""

from __future__ import annotations

import json

from pg_kit import store_snapshot

from brainbot.cli import main
from brainbot.index.freshness import missing_roots, present_roots
from brainbot.store.target import open_store


def test_a_moved_vault_is_reported_then_pruned_on_postgres(capsys, pg_url, tmp_path, vault):
    (vault / "delta.md").write_text("---\ndate: 2024-05-01\ntags: [x]\n---\n# Delta\n\n"
                                    "See [[alpha]] about the migration.\n", encoding="utf-8")
    assert main(["index", str(vault), "--db", pg_url]) == 0
    moved = tmp_path / "moved"
    vault.rename(moved)
    old = vault.absolute().as_posix()
    capsys.readouterr()
    assert main(["index", str(moved), "--db", pg_url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["missing_roots"] == {old: 4}
    with open_store(pg_url) as store:
        assert missing_roots(store) == {old: 4}
        assert present_roots(store) == [moved.absolute().as_posix()]
        assert len(store.documents()) == 8
    assert main(["index", "--prune", "--db", pg_url, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["pruned_roots"] == {old: 4} and result["removed"] == 4
    clean = tmp_path / "clean.db"
    assert main(["index", str(moved), "--db", str(clean)]) == 0
    assert store_snapshot(pg_url) == store_snapshot(clean)

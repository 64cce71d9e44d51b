"""benchmarks/make_big_vault.py: deterministic, copy 0 verbatim, later copies differ, and a
folder it did not write is never overwritten."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest
from conftest import DATA, REPO, need_shared


def _module():
    spec = importlib.util.spec_from_file_location(
        "make_big_vault", REPO / "benchmarks" / "make_big_vault.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _digests(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*.md")}


def test_big_vault_is_deterministic_and_copies_differ(tmp_path):
    need_shared(DATA / "corpora")
    mbv = _module()
    notes = 1_800  # one whole copy (1,776 notes) and the start of the second
    first = mbv.build(tmp_path / "a", notes)
    second = mbv.build(tmp_path / "b", notes)
    assert first == second and first["notes"] == notes and first["copies"] == 2
    a, b = _digests(tmp_path / "a"), _digests(tmp_path / "b")
    assert a == b and len(a) == notes
    for original in sorted((DATA / "corpora" / "rust-book").rglob("*.md")):
        rel = original.relative_to(DATA / "corpora").as_posix()
        assert (tmp_path / "a" / "c0" / rel).read_bytes() == original.read_bytes()
    later = sorted(k for k in a if k.startswith("c1/"))
    changed = [k for k in later if a[k] != a["c0/" + k[3:]]]
    assert len(later) == 24 and len(changed) >= 20  # a note without prose may stay the same


def test_big_vault_refuses_a_foreign_folder(tmp_path):
    (tmp_path / "mine.md").write_text("keep me")
    with pytest.raises(SystemExit, match="MANIFEST"):
        _module().build(tmp_path, 10)
    assert (tmp_path / "mine.md").read_text() == "keep me"

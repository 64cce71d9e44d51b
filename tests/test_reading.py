"""Reading indexed notes back (index/reading.py): stale notes, several indexed folders
holding one path (ROOT::PATH), chunk-id counts, and what `get` refuses to read."""

from __future__ import annotations

import os

import pytest

from brainbot.cli import main
from brainbot.errors import InputError, NotFoundError
from brainbot.index.indexer import Indexer
from brainbot.index.links import note_links
from brainbot.index.reading import get_lines
from brainbot.search.searcher import Searcher
from brainbot.store.target import open_store


@pytest.fixture
def two_roots(tmp_path, shared_embedder):
    """Two indexed folders that both hold README.md and plan.md."""
    for name, words in (("work", "quarterly budget review"), ("home", "garden watering")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "README.md").write_text(f"# {name}\n\nThe {words} is due.\n\nSee [[plan]].\n")
        (folder / "plan.md").write_text(f"# Plan\n\nThe {name} plan.\n")
    db = tmp_path / "n.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([tmp_path / "work", tmp_path / "home"])
    return tmp_path, db


def test_get_of_a_changed_note_reads_its_current_lines_marked_stale(vault, tmp_path,
                                                                    shared_embedder, capsys):
    db = tmp_path / "n.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    note = vault / "alpha.md"
    with open_store(db) as store:
        assert get_lines(store, "alpha.md").stale is False
    note.write_text(note.read_text() + "\nA brand new closing line.\n")
    with open_store(db) as store:
        reading = get_lines(store, "alpha.md")
    assert reading.stale is True and reading.lines[-2][1] == "A brand new closing line."
    assert main(["get", "alpha.md", "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert "A brand new closing line." in out and "changed on disk" in err


def test_get_refuses_a_note_replaced_by_a_symlink_to_a_secret(vault, tmp_path,
                                                             shared_embedder):
    db = tmp_path / "n.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    secret = tmp_path / "secret.txt"
    secret.write_text("the launch code is 0000\n")
    (vault / "alpha.md").unlink()
    os.symlink(secret, vault / "alpha.md")
    with open_store(db) as store, pytest.raises(NotFoundError, match="no longer a note"):
        get_lines(store, "alpha.md")


@pytest.mark.parametrize("count", [0, -2])
def test_a_chunk_id_count_is_validated_like_a_path_count(examples_db, count):
    with open_store(examples_db) as store:
        chunk = next(iter(store.chunk_records()))["chunk_id"]
        assert len(get_lines(store, chunk).lines) > 1
        with pytest.raises(InputError, match="count must be at least 1"):
            get_lines(store, chunk, count)


def test_a_path_in_two_indexed_folders_is_refused_naming_both(two_roots):
    tmp, db = two_roots
    with open_store(db) as store:
        with pytest.raises(InputError) as refused:
            get_lines(store, "README.md")
        assert str(tmp / "work") in str(refused.value) and str(tmp / "home") in str(refused.value)
        work = get_lines(store, "work::README.md:3")
        home = get_lines(store, f"{tmp / 'home'}::README.md:3")
        assert work.root == str(tmp / "work") and "budget" in work.lines[0][1]
        assert home.root == str(tmp / "home") and "garden" in home.lines[0][1]
        with pytest.raises(NotFoundError):
            get_lines(store, "elsewhere::README.md")


def test_links_resolve_within_each_folder(two_roots):
    tmp, db = two_roots
    with open_store(db) as store:
        with pytest.raises(InputError, match="more than one indexed folder"):
            note_links(store, "plan")
        home = note_links(store, "home::plan")
    assert home["root"] == str(tmp / "home")
    assert [b["source"] for b in home["backlinks"]] == ["README.md"]


def test_hits_carry_their_root(two_roots, shared_embedder):
    tmp, db = two_roots
    with Searcher(db, embedder=shared_embedder) as s:
        hits = s.search("garden watering", 1, mode="bm25")
    assert hits[0].to_dict()["root"] == str(tmp / "home")


def test_line_zero_is_out_of_range_not_line_one(two_roots):
    """L21: `get PATH:0` read from line 1."""
    root, db = two_roots
    with open_store(db) as store:
        assert get_lines(store, "work::plan.md:1").lines[0] == (1, "# Plan")
        with pytest.raises(InputError, match="line 0 is out of range"):
            get_lines(store, "work::plan.md:0")

"""Vault-native: links and backlinks, tags, dates, filters, the migration that fills them,
and the language share, on both stores (SQLite, and Postgres from tests/pg_server.py).
examples/vault/expected.json was written by the vault's author, blind to the code: what
the tags, unresolved links and dates should be."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest
from conftest import REPO, CountingEmbedder, copy_tree

from brainbot.cli import main
from brainbot.errors import InputError, OlderSchemaError
from brainbot.index.indexer import Indexer
from brainbot.notes.vault import Resolver, parse_when
from brainbot.store.sqlite import file as sqlite_file
from brainbot.store.target import open_store

VAULT = REPO / "examples" / "vault"
EXPECTED = json.loads((VAULT / "expected.json").read_text(encoding="utf-8"))
NOTES = 88  # examples/vault/README.md, "Files"


STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="module", params=STORES)
def vault_db(request, tmp_path_factory, shared_embedder):
    """examples/vault indexed into each store by the indexer itself."""
    if request.param == "postgres":
        db = request.getfixturevalue("pg_url")
    else:
        db = tmp_path_factory.mktemp("vault") / "v.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        stats = ix.index_paths([VAULT])
    return db, stats


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def filtered(capsys, db, *options) -> set[str]:
    """Every note a query filter lets through: a vector query returns every chunk when k
    exceeds the chunk count (246 here), so its paths are the filter's notes with text."""
    code, out, err = run(capsys, "query", "anything", "--db", db, "--mode", "vector",
                         "-k", 1000, "--json", *options)
    assert code == 0, err
    return {h["path"] for h in json.loads(out)}


# examples/vault/README.md, "Tags": the notes tagged project/heron or project/kestrel.
PROJECT_NOTES = {
    "daily/2026-01-05.md", "daily/2026-03-09.md", "daily/2026-03-30.md", "daily/2026-04-07.md",
    "meta/Vault conventions.md", "work/Index.md", "work/meetings/2026-02-10 Heron kickoff.md",
    "work/meetings/2026-03-03 Stratavolt vendor call.md", "work/meetings/Weekly sync.md",
    "work/projects/Heron.md", "work/projects/Kestrel Dashboard.md"}


def test_tags_links_and_dates_match_what_the_author_intended(vault_db):
    db, _ = vault_db
    with open_store(db) as store:
        assert store.tag_counts() == EXPECTED["tags"]
        unresolved = sorted((x.source, x.target) for x in store.unresolved_links())
        dates = {d.path: [d.date, d.date_source] for d in store.documents()}
    assert unresolved == sorted(map(tuple, EXPECTED["unresolved_links"]))
    for path, expected in EXPECTED["dates"].items():
        assert dates[path] == expected, path
    undated = [p for p, (_, source) in dates.items() if p not in EXPECTED["dates"]]
    assert undated and all(dates[p][1] == "mtime" for p in undated)
    assert "health/Physio exercises.md" in EXPECTED["broken_front_matter"]


def test_resolution_follows_obsidian():
    r = Resolver(["home/Index.md", "work/Index.md", "home/Garden Plan.md", "a/b/Deep.md",
                  "Deep.md", "notes/other note.md"])
    assert r.resolve("home/Bathroom leak.md", "wikilink", "Index") == "home/Index.md"
    assert r.resolve("x.md", "wikilink", "work/Index") == "work/Index.md"
    assert r.resolve("x.md", "wikilink", "garden plan") == "home/Garden Plan.md"
    assert r.resolve("x.md", "wikilink", "Garden Plan.md") == "home/Garden Plan.md"
    assert r.resolve("x.md", "embed", "Deep") == "Deep.md"  # the shortest path
    assert r.resolve("a/b/y.md", "wikilink", "Deep") == "a/b/Deep.md"  # the same folder
    assert r.resolve("notes/z.md", "markdown", "other note.md") == "notes/other note.md"
    assert r.resolve("a/b/y.md", "markdown", "../../notes/other note.md") == \
        "notes/other note.md"
    assert r.resolve("x.md", "wikilink", "Nowhere") is None
    assert r.resolve("x.md", "wikilink", "") == "x.md"


def test_a_dot_starts_an_extension_only_for_attachments():
    from types import SimpleNamespace

    from brainbot.notes.inline import InlineMarkup
    from brainbot.notes.markdown import parse
    from brainbot.notes.vault import note_links

    text = ("[[Node.js]] [[v1.2 release]] [[John D. Smith]] [[2024.01.05]] [[Old.markdown]] "
            "![[photo.PNG]] [[scan.pdf|scan]] ![[Board.canvas]] [a](script.py) [b](other.md) "
            "[c](Other) [d](https://x.org/a.md)\n")
    parsed = parse(text)
    chunks = [SimpleNamespace(chunk_index=0, start_char=0, end_char=len(text))]
    found = note_links(InlineMarkup.of_note(parsed), parsed, chunks)
    assert [x.target for x in found] == ["Node.js", "v1.2 release", "John D. Smith",
                                         "2024.01.05", "Old.markdown", "other.md", "Other"]


def test_dotted_names_resolve_or_are_listed_unresolved(vault_db, capsys):
    db, _ = vault_db
    code, out, _ = run(capsys, "links", "Keyboard v2.1 build", "--db", db, "--json")
    report = json.loads(out)
    assert code == 0 and report["note"] == "home/Keyboard v2.1 build.md"
    assert sorted(x["target"] for x in report["outgoing"]) == ["Ines K. Varga", "Node.js"]
    assert [x["target"] for x in report["unresolved"]] == ["2026.04.18 group buy"]
    assert {b["source"] for b in report["backlinks"]} == {"work/Node.js.md",
                                                          "people/Ines K. Varga.md"}
    code, out, _ = run(capsys, "links", "Node.js", "--db", db, "--json")
    assert code == 0 and [b["source"] for b in json.loads(out)["backlinks"]] == [
        "home/Keyboard v2.1 build.md"]


def test_links_command_and_backlinks_in_get(vault_db, capsys):
    db, _ = vault_db
    code, out, _ = run(capsys, "links", "garden plan", "--db", db, "--json")
    report = json.loads(out)
    assert code == 0 and report["note"] == "home/Garden Plan.md"
    assert {b["source"] for b in report["backlinks"]} >= {"home/Index.md"}
    assert all("garden plan" in b["line_text"].lower() for b in report["backlinks"])
    code, out, _ = run(capsys, "links", "work/projects/Heron.md", "--db", db, "--json")
    heron = json.loads(out)
    assert [u["target"] for u in heron["unresolved"]] == ["Project Osprey"]
    assert heron["outgoing"] and heron["backlinks"]
    code, out, _ = run(capsys, "get", "home/Garden Plan.md:1:3", "--db", db)
    assert code == 0 and "Backlinks:" in out and "home/Index.md:" in out
    code, _, err = run(capsys, "links", "No Such Note", "--db", db)
    assert code == 1 and "no note named 'No Such Note'" in err


def test_tags_command_and_nested_tag_filter(vault_db, capsys):
    db, _ = vault_db
    code, out, _ = run(capsys, "tags", "--db", db, "--json")
    tags = {t["tag"]: t["notes"] for t in json.loads(out)}
    assert code == 0 and tags == EXPECTED["tags"]
    assert filtered(capsys, db, "--tag", "project") == PROJECT_NOTES  # nested: a/b under a
    assert filtered(capsys, db, "--tag", "#Project/Heron/") == PROJECT_NOTES - {
        "work/projects/Kestrel Dashboard.md"}
    assert filtered(capsys, db, "--tag", "project/heron", "--tag", "project/kestrel") == {
        "work/Index.md", "work/meetings/2026-02-10 Heron kickoff.md",
        "work/meetings/Weekly sync.md"}  # both tags
    code, out, _ = run(capsys, "query", "heron", "--db", db, "--tag", "project", "-k", "50",
                       "--json", "--mode", "bm25")
    assert code == 0 and {h["path"] for h in json.loads(out)} <= PROJECT_NOTES


def test_date_filters_and_relative_dates(vault_db, capsys):
    db, _ = vault_db
    code, out, _ = run(capsys, "query", "heron", "--db", db, "--since", "2026-02-01",
                       "--before", "2026-03-01", "-k", "20", "--json")
    hits = json.loads(out)
    assert code == 0 and hits
    assert all("2026-02-01" <= h["date"] < "2026-03-01" for h in hits)
    assert {h["date_source"] for h in hits} <= {"front_matter", "filename", "mtime"}
    with open_store(db) as store:  # undated notes carry their file's mtime: the clock's
        dates = {d.path: d.date for d in store.documents() if d.date_source == "mtime"}
    dates.update({p: d for p, (d, _) in EXPECTED["dates"].items()})
    assert filtered(capsys, db, "--since", "2026-02-01", "--before", "2026-03-01") == {
        p for p, d in dates.items() if "2026-02-01" <= d < "2026-03-01"}
    assert filtered(capsys, db, "--before", "2026-01-12") == {
        p for p, d in dates.items() if d < "2026-01-12"}
    today = dt.date(2026, 3, 31)
    assert parse_when("7d", today) == "2026-03-24"
    assert parse_when("3w", today) == "2026-03-10"
    assert parse_when("1m", today) == "2026-02-28"
    assert parse_when("1y", dt.date(2024, 2, 29)) == "2023-02-28"
    assert parse_when("2026-01-05") == "2026-01-05"
    for bad in ("yesterday", "2026-13-01", "5x", "", "3000y", "99999999d", "9" * 30 + "w"):
        with pytest.raises(InputError, match="YYYY-MM-DD"):
            parse_when(bad)
    code, out, err = run(capsys, "query", "heron", "--db", db, "--since", "3000y")
    assert code == 2 and out == "" and err.count("\n") == 1 and "year 1" in err


def test_linked_to_filter(vault_db, capsys):
    db, _ = vault_db
    code, out, _ = run(capsys, "links", "work/projects/Heron.md", "--db", db, "--json")
    report = json.loads(out)
    near = {x["target"] for x in report["outgoing"]} | {x["source"] for x in report["backlinks"]}
    with open_store(db) as store:
        near = {store.find_note(n).path for n in near}
    assert filtered(capsys, db, "--linked-to", "Heron") == near - {"work/projects/Heron.md"}
    code, out, _ = run(capsys, "query", "meeting", "--db", db, "--linked-to", "Heron",
                       "-k", "30", "--json", "--mode", "bm25")
    hits = json.loads(out)
    assert code == 0 and hits and {h["path"] for h in hits} <= near - {"work/projects/Heron.md"}


def test_language_share_is_warned_once_and_shown(vault_db, capsys):
    db, stats = vault_db
    assert 0.3 < stats.non_english < 0.7 and "look non-English" in stats.language_note
    code, out, _ = run(capsys, "status", "--db", db, "--json")
    assert code == 0 and json.loads(out)["non_english"] == round(stats.non_english, 4)
    code, out, _ = run(capsys, "doctor", "--db", db, "--json")
    model = {c["name"]: c for c in json.loads(out)["checks"]}["model"]
    assert model["detail"].startswith("all-MiniLM-L6-v2")
    if stats.non_english <= 0.5:  # mostly English: the English model suits it
        assert model["ok"] and "BM25 carries them" in model["detail"]
    else:
        assert not model["ok"] and "--rebuild --model multilingual-e5-small" in model["fix"]


def test_english_only_notes_do_not_warn(tmp_path, vault, shared_embedder):
    with Indexer(tmp_path / "e.db", embedder=shared_embedder) as ix:
        stats = ix.index_paths([vault])
    assert stats.language_note is None and stats.non_english == 0.0


def _as_schema_three(db) -> None:
    """Undo migrations 5 and 4 on a fresh index, as a file written before them would be."""
    conn = sqlite_file.connect(db)
    conn.executescript("""
        ALTER TABLE documents DROP COLUMN read_ns;
        DROP TABLE links; DROP TABLE tags;
        ALTER TABLE documents DROP COLUMN date; ALTER TABLE documents DROP COLUMN date_source;
        ALTER TABLE chunks DROP COLUMN english;
        DELETE FROM meta WHERE key = 'vault_refresh';
        PRAGMA user_version = 3;""")
    conn.close()


def test_migration_fills_links_tags_and_dates_without_re_embedding(tmp_path, shared_embedder,
                                                                  capsys):
    vault = copy_tree(VAULT, tmp_path / "vault")
    db = tmp_path / "old.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    _as_schema_three(db)
    with pytest.raises(OlderSchemaError, match="brainbot index"):
        open_store(db)
    code, _, err = run(capsys, "query", "garden", "--db", db)
    assert code == 1 and "run `brainbot index NOTES" in err and "not a brainbot index" not in err
    counting = CountingEmbedder(shared_embedder)
    with Indexer(db, embedder=counting) as ix:
        stats = ix.index_paths([vault])
    assert counting.texts == [] and stats.unchanged == NOTES and stats.new == 0
    with open_store(db) as store:
        assert store.tag_counts() == EXPECTED["tags"]
        assert sorted((x.source, x.target) for x in store.unresolved_links()) == \
            sorted(map(tuple, EXPECTED["unresolved_links"]))
        assert store.language_share()[1] == store.chunk_count()
        assert "vault_refresh" not in store.meta()
    os.utime(vault / "inbox.md")  # a later run is an ordinary incremental one
    with Indexer(db, embedder=counting) as ix:
        assert ix.index_paths([vault]).unchanged == NOTES and not ix.refreshing


@pytest.mark.parametrize("store", STORES)
def test_a_tag_too_long_to_keep_is_dropped_with_a_warning(store, request, tmp_path,
                                                           shared_embedder):
    """A 3,000-character tag (past Postgres's btree row limit) failed the whole batch on
    Postgres; it is dropped with a warning on both stores and the rest is indexed."""
    db = (request.getfixturevalue("pg_server").fresh_database("bb_vault_long_tags")
          if store == "postgres" else tmp_path / "t.db")
    vault = tmp_path / "v"
    vault.mkdir()
    import random
    import string

    rng = random.Random(20)  # letters and digits at random: nothing for TOAST to compress
    blob = "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(3000))
    (vault / "long.md").write_text(f"---\ntags: [ok, {blob}y]\n---\n# Long\n\nA pasted "
                                   f"blob #{blob}z and a #short tag.\n", encoding="utf-8")
    (vault / "other.md").write_text("# Other\n\nNothing odd here. #ok\n", encoding="utf-8")
    with Indexer(db, embedder=shared_embedder) as ix:
        stats = ix.index_paths([vault])
    assert stats.new == 2
    warned = [w.reason for w in stats.warnings if w.path == "long.md"]
    assert len(warned) == 2 and all("3,001 characters" in w and "dropped" in w for w in warned)
    with open_store(db) as store:
        assert store.tag_counts() == {"ok": 2, "short": 1}
        assert "longer than 100" in json.dumps(store.documents()[0].warnings)


@pytest.mark.parametrize("zone, evening_in_la, naive", [
    ("UTC0", "2026-01-06", "2026-01-05"), ("PST8", "2026-01-05", "2026-01-05"),
    ("JST-9", "2026-01-06", "2026-01-05")])
def test_dates_are_local_to_the_indexing_machine(zone, evening_in_la, naive, monkeypatch):
    """One meaning of local time: a front-matter date-time with an offset counts on the
    local date it falls on, as an mtime does; without an offset it counts as written."""
    import time

    from brainbot.notes.markdown import parse
    from brainbot.notes.vault import note_date

    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        def dated(value: str) -> str:
            return note_date(parse(f"---\ndate: {value}\n---\nx\n").front_matter, "x.md", 0)[0]

        assert dated("2026-01-05T23:30:00-08:00") == evening_in_la  # YAML's timestamp
        assert dated('"2026-01-05 23:30:00-08:00"') == evening_in_la  # quoted: a string
        assert dated("2026-01-05T23:30:00") == naive == dated("2026-01-05T23:30")
        assert dated("2026-01-05") == "2026-01-05"
        mtime = int(dt.datetime(2026, 1, 6, 7, 30, tzinfo=dt.timezone.utc).timestamp() * 1e9)
        assert note_date({}, "x.md", mtime)[0] == evening_in_la  # 23:30 the day before in LA
    finally:
        monkeypatch.undo()
        time.tzset()

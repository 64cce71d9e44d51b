"""`brainbot related`: the notes nearest a note by their chunk vectors, checked against a
brute-force numpy oracle, with --unlinked, a partly embedded index, the CLI (golden text,
JSON) and the MCP tool through the official client."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from brainbot.cli import main
from brainbot.errors import InputError, NotFoundError
from brainbot.index.indexer import Indexer
from brainbot.search.related import METHODS, related
from brainbot.store.target import open_store

GOLDEN = Path(__file__).parent / "data" / "golden"

NOTES = {
    "bread/sourdough.md": "# Sourdough\n\nFeed the sourdough starter twice a day with rye "
                          "flour and water. The dough proofs overnight in the fridge; bake "
                          "the loaf in a hot Dutch oven. See [[rye bread]].\n",
    "bread/rye bread.md": "# Rye bread\n\nA dense rye loaf from a sourdough starter. Mix the "
                          "rye flour, let the dough proof for four hours, bake the bread "
                          "slowly.\n",
    "bread/baguette.md": "# Baguette\n\nBaguettes need strong flour, a long cold proof of the "
                         "dough and steam in the oven so the crust of the bread cracks.\n",
    "garden/tomatoes.md": "# Tomatoes\n\nThe tomato seedlings want full sun and water every "
                          "evening; pinch out the side shoots. (Bread: [[sourdough]].)\n",
    "garden/beans.md": "# Beans\n\nRunner beans climb the canes on the allotment; dig compost "
                       "into the bed in spring and pick the pods young.\n",
}


def write_vault(root: Path) -> Path:
    for rel, text in NOTES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, shared_embedder):
    root = write_vault(tmp_path_factory.mktemp("related") / "vault")
    db = root.parent / "r.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([root])
    return db, root


def paths(report) -> list[str]:
    return [r.document.path for r in report.related]


def test_nearest_by_meaning_never_the_note_itself_links_marked(indexed):
    db, _ = indexed
    with open_store(db) as store:
        report = related(store, "sourdough", k=10)
    got = paths(report)
    assert "bread/sourdough.md" not in got and len(got) == 4
    assert set(got[:2]) == {"bread/rye bread.md", "bread/baguette.md"}
    linked = {r.document.path: r.linked for r in report.related}
    assert linked == {"bread/rye bread.md": True, "bread/baguette.md": False,
                      "garden/tomatoes.md": True, "garden/beans.md": False}
    assert report.partial_note is None
    assert all(-1.0 <= r.score <= 1.0 for r in report.related)
    assert [r.score for r in report.related] == sorted((r.score for r in report.related),
                                                       reverse=True)


def test_unlinked_hides_notes_linked_either_way(indexed):
    db, _ = indexed
    with open_store(db) as store:
        report = related(store, "bread/sourdough.md", k=10, unlinked=True)
        assert paths(report) == [p for p in paths(related(store, "sourdough", k=10))
                                 if p not in ("bread/rye bread.md", "garden/tomatoes.md")]
        assert not any(r.linked for r in report.related)
        # linked from tomatoes only (a backlink): hidden from tomatoes' list too
        assert "bread/sourdough.md" not in paths(related(store, "tomatoes", unlinked=True))


@pytest.mark.parametrize("method", METHODS)
def test_matches_a_brute_force_oracle(indexed, method):
    """Each other note's score is its best chunk's cosine with the note's mean vector
    (mean) or the best cosine over all chunk pairs (max), from the stored vectors."""
    db, _ = indexed
    with open_store(db) as store:
        docs = {d.id: d for d in store.documents()}
        vecs = {d: np.stack([v for _, v in store.document_vectors(d)]) for d in docs}
        for d, doc in docs.items():
            own = vecs[d]
            queries = own if method == "max" else [own.mean(0) / np.linalg.norm(own.mean(0))]
            want = {docs[o].path: max(float(np.max(m @ q)) for q in queries)
                    for o, m in vecs.items() if o != d}
            report = related(store, doc.path, k=10, method=method)
            got = {r.document.path: r.score for r in report.related}
            assert got.keys() == want.keys()
            for p in want:
                assert got[p] == pytest.approx(want[p], abs=1e-5)
            assert paths(report) == sorted(want, key=lambda p: (-want[p], p))


def test_k_and_bad_input(indexed):
    db, _ = indexed
    with open_store(db) as store:
        assert len(related(store, "sourdough", k=2).related) == 2
        with pytest.raises(InputError):
            related(store, "sourdough", k=0)
        with pytest.raises(InputError):
            related(store, "sourdough", method="median")
        with pytest.raises(NotFoundError):
            related(store, "no such note")


def partly_embedded(folder: Path, embedder) -> Path:
    """The vault indexed in ``folder``, then one more note indexed without its vector
    (5 of 6 chunks embedded): the index's path."""
    root = write_vault(folder / "vault")
    db = folder / "p.db"
    with Indexer(db, embedder=embedder) as ix:
        ix.index_paths([root])
    (root / "bread" / "focaccia.md").write_text(
        "# Focaccia\n\nOlive oil, a wet dough, dimples, rosemary and salt.\n", encoding="utf-8")
    with Indexer(db, embedder=embedder, embed=False) as ix:
        ix.index_paths([root])
    return db


def test_partial_index_says_so_and_uses_embedded_chunks(tmp_path, shared_embedder):
    db = partly_embedded(tmp_path, shared_embedder)
    with open_store(db) as store:
        report = related(store, "sourdough", k=10)
        assert "bread/focaccia.md" not in paths(report) and len(report.related) == 4
        assert report.partial_note and "of 6 chunks embedded" in report.partial_note
        assert report.to_dict()["partial"] == report.partial_note
        with pytest.raises(NotFoundError, match="no embedded chunks yet"):
            related(store, "focaccia")


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_text_golden_and_json(indexed, capsys):
    db, _ = indexed
    code, out, err = run_cli(capsys, "related", "sourdough", "--db", str(db), "-k", "3")
    assert code == 0 and err == ""
    masked = re.sub(r"score \d\.\d{4}", "score X", out)
    golden = GOLDEN / "related.txt"
    if os.environ.get("BRAINBOT_UPDATE_GOLDEN"):  # regenerate after a deliberate change
        golden.write_text(masked, encoding="utf-8")
    assert masked == golden.read_text(encoding="utf-8")
    code, out, _ = run_cli(capsys, "related", "sourdough", "--db", str(db), "--json",
                           "--unlinked")
    records = json.loads(out)
    assert code == 0 and [r["path"] for r in records] == ["bread/baguette.md",
                                                           "garden/beans.md"]
    assert {"path", "root", "title", "score", "linked", "stale", "chunk_id", "heading_path",
            "start_line", "end_line", "text"} == set(records[0])
    with open_store(db) as store:
        assert records == [r.to_dict() for r in related(store, "sourdough",
                                                        unlinked=True).related]


def test_cli_errors_are_one_line(indexed, capsys):
    db, _ = indexed
    code, out, err = run_cli(capsys, "related", "nowhere", "--db", str(db))
    assert code != 0 and out == "" and err.count("\n") == 1 and "nowhere" in err
    with pytest.raises(SystemExit):
        main(["related", "sourdough", "--db", str(db), "-k", "0"])
    capsys.readouterr()


def test_mcp_tool_through_the_official_client(indexed):
    from test_mcp import session

    db, _ = indexed

    async def body(s):
        tools = {t.name: t for t in (await s.list_tools()).tools}
        found = await s.call_tool("related", {"note": "sourdough", "k": 3})
        hidden = await s.call_tool("related", {"note": "sourdough", "unlinked": True})
        bad = await s.call_tool("related", {"note": "nowhere"})
        return tools, found, hidden, bad

    tools, found, hidden, bad = session(db, body)
    assert tools["related"].annotations.read_only_hint
    with open_store(db) as store:
        assert found.structured_content["related"] == [
            r.to_dict() for r in related(store, "sourdough", k=3).related]
    assert [r["path"] for r in hidden.structured_content["related"]] == [
        "bread/baguette.md", "garden/beans.md"]
    assert bad.is_error and "nowhere" in bad.content[0].text

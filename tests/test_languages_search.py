"""Search in any language, end to end: German and Japanese mini-vaults (tests/data/languages,
written for the project) where the English-only analyzer ranked an FAQ note first and the
per-language one finds the note that answers; the fusion weight by language; and indexes
from before per-language analysis, which keep working."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO

from brainbot.index.indexer import Indexer
from brainbot.model import records
from brainbot.search import weights
from brainbot.search.searcher import Searcher
from brainbot.text import analyzers, lexical

VAULTS = REPO / "tests" / "data" / "languages"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
# (question, the note that answers it): each one the English-only analyzer answered with
# another note first (checked by test_the_english_only_analyzer_missed_them).
QUESTIONS = {
    "de": [("Wie kann ich meine Küchenabfälle kompostieren?", "Kompost.md"),
           ("Wie oft muss ich die Fahrradkette ölen?", "Fahrrad.md")],
    "ja": [("ブレーキが効かないときはどうすればいいですか？", "自転車.md"),
           ("なすはどれくらい漬けておけばいいですか？", "ぬか漬け.md")],
}


def _english_only(monkeypatch) -> None:
    """Make the Indexer write as the code before per-language analysis did."""
    monkeypatch.setattr(Indexer, "_analyzer", lambda self: lexical.ANALYZER_VERSION)


def _index(db: Path, lang: str, **kw) -> None:
    with Indexer(db, embed=False, workers=1, **kw) as ix:
        ix.index_paths([VAULTS / lang])


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    """lang -> (English-only index, per-language index) of that mini-vault."""
    tmp = tmp_path_factory.mktemp("languages")
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        for lang in QUESTIONS:
            old, new = tmp / f"{lang}-old.db", tmp / f"{lang}-new.db"
            _index(new, lang)
            _english_only(mp)
            _index(old, lang)
            mp.undo()
            out[lang] = (old, new)
    return out


def _top(db: Path, question: str) -> str:
    with Searcher(db) as s:
        return s.search(question, 1, mode="bm25")[0].path


@pytest.mark.parametrize("lang", sorted(QUESTIONS))
def test_the_english_only_analyzer_missed_them(dbs, lang):
    for question, note in QUESTIONS[lang]:
        assert _top(dbs[lang][0], question) != note, question


@pytest.mark.parametrize("lang", sorted(QUESTIONS))
def test_the_per_language_analyzer_finds_them(dbs, lang):
    for question, note in QUESTIONS[lang]:
        assert _top(dbs[lang][1], question) == note, question


def test_a_compound_is_found_by_its_part(dbs):
    """'Abfall' is inside 'Küchenabfälle': the English analyzer has no term in common."""
    assert _top(dbs["de"][1], "Abfall") == "Kompost.md"
    with Searcher(dbs["de"][0]) as s:
        assert s.search("Abfall", 1, mode="bm25") == []


def test_the_index_records_its_languages(dbs):
    with Searcher(dbs["de"][1]) as s:
        assert s.store.meta()["analyzer"] == analyzers.VERSION
        assert set(s.languages()) == {"de"}
    with Searcher(dbs["ja"][1]) as s:
        assert set(s.languages()) == {"ja"}


def test_an_english_only_index_is_read_as_it_was_written(dbs):
    """Readers accept it and analyse its queries in English, as its notes were."""
    with Searcher(dbs["de"][0]) as s:
        assert s.store.meta()["analyzer"] == lexical.ANALYZER_VERSION
        assert s.languages() == {"en": 1}
        question = QUESTIONS["de"][0][0]
        assert s.query_terms(question) == lexical.query_terms(question)


def test_a_writer_keeps_an_english_only_index_english_until_a_rebuild(dbs, tmp_path):
    import shutil

    db = tmp_path / "old.db"
    shutil.copy(dbs["de"][0], db)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "Neu.md").write_text(
        "# Neu\n\nIch habe heute die Tomaten gegossen und die Beete gejätet.\n", "utf-8")
    with Indexer(db, embed=False, workers=1) as ix:  # no mismatch: it keeps the analyzer
        ix.index_paths([tmp_path / "notes"])
    with Searcher(db) as s:
        assert s.store.meta()["analyzer"] == lexical.ANALYZER_VERSION
        assert "languages" not in s.store.meta()
        assert s.search("ich", 1, mode="bm25")  # "ich" is a term: English rules
    _index(db, "de", rebuild=True)
    with Searcher(db) as s:
        assert s.store.meta()["analyzer"] == analyzers.VERSION
        assert set(s.languages()) == {"de"}
        assert s.search("ich", 1, mode="bm25") == []  # a German stop word now


# -- the fusion weight by language ------------------------------------------------------

def _weigh(monkeypatch, table: dict[str, float]) -> None:
    """all-MiniLM-L6-v2's record weighs its vector leg by ``table`` for this test."""
    weights_now = records.MINILM.vector_weight
    for lang in list(weights_now):
        monkeypatch.delitem(weights_now, lang)
    for lang, weight in table.items():
        monkeypatch.setitem(weights_now, lang, weight)


def test_vector_weight_follows_the_models_languages(monkeypatch):
    _weigh(monkeypatch, {"en": 1.0, "ja": 0.0, "zh": 0.0, "ko": 0.0, "*": 0.3})
    english = {"en": 100}
    assert weights.vector_weight(MINILM, "how long does the dough rest", english) == 1.0
    assert weights.vector_weight(MINILM, "ぬか床の作り方", english) == 0.0  # by script
    assert weights.vector_weight(MINILM, "sourdough", {"en": 50, "ja": 10}) == 1.0
    german = {"de": 100}
    assert weights.vector_weight(MINILM, "Kompost?", german) == 0.3
    # an English question over German notes: the model must match across them
    assert weights.vector_weight(MINILM, "how do I start a compost heap in the garden",
                                 german) == 0.3
    assert weights.vector_weight("another/model", "Kompost?", german) == 1.0


def test_hybrid_skips_the_embedding_when_the_vector_leg_weighs_nothing(
        counting, monkeypatch, tmp_path):
    db = tmp_path / "ja.db"
    with Indexer(db, embedder=counting, workers=1) as ix:
        ix.index_paths([VAULTS / "ja"])
    queried: list[str] = []
    monkeypatch.setattr(counting, "embed_query",
                        lambda text: queried.append(text) or counting.inner.embed_query(text))
    question, note = QUESTIONS["ja"][0]
    for weight in (0.0, 1.0):
        _weigh(monkeypatch, {"ja": weight, "*": 1.0})
        with Searcher(db, embedder=counting) as s:
            assert s.fusion_weights(question) == (1.0, weight)
            hits = s.search(question, 3)
            assert hits[0].path == note
            assert all((h.explain["vector_rank"] is None) == (weight == 0) for h in hits)
        assert queried == ([] if weight == 0 else [question])


def test_doctor_says_how_to_analyse_an_english_only_index_in_its_languages(dbs):
    from brainbot.doctor import run_checks

    old = {c["name"]: c for c in run_checks(dbs["de"][0])}
    assert "--rebuild analyses each note in its own language" in old["language"]["detail"]
    assert "database" not in old  # a writer may still write to it: no identity complaint
    new = {c["name"]: c for c in run_checks(dbs["de"][1])}
    assert "English rules" not in new["language"]["detail"]


def test_a_follow_up_is_searched_with_the_terms_of_the_index_languages(shared_embedder,
                                                                      tmp_path):
    from brainbot.ask import followup
    from brainbot.store.conversations import Turn

    db = tmp_path / "de.db"
    with Indexer(db, embedder=shared_embedder, workers=1) as ix:
        ix.index_paths([VAULTS / "de"])
    earlier = [Turn("Wie kann ich meine Küchenabfälle kompostieren?", "", "answer",
                    "extractive")]
    with Searcher(db, embedder=shared_embedder) as s:
        plan = followup.plan("Und wann setze ich den Haufen um?", earlier, s,
                             followup.Method(gate="always"))
        assert plan.follow_up and plan.terms is not None
        assert {"kuchenabfall", "hauf"} <= set(plan.terms)  # German stems, both turns'
        assert not {"ich", "und", "wie"} & set(plan.terms)  # German stop words
        assert followup.search(plan, s, 1)[0].path == "Kompost.md"

"""text/analyzers.py, text/cjk.py, text/compounds.py: BM25 terms per language, English
unchanged, and a query analysed in the languages it may be in."""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainbot.text import analyzers, cjk, compounds, lexical

FUZZ = settings(deadline=None, max_examples=300,
                suppress_health_check=[HealthCheck.too_slow])
# Words of several scripts and languages, joined by spaces and punctuation.
_WORDS = st.sampled_from(
    ["Küchenabfälle", "und", "the", "running", "café", "ёлка", "настроить", "プロキシ", "です",
     "ますか", "設定", "的", "如何", "프록시를", "ｶﾞｲﾄﾞ", "𠮷野家", "ß", "3dprinting", "x" * 45,
     "l'eau", "naïve", "ÆØÅ", "Ǆ", "ﹰ", "İstanbul", "groß", "", "\u0301", "123", "_"])
_TEXTS = st.one_of(st.text(max_size=80),
                   st.lists(_WORDS, max_size=12).map(" ".join),
                   st.lists(_WORDS, max_size=12).map("".join))
_LANGS = st.sampled_from([None, "en", "xx", *analyzers.SNOWBALL, *cjk.LANGUAGES])


@FUZZ
@given(_TEXTS, _LANGS)
def test_analysis_never_crashes_and_is_deterministic(text, lang):
    first = analyzers.analyze_as(text, lang)
    assert first == analyzers.analyze_as(text, lang)
    assert all(isinstance(t, str) and t for t in first)
    counts, length = analyzers.index_terms(text, lang)
    assert length == len(first) and sum(counts.values()) >= length


@FUZZ
@given(_TEXTS)
def test_english_is_the_english_analyzer_exactly(text):
    assert analyzers.analyze_as(text, "en") == lexical.analyze(text)
    assert analyzers.analyze_as(text, None) == lexical.analyze(text)
    assert analyzers.index_terms(text, "en") == lexical.term_frequencies(text)
    assert analyzers.query_terms(text, {"en": 10}) == lexical.query_terms(text)


@FUZZ
@given(st.lists(_TEXTS, min_size=1, max_size=4))
def test_the_english_only_analyzer_gives_every_chunk_english_terms(chunks):
    got = analyzers.note_analysis(" ".join(chunks), chunks, lexical.ANALYZER_VERSION)
    assert [g[:2] for g in got] == [lexical.term_frequencies(c) for c in chunks]
    assert {g[3] for g in got} == {"en"}


def test_english_notes_keep_their_terms_byte_for_byte():
    """Every English chunk of the sample notes gets the terms the English analyzer gave
    it; the only chunks analysed otherwise are the two paragraphs written in German and
    French inside English travel notes."""
    from brainbot.text import documents
    from brainbot.text.tokens import TokenCounter

    counter = TokenCounter()
    notes = sorted((REPO / "examples" / "notes").rglob("*.md"))
    assert len(notes) > 20
    foreign = []
    for path in notes:
        doc = documents.record("dataset:x", path.name, path.read_text(encoding="utf-8"))
        texts = [c.retrieval_text for c in documents.chunk(doc, counter).chunks]
        for text, got in zip(texts, analyzers.note_analysis(doc.text, texts)):
            if got[3] == "en":
                assert got[:2] == lexical.term_frequencies(text), path
            else:
                foreign.append((path.name, got[3]))
    assert sorted(foreign) == [("Berlin conference.md", "de"), ("Lyon & Annecy 2023.md", "fr")]


@pytest.mark.parametrize(("lang", "stop", "forms"), [
    ("de", "ich meine und die", ("Häuser", "Haus", "Hauses")),
    ("es", "los de una por", ("canciones", "canción")),
    ("fr", "les dans une sont", ("chevaux", "cheval")),
    ("it", "il sono della", ("libri", "libro")),
    ("nl", "het een naar", ("scholen", "school")),
    ("pt", "os uma para", ("livros", "livro")),
    ("sv", "och jag det", ("husen", "huset", "hus")),
    ("ru", "и не что", ("лесах", "лес", "леса")),
    ("da", "og jeg det", ("husene", "huset")),
    ("fi", "ja on se", ("taloissa", "talo")),
])
def test_each_language_has_its_stemmer_and_stop_words(lang, stop, forms):
    assert analyzers.analyze_as(stop, lang) == []
    stems = {tuple(analyzers.analyze_as(f, lang)) for f in forms}
    assert len(stems) == 1 and len(next(iter(stems))) == 1, stems
    assert analyzers.analyze_as(stop, "en") != []  # English keeps them: they are not its


def test_stems_fold_accents_so_queries_typed_without_them_match():
    assert analyzers.analyze_as("Küchenabfälle", "de") == analyzers.analyze_as(
        "Kuchenabfalle", "de")
    assert analyzers.analyze_as("café", "fr") == analyzers.analyze_as("cafe", "fr")


def test_numbers_and_identifiers_are_not_stemmed():
    assert analyzers.analyze_as("Version 3dprinting v2beta", "de") == [
        "version", "3dprinting", "v2beta"]


def test_german_compounds_give_ngram_terms_and_queries_match_them(monkeypatch):
    monkeypatch.setattr(compounds, "MODE", "ngrams")
    note, length = analyzers.index_terms("Küchenabfälle kommen in den Komposter.", "de")
    assert length == 3  # the n-grams do not lengthen the chunk
    assert {"#abfal", "#bfall", "#kuche"} <= set(note)
    query = analyzers.query_terms("Abfall?", {"de": 10})
    assert query["abfall"] == 1 and 0 < query["#abfal"] < 1
    assert set(query) & set(note) >= {"#abfal", "#bfall"}
    monkeypatch.setattr(compounds, "MODE", "none")
    assert not any(t.startswith(compounds.MARK)
                   for t in analyzers.index_terms("Küchenabfälle", "de")[0])


def test_japanese_grammar_is_not_a_term_and_words_are():
    terms = cjk.terms("設定画面からリセットできますか？", "ja")
    assert not {"ます", "すか", "か", "ら", "から"} & set(terms)
    assert {"設定", "画面", "リセ", "セッ", "ット"} <= set(terms)
    assert "ぬか" in cjk.terms("ぬか床", "ja")  # a hiragana word keeps its bigram
    assert cjk.terms("Python 勉強会", "ja") == ["python", "勉", "勉強", "強", "強会", "会"]


def test_chinese_drops_function_characters_but_keeps_their_bigrams():
    terms = cjk.terms("我的代理是什么", "zh")
    assert "的" not in terms and "是" not in terms
    assert {"代理", "的代", "什么"} <= set(terms)


def test_korean_keeps_the_english_analyzers_grams():
    assert cjk.terms("프록시를 설정", "ko") == lexical.analyze("프록시를 설정")


def test_a_chunk_takes_its_notes_language_unless_it_clearly_has_its_own():
    german = ["Ich habe den Sauerteig gestern gefüttert, und er ist über Nacht schön "
              "aufgegangen. Morgen backe ich das Brot, wenn die Küche warm genug ist.",
              "Danach wird der Teig gefaltet und kommt für zwei Stunden in den Kühlschrank, "
              "weil er dort langsamer geht und mehr Geschmack bekommt als sonst.",
              "Brot"]
    english = ("The starter doubled overnight, and it should be fed again before "
               "it is used for the bread in the morning, when the kitchen is warm.")
    chunks = [*german, english]
    got = analyzers.chunk_languages(" ".join(chunks), chunks)
    assert got == ["de", "de", "de", "en"]
    assert analyzers.chunk_languages("tiny", ["tiny"]) == ["en"]


def test_a_query_is_analysed_in_the_index_languages_it_may_be_in():
    index = {"de": 100, "en": 100}
    german = analyzers.query_terms("Wie kann ich meine Rosen schneiden?", index)
    assert set(german) == {"ros", "schneid", "#schne", "#chnei", "#hneid"}
    short = analyzers.query_terms("Rosen", index)  # too short to tell: German and English
    assert {"ros", "rosen"} <= set(short)
    assert all(v == 1 for t, v in short.items() if not t.startswith("#"))
    # a stop word of any language the query may be in is no term, though English keeps it
    assert "ich" not in analyzers.query_terms("ich Rosen", index)
    # a language of a few chunks only is left out unless the query is detected as it
    assert analyzers.query_terms("Rosen", {"en": 1000, "de": 3}) == lexical.query_terms("Rosen")


def test_index_languages_of_meta():
    assert analyzers.index_languages({}) == {"en": 1}
    old = {"analyzer": lexical.ANALYZER_VERSION, "languages": '{"de": 5}'}
    assert analyzers.index_languages(old) == {"en": 1}  # its notes were analysed English
    new = {"analyzer": analyzers.VERSION, "languages": '{"de": 5, "en": 2}'}
    assert analyzers.index_languages(new) == {"de": 5, "en": 2}
    broken = {"analyzer": analyzers.VERSION, "languages": "[1"}
    assert analyzers.index_languages(broken) == {"en": 1}
    assert analyzers.recorded_languages({"languages": '{"de": -1, "x": "y"}'}) == {}


def test_query_terms_weigh_a_term_found_twice_once():
    got = analyzers.query_terms("Python Python", {"de": 10, "en": 10})
    assert got["python"] == 2 and isinstance(got, Counter)

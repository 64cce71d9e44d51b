"""CJK and mixed-script text: exact spans and lines, the n-gram analyzer, `get`, and the
hybrid weighting of a CJK query."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainbot.notes.language import cjk_share, looks_english, mostly_cjk
from brainbot.text import lexical
from brainbot.text.chunking import ChunkParams, chunk_text

HAN = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
KANA = st.characters(min_codepoint=0x3040, max_codepoint=0x30FF)
HANGUL = st.characters(min_codepoint=0xAC00, max_codepoint=0xD7AF)
LATIN = st.sampled_from(list("abcxyz ABC.,!?0129"))
PUNCT = st.sampled_from(list("。！？、「」（）・ー\n\n# -*`|"))
MIXED = st.text(st.one_of(HAN, KANA, HANGUL, LATIN, PUNCT, st.just("😀")), max_size=600)
CJK_RUN = st.text(st.one_of(HAN, KANA, HANGUL), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MIXED)
def test_spans_and_lines_are_exact_in_mixed_scripts(counter, text):
    params = ChunkParams(target_tokens=40, min_tokens=8)
    for c in chunk_text(text, "混合.md", counter, params):
        assert text[c.start_char:c.end_char] == c.source_text
        assert c.start_line == text.count("\n", 0, c.start_char) + 1
        assert c.end_line == text.count("\n", 0, c.end_char) + 1
        assert c.retrieval_tokens <= 256


@given(CJK_RUN)
def test_bigrams_and_unigrams_of_a_run(run):
    run = run.lower()
    both = lexical.cjk_grams(run, (1, 2))
    assert [g for g in both if len(g) == 1] == list(run)
    bigrams = [g for g in both if len(g) == 2]
    assert bigrams == [run[i:i + 2] for i in range(len(run) - 1)]
    assert lexical.cjk_grams(run, (2,)) == (bigrams or [run])


@given(st.lists(CJK_RUN, min_size=1, max_size=5))
def test_analyze_keeps_runs_apart_and_is_deterministic(runs):
    text = " abc ".join(runs)
    terms = lexical.analyze(text)
    assert terms == lexical.analyze(text)
    assert ("abc" in terms) == (len(runs) > 1)
    for term in terms:  # no n-gram crosses the Latin word between two runs
        assert term == "abc" or any(term in r.lower() for r in runs)


def test_queries_match_bigrams_not_just_characters():
    note = lexical.term_frequencies("上海的小笼包很好吃")[0]
    query = lexical.query_terms("小笼包")
    assert {"小笼", "笼包"} <= set(query) and {"小笼", "笼包"} <= set(note)
    assert "笼包" not in lexical.term_frequencies("包子和笼子")[0]


def test_language_check():
    assert mostly_cjk("東京の古本屋めぐり") and not looks_english("東京の古本屋めぐり")
    assert cjk_share("Python 勉強会") == pytest.approx(3 / 9)
    assert looks_english("The starter is fed twice a day on the counter, and once a week "
                         "in the fridge when it is cold outside and I am away from home.")
    german = ("Gestern war ich mit meiner Schwester im Stadtpark spazieren. Die Bäume "
              "verlieren schon ihre Blätter, und es wird jeden Abend früher dunkel.")
    assert not looks_english(german)


def test_jamo_halfwidth_kana_and_ext_b_are_cjk():
    """Compatibility jamo (ㅋㅋ), halfwidth katakana and Ext B ideographs (𠮷) are CJK to
    both the script check and the analyzer (one range constant): bigrammed with their
    neighbours, and halfwidth kana folded to match fullwidth text."""
    assert lexical.analyze("ㅋㅋ 웃겨") == ["ㅋ", "ㅋㅋ", "ㅋ", "웃", "웃겨", "겨"]
    assert lexical.analyze("ｶﾞｲﾄﾞﾌﾞｯｸ") == lexical.analyze("ガイドブック")
    assert lexical.analyze("𠮷野家で") == ["𠮷", "𠮷野", "野", "野家", "家", "家で", "で"]
    assert lexical.analyze("ᄒᆞᆫ") == ["ᄒ", "ᄒᆞ", "ᆞ", "ᆞᆫ", "ᆫ"]  # conjoining jamo
    for text in ("ㅋㅋㅋ", "ｶﾀｶﾅ", "𠮷野家", "ᄒᆞᆫ글"):
        assert mostly_cjk(text) and not looks_english(text), text


@pytest.fixture(scope="module")
def cjk_db(tmp_path_factory, shared_embedder):
    from conftest import REPO

    from brainbot.index.indexer import Indexer

    db = tmp_path_factory.mktemp("cjk") / "v.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([REPO / "examples" / "vault" / "cjk"])
    return db


def test_get_is_exact_for_cjk_notes(cjk_db):
    from conftest import REPO

    from brainbot.index.reading import get_lines
    from brainbot.store.target import open_store

    path = "東京の古本屋めぐり.md"
    lines = (REPO / "examples" / "vault" / "cjk" / path).read_text(encoding="utf-8").split("\n")
    with open_store(cjk_db) as store:
        got = get_lines(store, f"{path}:3:4")
        assert not got.stale
        assert got.lines == [(n, lines[n - 1]) for n in range(3, 7)]
        row = next(iter(store.chunks([1]).values()))
        text = (REPO / "examples" / "vault" / "cjk" / row.path).read_text(encoding="utf-8")
        assert text[row.start_char:row.end_char] == row.text


def test_a_cjk_query_is_carried_by_bm25_and_not_embedded(cjk_db):
    from brainbot.search.searcher import Searcher

    class NoEmbedder:
        fingerprint = "none"

        def embed_query(self, text):
            raise AssertionError("a CJK query must not be embedded for hybrid search")

    with Searcher(cjk_db, embedder=NoEmbedder()) as s:
        hybrid = s.search("去南翔老店吃小笼包要排多久", 3)
        bm25 = s.search("去南翔老店吃小笼包要排多久", 3, mode="bm25")
    assert [h.chunk_id for h in hybrid] == [h.chunk_id for h in bm25]
    assert hybrid[0].path == "上海小吃.md"


def test_ask_in_cjk_is_judged_by_lexical_evidence_not_the_english_cosine(cjk_db,
                                                                        shared_embedder,
                                                                        monkeypatch):
    from brainbot.ask.agent import ask
    from brainbot.search.searcher import Searcher

    with Searcher(cjk_db, embedder=shared_embedder) as s:
        monkeypatch.setattr(s, "best_cosine", lambda qvec: 0.05)  # far under REFUSE_BELOW
        found = ask("福佑路上那家老陈生煎多少钱一两？", db=cjk_db, searcher=s)
        assert found.outcome != "not_found"
        assert any("12 元" in c.cited_text for c in found.citations)
        english = ask("How much is a ticket to the moon?", db=cjk_db, searcher=s)
        assert english.outcome == "not_found" and english.stop_reason == "weak_evidence"

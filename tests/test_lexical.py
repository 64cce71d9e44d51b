"""The BM25 analyzer: what becomes a term."""

from __future__ import annotations

import numpy as np

from brainbot.text import lexical


def test_lowercase_stop_words_and_stemming():
    assert lexical.analyze("The Running of the Dogs") == ["run", "dog"]


def test_accents_fold_for_latin_script_only():
    assert lexical.analyze("Kyōto") == lexical.analyze("Kyoto") == ["kyoto"]
    assert lexical.analyze("naïve café") == lexical.analyze("naive cafe")
    assert lexical.analyze("が") == ["が"]  # kana keep their voicing mark


def test_cjk_runs_are_characters_and_bigrams():
    assert lexical.analyze("醤油ダレ") == ["醤", "醤油", "油", "油ダ", "ダ", "ダレ", "レ"]


def test_idf_is_lucene_bm25_and_never_negative():
    got = lexical.idf(10, np.array([1, 10]))
    assert np.allclose(got, np.log1p((10 - np.array([1, 10]) + 0.5) / (np.array([1, 10]) + 0.5)))
    assert (got >= 0).all()


def test_terms_of_text_without_the_new_cjk_ranges_are_those_of_analyzer_v3():
    """Analyzer v4 widened the CJK ranges (language.CJK_RANGES); every other text keeps
    the terms v3 gave it: v3's tokenizer, kept here, over the sample notes."""
    import re

    from conftest import REPO

    old = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
    token, run = re.compile(rf"[{old}]+|[^\W_{old}]+"), re.compile(rf"[{old}]")

    def v3(text: str) -> list[str]:
        out = []
        for t in token.findall(text.lower()):
            if run.match(t):
                out.extend(lexical.cjk_grams(t))
            elif len(t) <= lexical.MAX_TERM_CHARS and t not in lexical.STOP_WORDS:
                out.extend([n] if (n := lexical._normalise(t)) else [])
        return out

    notes = sorted((REPO / "examples").rglob("*.md"))
    assert len(notes) > 100
    for note in notes:
        text = note.read_text(encoding="utf-8")
        assert lexical.analyze(text) == v3(text), note

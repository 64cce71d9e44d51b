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

"""benchmarks/tune_languages.py's choices for a model other than the default, and the final
per-language table of docs/benchmarks.md (benchmarks/language_tables.py): which languages
share a model's "*" weight, the question files --questions reads, the weight chosen over
them, and each model's share of English's hybrid hit@5 beside the no-flag model's."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import benchmark_modules

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def modules():
    return benchmark_modules("tune_languages", "language_tables")


def test_star_languages_are_those_the_record_does_not_name(modules):
    tune, _ = modules
    from brainbot.model.records import E5_SMALL, MINILM

    assert tune.star_languages(MINILM.vector_weight) == ("de", "es", "fr")
    assert tune.star_languages(E5_SMALL.vector_weight) == tune.LANGS


def test_all_questions_are_the_terms_and_plain_files_answerable_ones(modules):
    tune, _ = modules
    examples = ROOT / "examples"
    terms, plain, both = (tune.answerable(examples, "debian-reference", "de", q)
                          for q in ("terms", "plain", "all"))
    assert terms and plain and both == terms + plain
    assert all(q["answerable"] for q in both)
    assert {q["question"] for q in terms}.isdisjoint(q["question"] for q in plain)


def sweep(**by_lang):
    """A run's per-language result: its model and each weight's hybrid (hit@5, mrr@10)."""
    return {lang: {"model": "intfloat/multilingual-e5-small",
                   "weights": {w: {"hit@5": h, "mrr@10": m} for w, (h, m) in ws.items()}}
            for lang, ws in by_lang.items()}


def test_a_model_without_named_languages_takes_star_over_all_of_them(modules):
    tune, _ = modules
    low, high = ("0.5", "1.0")
    # ja alone prefers 0.5; over both 1.0 wins (1.5 hit@5 against 1.4)
    result = {"languages": sweep(en={low: (0.6, 0.5), high: (0.8, 0.7)},
                                 ja={low: (0.8, 0.7), high: (0.7, 0.6)})}
    chosen = tune.choices(result)
    assert chosen["weights"] == {"en": high, "ja": low, "*": high}
    assert chosen["weights_leave_one_out"]["ja"]["chosen_on_the_others"] == high


def result(hybrid: dict[str, float], bm25=0.5, vector=0.5) -> dict:
    return {"source": "debian-install", "languages": {
        lang: {"modes": {"bm25": {"hit@5": bm25}, "vector": {"hit@5": vector},
                         "hybrid": {"hit@5": h}}} for lang, h in hybrid.items()}}


def test_the_final_table_takes_each_language_s_no_flag_model(modules, monkeypatch):
    _, tables = modules
    monkeypatch.setattr(tables, "automatic_models",
                        lambda source, langs: {"en": "a", "de": "b"})
    runs = {"a": {"all": result({"en": 1.0, "de": 0.5})},
            "b": {"all": result({"en": 0.6, "de": 0.85})}}
    lines = tables._final_table(runs, ("terms", "all"))[0].splitlines()
    assert len(lines) == 4  # header, rule, en, de: "terms" is in no run and left out
    de = [c.strip() for c in lines[3].strip("|").split("|")]
    # a's share 0.5 / 1.0; b's 0.85 / 0.6; no flag: b's German over a's English, bold below 0.9
    assert de[:2] == ["de", "all"]
    assert de[5] == "0.50" and de[9] == "1.42"
    assert de[10:] == ["b", "**0.85**"]
    en = [c.strip() for c in lines[2].strip("|").split("|")]
    assert en[10:] == ["a", "1.00"]


def test_the_automatic_models_are_model_choice_s(modules):
    _, tables = modules
    got = tables.automatic_models("debian-install", ["en", "de"])
    assert got == {"en": "all-MiniLM-L6-v2", "de": "multilingual-e5-small"}

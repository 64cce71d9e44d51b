"""The multilingual evaluation sets (issue 41) are valid: every question file of
examples/questions-SOURCE-LANG.jsonl against its notes folder examples/languages/SOURCE/LANG,
and the six languages of a source against each other, checked by examples/check_questions.py
--languages. The checker's own cross-language checks are tested on a small made-up source,
so that a broken set cannot pass unseen."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest
from conftest import REPO

LANGUAGES = REPO / "examples" / "languages"
ROLES = {"debian-reference": "tuning", "debian-install": "test"}


def checker():
    spec = importlib.util.spec_from_file_location("check_questions",
                                                  REPO / "examples" / "check_questions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def quiet(*_args) -> None:
    pass


def test_every_multilingual_set_passes_the_checker():
    assert checker().check_languages(LANGUAGES, out=quiet) == []


@pytest.mark.parametrize("source,role", sorted(ROLES.items()))
def test_each_source_is_one_role_with_every_kind_of_question(source, role):
    """A tuning and a test set from two sources, in six languages, 30-40 questions each, with
    easy, medium and hard answerable questions and both kinds of unanswerable ones."""
    assert f"the **{role}** set" in (LANGUAGES / source / "SOURCE.md").read_text(encoding="utf-8")
    for lang in checker().LANGS:
        lines = (REPO / "examples" / f"questions-{source}-{lang}.jsonl").read_text(encoding="utf-8")
        qs = [json.loads(line) for line in lines.splitlines() if line.strip()]
        assert 30 <= len(qs) <= 40
        assert {q["difficulty"] for q in qs if q["answerable"]} == {"easy", "medium", "hard"}
        assert {q["kind"] for q in qs if not q["answerable"]} == {"near_miss", "off_topic"}
    assert sorted(p.name for p in LANGUAGES.iterdir() if p.is_dir()) == sorted(ROLES)


# --- the checker on a made-up source -------------------------------------------------------

QUESTIONS = {
    "en": "Where does the cat sleep?", "de": "Wo schläft die Katze?",
    "es": "¿Dónde duerme el gato?", "fr": "Où dort le chat ?",
    "ja": "猫はどこで寝ますか？", "zh": "猫在哪里睡觉？"}
HEADINGS = {"en": "Sleep", "de": "Schlaf", "es": "Sueño", "fr": "Sommeil", "ja": "睡眠", "zh": "睡觉"}


@pytest.fixture
def made_up(tmp_path):
    """examples/-like folder: languages/pets/LANG/{cat,dog}.md and questions-pets-LANG.jsonl."""
    source = tmp_path / "languages" / "pets"
    source.mkdir(parents=True)
    (source / "SOURCE.md").write_text("# pets\n", encoding="utf-8")
    for lang in QUESTIONS:
        (source / lang).mkdir()
        for pet in ("cat", "dog"):
            (source / lang / f"{pet}.md").write_text(f"# {pet}\n\n## {HEADINGS[lang]}\n\nbasket-42\n",
                                                     encoding="utf-8")
        write(tmp_path, lang, [{"question": QUESTIONS[lang], "expected": [f"cat.md#{HEADINGS[lang]}"],
                                "answerable": True, "answer_contains": ["basket-42"],
                                "difficulty": "easy", "lang": lang, "id": "pets-01"}])
    return tmp_path


def write(root, lang, questions) -> None:
    text = "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions)
    (root / f"questions-pets-{lang}.jsonl").write_text(text, encoding="utf-8")


def read(root, lang) -> list[dict]:
    text = (root / f"questions-pets-{lang}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def problems(root) -> list[str]:
    return checker().check_languages(root / "languages", out=quiet)


def test_a_sound_made_up_source_passes(made_up):
    assert problems(made_up) == []


def _other_id(q):
    q["id"] = "pets-02"


def _other_note(q):
    q["expected"] = ["dog.md"]  # a note of the set, but not the one en expects


def _english(q):
    q["question"] = QUESTIONS["en"]


def _wrong_lang(q):
    q["lang"] = "en"


def _harder(q):
    q["difficulty"] = "hard"


def _romaji(q):
    q["question"] = "Neko wa doko de nemasu ka?"


@pytest.mark.parametrize("lang,change,words", [
    ("zh", _other_id, "ids differ"),
    ("de", _other_note, "expected notes differ"),
    ("fr", _english, "is the English one"),
    ("es", _wrong_lang, "lang is 'en'"),
    ("ja", _harder, "difficulty 'hard'"),
    ("ja", _romaji, "without kana"),
])
def test_the_checker_finds_a_language_out_of_line(made_up, lang, change, words):
    qs = read(made_up, lang)
    change(qs[0])
    write(made_up, lang, qs)
    assert any(words in p and p.startswith("pets:") for p in problems(made_up)), problems(made_up)


def test_the_checker_finds_notes_that_differ_between_languages(made_up):
    shutil.copy(made_up / "languages/pets/en/cat.md", made_up / "languages/pets/en/bird.md")
    assert "pets: de: its notes differ from en's" in problems(made_up)


def test_the_checker_finds_a_heading_of_another_language(made_up):
    qs = read(made_up, "de")
    qs[0]["expected"] = ["cat.md#Sleep"]  # the English heading in the German notes
    write(made_up, "de", qs)
    assert any("no heading 'Sleep'" in p for p in problems(made_up))

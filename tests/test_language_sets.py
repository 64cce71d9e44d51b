"""The multilingual evaluation sets (issue 41) are valid: every question file of
examples/questions-SOURCE-LANG.jsonl (the "terms" set) and examples/questions-SOURCE-plain-LANG.jsonl
(the "plain" set, written blind in everyday words) against its notes folder
examples/languages/SOURCE/LANG, the six languages of a set against each other and the sets of
a source against each other, checked by examples/check_questions.py --languages. The
checker's own cross-language and cross-set checks are tested on a small made-up source, so
that a broken set cannot pass unseen."""

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


@pytest.mark.parametrize("source", sorted(ROLES))
def test_each_source_has_a_plain_set_of_30_answerable_questions_and_5_near_misses(source):
    """The plain sets' shape (examples/README.md): the same 35 questions in every language,
    30 answerable, most of them medium or hard, and 5 unanswerable near misses; their ids are
    their own (the benchmark's union of the two sets is keyed by id)."""
    terms = {q["id"] for q in questions(source, "", "en")}
    for lang in checker().LANGS:
        qs = questions(source, "-plain", lang)
        answerable = [q for q in qs if q["answerable"]]
        assert (len(qs), len(answerable)) == (35, 30)
        assert {q["kind"] for q in qs if not q["answerable"]} == {"near_miss"}
        assert sum(q["difficulty"] in ("medium", "hard") for q in answerable) >= 25
        assert all(q["answer_contains"] for q in answerable)  # `brainbot eval --answers` needs them
        assert not terms & {q["id"] for q in qs}


def questions(source: str, variant: str, lang: str) -> list[dict]:
    text = (REPO / "examples" / f"questions-{source}{variant}-{lang}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


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


def write(root, lang, questions, variant="") -> None:
    text = "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions)
    (root / f"questions-pets{variant}-{lang}.jsonl").write_text(text, encoding="utf-8")


def read(root, lang, variant="") -> list[dict]:
    text = (root / f"questions-pets{variant}-{lang}.jsonl").read_text(encoding="utf-8")
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


# --- a second, "plain" set beside the first -------------------------------------------------

PLAIN = {
    "en": "Where does my furry friend take a nap?", "de": "Wo hält mein Stubentiger sein Nickerchen?",
    "es": "¿Dónde se echa la siesta mi minino?", "fr": "Où mon matou fait-il la sieste ?",
    "ja": "うちの猫はどこで昼寝していますか？", "zh": "我家猫咪在哪儿打盹？"}


@pytest.fixture
def with_plain(made_up):
    """The made-up source with a plain set: the same question in everyday words, id pets-p01."""
    for lang in QUESTIONS:
        q = read(made_up, lang)[0] | {"question": PLAIN[lang], "id": "pets-p01", "difficulty": "hard"}
        write(made_up, lang, [q], "-plain")
    return made_up


def test_a_sound_plain_set_passes_and_is_checked(with_plain):
    assert problems(with_plain) == []
    qs = read(with_plain, "fr", "-plain")
    qs[0]["expected"] = ["cat.md#Sleep"]  # the English heading in the French notes
    write(with_plain, "fr", qs, "-plain")
    assert any("questions-pets-plain-fr.jsonl: " in p and "no heading 'Sleep'" in p
               for p in problems(with_plain)), problems(with_plain)


def test_the_checker_finds_a_plain_set_missing_a_language(with_plain):
    (with_plain / "questions-pets-plain-ja.jsonl").unlink()
    assert "pets: no questions-pets-plain-ja.jsonl" in problems(with_plain)


@pytest.mark.parametrize("lang,change,words", [
    ("zh", _other_id, "ids differ"),
    ("de", _other_note, "expected notes differ"),
    ("ja", _romaji, "without kana"),
])
def test_the_checker_finds_a_plain_language_out_of_line(with_plain, lang, change, words):
    qs = read(with_plain, lang, "-plain")
    change(qs[0])
    write(with_plain, lang, qs, "-plain")
    assert any(words in p and p.startswith(f"pets: plain: {lang}:") for p in problems(with_plain)), \
        problems(with_plain)


@pytest.mark.parametrize("field", ["id", "question"])
def test_the_checker_finds_a_question_in_both_sets(with_plain, field):
    for lang in QUESTIONS:
        qs = read(with_plain, lang, "-plain")
        qs[0][field] = read(with_plain, lang)[0][field]
        write(with_plain, lang, qs, "-plain")
    assert any("in both the terms and the plain set" in p for p in problems(with_plain)), \
        problems(with_plain)

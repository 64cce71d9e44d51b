"""notes/language.py: which language a text is in, from its script or its stop words, on
short and mixed texts; and the languages a query may be in."""

from __future__ import annotations

import pytest

from brainbot.notes import language

PROSE = {
    "en": "The starter is fed twice a day, and when it lives in the fridge it is fed once "
          "a week. It should double within eight hours.",
    "de": "Der Sauerteig wird zweimal am Tag gefüttert, und wenn er im Kühlschrank steht, "
          "nur einmal in der Woche. Er sollte sich in acht Stunden verdoppeln.",
    "es": "La masa madre se alimenta dos veces al día, y cuando vive en la nevera se "
          "alimenta una vez por semana. Debería duplicarse en ocho horas.",
    "fr": "Le levain est nourri deux fois par jour, et quand il vit au réfrigérateur, une "
          "fois par semaine. Il doit doubler en huit heures.",
    "it": "Il lievito madre si nutre due volte al giorno, e quando sta nel frigorifero una "
          "volta alla settimana. Dovrebbe raddoppiare in otto ore.",
    "nl": "Het zuurdesem wordt twee keer per dag gevoed, en als het in de koelkast staat "
          "maar één keer per week. Het moet binnen acht uur verdubbelen.",
    "pt": "O fermento natural é alimentado duas vezes por dia, e quando está na geladeira "
          "uma vez por semana. Ele deve dobrar em oito horas.",
    "sv": "Surdegen matas två gånger om dagen, och när den står i kylskåpet bara en gång "
          "i veckan. Den ska fördubblas på åtta timmar.",
    "ru": "Закваску кормят два раза в день, а когда она стоит в холодильнике, раз в неделю.",
    "zh": "酵头每天喂两次，放在冰箱里的时候每周喂一次，应该在八小时内翻倍。",
    "ja": "パン種は一日二回餌をやり、冷蔵庫に入れているときは週に一回でよい。八時間で二倍になる。",
    "ko": "발효종은 하루에 두 번 먹이를 주고, 냉장고에 있을 때는 일주일에 한 번 준다.",
}


@pytest.mark.parametrize("lang", sorted(PROSE))
def test_a_paragraph_is_named_its_language(lang):
    assert language.detect(PROSE[lang]) == lang


@pytest.mark.parametrize("text", ["Kompost?", "docker compose up", "soy milk", "", "1234",
                                  "README", "Prater Biergarten"])
def test_too_short_to_tell_is_none(text):
    assert language.detect(text) is None


def test_repeated_and_single_letter_stop_words_do_not_name_a_language():
    """A table of '95% CI' repeats Italian 'ci'; 'n.d.' holds French 'n' and 'd'."""
    table = "; ".join(f"HR = 0.{i}, 95% CI 0.8-1.{i}" for i in range(12))
    assert language.detect(table) is None
    assert language.detect("Using Plugins. (n.d.). Retrieved July 28, from the docs") in (None, "en")


def test_scripts_name_cjk_and_cyrillic_languages():
    assert language.script_language("プロキシの設定") == "ja"
    assert language.script_language("設定方法") == "zh"  # kanji alone reads as Chinese
    assert language.script_language("프록시 설정") == "ko"
    assert language.script_language("Как настроить") == "ru"
    # a few CJK characters in Latin text are no CJK text; a tenth of its letters is
    assert language.script_language("We met at the Python 勉強会 in Tokyo on Friday") is None
    assert language.script_language("apt-get install を実行する") == "ja"


def test_mixed_text_takes_the_language_with_most_evidence_by_a_margin():
    mixed = PROSE["de"] + " " + "The end."
    assert language.detect(mixed) == "de"
    half = PROSE["en"] + " " + PROSE["de"]
    assert language.detect(half) is None  # neither is twice the other


def test_stop_lists_are_snowballs():
    assert {"und", "ich", "nicht"} <= language.stop_words("de")
    assert {"и", "не"} <= language.stop_words("ru")
    assert language.stop_words("xx") == frozenset()
    for lang in (*language.LATIN_LANGUAGES, "ru"):
        assert len(language.stop_words(lang)) > 50, lang


def test_plausible_languages_of_a_query():
    among, main = ["de", "en", "ja"], ["de", "en", "ja"]
    assert language.plausible("Wie kann ich meine Rosen schneiden?", among, main) == ["de"]
    assert language.plausible("Kompost?", among, main) == ["de", "en"]  # Latin: not ja
    assert language.plausible("ぬか床", among, main) == ["ja"]
    # a minor language of the index is taken only when the query is detected as it
    assert language.plausible("soy milk", ["en", "es"], ["en"]) == ["en"]
    assert language.plausible("¿Cómo se alimenta la masa madre cuando está en la nevera?",
                              ["en", "es"], ["en"]) == ["es"]
    assert language.plausible("anything", ["en"]) == ["en"]


def test_an_ideograph_unknown_to_this_pythons_unicode_tables_is_still_cjk():
    """U+2EBE1 (CJK Extension I) is in CJK_RANGES but no word character to Python 3.11:
    a text of it alone once divided by zero letters (hypothesis found it)."""
    assert language.script_language("\U0002ebe1") == "zh"
    assert language.detect("\U0002ebe1 \U0002ebe1") == "zh"

"""The "Language constants" section of docs/benchmarks.md, from the JSON that
benchmarks/tune_languages.py writes: every per-language constant of issue 41, its variants
on the tuning set (where it was chosen) and on the test set (reported only); and the
"Languages: final figures" section, from benchmarks/bench_languages.py's runs named
after_MODEL: each model side by side, and what a user gets with no flag (the model
index/model_choice.py picks for each vault).

Nothing here measures anything; ``readme_tables.py`` calls ``section()`` and
``final_section()``.
"""

from __future__ import annotations

import json
from pathlib import Path

from markdown_tables import RESULTS, read_result, table
from tune_languages import REPO, answerable

GROUP_TITLES = {
    "snowball": "The Snowball stop words and stemmer of German, Spanish and French (text/"
                "analyzers.py). Not chosen by these figures: stop words are what keeps "
                "question words (ich, wie, meine) from ranking FAQ sections first, which "
                "the kept-aside set showed and these sets hold no FAQ to show. Without them "
                "BM25 is two questions of 96 ahead on the tuning set and three of 99 on the "
                "test set: the questions' own function words (sin, sans, ohne) match",
    "chunks": "A chunk's language: its note's alone, or its own when its stop words name it "
              "with this much evidence",
    "compounds": "German compounds (text/compounds.py)",
    "japanese": "Japanese runs (text/cjk.JapaneseRules)",
    "chinese": "Chinese function characters (text/cjk.py)",
}


def _pair(m: dict | None) -> str:
    return "—" if not m else f"{m['hit@5']:.3f} / {m['mrr@10']:.3f}"


def _mean(rows: list[dict]) -> dict | None:
    if not rows:
        return None
    return {k: sum(r[k] for r in rows) / len(rows) for k in ("hit@5", "mrr@10")}


def _analyzer_table(tuning: dict, test: dict) -> str:
    rows = []
    for lang in tuning["languages"]:
        a, b = tuning["languages"][lang], (test or {}).get("languages", {}).get(lang, {})
        rows.append([lang] + [_pair(x.get(k, {}).get(m)) for x in (a, b)
                              for k, m in (("english-only", "bm25"), ("default", "bm25"),
                                           ("default", "hybrid"))])
    return table(["language", "tuning: bm25 English-only", "tuning: bm25 per language",
                  "tuning: hybrid", "test: bm25 English-only", "test: bm25 per language",
                  "test: hybrid"], rows)


def _group_table(group: str, tuning: dict, test: dict | None) -> str:
    sets = [("tuning", tuning)] + ([("test", test)] if test else [])
    langs = [lang for lang, v in tuning["languages"].items() if group in v]
    variants = list(tuning["languages"][langs[0]][group])
    rows = []
    for name in variants:
        marks = [label for label, hit in (
            ("the tuning set's best", tuning["chosen_here"].get(group) == name),
            ("in use", tuning.get("in_use", {}).get(group) == name)) if hit]
        cells = []
        for _, data in sets:
            got = [data["languages"][lang][group][name]["bm25"]
                   for lang in langs if group in data["languages"].get(lang, {})]
            cells.append(_pair(_mean(got)))
        rows.append([f"**{name}** ({', '.join(marks)})" if marks else name] + cells)
    header = ["variant"] + [f"{label}: bm25 ({', '.join(langs)})" for label, _ in sets]
    return "\n".join([f"{GROUP_TITLES.get(group, group)}:", "", table(header, rows)])


def _weights_table(tuning: dict, test: dict | None) -> str:
    sets = [("tuning", tuning)] + ([("test", test)] if test else [])
    langs = list(tuning["languages"])
    weights = list(tuning["languages"][langs[0]]["weights"])
    rows = []
    for w in weights:
        rows.append([w] + [_pair(data["languages"].get(lang, {}).get("weights", {}).get(w))
                           for label, data in sets for lang in langs])
    header = ["vector weight"] + [f"{label} {lang}" for label, _ in sets for lang in langs]
    chosen = tuning["chosen_here"]
    lolo = "; ".join(
        f"{lang} left out: {v['chosen_on_the_others']} chosen on the others gives it "
        f"{_pair(v['its_hybrid'])}, its own best {_pair(v['its_own_best'])}"
        for lang, v in chosen.get("weights_leave_one_out", {}).items())
    return "\n".join([
        "The vector leg's weight in hybrid mode (all-MiniLM-L6-v2, search/weights.py), hybrid "
        f"hit@5 / MRR@10: the tuning set's best per language is "
        f"{', '.join(f'{k} {v}' for k, v in chosen['weights'].items())}; the table keeps "
        "en, ja and zh (and ko) and gives the others \"*\". Leave one language out: "
        f"{lolo}.", "",
        table(header, rows)])


def _model_weights(result: dict) -> str:
    """The vector weight sweep of another model's run (``tune_languages.py --model NAME
    --groups none``): chosen on its set, one row a weight."""
    langs = list(result["languages"])
    weights = list(result["languages"][langs[0]]["weights"])
    rows = [[w] + [_pair(result["languages"][lang]["weights"].get(w)) for lang in langs]
            for w in weights]
    chosen = result["chosen_here"]["weights"]
    counts = sorted({len(answerable(REPO / "examples", result["source"], lang,
                                    result["questions"])) for lang in langs})
    load = result.get("load_average_start", ["?"])[0], result.get("load_average_end", ["?"])[0]
    return "\n".join([
        f"The vector leg's weight for {result['model']} on the {result['set']} set "
        f"({result['source']}, {result['questions']} questions: "
        f"{'-'.join(map(str, counts))} answerable a language), hybrid hit@5 / MRR@10, its "
        f"vault indexed with it at int8 (`python benchmarks/tune_languages.py --set "
        f"{result['set']} --model {result['model']} --questions {result['questions']} "
        f"--groups none`, load {load[0]}–{load[1]}): the best per language "
        f"{'(chosen here)' if result['set'] == 'tuning' else '(reported only, never chosen on)'}"
        f" is {', '.join(f'{k} {v}' for k, v in chosen.items())} (ties go to the higher "
        "MRR@10; `\"*\"` is the best over all six).", "",
        table(["vector weight"] + langs, rows)])


def other_models() -> list[dict]:
    """The weight sweeps of models other than the default (language_constants_*_MODEL.json)."""
    found = [json.loads(p.read_text(encoding="utf-8"))
             for p in sorted(RESULTS.glob("language_constants_*.json"))]
    found.sort(key=lambda r: r["set"] != "tuning")  # where it was chosen, first
    return [r for r in found if r.get("model") not in (None, "all-MiniLM-L6-v2")]


def section() -> str:
    tuning = read_result("language_constants_tuning.json")
    if not tuning:
        return ""
    test = read_result("language_constants_test.json")
    parts = [
        "### Language constants",
        "`python benchmarks/tune_languages.py --set tuning` and `--set test` — every constant "
        "of per-language BM25 and fusion (issue 41), one variant at a time, on the "
        f"multilingual question sets: chosen on the tuning set ({tuning['source']}), "
        f"reported on the test set ({test['source'] if test else 'not run'}), never chosen "
        "there. Each language's vault indexed with all-MiniLM-L6-v2 at int8; a variant "
        "rebuilds the terms and keeps the vectors. hit@5 / MRR@10 over the answerable "
        "questions (32-33 a language): one question is 0.03 of hit@5, so most differences "
        "below are one or two questions.", "",
        _analyzer_table(tuning, test), ""]
    for group in GROUP_TITLES:
        if any(group in v for v in tuning["languages"].values()):
            parts += [_group_table(group, tuning, test), ""]
    parts.append(_weights_table(tuning, test))
    if test:
        other = test["chosen_here"]
        parts += ["", "What the test set alone would have chosen (leave one source out): "
                  + "; ".join(f"{k}: {v}" for k, v in other.items() if isinstance(v, str))
                  + "; weights " + ", ".join(f"{k} {v}" for k, v in other["weights"].items())
                  + "."]
    for result in other_models():
        parts += ["", _model_weights(result)]
    return "\n".join(parts)


FINAL_RUNS = {"all-MiniLM-L6-v2": "after_minilm", "multilingual-e5-small": "after_e5"}
TARGET_SHARE = 0.9  # the issue's: every language's hybrid hit@5 >= 0.9 x English's


def automatic_models(source: str, langs) -> dict[str, str]:
    """The model `brainbot index` takes with no --model for each vault of ``source``: what
    index/model_choice.choose_model gives a new index of it."""
    import tempfile

    from brainbot.index.model_choice import choose_model

    folder = RESULTS.parents[1] / "examples" / "languages" / source
    with tempfile.TemporaryDirectory() as tmp:
        return {lang: choose_model(str(Path(tmp) / f"{lang}.db"), [folder / lang]).record.name
                for lang in langs}


def _final_table(runs: dict[str, dict], questions: tuple[str, ...]) -> list[str]:
    """One set's rows: a language and question file a row; each model's bm25 / vector /
    hybrid hit@5 and share of English's hybrid; the no-flag model's share."""
    first = next(iter(runs.values()))
    langs = list(first["all"]["languages"])
    auto = automatic_models(first["all"]["source"], langs)
    header = ["language", "questions"] + [
        f"{m}: {col}" for m in runs for col in ("bm25", "vector", "hybrid", "share")] + [
        "no flag: model", "no flag: share"]
    rows = []
    for q in questions:
        if any(q not in r for r in runs.values()):
            continue
        english = {m: r[q]["languages"]["en"]["modes"]["hybrid"]["hit@5"]
                   for m, r in runs.items()}
        for lang in langs:
            cells = [lang, q]
            for m, r in runs.items():
                x = r[q]["languages"][lang]["modes"]
                cells += [f"{x[mode]['hit@5']:.3f}" for mode in ("bm25", "vector", "hybrid")]
                cells.append(f"{x['hybrid']['hit@5'] / english[m]:.2f}")
            own = runs.get(auto[lang], {}).get(q, {}).get("languages", {}).get(lang)
            base = runs.get(auto["en"], {}).get(q, {}).get("languages", {}).get("en")
            share = own["modes"]["hybrid"]["hit@5"] / base["modes"]["hybrid"]["hit@5"] \
                if own and base else None
            mark = "–" if share is None else (f"**{share:.2f}**" if share < TARGET_SHARE
                                              else f"{share:.2f}")
            rows.append(cells + [auto[lang], mark])
    return [table(header, rows)]


def final_section() -> str:
    """Each model's run on both sets (bench_languages.py --name after_MODEL) side by side."""
    text = []
    for set_name in ("tuning", "test"):
        runs = {}
        for model, name in FINAL_RUNS.items():
            found = {q: read_result(f"languages_{set_name}{'' if q == 'terms' else '_' + q}_{name}.json")
                     for q in ("terms", "plain", "all")}
            if all(found.values()):
                runs[model] = found
        if not runs:
            continue
        r = next(iter(runs.values()))["all"]
        loads = [f"{x['all']['load_average_start'][0]}–{x['all']['load_average_end'][0]}"
                 for x in runs.values()]
        text += ["", f"{set_name.capitalize()} set ({r['title']}; {r['role']}), int8, code "
                 f"{', '.join(x['all']['code'] for x in runs.values())}; "
                 f"{r['machine']['cpu']}, load {', '.join(loads)} "
                 f"(`languages_{set_name}[_plain|_all]_{{{','.join(FINAL_RUNS.values())}}}"
                 ".json`):", ""]
        text += _final_table(runs, ("terms", "plain", "all"))
    if not text:
        return ""
    return "\n".join([
        "### Languages: final figures (issue 41)",
        "`python benchmarks/bench_languages.py --set both --questions all --model MODEL "
        "--name after_MODEL` for all-MiniLM-L6-v2 (after_minilm) and multilingual-e5-small "
        "(after_e5): hit@5 per language, question file (terms, plain, and all: their union) "
        "and mode; \"share\" is hybrid hit@5 over English's with the same model. \"No flag\" "
        "is what a user gets from `brainbot index FOLDER`: the model index/model_choice.py "
        "picks for that vault (all-MiniLM-L6-v2 for English notes, multilingual-e5-small for "
        "mostly non-English ones), its hybrid hit@5 over English's no-flag figure; below the "
        f"issue's {TARGET_SHARE} in bold. The test set is the one that counts: nothing was "
        "chosen on it.", *text])

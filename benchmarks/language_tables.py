"""The "Language constants" section of docs/benchmarks.md, from the JSON that
benchmarks/tune_languages.py writes: every per-language constant of issue 41, its variants
on the tuning set (where it was chosen) and on the test set (reported only).

Nothing here measures anything; ``readme_tables.py`` calls ``section()``.
"""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
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


def _load(name: str):
    path = RESULTS / name
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _table(header: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


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
    return _table(["language", "tuning: bm25 English-only", "tuning: bm25 per language",
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
    return "\n".join([f"{GROUP_TITLES.get(group, group)}:", "", _table(header, rows)])


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
        _table(header, rows)])


def section() -> str:
    tuning = _load("language_constants_tuning.json")
    if not tuning:
        return ""
    test = _load("language_constants_test.json")
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
    return "\n".join(parts)

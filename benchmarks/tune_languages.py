"""Choose the per-language BM25 and fusion constants on the tuning set; report the test set.

The constants of issue 41's language side, each a choice between variants, measured per
language on the multilingual question sets (examples/languages, benchmarks/bench_languages.py):

  snowball   the Snowball stop words and stemmer of German, Spanish and French, each on
             or off (text/analyzers.py)
  compounds  German compound n-grams (text/compounds.py): none, or n-grams of n letters of
             words of at least INDEX_MIN letters, a query word's grams weighing QUERY_WEIGHT
  japanese   how a Japanese run becomes terms (text/cjk.JapaneseRules): split at script
             changes or not; hiragana as grams, bigrams, content bigrams, or dropped
  chinese    Chinese function characters dropped as single characters or kept
  chunks     whether a chunk is analysed in its note's language alone, or in its own when
             its stop words name it with at least CHUNK_MIN_EVIDENCE (notes/language.py)
  weights    the vector leg's weight per language for the index's model (model/records.py: vector_weight)

For each language the vault is indexed once (int8, with ``--model``, the default model when
not given); each variant then
rebuilds the index (its vectors are reused, only the terms change) and asks the set's
answerable questions, scoring hit@5 and MRR@10 with eval's matcher. The reference row
"english-only" is the analyzer before per-language analysis.

**The choice is made on the tuning set alone** (``--set tuning``: the best hit@5, MRR@10 to
break ties, over the languages the constant applies to); ``--set test`` measures the same
variants on the test set only to report them and how the choice carries over (a
leave-one-source-out check); the vector weight of the languages sharing "*" is also checked
leave-one-language-out (chosen on the others, scored on the one left out).

    python benchmarks/tune_languages.py --set tuning
    python benchmarks/tune_languages.py --set test
    python benchmarks/tune_languages.py --set tuning --model multilingual-e5-small \
        --questions all --groups none

``--questions`` takes the "terms" question files (the default, as the constants in use were
chosen), "plain" or "all" (both, as one set); ``--groups none`` measures the vector weights
alone. A run with ``--model`` or ``--questions`` other than the defaults writes
language_constants_SET[_QUESTIONS][_MODEL].json beside the others.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SETS = {"tuning": "debian-reference", "test": "debian-install"}
LANGS = ("en", "de", "es", "fr", "ja", "zh")
HIT_AT, K = 5, 10
VECTOR_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)
QUESTIONS = {"terms": ("terms",), "plain": ("plain",), "all": ("terms", "plain")}


def star_languages(table: dict[str, float]) -> tuple[str, ...]:
    """The languages of the sets that share a model's "*" weight: those its record's
    ``vector_weight`` does not name (de, es and fr for MiniLM; all six for e5)."""
    return tuple(lang for lang in LANGS if lang not in table)


def compound_variants() -> dict[str, dict]:
    out = {"none": {"MODE": "none"}}
    for n, low, weight in [(4, 8, 0.5), (5, 8, 0.5), (5, 10, 0.5), (5, 12, 0.5),
                           (5, 8, 0.25), (5, 8, 1.0), (6, 10, 0.5)]:
        out[f"ngrams n={n} min={low} w={weight}"] = {
            "MODE": "ngrams", "N": n, "INDEX_MIN": low, "QUERY_WEIGHT": weight}
    return out


def japanese_variants() -> dict[str, dict]:
    from brainbot.text.cjk import JapaneseRules

    out = {}
    for split in (True, False):
        for hira in ("grams", "bigrams", "content", "drop"):
            rules = JapaneseRules(split_scripts=split, hiragana=hira)
            out[f"{'split' if split else 'whole'} hiragana={hira}"] = {"JAPANESE": rules}
    return out


def chunk_variants() -> dict[str, dict]:
    return {"note alone": {"CHUNK_MIN_EVIDENCE": float("inf")},
            **{f"chunk at {e:g}": {"CHUNK_MIN_EVIDENCE": e} for e in (5.0, 10.0)}}


def snowball_variants() -> dict[str, dict]:
    return {"stop words and stemmer": {"SNOWBALL_STOP": "both", "SNOWBALL_STEM": True},
            "stop words from queries, stemmer": {"SNOWBALL_STOP": "query",
                                                 "SNOWBALL_STEM": True},
            "stemmer alone": {"SNOWBALL_STOP": "none", "SNOWBALL_STEM": True},
            "stop words alone": {"SNOWBALL_STOP": "both", "SNOWBALL_STEM": False},
            "neither": {"SNOWBALL_STOP": "none", "SNOWBALL_STEM": False}}


GROUPS = {  # name: (module, languages it applies to, variants)
    "snowball": ("brainbot.text.analyzers", ("de", "es", "fr"), snowball_variants),
    "chunks": ("brainbot.notes.language", LANGS, chunk_variants),
    "compounds": ("brainbot.text.compounds", ("de",), compound_variants),
    "japanese": ("brainbot.text.cjk", ("ja",), japanese_variants),
    "chinese": ("brainbot.text.cjk", ("zh",),
                lambda: {"drop function": {"ZH_DROP_FUNCTION": True},
                         "keep function": {"ZH_DROP_FUNCTION": False}}),
}


def score(db: Path, questions: list[dict], mode: str) -> dict:
    from brainbot.evaluate import score_question
    from brainbot.search.searcher import Searcher

    ranks = []
    with Searcher(db) as s:
        for q in questions:
            hits = s.search(q["question"], K, mode=mode)
            ranks.append(score_question(hits, q["expected"], K)["rank"])
    n = len(ranks)
    return {"hit@5": round(sum(1 for r in ranks if r and r <= HIT_AT) / n, 4),
            "mrr@10": round(sum(1 / r for r in ranks if r) / n, 4)}


def index(db: Path, vault: Path, embedder, rebuild: bool) -> None:
    from brainbot.index.indexer import Indexer

    with Indexer(db, embedder=embedder, rebuild=rebuild, workers=1) as ix:
        ix.index_paths([vault])


def patched(module_name: str, values: dict):
    """Set a module's constants; returns a function that puts them back."""
    import importlib

    module = importlib.import_module(module_name)
    saved = {k: getattr(module, k) for k in values}
    for k, v in values.items():
        setattr(module, k, v)
    return lambda: [setattr(module, k, v) for k, v in saved.items()]


def english_only(db: Path, vault: Path, embedder) -> None:
    from brainbot.index.indexer import Indexer
    from brainbot.text import lexical

    own = Indexer._analyzer
    Indexer._analyzer = lambda self: lexical.ANALYZER_VERSION
    try:
        index(db, vault, embedder, rebuild=True)
    finally:
        Indexer._analyzer = own


def run_language(lang: str, vault: Path, questions: list[dict], embedder, tmp: Path,
                 groups=tuple(GROUPS)) -> dict:
    """Every variant of ``groups`` that applies to ``lang``, bm25 and hybrid, and the weight
    sweep."""
    from brainbot.model.records import for_index

    db = tmp / f"{lang}.db"
    index(db, vault, embedder, rebuild=False)
    out: dict = {"vector": score(db, questions, "vector")}
    english_only(db, vault, embedder)
    out["english-only"] = {m: score(db, questions, m) for m in ("bm25", "hybrid")}
    index(db, vault, embedder, rebuild=True)  # this code's defaults
    out["default"] = {m: score(db, questions, m) for m in ("bm25", "hybrid")}
    for group, (module, langs, variants) in GROUPS.items():
        if lang not in langs or group not in groups:
            continue
        out[group] = {}
        for name, values in variants().items():
            restore = patched(module, values)
            try:
                index(db, vault, embedder, rebuild=True)
                out[group][name] = {m: score(db, questions, m) for m in ("bm25", "hybrid")}
            finally:
                restore()
        index(db, vault, embedder, rebuild=True)
    from brainbot.search.searcher import Searcher

    with Searcher(db) as s:
        model = s.store.meta().get("model")
    out["model"], out["weights"] = model, {}
    table = for_index({"model": model}).vector_weight  # the index's model's record
    saved = dict(table)
    for w in VECTOR_WEIGHTS:
        table.clear()
        table["*"] = w
        try:
            out["weights"][str(w)] = score(db, questions, "hybrid")
        finally:
            table.clear()
            table.update(saved)
    return out


def best(scores: dict[str, dict], langs, mode: str) -> str:
    """The variant with the best mean hit@5 over ``langs`` (MRR@10 breaks ties)."""
    def key(name):
        rows = [scores[lang][name][mode] for lang in langs]
        return (sum(r["hit@5"] for r in rows), sum(r["mrr@10"] for r in rows))

    names = list(scores[langs[0]])
    return max(names, key=key)


def in_use() -> dict[str, str]:
    """Each group's variant whose values are the code's own constants now."""
    import importlib

    out = {}
    for group, (module_name, _, variants) in GROUPS.items():
        module = importlib.import_module(module_name)
        for name, values in variants().items():
            if all(getattr(module, k) == v for k, v in values.items()):
                out[group] = name
    return out


def choices(result: dict) -> dict:
    """What the set's figures choose: each group's variant (by bm25, the leg it changes),
    each language's vector weight, and "*" left one language out at a time."""
    per_lang = result["languages"]
    from brainbot.model.records import for_index

    out = {}
    for group, (_, langs, _) in GROUPS.items():
        present = [lang for lang in langs if lang in per_lang and group in per_lang[lang]]
        if present:
            out[group] = best({lang: per_lang[lang][group] for lang in present}, present, "bm25")
    sweep = {lang: {w: {"hybrid": v} for w, v in per_lang[lang]["weights"].items()}
             for lang in per_lang}
    out["weights"] = {lang: best({lang: sweep[lang]}, [lang], "hybrid") for lang in per_lang}
    models = {per_lang[lang]["model"] for lang in per_lang}
    table = for_index({"model": models.pop()}).vector_weight if len(models) == 1 else {}
    star = [lang for lang in star_languages(table) if lang in per_lang]
    if star:
        out["weights"]["*"] = best(sweep, star, "hybrid")
        out["weights_leave_one_out"] = {
            lang: {"chosen_on_the_others": (w := best(sweep, [x for x in star if x != lang],
                                                        "hybrid")),
                   "its_hybrid": sweep[lang][w]["hybrid"],
                   "its_own_best": sweep[lang][best(sweep, [lang], "hybrid")]["hybrid"]}
            for lang in star if len(star) > 1}
    return out


def answerable(examples: Path, source: str, lang: str, questions: str) -> list[dict]:
    """The answerable questions of ``lang``'s question files named by ``questions``."""
    from brainbot.evaluate import load_questions

    spec = importlib.util.spec_from_file_location("check_questions",
                                                  examples / "check_questions.py")
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    files = [examples / checker.QUESTION_SETS[name].format(source=source, lang=lang)
             for name in QUESTIONS[questions]]
    return [q for f in files for q in load_questions(f) if q["answerable"]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", choices=sorted(SETS), default="tuning")
    ap.add_argument("--langs", default=",".join(LANGS))
    ap.add_argument("--examples", default=str(REPO / "examples"),
                    help="the folder holding languages/ and the question files")
    ap.add_argument("--model", default=None,
                    help="the model the indexes embed with (default: the default model)")
    ap.add_argument("--questions", choices=sorted(QUESTIONS), default="terms",
                    help="which question files: terms (default), plain, or all (both as one set)")
    ap.add_argument("--groups", default=",".join(GROUPS),
                    help=f"the variant groups to measure (default {','.join(GROUPS)}; 'none': "
                         "the vector weights alone)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from brainbot.model.embed import Embedder
    from brainbot.model.records import DEFAULT, record

    groups = tuple(g for g in args.groups.split(",") if g in GROUPS)
    source, examples = SETS[args.set], Path(args.examples)
    model = record(args.model)
    embedder = Embedder("int8", model=model)
    result = {"set": args.set, "source": source, "model": model.name,
              "questions": args.questions, "groups": list(groups), "host": platform.node(),
              "cpu": platform.processor() or platform.machine(),
              "load_average_start": [round(x, 2) for x in os.getloadavg()], "languages": {}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for lang in args.langs.split(","):
            questions = answerable(examples, source, lang, args.questions)
            result["languages"][lang] = run_language(
                lang, examples / "languages" / source / lang, questions, embedder, Path(tmp),
                groups)
            print(lang, json.dumps(result["languages"][lang]), flush=True)
    result["chosen_here"] = choices(result)
    result["in_use"] = in_use()
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    suffix = ("" if args.questions == "terms" else f"_{args.questions}") + \
        ("" if model.name == DEFAULT else f"_{model.name}")
    out = Path(args.out or REPO / f"benchmarks/results/language_constants_{args.set}{suffix}.json")
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(result["chosen_here"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Follow-up questions, offline: does the gold note come up alone, and within its conversation?

Runs ``brainbot eval --sets examples/sets.json -k 5`` on the manifest's conversation sets
with the method ``ask/followup.py`` ships (DEFAULT), each on its corpus's index
(``--db NAME=PATH`` reuses one, else the eval cache's), and writes
benchmarks/results/eval_followups.json: each set with its role, tuning or test, and each
role pooled. docs/benchmarks.md's "Follow-up questions" tables and the README's headline row
are made from it.

``--methods`` races the ways of reading a follow-up on the TUNING sets only and writes
benchmarks/results/eval_followups_methods.json: every method's figures per set, and for
each constant DEFAULT sets, the value chosen on all tuning corpora but one and how it does
on the one left out. The test sets are run with DEFAULT for their figures and, beside it,
with the two methods the issue compared (each earlier question weighted by itself, until
issue 43, and plain joining of the last question): for comparison, nothing is chosen on
them.

No API key is used: the answers are the offline (extractive) ones.

    python benchmarks/bench_followups.py [--role tuning|test] [--methods] [--db NAME=PATH ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "examples/sets.json"
K = 5


GATES = ("closer", "cue", "both", "either", "always")


def label(m) -> str:
    """A method's name in the tables; the shipped one says so."""
    from brainbot.ask.followup import DEFAULT, OWN_TERMS, UNTIL_43

    if m == UNTIL_43:
        return "until issue 43: each earlier question weighted by itself, 0.5 / 0.25, no gate"
    if m.concat:
        what = "the last question" if m.context == "last" else "the topic"
        return f"plain joining of {what} and the question, gate {m.gate}"
    name = f"topic block {m.terms:g}, gate {m.gate}" + (
        f", own terms {m.own_terms}" if m.own_terms != OWN_TERMS else "")
    return name + (" (shipped)" if m == DEFAULT else "")


def methods() -> dict:
    """The ways raced on the tuning sets, DEFAULT first."""
    from dataclasses import replace

    from brainbot.ask.followup import DEFAULT, UNTIL_43, Method

    out = [DEFAULT, UNTIL_43, Method(concat=True, context="last", gate="always"),
           replace(DEFAULT, concat=True)]
    out += [replace(DEFAULT, terms=w, vector=w) for w in WEIGHTS]
    out += [replace(DEFAULT, gate=g) for g in GATES]
    out += [replace(DEFAULT, gate="cue", own_terms=n) for n in OWN]
    return {label(m): m for m in dict.fromkeys(out)}


WEIGHTS = (0.25, 0.5, 0.75, 1.0)
OWN = (1, 3)  # with the cue gate, beside its 2


def families() -> dict:
    """The constants DEFAULT sets, each with the methods that differ from it only there."""
    from dataclasses import replace

    from brainbot.ask.followup import DEFAULT

    return {"CONTEXT_WEIGHT": {w: label(replace(DEFAULT, terms=w, vector=w)) for w in WEIGHTS}}


def score(results: list[dict]) -> tuple[int, int]:
    """(follow-ups found within, questions that should stand alone found: first questions
    inside another conversation and new topics), pooled over ``results``."""
    def found(group: dict) -> int:
        return round(group.get("found", 0) * group.get("n", 0))

    return (sum(found(r["follow_ups"]["within"]) for r in results),
            sum(found(r["first"]["inside_unrelated"]) + found(r["shifts"]["within"])
                for r in results))


def counted(results: list[dict]) -> tuple[int, int]:
    """How many follow-ups, and questions that should stand alone, ``score`` counts."""
    return (sum(r["follow_ups"]["within"]["n"] for r in results),
            sum(r["first"]["inside_unrelated"]["n"] + r["shifts"]["within"]["n"]
                for r in results))


def _found(raced: dict, corpus_of: dict, label: str, corpora: set) -> tuple[int, int]:
    return score([by[label] for s, by in raced.items() if corpus_of[s] in corpora])


def leave_one_out(raced: dict, corpus_of: dict) -> dict:
    """For each constant: the value chosen on the other tuning corpora (most found, both
    kinds counted; ties to the smaller value) and its figures on the one left out."""
    corpora = set(corpus_of.values())
    out = {}
    for name, family in families().items():
        rows = []
        for left in sorted(corpora):
            chosen = max(sorted(family), key=lambda v: sum(
                _found(raced, corpus_of, family[v], corpora - {left})))
            there = {v: _found(raced, corpus_of, family[v], {left}) for v in family}
            of = counted([by[family[chosen]] for s, by in raced.items()
                          if corpus_of[s] == left])
            rows.append({"left_out": left, "chosen": chosen, "found": there[chosen],
                         "of": of, "best_there": max(sum(f) for f in there.values())})
        out[name] = rows
    return out


def compare(manifest, dbs: dict, embedder) -> dict:
    """The test sets read by the two methods issue 43 compared, pooled (figures only)."""
    from brainbot.ask.followup import UNTIL_43, Method
    from brainbot.evaluation.sets import run_sets

    out = {}
    for method in (UNTIL_43, Method(concat=True, context="last", gate="always")):
        result = run_sets(manifest, kinds=("conversations",), roles=("test",), k=K, dbs=dbs,
                          embedder=embedder, method=method)
        out[label(method)] = brief(result["pooled"]["follow-ups"]["test"])
        print(label(method), score([e["result"] for e in result["sets"]]), flush=True)
    return out


def brief(result: dict) -> dict:
    """A result without its rows."""
    return {k: v for k, v in result.items() if k != "rows"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", choices=["tuning", "test"], default=None)
    parser.add_argument("--methods", action="store_true",
                        help="race the methods on the tuning sets")
    parser.add_argument("--db", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--out", default=str(REPO / "benchmarks/results"))
    args = parser.parse_args()
    os.environ.pop("ANTHROPIC_API_KEY", None)  # the offline answer, whatever is set
    from brainbot.evaluation.sets import ROLES, format_sets, load_manifest, run_sets
    from brainbot.model.embed import Embedder

    manifest, embedder = load_manifest(MANIFEST), Embedder()
    dbs, out = dict(x.split("=", 1) for x in args.db), Path(args.out)
    if args.methods:
        raced: dict = {}
        for label, method in methods().items():
            result = run_sets(manifest, kinds=("conversations",), roles=("tuning",), k=K,
                              dbs=dbs, embedder=embedder, method=method)
            for e in result["sets"]:
                raced.setdefault(e["file"], {})[label] = brief(e["result"])
            print(label, score([e["result"] for e in result["sets"]]), flush=True)
        corpus_of = {s.file.name: s.corpus for s in manifest.sets if s.file.name in raced}
        (out / "eval_followups_methods.json").write_text(json.dumps(
            {"command": "python benchmarks/bench_followups.py --methods (tuning sets only)",
             "corpus_of": corpus_of, "sets": raced,
             "leave_one_corpus_out": leave_one_out(raced, corpus_of)},
            indent=1, ensure_ascii=False) + "\n")
        return 0
    roles = (args.role,) if args.role else ROLES
    result = run_sets(manifest, kinds=("conversations",), roles=roles, k=K, dbs=dbs,
                      embedder=embedder)
    print(format_sets(result), flush=True)
    if "test" in roles:
        result["compare"] = compare(manifest, dbs, embedder)
    (out / "eval_followups.json").write_text(json.dumps(
        {"command": "brainbot eval --sets examples/sets.json -k 5 (conversation sets; no API "
                    "key: extractive)", **result}, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

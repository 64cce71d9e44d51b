"""Every evaluation set at once, each with its corpus and its role: ``brainbot eval --sets``.

A manifest (``examples/sets.json``) names each question or conversation set, the corpus it
asks about and its role: **tuning** (methods and constants may be chosen on it) or **test**
(a corpus nobody tuned on, run for the final figures only). The role is also in the file's
name: a test set's file ends in ``-test.jsonl`` and no other does; a manifest where the two
disagree is refused, so neither record can drift from the other.

Each corpus is indexed once (incrementally, into the eval cache, or the index the caller
names) and every set is measured as its kind says: a question set's retrieval, or with
``answers`` what ``brainbot ask`` answers (``evaluate.run_answers``); a conversation set's
follow-ups (``evaluate_conversations``). The result holds one entry per set with its role,
and the figures pooled per role: the tuning sets' and the test sets' are never mixed.

A corpus path is looked up in the manifest's folder, then in each folder above it (the
shared corpora live beside the checkout, not in it); a corpus found nowhere is reported as
skipped, with where it was looked for, and its sets are not run.

This module runs and tabulates; it chooses nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from brainbot.errors import InputError

ROLES = ("tuning", "test")
TEST_SUFFIX = "-test.jsonl"  # the naming rule: a test set's file, and only a test set's


@dataclass(frozen=True)
class EvalSet:
    """One set of the manifest."""

    file: Path
    corpus: str
    role: str

    @property
    def kind(self) -> str:
        """questions or conversations, by the file's name."""
        return "conversations" if self.file.name.startswith("conversations") else "questions"


@dataclass
class Manifest:
    path: Path
    corpora: dict[str, Path | None]  # None: found nowhere
    looked_for: dict[str, str]
    sets: list[EvalSet]


def load_manifest(path: Path, corpora: dict[str, str] | None = None) -> Manifest:
    """The manifest at ``path``, its corpora resolved (``corpora``: NAME -> folder, given
    by the caller, wins over the manifest's)."""
    if not path.is_file():
        raise InputError(f"{path}: no such manifest")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        named, listed = dict(raw["corpora"]), list(raw["sets"])
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: not a manifest of sets ({exc})") from None
    given = corpora or {}
    unknown = set(given) - set(named)
    if unknown:
        raise InputError(f"--corpus {sorted(unknown)[0]}: the manifest names no such corpus "
                         f"(it names {', '.join(sorted(named))})")
    found = {name: Path(given[name]) if name in given else _find(path.parent, rel)
             for name, rel in named.items()}
    sets = [_entry(path, n, item, named) for n, item in enumerate(listed, 1)]
    return Manifest(path, {k: v if v is None or v.is_dir() else None for k, v in found.items()},
                    {name: given.get(name, rel) for name, rel in named.items()}, sets)


def _entry(path: Path, n: int, item: dict, corpora: dict) -> EvalSet:
    where = f"{path}: set {n}"
    if not isinstance(item, dict) or not {"file", "corpus", "role"} <= set(item):
        raise InputError(f"{where}: needs 'file', 'corpus' and 'role'")
    file, role = path.parent / item["file"], item["role"]
    if role not in ROLES:
        raise InputError(f"{where}: role must be one of {', '.join(ROLES)}, not {role!r}")
    if (role == "test") != file.name.endswith(TEST_SUFFIX):
        raise InputError(f"{where}: {file.name} is marked {role}, but a test set's file "
                         f"ends in {TEST_SUFFIX} and no other does")
    if item["corpus"] not in corpora:
        raise InputError(f"{where}: no corpus named {item['corpus']!r}")
    if not file.is_file():
        raise InputError(f"{where}: {file} does not exist")
    return EvalSet(file, item["corpus"], role)


def _find(base: Path, rel: str) -> Path | None:
    """``rel`` under ``base`` or under the nearest folder above it that holds it."""
    for folder in (base, *base.resolve().parents):
        if (folder / rel).is_dir():
            return folder / rel
    return None


def index_of(corpus: Path, name: str) -> Path:
    """The eval cache's index of a corpus folder, brought up to date (only what changed is
    indexed again). One cache file a real folder, holding that folder alone: the corpus is
    indexed by its resolved path, and any other root in the file leaves it. A corpus
    reached once through a symlink (a worktree's ``shared -> /work/shared``) and once by
    its real path used to be indexed twice into the same file, every chunk twice, and
    the sets measured on it read other figures than on a clean index (157 of 158
    follow-ups found on a clean one, 153 on the doubled one)."""
    from brainbot.index.indexer import Indexer

    cache = Path(os.environ.get("BRAINBOT_CACHE_DIR") or Path(
        os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "brainbot")
    cache.mkdir(parents=True, exist_ok=True)
    real = corpus.resolve()
    tag = hashlib.sha256(str(real).encode()).hexdigest()[:8]
    db = cache / f"eval-{name}-{tag}.db"
    with Indexer(db) as ix:
        for other in sorted((ix.store.folder_roots() or set()) - {real.as_posix()}):
            ix.forget_root(other)
        ix.index_paths([real])
        ix.finish()
    return db


def run_sets(manifest: Manifest, *, answers: bool = False, kinds=("questions", "conversations"),
             roles=ROLES, k: int = 10, modes: list[str] | None = None, dbs: dict | None = None,
             embedder=None, method=None) -> dict:
    """Every set of ``manifest`` of the given kinds and roles, measured on its corpus's index
    (``dbs``: corpus -> index, else the eval cache's, built or updated here)."""
    from brainbot.search.searcher import Searcher

    chosen = [s for s in manifest.sets if s.kind in kinds and s.role in roles]
    dbs, entries, skipped = dict(dbs or {}), [], []
    for corpus in dict.fromkeys(s.corpus for s in chosen):
        folder = manifest.corpora[corpus]
        if corpus in dbs:
            continue
        if folder is None:
            skipped.append({"corpus": corpus, "reason": f"{manifest.looked_for[corpus]} not "
                            f"found in {manifest.path.parent} or any folder above it"})
            continue
        dbs[corpus] = index_of(folder, corpus)
    for corpus in [c for c in dict.fromkeys(s.corpus for s in chosen) if c in dbs]:
        with Searcher(dbs[corpus], embedder=embedder) as searcher:
            for s in (s for s in chosen if s.corpus == corpus):
                entries.append(_measure(s, searcher, str(dbs[corpus]), answers, k, modes,
                                        method))
    entries.sort(key=lambda e: [s.file.name for s in chosen].index(e["file"]))
    return {"manifest": str(manifest.path), "sets": entries, "pooled": pooled(entries),
            "skipped": skipped}


def _measure(s: EvalSet, searcher, db: str, answers: bool, k: int, modes, method) -> dict:
    from brainbot import evaluate

    from .conversations import run_conversations

    if s.kind == "conversations":
        measure = "follow-ups"
        result = run_conversations(s.file, db=db, k=k, method=method, searcher=searcher)
    elif answers:
        measure, result = "answers", evaluate.run_answers(s.file, db=db, searcher=searcher)
    else:
        measure = "retrieval"
        result = evaluate.run_questions(s.file, db=db, modes=modes, k=k)
    return {"file": s.file.name, "corpus": s.corpus, "role": s.role, "measure": measure,
            "result": result}


def pooled(entries: list[dict]) -> dict:
    """The figures of each measure pooled over the sets of each role (per question, so a
    big set weighs more than a small one); tuning and test never mixed."""
    from brainbot.evaluate import answer_rates

    from .conversations import conversation_rates

    out: dict = {}
    for measure in dict.fromkeys(e["measure"] for e in entries):
        for role in ROLES:
            group = [e["result"] for e in entries if e["measure"] == measure
                     and e["role"] == role]
            if not group:
                continue
            if measure == "answers":
                value = answer_rates([r for g in group for r in g["rows"]])
            elif measure == "follow-ups":
                value = conversation_rates([r for g in group for r in g["rows"]])
            else:
                value = _pooled_retrieval(group)
            out.setdefault(measure, {})[role] = {"sets": len(group), **value}
    return out


def _pooled_retrieval(group: list[dict]) -> dict:
    n = sum(g["answerable"] for g in group) or 1
    modes = list(group[0]["modes"])
    return {"answerable": n, "modes": {m: {key: round(sum(
        g["modes"][m][key] * g["answerable"] for g in group) / n, 4) for key in (
        f"hit@{group[0]['k']}", "hit@1", "mrr")} for m in modes}}


def format_sets(result: dict) -> str:
    """Per-set tables, one per measure, tuning sets marked ``*``, then each role pooled."""
    lines = [f"sets: {result['manifest']} (* tuning: methods were chosen on it; "
             "test: run for the final figures only)"]
    for measure in dict.fromkeys(e["measure"] for e in result["sets"]):
        header, row = _COLUMNS[measure]
        lines += ["", f"{measure}:", "  " + _cells(["set", "role", *header])]
        for e in (e for e in result["sets"] if e["measure"] == measure):
            mark = "*" if e["role"] == "tuning" else " "
            lines.append(mark + " " + _cells([e["file"], e["role"], *row(e["result"])]))
        for role, value in result["pooled"].get(measure, {}).items():
            lines.append("  " + _cells([f"pooled: {value['sets']} sets", role,
                                        *row(value, pooled=True)]))
    lines += [f"skipped: corpus {s['corpus']}: {s['reason']}" for s in result["skipped"]]
    return "\n".join(lines)


def _cells(values: list) -> str:
    widths = [38, 7] + [20] * (len(values) - 2)
    return "".join(f"{str(v):<{w}}" for v, w in zip(values, widths, strict=True)).rstrip()


def _count(rate, n) -> str:
    return "-" if rate is None or not n else f"{round(rate * n)}/{n} ({rate:.0%})"


def _answers_row(r: dict, pooled: bool = False) -> list:
    rates, n = r["rates"], r["answerable"]
    return [_count(rates["answered_correct"], n), _count(rates["answered_wrong"], n),
            _count(rates["fact_cited"], n), _count(rates["near_miss_answered"], r["near_miss"]),
            _count(rates["off_topic_not_found"], r["off_topic"])]


def _followups_row(r: dict, pooled: bool = False) -> list:
    def group(g: dict) -> str:
        return _count(g.get("found"), g.get("n", 0))

    first = r["first"]
    paired = f" (alone {group(first['alone_paired'])})" if "alone_paired" in first else ""
    return [group(r["follow_ups"]["alone"]), group(r["follow_ups"]["within"]),
            group(first["inside_unrelated"]) + paired, group(r["shifts"]["within"])]


def _retrieval_row(r: dict, pooled: bool = False) -> list:
    if pooled:
        return [f"{m} {v[next(iter(v))]:.3f}" for m, v in r["modes"].items()]
    k = r["k"]
    return [f"{m} {v[f'hit@{k}']:.3f}" for m, v in r["modes"].items()]


_COLUMNS = {
    "answers": (["answered correctly", "answered wrongly", "fact cited", "near misses answered",
                 "off-topic not found"], _answers_row),
    "follow-ups": (["follow-ups alone", "within", "first inside another", "new topics within"],
                   _followups_row),
    "retrieval": (["hit@k by mode"], _retrieval_row),
}

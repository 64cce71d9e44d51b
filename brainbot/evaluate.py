"""Does it work? Retrieval metrics on BEIR datasets and on question sets over notes.

BEIR: the corpus is indexed like notes (each document as ``title + "\\n\\n" + text``, as
BEIR and MTEB do), a document scores as its best chunk, and nDCG@10 follows trec_eval
(linear gain, ``ndcg_cut.10``), so the numbers compare with the published ones. Question
sets: each question names where its answer lives (``path``, ``path#Heading`` or
``path:10-20``); we report hit@k, recall@k and MRR per mode, and keep the unanswerable
questions apart, with the top scores they got, for calibrating refusal. With
``answers`` the question set measures ``brainbot ask`` itself: the expected fact cited, or
a refusal where the notes do not hold the answer. Conversation sets are
``evaluation/conversations``'s; a manifest of sets with their roles, ``evaluation/sets``'s.

This module measures; it does not tune anything by itself.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shlex
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from .errors import InputError, PartialIndexError

# Chunks fetched per query before collapsing to documents: several chunks of one
# document often rank together, and recall@100 needs 100 distinct documents.
BEIR_CHUNK_POOL = 300
MODE_ALIASES = {"rerank": ("hybrid", True)}


# -- metrics ---------------------------------------------------------------------------
def ndcg_at(ranked: list[str], qrels: dict[str, int], k: int = 10) -> float:
    """trec_eval ndcg_cut: gain = relevance grade (linear), discount log2(rank + 1)."""
    dcg = sum(qrels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: list[str], qrels: dict[str, int], k: int) -> float:
    relevant = {d for d, g in qrels.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant & set(ranked[:k])) / len(relevant)


def mrr_at(ranked: list[str], qrels: dict[str, int], k: int = 10) -> float:
    for i, d in enumerate(ranked[:k]):
        if qrels.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


# -- BEIR ------------------------------------------------------------------------------
def _read_jsonl(path: Path):
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def load_qrels(folder: Path, split: str) -> dict[str, dict[str, int]]:
    candidates = [folder / "qrels" / f"{split}.tsv", folder / f"qrels_{split}.tsv"]
    if split == "test":
        candidates.append(folder / "qrels.tsv")
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise InputError(f"no qrels for split {split!r} in {folder}")
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with open(path, encoding="utf-8") as handle:
        for n, line in enumerate(handle):
            parts = line.rstrip("\n").split("\t")
            if n == 0 and not parts[-1].lstrip("-").isdigit():
                continue  # header
            qrels[parts[0]][parts[1]] = int(parts[2])
    return dict(qrels)


def _beir_db(folder: Path, db: str | None) -> Path | str:
    from brainbot.store.target import is_url

    if db:
        return db if is_url(db) else Path(db)
    cache = Path(os.environ.get("BRAINBOT_CACHE_DIR") or Path(
        os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "brainbot")
    cache.mkdir(parents=True, exist_ok=True)
    tag = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:8]
    return cache / f"eval-{folder.name}-{tag}.db"


def _corpus_records(folder: Path, root: str):
    from brainbot.text.documents import record

    for doc in _read_jsonl(folder / "corpus.jsonl"):
        title = (doc.get("title") or "").strip()
        body = doc.get("text") or ""
        yield record(root, str(doc["_id"]), f"{title}\n\n{body}" if title else body)


def index_beir(folder: Path, db_path: Path, precision: str | None = None) -> dict:
    from brainbot.index.indexer import Indexer

    if not (folder / "corpus.jsonl").is_file():
        raise InputError(f"{folder} has no corpus.jsonl (is it a BEIR dataset folder?)")
    root = f"dataset:{folder.name}"  # a name for the records' root: they have no folder
    with Indexer(db_path, precision=precision) as ix:
        ix.index_documents(root, _corpus_records(folder, root))
        return ix.finish().to_dict()


def _doc_ranking(hits, limit: int = 100) -> list[str]:
    seen, ranked = set(), []
    for h in hits:  # hits come best first: a document's first hit is its best chunk
        if h.path not in seen:
            seen.add(h.path)
            ranked.append(h.path)
        if len(ranked) >= limit:
            break
    return ranked


def run_beir(folder: Path, *, db: str | None = None, split: str = "test",
             modes: list[str] | None = None, limit: int | None = None,
             precision: str | None = None) -> dict:
    from brainbot.search.searcher import Searcher
    from brainbot.store.identity import precision_of

    modes = modes or ["bm25", "vector", "hybrid"]
    db_path = _beir_db(folder, db)
    index_stats = index_beir(folder, db_path, precision)
    qrels = load_qrels(folder, split)
    queries = {str(q["_id"]): q["text"] for q in _read_jsonl(folder / "queries.jsonl")}
    qids = [q for q in qrels if q in queries][:limit]
    searcher = Searcher(db_path)
    refuse_partial(searcher, modes)
    result = {"dataset": folder.name, "split": split, "queries": len(qids),
              "db": searcher.store.target, "precision": precision_of(searcher.meta),
              "index": index_stats, "modes": {}}
    for name in modes:
        mode, rerank = MODE_ALIASES.get(name, (name, False))
        scores = defaultdict(list)
        latencies = []
        for qid in qids:
            t0 = time.perf_counter()  # every mode but bm25 embeds its query, timed
            hits = searcher.search(queries[qid], BEIR_CHUNK_POOL, mode=mode, rerank=rerank,
                                   pool=BEIR_CHUNK_POOL)
            latencies.append((time.perf_counter() - t0) * 1000)
            ranked = _doc_ranking(hits)
            scores["ndcg@10"].append(ndcg_at(ranked, qrels[qid], 10))
            scores["recall@10"].append(recall_at(ranked, qrels[qid], 10))
            scores["recall@100"].append(recall_at(ranked, qrels[qid], 100))
            scores["mrr@10"].append(mrr_at(ranked, qrels[qid], 10))
        out = {m: round(float(np.mean(v)), 4) for m, v in scores.items()}
        out["p50_ms"] = round(percentile(latencies, 50), 2)
        out["p95_ms"] = round(percentile(latencies, 95), 2)
        result["modes"][name] = out
    searcher.close()
    return result


# -- question sets ---------------------------------------------------------------------
_RANGE = re.compile(r"^(?P<path>.+):(?P<start>\d+)-(?P<end>\d+)$")


def load_questions(path: Path) -> list[dict]:
    if not path.is_file():
        raise InputError(f"{path}: no such question file")
    questions = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{path}:{n}: not JSON ({exc})") from None
        if "question" not in q:
            raise InputError(f"{path}:{n}: no 'question' field")
        q.setdefault("expected", [])
        q.setdefault("answerable", bool(q["expected"]))
        questions.append(q)
    return questions


def matches(hit, expected: str) -> bool:
    """Does a hit satisfy one expected location (path, path#Heading, path:a-b)?"""
    m = _RANGE.match(expected)
    if m:
        return (hit.path == m.group("path") and hit.start_line <= int(m.group("end"))
                and hit.end_line >= int(m.group("start")))
    if "#" in expected:
        path, heading = expected.split("#", 1)
        if hit.path != path:
            return False
        heading = heading.strip()
        # under the heading, or holding the heading's own line (a merged small section)
        return heading in [h.strip() for h in hit.heading_path] or re.search(
            rf"^#{{1,6}}[ \t]+{re.escape(heading)}[ \t#]*$", hit.text, re.M) is not None
    return hit.path == expected


def score_question(hits, expected: list[str], k: int) -> dict:
    top = hits[:k]
    first = next((i + 1 for i, h in enumerate(top) if any(matches(h, e) for e in expected)), None)
    found = sum(1 for e in expected if any(matches(h, e) for h in top))
    return {"hit": first is not None, "rank": first,
            "recall": found / len(expected) if expected else 0.0,
            "rr": 1.0 / first if first else 0.0}


def refuse_partial(searcher, modes: list[str]) -> None:
    """Vector and hybrid figures on a partly embedded index would measure the gap."""
    if all(MODE_ALIASES.get(m, (m, False))[0] == "bm25" for m in modes):
        return
    vectors, chunks = searcher.coverage()
    if vectors < chunks:
        searcher.close()
        raise PartialIndexError(
            f"{vectors:,} of {chunks:,} chunks embedded: vector and hybrid figures would be "
            f"wrong; run `brainbot index NOTES --db {shlex.quote(str(searcher.target))}` to "
            "finish embedding, or evaluate --modes bm25")


def run_questions(path: Path, *, db: str, modes: list[str] | None = None, k: int = 10) -> dict:
    from brainbot.search.searcher import Searcher

    modes = modes or ["bm25", "vector", "hybrid"]
    questions = load_questions(path)
    searcher = Searcher(db)
    refuse_partial(searcher, modes)
    result = {"dataset": str(path), "questions": len(questions),
              "answerable": sum(1 for q in questions if q["answerable"]), "k": k, "modes": {}}
    for name in modes:
        mode, rerank = MODE_ALIASES.get(name, (name, False))
        per_q, unanswerable, latencies = [], [], []
        for q in questions:
            t0 = time.perf_counter()
            hits = searcher.search(q["question"], k, mode=mode, rerank=rerank)
            latencies.append((time.perf_counter() - t0) * 1000)
            if not q["answerable"]:
                unanswerable.append({"question": q["question"],
                                     "top_score": hits[0].score if hits else None})
                continue
            s = score_question(hits, q["expected"], k)
            s["question"] = q["question"]
            per_q.append(s)
        n = max(len(per_q), 1)
        result["modes"][name] = {
            f"hit@{k}": round(sum(s["hit"] for s in per_q) / n, 4),
            "hit@1": round(sum(1 for s in per_q if s["rank"] == 1) / n, 4),
            f"recall@{k}": round(sum(s["recall"] for s in per_q) / n, 4),
            "mrr": round(sum(s["rr"] for s in per_q) / n, 4),
            "p50_ms": round(percentile(latencies, 50), 2),
            "misses": [s["question"] for s in per_q if not s["hit"]],
            "unanswerable": unanswerable,
        }
    searcher.close()
    return result


def run_answers(path: Path, *, db: str, searcher=None) -> dict:
    """What ``brainbot ask`` answers (Claude with a key, else extractive), by outcome:
    an answerable question's answer is correct when a citation quotes one of its
    ``answer_contains`` strings (case-insensitive), and wrong otherwise (the costly error);
    its passages hold the fact or not; an unanswerable one should not be answered
    (near misses: passages are fine; off-topic questions: not_found). Also counted, as
    issue 43 measured it: an answer with a verified citation in a gold note (the note of
    an ``expected`` location), whether or not the quote holds the fact."""
    from brainbot.ask.agent import ask
    from brainbot.search.searcher import Searcher

    questions = load_questions(path)
    lacking = [q["question"] for q in questions
               if q["answerable"] and not q.get("answer_contains")]
    if lacking:
        raise InputError(f"{path}: answerable question without answer_contains "
                         f"(needed to judge answers): {lacking[0]!r}")
    own = searcher is None
    searcher = searcher or Searcher(db)
    rows, modes = [], set()
    try:
        for q in questions:
            answer = ask(q["question"], db=db, searcher=searcher)
            modes.add(answer.mode)
            rows.append(_judge(q, answer))
    finally:
        if own:
            searcher.close()
    return {"dataset": str(path), "questions": len(rows), "mode": "+".join(sorted(modes)),
            **answer_rates(rows), "rows": rows}


def _judge(q: dict, answer) -> dict:
    quoted = " ".join(c.cited_text.lower() for c in answer.citations)
    fact = any(s.lower() in quoted for s in q.get("answer_contains", []))
    kind = "answerable" if q["answerable"] else q.get("kind", "near_miss")
    gold = {_RANGE.match(e).group("path") if _RANGE.match(e) else e.split("#", 1)[0]
            for e in q["expected"]}
    return {"question": q["question"], "kind": kind, "outcome": answer.outcome, "fact": fact,
            "gold_note": any(c.path in gold and c.verified for c in answer.citations),
            "quoted_chars": len(quoted) if answer.outcome == "answer" else 0,
            "stop_reason": answer.stop_reason, "support": answer.support}


def answer_rates(rows: list[dict]) -> dict:
    """The outcome counts per kind of question, and the rates the targets speak of."""
    def count(kind, outcome=None, fact=None):
        return sum(1 for r in rows if r["kind"] == kind and outcome in (None, r["outcome"])
                   and fact in (None, r["fact"]))

    n = {k: count(k) for k in ("answerable", "near_miss", "off_topic")}
    answered = [r for r in rows if r["outcome"] == "answer"]
    out = {"answerable": n["answerable"], "near_miss": n["near_miss"], "off_topic": n["off_topic"],
           "answered_correct": count("answerable", "answer", True),
           "answered_wrong": count("answerable", "answer", False),
           "passages_with_fact": count("answerable", "passages", True),
           "passages_without": count("answerable", "passages", False),
           "refused_wrongly": count("answerable", "not_found"),
           "near_miss_answered": count("near_miss", "answer"),
           "near_miss_passages": count("near_miss", "passages"),
           "refused_correctly": count("near_miss", "not_found") + count("off_topic", "not_found"),
           "off_topic_not_found": count("off_topic", "not_found"),
           "answered_in_gold_note": sum(1 for r in answered if r["kind"] == "answerable"
                                        and r.get("gold_note")),
           "mean_quoted_chars": round(sum(r["quoted_chars"] for r in answered)
                                      / max(len(answered), 1), 1)}
    rate = lambda a, b: round(a / b, 4) if b else None  # noqa: E731
    out["rates"] = {
        "answered_correct": rate(out["answered_correct"], n["answerable"]),
        "answered_wrong": rate(out["answered_wrong"], n["answerable"]),
        "fact_cited": rate(out["answered_correct"] + out["passages_with_fact"], n["answerable"]),
        "answered_in_gold_note": rate(out["answered_in_gold_note"], n["answerable"]),
        "answered_outside_gold_note": rate(
            out["answered_correct"] + out["answered_wrong"] - out["answered_in_gold_note"],
            n["answerable"]),
        "off_topic_not_found": rate(out["off_topic_not_found"], n["off_topic"]),
        "near_miss_answered": rate(out["near_miss_answered"], n["near_miss"])}
    return out


def format_answers(result: dict) -> str:
    r, rates = result, result["rates"]

    def pct(x):
        return "-" if x is None else f"{x:.0%}"

    lines = [f"dataset: {r['dataset']} ({r['mode']} answers)",
             f"answerable ({r['answerable']}): answered correctly {r['answered_correct']} "
             f"({pct(rates['answered_correct'])}), answered wrongly {r['answered_wrong']} "
             f"({pct(rates['answered_wrong'])}); passages with the fact "
             f"{r['passages_with_fact']}, without {r['passages_without']}; not found "
             f"{r['refused_wrongly']}; fact cited {pct(rates['fact_cited'])}",
             f"near misses ({r['near_miss']}): answered {r['near_miss_answered']} "
             f"({pct(rates['near_miss_answered'])}), passages {r['near_miss_passages']}",
             f"off-topic ({r['off_topic']}): not found {r['off_topic_not_found']} "
             f"({pct(rates['off_topic_not_found'])})",
             f"answered with a verified citation in a gold note (issue 43's measure): "
             f"{r['answered_in_gold_note']} ({pct(rates['answered_in_gold_note'])}), outside "
             f"one {pct(rates['answered_outside_gold_note'])}",
             f"mean quoted characters per answer: {r['mean_quoted_chars']}"]
    wrong = [x["question"] for x in r["rows"] if (x["kind"] == "answerable" and x["outcome"]
             == "answer" and not x["fact"]) or (x["kind"] != "answerable" and x["outcome"]
             == "answer")]
    lines += [f"  answered wrongly: {q}" for q in wrong]
    return "\n".join(lines)


def format_result(result: dict) -> str:
    lines = [f"dataset: {result['dataset']}"]
    modes = result["modes"]
    if not modes:
        return lines[0]
    metrics = [m for m in next(iter(modes.values())) if not isinstance(
        next(iter(modes.values()))[m], list)]
    lines.append("mode        " + "".join(f"{m:>12}" for m in metrics))
    for name, values in modes.items():
        lines.append(f"{name:<12}" + "".join(f"{values[m]:>12}" for m in metrics))
    for name, values in modes.items():
        if values.get("misses"):
            lines.append(f"{name} misses: " + "; ".join(values["misses"][:10]))
    return "\n".join(lines)

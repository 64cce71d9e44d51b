"""How many lines does a Claude citation point at: the whole chunk, or the sentence?

Before issue 13 each search result went to the API as one text block, so a citation
(which names a range of blocks) was always the whole chunk. Now a result is one block per
sentence, list item, code block or table row. This measures both on the example question
sets, with scripted responses from the local Messages API server of the tests (no key, no
network): for each answerable question, the scripted model cites the narrowest block range
of a sent result that holds one of the question's ``answer_contains`` strings, as a model
citing one fact would. "Before" is that result's own line span (what one block per result
would have cited); "after" is the span of the blocks cited, verified by brainbot.

What is not measured: what a real model would choose to cite (no key here).

    python benchmarks/bench_citations.py [--out benchmarks/results/citations.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from fake_anthropic import FakeAnthropic, cite_text, message, search_results, text  # noqa: E402

SETS = ["examples/questions.jsonl", "examples/questions-holdout.jsonl"]


def scripted(needles: list[str], seen: dict):
    def reply(body):
        for i, result in enumerate(search_results(body)):
            whole = "".join(b["text"] for b in result["content"]).lower()
            needle = next((n for n in needles if n.lower() in whole), None)
            if needle:
                first, last = map(int, result["source"].rsplit(":", 1)[1].split("-"))
                seen["before"] = last - first + 1
                return message(text("Here it is.", [cite_text(body, i, needle)]))
        seen["before"] = None
        return message(text("I couldn't find this in your notes."))
    return reply


def measure(path: Path, searcher, db) -> dict:
    from brainbot.ask.agent import ask

    before, after, missing = [], [], 0
    questions = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    with FakeAnthropic() as fake:
        client = fake.client()
        for q in (q for q in questions if q.get("answerable")):
            seen: dict = {}
            fake.push(scripted(q["answer_contains"], seen))
            answer = ask(q["question"], db=db, searcher=searcher, client=client)
            if seen.get("before") is None or not answer.citations:
                missing += 1
                continue
            c = answer.citations[0]
            before.append(seen["before"])
            after.append(c.end_line - c.start_line + 1)
    return {"set": str(path.relative_to(REPO)), "cited": len(after), "not_retrieved": missing,
            "mean_lines_before": round(statistics.mean(before), 2),
            "mean_lines_after": round(statistics.mean(after), 2),
            "median_lines_before": statistics.median(before),
            "median_lines_after": statistics.median(after)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/citations.json"))
    args = parser.parse_args()
    from brainbot.index.indexer import Indexer
    from brainbot.search.searcher import Searcher

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "examples.db"
        with Indexer(db) as ix:
            ix.index_paths([REPO / "examples/notes"])
        with Searcher(db) as searcher:
            rows = [measure(REPO / s, searcher, db) for s in SETS]
    for r in rows:
        print(f"{r['set']}: {r['cited']} cited; mean lines per citation "
              f"{r['mean_lines_before']} -> {r['mean_lines_after']} (median "
              f"{r['median_lines_before']} -> {r['median_lines_after']})")
    Path(args.out).write_text(json.dumps({"sets": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

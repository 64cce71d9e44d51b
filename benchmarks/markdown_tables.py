"""The two steps every part of docs/benchmarks.md and the README's headline table takes: a
benchmark's result file read from benchmarks/results/ (``read_result``: its JSON, or None
while that benchmark has not been run) and rows written as a markdown table (``table``).

readme_tables.py, the section modules it calls (before_after_tables, e5_tables,
eval_tables, language_tables) and headline.py share these. Nothing here measures anything,
knows what a result file holds or words a line of the page.
"""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def read_result(name: str, results: Path = RESULTS):
    """The JSON of ``results/name``, or None when there is no such file."""
    path = results / name
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def table(header: list[str], rows: list[list]) -> str:
    """A markdown table: the header, its rule, one line a row (cells as str)."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)

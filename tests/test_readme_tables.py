"""The README's results section is what benchmarks/readme_tables.py renders from the
committed benchmarks/results/*.json: no table is pasted or edited by hand."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_results_section_is_rendered_from_the_json():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import readme_tables
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.count(readme_tables.BEGIN) == 1 and text.count(readme_tables.END) == 1
    region = text.split(readme_tables.BEGIN, 1)[1].split(readme_tables.END, 1)[0]
    want = readme_tables.build()
    if region.strip("\n") != want.strip("\n"):
        got, new = region.strip("\n").splitlines(), want.splitlines()
        first = next((i for i, (a, b) in enumerate(zip(got, new)) if a != b),
                     min(len(got), len(new)))
        raise AssertionError(
            "README.md's results section differs from `python benchmarks/readme_tables.py` "
            f"(run it to regenerate) from line {first + 1} of the section:\n"
            f"README:   {got[first] if first < len(got) else '<end>'}\n"
            f"rendered: {new[first] if first < len(new) else '<end>'}")

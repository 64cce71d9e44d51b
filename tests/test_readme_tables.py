"""The front page and docs/benchmarks.md are what benchmarks/readme_tables.py renders from
the committed benchmarks/results/*.json: no table is pasted or edited by hand (issue 35).
The README stays a front page: short, the two commands first, its headline figures
linking to full tables that exist."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tables():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import headline
        import readme_tables
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return readme_tables, headline


def first_difference(have: str, want: str) -> str:
    got, new = have.splitlines(), want.splitlines()
    i = next((i for i, (a, b) in enumerate(zip(got, new)) if a != b), min(len(got), len(new)))
    return (f"line {i + 1}:\nfile:     {got[i] if i < len(got) else '<end>'}\n"
            f"rendered: {new[i] if i < len(new) else '<end>'}")


def test_docs_benchmarks_md_is_rendered_from_the_json(tables):
    readme_tables, _ = tables
    have, want = readme_tables.PAGE.read_text(encoding="utf-8"), readme_tables.build()
    assert have == want, ("docs/benchmarks.md differs from `python benchmarks/readme_tables.py`"
                          " (run `make docs`) from " + first_difference(have, want))


def test_the_readme_headline_table_is_rendered_from_the_same_json(tables):
    readme_tables, headline = tables
    have = readme_tables.README.read_text(encoding="utf-8")
    assert have.count(readme_tables.BEGIN) == 1 and have.count(readme_tables.END) == 1
    want = readme_tables.readme_with(headline.build())
    assert have == want, ("README.md's headline table differs from `python benchmarks/"
                          "readme_tables.py` (run `make docs`) from "
                          + first_difference(have, want))


def test_every_headline_row_links_to_a_table_on_the_page(tables):
    readme_tables, headline = tables
    page = readme_tables.PAGE.read_text(encoding="utf-8")
    anchors = {headline.slug(h) for h in re.findall(r"(?m)^#+ (.+)$", page)}
    links = re.findall(r"\]\(docs/benchmarks\.md#([^)]+)\)", headline.build())
    assert len(links) >= 5
    assert set(links) <= anchors, set(links) - anchors


def test_the_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 16_384
    first = "\n".join(text.splitlines()[:30])
    assert "make demo" in first and "make test" in first


def test_slug_is_githubs_anchor(tables):
    _, headline = tables
    assert headline.slug("Answers: `brainbot ask`") == "answers-brainbot-ask"
    assert headline.slug("Issue #24 targets on this host") == "issue-24-targets-on-this-host"
    assert headline.slug("Serving: HTTP against stdio") == "serving-http-against-stdio"

"""The front page and docs/benchmarks.md are what benchmarks/readme_tables.py renders from
the committed benchmarks/results/*.json: no table is pasted or edited by hand (issue 35).
The README stays a front page: short, the two commands first, its headline figures
linking to full tables that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import benchmark_modules

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tables():
    return benchmark_modules("readme_tables", "headline")


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


def _first_run_row(vault: str, cpu: str, **extra) -> dict:
    return {"vault": vault, "host": {"cpu": cpu, "cores": 2}, "files": 10, "megabytes": 1.0,
            "chunks": 1000, "to_last_bm25_hit_s": 1.0, "to_lexical_end_s": 0.9,
            "stages_seconds": {}, "rounds": [{"index_load": 1.5, "index_cpu_s": 2.0}], **extra}


def test_first_run_rows_name_their_host_and_how_they_were_measured(tables, monkeypatch):
    """first_run.json gathers rows from several sessions: a row measured on another CPU
    says so, and the big vault's end-to-end row is told apart from a projection."""
    readme_tables, headline = tables
    big = _first_run_row("big vault (make_big_vault.py)", "CPU B", embed=False,
                         projected_embed_s={"int8": 600.0})
    e2e = _first_run_row("big vault (make_big_vault.py)", "CPU B", embed=True, end_to_end=True,
                         precision="int8", model="multilingual-e5-small",
                         fully_embedded_s=1800.5, peak_rss_mb=700)
    old = _first_run_row("rust-book", "CPU A", embed=True, precision="int8",
                         fully_embedded_s=10.0, embedder_alone_s=9.5, semantic_vs_alone=1.0,
                         index_vs_alone=1.05)
    data = {"machine": {"cpu": "CPU B", "cores": 2}, "vaults": [old, big, e2e]}
    def load(name: str):
        return data if name == "first_run.json" else None

    monkeypatch.setattr(readme_tables, "read_result", load)
    page = readme_tables.first_run_section()
    rows = [line for line in page.splitlines() if line.startswith("| ")]
    assert rows[0].endswith("| host |")
    assert "| CPU A, 2 cores |" in rows[1] and "| CPU B, 2 cores |" in rows[2]
    assert "projected int8 600 s" in rows[2]
    assert "1,800.5 (measured end to end; peak RSS 700 MB)" in rows[3]
    assert "multilingual-e5-small" in rows[3]
    data["vaults"] = [big, e2e]  # one host: no column, the host named once
    assert "| host |" not in readme_tables.first_run_section()
    monkeypatch.setattr(headline, "read_result", load)
    first = headline._first_run()  # the default model's projection, not e5's measured row
    assert "~10 min (int8, projected)" in first[1] and first[2] == ""

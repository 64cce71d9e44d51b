"""benchmarks/bench_before_after.py's plumbing (the trees alternate, each tree's own benchmark
runs with its own venv, medians and ratios per measure) and its section of
docs/benchmarks.md (benchmarks/before_after_tables.py), rendered from the committed JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import benchmark_modules


@pytest.fixture(scope="module")
def bench():
    return benchmark_modules("bench_before_after", "before_after_tables", "readme_tables")


def test_the_trees_alternate_and_take_turns_going_first(bench):
    b = bench[0]
    runs = b.order(4)
    assert runs == [(0, "before"), (0, "after"), (1, "after"), (1, "before"),
                    (2, "before"), (2, "after"), (3, "after"), (3, "before")]
    assert [t for r, t in runs if r % 2 == 0][::2] == ["before", "before"]


def test_a_serve_result_is_flattened_to_one_measure_a_key(bench):
    serve = {"search": {"10000": {"p50_ms": 15.0, "p95_ms": 20.0, "queries": 60,
                                  "baseline": {"p50_ms": 1}}},
             "watch": {"edits": 20, "mcp_median_s": 0.2, "cli_max_s": 0.4}}
    assert bench[0].flatten(serve) == {"search 10000 p50_ms": 15.0, "search 10000 p95_ms": 20.0,
                                       "watch mcp_median_s": 0.2, "watch cli_max_s": 0.4}


def test_medians_per_tree_and_after_over_before(bench):
    runs = [{"round": 0, "tree": "before", "measures": {"x": 10.0, "y": 0.0}},
            {"round": 0, "tree": "after", "measures": {"x": 9.0, "y": 1.0}},
            {"round": 1, "tree": "after", "measures": {"x": 12.0, "y": 1.0}},
            {"round": 1, "tree": "before", "measures": {"x": 30.0, "y": 0.0}},
            {"round": 2, "tree": "before", "measures": {"x": 12.0, "y": 0.0}},
            {"round": 2, "tree": "after", "measures": {"x": 6.0, "y": 1.0}}]
    out = bench[0].summarise(runs)
    assert out["medians"] == {"before": {"x": 12.0, "y": 0.0}, "after": {"x": 9.0, "y": 1.0}}
    assert out["ratios"] == {"x": 0.75}  # none where the before median is 0
    assert out["paired_ratios"] == {"x": 0.5}  # rounds: 0.9, 0.4, 0.5
    cut = bench[0].summarise(runs[:3])  # round 1 has no before: only round 0 pairs
    assert cut["paired_ratios"] == {"x": 0.9} and cut["medians"]["after"]["x"] == 10.5


def test_a_result_file_is_summarised_again_from_its_runs(bench, tmp_path):
    runs = [{"round": 0, "tree": t, "measures": {"wall_s": w}}
            for t, w in (("before", 4.0), ("after", 5.0))]
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"vaults": {"v": {"runs": runs, "ratios": {}}}}))
    assert bench[0].resummarise(path)["vaults"]["v"]["paired_ratios"] == {"wall_s": 1.25}
    path.write_text(json.dumps({"runs": runs}))
    assert bench[0].resummarise(path)["ratios"] == {"wall_s": 1.25}


def _fake_tree(root: Path, name: str, python_body: str, brainbot_body: str) -> Path:
    tree = root / name
    (tree / ".venv/bin").mkdir(parents=True)
    (tree / "benchmarks").mkdir()
    for script, body in (("python", python_body), ("brainbot", brainbot_body)):
        path = tree / ".venv/bin" / script
        path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
        path.chmod(0o755)
    return tree


def test_each_tree_runs_its_own_bench_serve_with_its_own_python(bench, tmp_path):
    # the fake python writes, to the --out it is given (argv 3), which script it ran
    tree = _fake_tree(tmp_path, "t", 'echo "{\\"search\\": {\\"10\\": {\\"p50_ms\\": 1, '
                      '\\"p95_ms\\": 2}}, \\"watch\\": {\\"mcp_median_s\\": 0.5}, '
                      '\\"loads_start\\": [0.5, 0, 0], \\"ran\\": \\"$1\\"}" > "$3"', "")
    run = bench[0].serve_run(tree, quick=True, min_idle=0.0)
    assert run["measures"] == {"search 10 p50_ms": 1, "search 10 p95_ms": 2,
                               "watch mcp_median_s": 0.5}
    assert run["loads_start"] == [0.5, 0, 0]


@pytest.mark.skipif(not Path("/usr/bin/time").is_file(), reason="needs /usr/bin/time")
def test_a_first_index_is_timed_with_its_peak_memory(bench, tmp_path):
    tree = _fake_tree(tmp_path, "t", "", 'test "$1" = index && test "$4" = "$PWD/new.db" && '
                      'test "$6" = int8 && echo "3 new · 7 chunks"')
    run = bench[0].index_run(tree, tmp_path, 0.0)
    assert run["summary"] == ["3 new · 7 chunks"]
    assert set(run["measures"]) == {"wall_s", "peak_rss_mb", "cpu_s"}
    assert run["measures"]["peak_rss_mb"] > 0 and run["measures"]["cpu_s"] >= 0
    broken = _fake_tree(tmp_path, "broken", "", "echo no such vault >&2; exit 2")
    with pytest.raises(RuntimeError, match="no such vault"):
        bench[0].index_run(broken, tmp_path, 0.0)


def _results(tmp_path: Path) -> Path:
    trees = {"before": {"commit": "aaa1111"}, "after": {"commit": "bbb2222"}}
    common = {"cpu": "Some CPU", "rounds": 3, "min_idle": 0.0, "trees": trees,
              "loads_start": [2.5, 2, 2], "loads_end": [3.5, 3, 3]}
    serve = common | {"command": "python benchmarks/bench_before_after.py serve", "runs": [
        {"tree": "before", "loads_start": [1.25, 1, 1]}, {"tree": "after", "loads_start": [4.0]}],
        "medians": {"before": {"search 100000 p95_ms": 24.0, "watch mcp_median_s": 0.2},
                    "after": {"search 100000 p95_ms": 18.0, "watch mcp_median_s": 0.25}},
        "ratios": {"search 100000 p95_ms": 0.75, "watch mcp_median_s": 1.25},
        "paired_ratios": {"search 100000 p95_ms": 0.8}}
    run = {"tree": "after", "loads_start": [2.0]}
    index = common | {"command": "python benchmarks/bench_before_after.py index", "vaults": {
        "examples/vault": {"runs": [run], "medians": {
            "before": {"wall_s": 8.0, "peak_rss_mb": 160.0},
            "after": {"wall_s": 6.0, "peak_rss_mb": 200.0}},
            "ratios": {"wall_s": 0.75, "peak_rss_mb": 1.25},
            "paired_ratios": {"wall_s": 0.7, "peak_rss_mb": 1.2}}}}
    for name, data in (("serve_before_after.json", serve),
                       ("first_index_before_after.json", index)):
        (tmp_path / name).write_text(json.dumps(data), encoding="utf-8")
    return tmp_path


def test_the_section_renders_both_tables_from_the_json(bench, tmp_path):
    text = bench[1].section(_results(tmp_path))
    assert text.startswith("### Before and after")
    assert "| warm search, 100,000 chunks, p95 ms | 24.0 | 18.0 | 0.75 | 0.80 |" in text
    assert "| save to searchable, median s, MCP | 0.2 | 0.25 | 1.25 |  |" in text
    assert "| `examples/vault` | 8.0 | 6.0 | 0.75 | 0.70 | 160.0 | 200.0 | 1.25 | 1.20 |" in text
    assert "before (aaa1111)" in text and "after (bbb2222)" in text
    assert "load average 1.25–4.00 at the starts of the runs" in text
    assert text.count("(`--min-idle 0`)") == 2  # no wait: said, not "0% idle"
    (tmp_path / "serve_before_after.json").unlink()
    assert "warm search" not in bench[1].section(tmp_path) and "examples/vault" in text
    (tmp_path / "first_index_before_after.json").unlink()
    assert bench[1].section(tmp_path) == ""


def test_the_page_carries_the_section_of_the_committed_results(bench):
    _, tables, readme_tables = bench
    for name in ("serve_before_after.json", "first_index_before_after.json"):
        assert (tables.RESULTS / name).is_file(), name
    section = tables.section()
    assert section.count("| paired |") == 3  # one column in the serve table, two here
    assert section.replace("### ", "## ", 1) in readme_tables.PAGE.read_text(encoding="utf-8")

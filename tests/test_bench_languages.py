"""benchmarks/bench_languages.py's own arithmetic and plumbing: the measures it adds to
`brainbot eval`'s (hit@5, nDCG@10) from each expected location's rank, and `--model` /
`--precision` reaching `brainbot index` only when given."""

from __future__ import annotations

import math
import sys
from argparse import Namespace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_languages
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return bench_languages


def test_ndcg_credits_each_expected_location_once(bench):
    assert bench.ndcg([1]) == 1.0
    assert bench.ndcg([None]) == 0.0
    assert bench.ndcg([3]) == pytest.approx(1 / math.log2(4))
    assert bench.ndcg([1, 2]) == pytest.approx(1.0)
    # one hit that shows both locations is one position: not a perfect score
    assert bench.ndcg([1, 1]) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert bench.ndcg([2, None]) == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))


def test_measures_from_ranks(bench):
    ranks = {"a": {"hybrid": [1]}, "b": {"hybrid": [7, None]}, "c": {"hybrid": [None]},
             "d": {"hybrid": [None, 4]}}
    m = bench.measures(ranks, "hybrid")
    assert m["hit@5"] == 0.5  # a at 1, d at 4; b's first is 7
    assert m["mrr@10"] == pytest.approx(round((1 + 1 / 7 + 1 / 4) / 4, 4))
    assert m["recall@10"] == pytest.approx(round((1 + 0.5 + 0 + 0.5) / 4, 4))


def test_first_ranks_use_the_matcher_per_expected_location(bench):
    hits = ["x.md", "y.md", "x.md"]
    assert bench.first_ranks(hits, ["x.md", "z.md", "y.md"], lambda h, e: h == e) == [1, None, 2]


@pytest.mark.parametrize("model,precision,passed", [
    (None, None, []),
    ("multilingual-e5-small", None, ["--model", "multilingual-e5-small"]),
    (None, "fp32", ["--precision", "fp32"]),
])
def test_model_and_precision_reach_the_index_only_when_given(bench, monkeypatch, tmp_path,
                                                             model, precision, passed):
    calls = []
    monkeypatch.setattr(bench, "brainbot", lambda *argv: calls.append(argv) or {"chunks": 3})
    (tmp_path / "old.db-wal").write_text("x")  # a kept database's leftovers go first
    (tmp_path / "old.db").write_text("x")
    out = bench.index(tmp_path / "notes", tmp_path / "old.db",
                      Namespace(model=model, precision=precision))
    assert calls == [("index", str(tmp_path / "notes"), "--db", str(tmp_path / "old.db"), *passed)]
    assert out["chunks"] == 3 and not list(tmp_path.glob("old.db*"))

"""benchmarks/bench_languages.py's own arithmetic and plumbing: the measures it adds to
`brainbot eval`'s (hit@5, nDCG@10) from each expected location's rank, `--model` /
`--precision` reaching `brainbot index` only when given, and `--questions`: each question
file measured on one index, their union measured from the same ranks, one result file a set."""

from __future__ import annotations

import json
import math
from argparse import Namespace

import pytest
from conftest import benchmark_modules


@pytest.fixture(scope="module")
def bench():
    (module,) = benchmark_modules("bench_languages")
    return module


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
    assert (m["hit@10"], m["hit@1"]) == (0.75, 0.25)  # what `brainbot eval` reports, checked


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


# --- --questions: the terms and plain files, apart and together ------------------------------

TERMS = {"t1": {"hybrid": [1]}, "t2": {"hybrid": [None]}}
PLAIN = {"p1": {"hybrid": [6]}, "p2": {"hybrid": [2, None]}, "p3": {"hybrid": [None]}}


def official(ranks, bench) -> dict:
    """What `brainbot eval` says of these ranks (its names), with one unanswerable question."""
    m = bench.measures(ranks, "hybrid")
    return {"hybrid": {"mrr": m["mrr@10"], "hit@10": m["hit@10"], "hit@1": m["hit@1"],
                       "unanswerable": [{"top_score": 0.5}]}}


@pytest.fixture
def measured(bench, monkeypatch, tmp_path):
    """run_language on a fake index: the terms file ranks as TERMS, the plain one as PLAIN."""
    ranks = lambda path: PLAIN if "-plain-" in path.name else TERMS  # noqa: E731
    monkeypatch.setattr(bench, "index", lambda *a: {"chunks": 9})
    monkeypatch.setattr(bench, "eval_cli", lambda path, db, modes: official(ranks(path), bench))
    monkeypatch.setattr(bench, "rank_all", lambda path, db, modes: (
        ranks(path), {q: "hard" for q in ranks(path)}))

    def run(questions, set_name="tuning"):
        args = Namespace(questions=questions, modes=["hybrid"], set_name=set_name)
        return bench.run_language("debian-reference", "de", args, tmp_path)
    return run


def test_all_measures_each_question_file_and_their_union(bench, measured):
    out = measured("all")
    assert list(out) == ["terms", "plain", "all"]
    assert [out[k]["answerable"] for k in out] == [2, 3, 5]
    assert out["terms"]["modes"]["hybrid"]["hit@5"] == 0.5
    assert out["plain"]["modes"]["hybrid"]["hit@5"] == pytest.approx(round(1 / 3, 4))
    assert out["all"]["modes"]["hybrid"]["hit@5"] == 0.4  # t1 and p2 of five
    assert set(out["all"]["ranks"]) == {"t1", "t2", "p1", "p2", "p3"}
    assert out["all"]["unanswerable_top_scores"] == {"hybrid": [0.5, 0.5]}
    assert out["all"]["hit@5_by_difficulty"]["hard"]["questions"] == 5


def test_a_union_of_files_that_share_an_id_stops(bench):
    with pytest.raises(SystemExit, match="share a question id"):
        bench.union([(TERMS, {}, {}), (TERMS, {}, {})])


@pytest.mark.parametrize("questions", ["terms", "plain"])
def test_one_question_file_alone_has_no_union(measured, questions):
    assert list(measured(questions)) == [questions]


def test_the_test_set_keeps_no_ranks(measured):
    assert all("ranks" not in result for result in measured("all", "test").values())


def test_a_pass_that_ranks_apart_from_eval_stops(bench):
    theirs = official(TERMS, bench)
    theirs["hybrid"]["hit@1"] = 0.0
    with pytest.raises(SystemExit, match="hit@1"):
        bench.agree_with_eval(TERMS, theirs, ["hybrid"], "debian-reference/de/terms")


@pytest.mark.parametrize("set_name,questions,name,file", [
    ("tuning", "terms", None, "languages_tuning.json"),  # the name it had before the plain set
    ("test", "terms", "before", "languages_test_before.json"),
    ("tuning", "plain", "before", "languages_tuning_plain_before.json"),
    ("test", "all", None, "languages_test_all.json"),
    ("tuning", "all", "e5_fp32", "languages_tuning_all_e5_fp32.json"),
])
def test_result_names(bench, set_name, questions, name, file):
    assert bench.result_name(set_name, questions, name) == file
    assert bench.run_name(file) == (name or "")


def test_a_name_that_reads_as_a_question_set_is_refused(bench):
    with pytest.raises(SystemExit):
        bench.parse_args(["--name", "plain"])


def test_the_docs_show_each_run_with_its_sets_in_order(bench, tmp_path):
    machine = {"cpu": "cpu", "cores": 2}
    for file, questions in (("languages_tuning_all_x.json", "all"),
                            ("languages_tuning_x.json", None),  # written before --questions
                            ("languages_tuning_plain_x.json", "plain")):
        result = {"set": "tuning", "title": "T", "model": "m", "precision": "p", "code": "c",
                  "machine": machine, "load_average_start": [1], "load_average_end": [1],
                  "languages": {"en": {"modes": {"hybrid": {"hit@5": 1.0}}}}}
        (tmp_path / file).write_text(json.dumps(result | ({"questions": questions} if questions
                                                          else {})))
    text = bench.docs_section(tmp_path)
    assert [line.split(",")[1].strip() for line in text.splitlines()
            if line.startswith("Tuning set")] == ["terms questions", "plain questions",
                                                   "all questions"]

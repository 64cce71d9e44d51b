"""`brainbot eval --sets`: every set of a manifest on its corpus, each with its role, tuning
or test, recorded in the manifest and in the file's name (issue 43)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brainbot.errors import InputError
from brainbot.evaluation import sets

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _manifest(tmp_path: Path, entries: list[dict], corpora: dict | None = None) -> Path:
    for e in entries:
        (tmp_path / e["file"]).write_text(e.pop("_text", ""), encoding="utf-8")
    path = tmp_path / "sets.json"
    path.write_text(json.dumps({"corpora": corpora or {"notes": "notes"}, "sets": entries}))
    return path


@pytest.mark.parametrize("file, role", [("questions-a.jsonl", "test"),
                                        ("questions-a-test.jsonl", "tuning")])
def test_a_role_its_file_name_contradicts_is_refused(tmp_path, file, role):
    path = _manifest(tmp_path, [{"file": file, "corpus": "notes", "role": role}])
    with pytest.raises(InputError, match="-test.jsonl"):
        sets.load_manifest(path)


def test_an_unknown_role_or_corpus_is_refused(tmp_path):
    path = _manifest(tmp_path, [{"file": "questions.jsonl", "corpus": "notes", "role": "dev"}])
    with pytest.raises(InputError, match="role must be one of"):
        sets.load_manifest(path)
    path = _manifest(tmp_path, [{"file": "questions.jsonl", "corpus": "x", "role": "tuning"}])
    with pytest.raises(InputError, match="no corpus named"):
        sets.load_manifest(path)
    path = _manifest(tmp_path, [{"file": "questions.jsonl", "corpus": "notes",
                                 "role": "tuning"}])
    with pytest.raises(InputError, match="--corpus other"):
        sets.load_manifest(path, {"other": str(tmp_path)})


def test_a_corpus_is_looked_up_here_then_in_each_folder_above(tmp_path):
    (tmp_path / "data/corpora/docs").mkdir(parents=True)
    deep = tmp_path / "repo/examples"
    deep.mkdir(parents=True)
    path = _manifest(deep, [{"file": "questions.jsonl", "corpus": "docs", "role": "tuning"}],
                     {"docs": "data/corpora/docs", "gone": "data/corpora/gone"})
    m = sets.load_manifest(path)
    assert m.corpora["docs"].resolve() == (tmp_path / "data/corpora/docs").resolve()
    assert m.corpora["gone"] is None
    given = sets.load_manifest(path, {"docs": str(deep)})
    assert given.corpora["docs"] == deep


def test_a_set_whose_corpus_is_nowhere_is_skipped_with_the_reason(tmp_path):
    path = _manifest(tmp_path, [{"file": "questions.jsonl", "corpus": "gone", "role": "tuning",
                                 "_text": '{"question": "q?"}\n'}], {"gone": "nowhere/at/all"})
    result = sets.run_sets(sets.load_manifest(path))
    assert result["sets"] == [] and result["skipped"][0]["corpus"] == "gone"
    assert "nowhere/at/all not found" in sets.format_sets(result)


def test_the_project_manifest_gives_every_set_a_role():
    m = sets.load_manifest(EXAMPLES / "sets.json")  # the naming rule is checked on load
    listed = {s.file.name for s in m.sets}
    # The multilingual sets take their role from their source, one vault a language
    # (benchmarks/bench_languages.py SETS: debian-reference tuning, debian-install test),
    # and are run by that benchmark, not by the manifest.
    on_disk = {p.name for p in EXAMPLES.glob("*.jsonl")
               if p.name.startswith(("questions", "conversations"))
               and not p.name.startswith("questions-debian-")}
    assert listed == on_disk
    assert {s.role for s in m.sets} == {"tuning", "test"}
    assert {s.kind for s in m.sets if s.role == "test"} == {"questions", "conversations"}


def test_per_set_tables_mark_the_tuning_sets_and_pool_each_role_apart(tmp_path, examples_db,
                                                                       shared_embedder):
    lines = [line for line in (EXAMPLES / "questions.jsonl").read_text().splitlines() if line]
    path = _manifest(tmp_path, [
        {"file": "questions-one.jsonl", "corpus": "notes", "role": "tuning",
         "_text": "\n".join(lines[:4]) + "\n"},
        {"file": "questions-two-test.jsonl", "corpus": "notes", "role": "test",
         "_text": "\n".join(lines[4:7]) + "\n"}])
    result = sets.run_sets(sets.load_manifest(path), modes=["bm25"], k=5,
                           dbs={"notes": examples_db}, embedder=shared_embedder)
    roles = {e["file"]: e["role"] for e in result["sets"]}
    assert roles == {"questions-one.jsonl": "tuning", "questions-two-test.jsonl": "test"}
    pooled = result["pooled"]["retrieval"]
    assert pooled["tuning"]["answerable"] == result["sets"][0]["result"]["answerable"]
    assert pooled["test"]["answerable"] == result["sets"][1]["result"]["answerable"]
    table = sets.format_sets(result).splitlines()
    assert next(t for t in table if "questions-one.jsonl" in t).startswith("*")
    assert next(t for t in table if "questions-two-test.jsonl" in t).startswith(" ")
    assert sum("pooled" in t for t in table) == 2


def test_the_cli_refuses_a_manifest_that_breaks_the_naming_rule(tmp_path, capsys):
    from brainbot.cli import main

    path = _manifest(tmp_path, [{"file": "questions.jsonl", "corpus": "notes", "role": "test"}])
    assert main(["eval", "--sets", str(path)]) == 2
    assert "-test.jsonl" in capsys.readouterr().err
    assert main(["eval", "--questions", str(path), "--role", "test"]) == 2


def test_eval_answers_with_sets_runs_the_manifest(tmp_path, capsys):
    """`eval --sets M --answers` measures the manifest's sets' answers (it once took the
    --questions branch, with no file: a traceback)."""
    from brainbot.cli import main

    path = _manifest(tmp_path, [{"file": "questions.jsonl", "corpus": "gone", "role": "tuning",
                                 "_text": '{"question": "q?"}\n'}], {"gone": "nowhere/at/all"})
    assert main(["eval", "--sets", str(path), "--answers", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["sets"] == [] and out["skipped"][0]["corpus"] == "gone"
    assert main(["eval", "--answers"]) == 2
    assert "--answers needs --questions" in capsys.readouterr().err


def test_the_eval_cache_holds_one_corpus_once_however_it_is_reached(tmp_path, monkeypatch):
    """A corpus reached through a symlink and by its real path is one index of one root;
    a cache file that holds another root (as a doubled one did) is brought back to one."""
    import sqlite3

    from brainbot.index.indexer import Indexer

    monkeypatch.setenv("BRAINBOT_CACHE_DIR", str(tmp_path / "cache"))
    real = tmp_path / "corpus"
    real.mkdir()
    (real / "a.md").write_text("# Tare\n\nThe shoyu tare keeps three months in the fridge.\n")
    (real / "b.md").write_text("# Starter\n\nFeed the starter at a 1:1:1 ratio each morning.\n")
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    db = sets.index_of(tmp_path / "link", "docs")
    assert sets.index_of(real, "docs") == db

    def roots() -> set:
        with sqlite3.connect(db) as con:
            return {r[0] for r in con.execute("SELECT DISTINCT root FROM documents")}

    assert roots() == {real.resolve().as_posix()}
    with Indexer(db) as ix:  # the doubled state: the same notes under a second root
        ix.index_paths([tmp_path / "link"])
    assert len(roots()) == 2
    sets.index_of(tmp_path / "link", "docs")
    assert roots() == {real.resolve().as_posix()}

"""The CLI as a user sees it: golden files, JSON shapes, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO

from brainbot.cli import build_parser, main

GOLDEN = Path(__file__).parent / "data" / "golden"


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_chunks_golden(capsys):
    code, out, _ = run_cli(capsys, "chunks", str(GOLDEN / "note.md"))
    assert code == 0
    golden = GOLDEN / "note.chunks.jsonl"
    if os.environ.get("BRAINBOT_UPDATE_GOLDEN"):  # regenerate after a deliberate change
        golden.write_text(out, encoding="utf-8")
    assert out == golden.read_text(encoding="utf-8")


def test_chunk_records_follow_the_contract(capsys):
    _, out, _ = run_cli(capsys, "chunks", str(GOLDEN / "note.md"))
    text = (GOLDEN / "note.md").read_text(encoding="utf-8")
    for line in out.splitlines():
        rec = json.loads(line)
        assert set(rec) == {"chunk_id", "chunk_index", "source_text", "retrieval_text",
                            "metadata", "measurements"}
        meta = rec["metadata"]
        assert set(meta) == {"source_file", "heading_path", "start_line", "end_line",
                             "start_char", "end_char"}
        assert text[meta["start_char"]:meta["end_char"]] == rec["source_text"]
        assert rec["measurements"]["retrieval_tokens"] <= 256


def test_index_json_and_query_json(capsys, tmp_path, vault):
    db = str(tmp_path / "c.db")
    code, out, _ = run_cli(capsys, "index", str(vault), "--db", db, "--json")
    stats = json.loads(out)
    assert code == 0 and {"new", "updated", "unchanged", "removed", "chunks", "embedded",
                          "seconds"} <= set(stats) and stats["new"] == 3
    code, out, _ = run_cli(capsys, "query", "tomatoes sun", "--db", db, "--json", "--explain")
    hits = json.loads(out)
    assert code == 0 and hits[0]["path"] == "sub/beta.md"
    assert {"chunk_id", "path", "heading_path", "start_line", "end_line", "score", "text",
            "explain"} <= set(hits[0])
    code, out, _ = run_cli(capsys, "query", "zzzqqq", "--db", db, "--json", "--mode", "bm25")
    assert code == 0 and json.loads(out) == []
    code, out, _ = run_cli(capsys, "query", "tomatoes", "--db", db, "--jsonl", "--path", "sub/*")
    assert all(json.loads(line)["path"].startswith("sub/") for line in out.splitlines())
    code, out, _ = run_cli(capsys, "query", "tomatoes", "--db", db, "--json", "--tag", "garden")
    assert {h["path"] for h in json.loads(out)} == {"sub/beta.md"}


def test_index_text_summary(capsys, tmp_path, vault):
    code, out, _ = run_cli(capsys, "index", str(vault), "--db", str(tmp_path / "c.db"))
    assert code == 0
    assert re.fullmatch(r"3 new, 0 updated, 0 unchanged, 0 removed · \d+ chunks · \d+ "
                        r"embedded · [\d.]+ s\n", out)


def test_get_lines_and_chunk(capsys, tmp_path, vault):
    db = str(tmp_path / "c.db")
    run_cli(capsys, "index", str(vault), "--db", db)
    code, out, _ = run_cli(capsys, "get", "alpha.md:3:1", "--db", db)
    assert code == 0 and out == "     3  The alpha project ships in March. It uses SQLite for storage.\n"
    _, out, _ = run_cli(capsys, "query", "risk migration", "--db", db, "--json")
    chunk_id = json.loads(out)[0]["chunk_id"]
    code, out, _ = run_cli(capsys, "get", chunk_id, "--db", db)
    assert code == 0 and "migration" in out
    code, _, err = run_cli(capsys, "get", "../etc/passwd", "--db", db)
    assert code != 0 and err.count("\n") == 1 and "not a document" in err


def test_user_errors_are_one_line(capsys, tmp_path):
    code, out, err = run_cli(capsys, "query", "x", "--db", str(tmp_path / "none.db"))
    assert code != 0 and out == "" and err.count("\n") == 1 and "brainbot index" in err
    code, _, err = run_cli(capsys, "index", str(tmp_path / "missing"), "--db",
                           str(tmp_path / "x.db"))
    assert code == 2 and "no such file" in err and err.count("\n") == 1


def test_help_is_instant_and_light():
    # Importing the CLI must not load onnxruntime, numpy-heavy modules or the kernel.
    code = ("import sys, brainbot.cli; "
            "print(sorted(m for m in ('onnxruntime','tokenizers','anthropic','brainbot._kernel')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, check=True).stdout
    assert out.strip() == "[]"


def test_every_command_is_documented_in_the_guide():
    guide = (REPO / "docs" / "guide.md").read_text(encoding="utf-8")
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    for name in sub.choices:
        assert f"brainbot {name}" in guide, f"docs/guide.md does not document `brainbot {name}`"
    for name, parser in sub.choices.items():
        assert "Example:" in (parser.epilog or ""), f"`brainbot {name} --help` has no example"


@pytest.mark.skipif(not EXAMPLES.exists(), reason="examples/notes missing")
def test_report_on_examples(capsys):
    code, out, _ = run_cli(capsys, "report", str(EXAMPLES), "--json")
    report = json.loads(out)
    # The sample vault is well-formed notes: no hard failure, clean boundaries, no junk,
    # and a score that a chunker regression (cut fences, heading-only chunks) would sink.
    assert code == 0 and report["hard"] == {"over_limit": 0, "heading_only": 0,
                                            "cut_fences": 0, "cut_table_rows": 0}
    assert report["signals"]["boundary"]["score"] >= 99 and report["signals"]["junk"]["score"] >= 99
    assert 90 <= report["score"] <= 100 and report["chunks"] > 250 and report["warnings"] == []


def test_a_cold_query_imports_only_what_it_uses(tmp_path, examples_db):
    # With no daemon running, a bm25 query needs neither the HTTP client (serve/client.py)
    # nor the vault's link and date parsing (only --since/--before use it).
    code = ("import sys; from brainbot.cli import main; "
            f"rc = main(['query', 'reading log', '--db', {str(examples_db)!r}, "
            "'--mode', 'bm25', '--json']); "
            "print(sorted(m for m in ('http.client', 'ssl', 'uuid', 'brainbot.notes.vault')"
            " if m in sys.modules), file=sys.stderr); sys.exit(rc)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout), "the query found nothing"
    assert run.stderr.strip().splitlines()[-1] == "[]"

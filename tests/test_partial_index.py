"""Issue 22 part 2: a partly embedded index (`index --no-embed`, a kill in the semantic phase)
is a normal state, and every surface says so: hits, status, doctor, queries, eval."""

from __future__ import annotations

import json

from brainbot.cli import main
from brainbot.doctor import run_checks, status


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _questions(tmp_path):
    qs = tmp_path / "q.jsonl"
    qs.write_text('{"question": "when does alpha ship", "expected": ["alpha.md"]}\n',
                  encoding="utf-8")
    return str(qs)


def test_no_embed_index_is_partial_then_index_finishes_it(capsys, tmp_path, vault):
    db = str(tmp_path / "p.db")
    code, out, _ = run_cli(capsys, "index", str(vault), "--db", db, "--no-embed", "--json")
    chunks = json.loads(out)["chunks"]
    assert code == 0 and chunks > 0

    # status (CLI, and the dict MCP and serve return) counts the vectors
    assert status(db)["embedded"] == f"0 of {chunks} chunks embedded"
    code, out, _ = run_cli(capsys, "status", "--db", db)
    assert code == 0 and f"0 of {chunks} chunks embedded" in out
    # doctor: not a fault, but it says what fills the rest in
    vectors = next(c for c in run_checks(db) if c["name"] == "vectors")
    assert vectors["ok"] and vectors["detail"].startswith(f"0 of {chunks} chunks embedded")
    assert "brainbot index" in vectors["detail"]

    # a hybrid query still finds BM25 hits, flags them, and notes the gap on stderr only
    code, out, err = run_cli(capsys, "query", "tomatoes sun", "--db", db, "--json")
    hits = json.loads(out)
    assert code == 0 and hits and hits[0]["path"] == "sub/beta.md"
    assert all(h["embedded"] is False for h in hits)
    assert err.strip() == (f"note: 0 of {chunks} chunks embedded; run `brainbot index` to "
                           "finish (the vector leg sees only embedded chunks)")
    code, out, err = run_cli(capsys, "query", "tomatoes sun", "--db", db, "--mode", "bm25",
                             "--json")
    assert code == 0 and err == ""  # BM25 alone sees every chunk

    # eval refuses the modes whose figures the gap would falsify, in one line
    code, out, err = run_cli(capsys, "eval", "--questions", _questions(tmp_path), "--db", db,
                             "--modes", "bm25,hybrid")
    assert code != 0 and out == "" and len(err.strip().splitlines()) == 1
    assert f"0 of {chunks} chunks embedded" in err and "brainbot index" in err
    code, out, _ = run_cli(capsys, "eval", "--questions", _questions(tmp_path), "--db", db,
                           "--modes", "bm25", "--json")
    assert code == 0 and "bm25" in json.loads(out)["modes"]

    # a plain `index` runs the semantic phase over what is there
    code, _, _ = run_cli(capsys, "index", str(vault), "--db", db)
    assert code == 0
    assert status(db)["embedded"] == f"{chunks} of {chunks} chunks embedded"
    code, out, err = run_cli(capsys, "query", "tomatoes sun", "--db", db, "--json")
    hits = json.loads(out)
    assert code == 0 and hits and all(h["embedded"] is True for h in hits)
    assert "chunks embedded" not in err
    code, _, err = run_cli(capsys, "eval", "--questions", _questions(tmp_path), "--db", db,
                           "--modes", "hybrid", "--json")
    assert code == 0


def test_first_batches_are_searchable_while_the_lexical_phase_runs(tmp_path):
    """`brainbot index` held after its first committed batch of notes (the identity write
    is commit 1): a BM25 query and a hybrid one, each a new process, find a note of that
    batch, and only notes already written; released, the index finishes every note."""
    import re
    import subprocess
    import sys

    from conftest import REPO
    from reliability_kit import cli_env, connect, write_harness
    from wait_kit import still_running, wait_until

    db, hold = tmp_path / "first.db", tmp_path / "hold"
    env = cli_env(BB_TEST_BATCH="8", BB_TEST_HOLD_COMMIT=f"2:{hold}")
    proc = subprocess.Popen([sys.executable, str(write_harness(tmp_path)), "index",
                             str(REPO / "examples" / "vault"), "--db", str(db), "--no-embed"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_until((tmp_path / "hold.held").exists, "the index commits a batch", timeout=300,
                   alive=still_running(proc))
        con = connect(db)
        written = {p for (p,) in con.execute("SELECT path FROM documents")}
        path, text = con.execute("SELECT d.path, c.retrieval_text FROM chunks c JOIN "
                                 "documents d ON d.id = c.document_id ORDER BY c.id").fetchone()
        con.close()
        word = max(re.findall(r"[a-z]{5,}", text.lower()), key=len)
        for mode in ("bm25", "hybrid"):
            out = subprocess.run([sys.executable, "-m", "brainbot", "query", word, "--db",
                                  str(db), "--mode", mode, "-k", "20", "--json"], cwd=REPO,
                                 env=cli_env(), capture_output=True, text=True, timeout=300)
            assert out.returncode == 0, out.stderr
            hits = json.loads(out.stdout)
            assert path in {h["path"] for h in hits}, (mode, word)
            assert {h["path"] for h in hits} <= written
            assert all(h["embedded"] is False for h in hits)
        assert proc.poll() is None  # still held: the rest of the vault is not written
    finally:
        hold.touch()
        out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    con = connect(db)
    total = con.execute("SELECT count(*) FROM documents").fetchone()[0]
    con.close()
    assert 0 < len(written) < total

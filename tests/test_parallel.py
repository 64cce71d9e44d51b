"""text/parallel.py: chunking on worker processes gives what one process gives, in order.

The oracle is ``documents.chunk_paths`` / ``documents.chunk`` in this process: the records,
retrieval texts, warnings, facts and postings terms must be the same, byte for byte."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from conftest import DATA, EXAMPLES, need_shared

from brainbot.notes.files import Problem
from brainbot.text import documents, parallel
from brainbot.text.analyzers import note_analysis


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of a few notes, so the sample vault is enough to start a pool."""
    monkeypatch.setattr(parallel, "BATCH_CHARS", 4_000)
    monkeypatch.setattr(parallel, "BATCH_DOCUMENTS", 3)


def _view(items) -> list:
    out = []
    for item in items:
        if isinstance(item, Problem):
            out.append(("problem", item.path, item.reason))
            continue
        out.append((item.doc.relpath, item.title, json.dumps(item.parsed.front_matter,
                    default=str, sort_keys=True), item.warnings, item.facts,
                    [json.dumps(c.to_record(), ensure_ascii=False) for c in item.chunks]))
    return out


def test_parallel_chunk_paths_equal_serial(counter, small_batches, tmp_path):
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLES, vault)
    (vault / "broken.md").write_bytes(b"# x\n\x00\x01 binary")
    serial = _view(documents.chunk_paths([vault], counter))
    assert any(v[0] == "problem" and v[1] == "broken.md" for v in serial)
    assert _view(parallel.chunk_paths([vault], counter, workers=2)) == serial
    assert _view(parallel.chunk_paths([vault], counter, workers=1)) == serial


def test_parallel_over_a_corpus_with_analysis(counter):
    corpus = need_shared(DATA / "corpora" / "rust-lang-team-minutes")
    docs = [d for d in documents.readable([corpus]) if not isinstance(d, Problem)][:40]
    got = list(parallel.chunk_in_order(docs, counter=counter, workers=2, analyze=True))
    assert [item for item, _ in got] == docs
    for doc, chunked in got:
        alone = documents.chunk(doc, counter)
        assert chunked.doc is doc
        assert chunked.chunks == alone.chunks and chunked.facts == alone.facts
        assert chunked.lexical == note_analysis(doc.text, [c.retrieval_text
                                                           for c in alone.chunks])


def test_items_without_a_document_pass_through_in_place(counter, small_batches):
    docs = [documents.record("dataset:t", f"r{i}", f"Sentence number {i}. " * 40)
            for i in range(12)]
    items = [(i, d if i % 3 else None) for i, d in enumerate(docs)]
    got = list(parallel.chunk_in_order(items, lambda it: it[1], counter=counter, workers=2))
    assert [item for item, _ in got] == items
    assert [c is None for _, c in got] == [i % 3 == 0 for i in range(12)]
    for (_, doc), chunked in got:
        if doc is not None:
            assert chunked.chunks == documents.chunk(doc, counter).chunks


def test_an_error_comes_at_its_turn_with_its_type(counter, small_batches):
    good = [documents.record("dataset:t", f"r{i}", "Some words here. " * 30) for i in range(8)]
    bad = documents.record("dataset:t", "bad", "x")
    bad.text = b"# bytes, not text"  # parsing raises TypeError, in a worker and here alike
    seen = []
    with pytest.raises(TypeError):
        for item, _ in parallel.chunk_in_order([*good[:5], bad, *good[5:]], counter=counter,
                                               workers=2):
            seen.append(item.relpath)
    assert seen == [d.relpath for d in good[:5]]


def test_usable_cpus_is_at_least_one():
    assert parallel.usable_cpus() >= 1


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc to find the children")
def test_workers_end_when_an_index_is_killed_in_its_lexical_phase(tmp_path):
    """Issue 32: `brainbot index` killed with SIGKILL mid lexical phase left its chunking
    workers and multiprocessing's resource tracker running under init, for good."""
    import signal
    import subprocess
    import sys

    from conftest import REPO
    from reliability_kit import cli_env, write_harness
    from wait_kit import wait_until

    vault = tmp_path / "vault"
    vault.mkdir()
    for i in range(150):  # more than two batches of documents: the pool starts
        (vault / f"n{i:03}.md").write_text(f"# Note {i}\n\nWords about kites, {i}.\n",
                                           encoding="utf-8")
    pids = tmp_path / "children"
    # batches of 4: the first commit comes while the pool still runs
    env = cli_env(BB_TEST_KILL_AT="insert:1", BB_TEST_BATCH="4", BB_TEST_WORKERS="2",
                  BB_TEST_CHILDREN=str(pids))
    err = tmp_path / "stderr"  # a file, not a pipe: orphans would hold a pipe open
    with open(err, "w") as stderr:
        proc = subprocess.run([sys.executable, str(write_harness(tmp_path)), "index",
                               str(vault), "--db", str(tmp_path / "k.db"), "--no-embed"],
                              cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=stderr,
                              timeout=600)
    assert proc.returncode == -signal.SIGKILL, err.read_text()
    children = pids.read_text().split()
    assert len(children) >= 3, children  # the two workers and the resource tracker

    def running(pid: str) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
        except OSError:
            return False

    wait_until(lambda: not any(map(running, children)), "the orphaned children end")

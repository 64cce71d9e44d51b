"""text/parallel.py: chunking on worker processes gives what one process gives, in order.

The oracle is ``documents.chunk_paths`` / ``documents.chunk`` in this process: the records,
retrieval texts, warnings, facts and postings terms must be the same, byte for byte."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import DATA, EXAMPLES, need_shared

from brainbot.notes.files import Problem
from brainbot.notes.language import looks_english
from brainbot.text import documents, parallel
from brainbot.text.lexical import term_frequencies


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
        assert chunked.lexical == [(*term_frequencies(c.retrieval_text),
                                    looks_english(c.retrieval_text)) for c in alone.chunks]


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

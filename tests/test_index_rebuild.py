"""`--rebuild` reuses the old file's vectors by text hash when the model and embedder
match, so an analyzer (or chunker) bump does not embed everything again."""

from __future__ import annotations

import numpy as np
import pytest

from brainbot.errors import IdentityMismatchError
from brainbot.index.indexer import Indexer
from brainbot.store.sqlite import file as sf
from brainbot.text import analyzers


def _index(db, vault, embedder, **kw):
    with Indexer(db, embedder=embedder, workers=1, **kw) as ix:
        return ix.index_paths([vault])


def _vectors(db) -> dict[str, bytes]:
    con = sf.connect(db)
    try:
        return dict(con.execute("SELECT c.text_sha256, e.vector FROM chunks c "
                                "JOIN embeddings e ON e.chunk = c.id"))
    finally:
        con.close()


def test_analyzer_bump_rebuild_embeds_nothing(tmp_path, vault, counting, monkeypatch):
    db = tmp_path / "b.db"
    first = _index(db, vault, counting)
    before = _vectors(db)
    assert first.embedded == len(before) > 0
    monkeypatch.setattr(analyzers, "VERSION", analyzers.VERSION + "-next")
    with pytest.raises(IdentityMismatchError):
        _index(db, vault, counting)
    counting.texts.clear()
    stats = _index(db, vault, counting, rebuild=True)
    assert counting.texts == [] and stats.embedded == 0
    assert stats.vectors == stats.chunks == first.chunks and not stats.partial
    assert _vectors(db) == before  # the same vectors, bit for bit
    con = sf.connect(db)
    assert dict(con.execute("SELECT key, value FROM meta"))["analyzer"].endswith("-next")
    con.close()


def test_rebuild_embeds_what_another_embedder_made(tmp_path, vault, counting):
    db = tmp_path / "b.db"
    first = _index(db, vault, counting)
    con = sf.connect(db)
    con.execute("UPDATE meta SET value = 'other-embedder' WHERE key = 'embedder'")
    con.close()
    counting.texts.clear()
    stats = _index(db, vault, counting, rebuild=True)
    assert stats.embedded == first.embedded == len(counting.texts)


def test_rebuild_embeds_only_new_text(tmp_path, vault, counting):
    db = tmp_path / "b.db"
    _index(db, vault, counting)
    (vault / "delta.md").write_text("# Delta\n\nA brand new note about kites.\n")
    counting.texts.clear()
    stats = _index(db, vault, counting, rebuild=True)
    assert stats.embedded == len(counting.texts) == 1 and "kites" in counting.texts[0]
    assert not stats.partial
    for blob in _vectors(db).values():
        assert np.isclose(np.linalg.norm(np.frombuffer(blob, "<f4")), 1.0, atol=1e-5)

"""The vectors of an index file about to be rebuilt, kept so `--rebuild` need not embed
again what the same model and embedder already embedded.

A vector depends only on its retrieval text and on what made it: the model, its weights,
the dimension, the tokenizer and the embedder (precision). A rebuild forced by another
chunker or analyzer keeps all of those, so each old vector is still the vector of its
text: they are read, by text hash, before the file is emptied. A file that is absent,
unreadable, not a brainbot index, or made by another model or embedder gives none.
"""

from __future__ import annotations

import os

import sqlean as sqlite3

from brainbot.errors import StoreError

from . import file as sf

VECTOR_KEYS = ("model", "model_sha256", "dimension", "tokenizer", "embedder")


def reusable_vectors(path: str | os.PathLike, identity) -> dict[str, bytes]:
    """text_sha256 -> vector blob (little-endian float32) of the index at ``path`` when
    its vectors were made as ``identity`` would make them; else {}."""
    try:
        db = sf.connect(path, readonly=True)
    except (StoreError, sqlite3.Error, OSError):
        return {}
    try:
        meta = sf.read_meta(db)
        if any(meta.get(k) != str(getattr(identity, k)) for k in VECTOR_KEYS):
            return {}
        return dict(db.execute("SELECT c.text_sha256, e.vector FROM chunks c JOIN "
                               "embeddings e ON e.chunk = c.id WHERE length(e.vector) = ?",
                               (4 * int(identity.dimension),)))
    except sqlite3.Error:
        return {}
    finally:
        db.close()

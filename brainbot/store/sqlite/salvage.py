"""The vectors of an index file being rebuilt, read from that file as the rebuild needs
them, so `--rebuild` need not embed again what the same model and embedder already
embedded.

A vector depends only on its retrieval text and on what made it: the model, its weights,
the dimension, the tokenizer and the embedder (precision). A rebuild forced by another
chunker or analyzer keeps all of those, so each old vector is still the vector of its
text. The rebuild writes a new file beside the old one (``store/sqlite/rebuild.py``), so
the old file stays whole on disk until the new one replaces it: its vectors are looked up
there, by text hash, one batch of hashes at a time (the ``chunks_text_sha256`` index), and
never held in memory (a 1M-chunk index's vectors are 1.5 GB). A file that is absent,
unreadable, not a brainbot index, or made by another model or embedder gives none.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import sqlean as sqlite3

from brainbot.errors import StoreError
from brainbot.store.identity import same_vectors

from . import file as sf


class Salvage:
    """The old file's vectors, for the texts asked about; none at all when its vectors
    were not made as ``identity`` would make them (or it cannot be read)."""

    def __init__(self, path: str | os.PathLike, identity) -> None:
        self.db = None
        self.dim_bytes = 4 * int(identity.dimension)
        try:
            db = sf.connect(path, readonly=True)
        except (StoreError, sqlite3.Error, OSError):
            return
        try:
            meta = sf.read_meta(db)
            if same_vectors(meta, identity):
                self.db, db = db, None
        except sqlite3.Error:  # damaged past its meta: nothing to reuse
            pass
        finally:
            if db is not None:
                db.close()

    def vectors(self, text_hashes: Sequence[str]) -> dict[str, bytes]:
        """text_sha256 -> vector blob (little-endian float32) of those the old file has."""
        if self.db is None or not text_hashes:
            return {}
        found: dict[str, bytes] = {}
        hashes = sorted(set(text_hashes))
        try:
            for i in range(0, len(hashes), 500):  # SQLite's limit on bound variables
                part = hashes[i:i + 500]
                found.update(self.db.execute(
                    f"SELECT c.text_sha256, e.vector FROM chunks c JOIN embeddings e "
                    f"ON e.chunk = c.id WHERE c.text_sha256 IN ({','.join('?' * len(part))})"
                    f" AND length(e.vector) = ?", [*part, self.dim_bytes]))
        except sqlite3.Error:  # a damaged old file: what it cannot give is embedded again
            self.close()
            return found
        return found

    def close(self) -> None:
        db, self.db = self.db, None
        if db is not None:
            try:
                db.close()
            except sqlite3.Error:
                pass

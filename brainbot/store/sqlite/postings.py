"""A write transaction's BM25 rows, held until its commit and written in bulk.

``add_document`` hands each chunk's terms here instead of inserting them row by row:
new terms, postings and the document-frequency increments of the whole batch go in with
one statement each, just before the commit, postings in key order so the
``(term, chunk)`` B-tree fills page by page. The rows are the ones the row-by-row writes
made (term ids are handed out in the same order), so the file's content is the same.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from itertools import repeat


class PostingsBuffer:
    """New terms, postings and df increments of one open transaction."""

    def __init__(self) -> None:
        self.terms: list[tuple[int, str]] = []  # (id, term): new to the index
        self.rows: list[tuple[int, int, int]] = []  # (term id, chunk id, tf)
        self.df: Counter = Counter()  # term id -> chunks gaining it

    def add(self, chunk: int, term_ids: list[int], tfs: Iterable[int]) -> None:
        """One chunk's terms (ids) and their counts."""
        self.rows.extend(zip(term_ids, repeat(chunk), tfs))
        self.df.update(term_ids)

    def flush(self, db) -> None:
        """Write what is held (inside the transaction) and forget it."""
        if self.terms:
            db.executemany("INSERT INTO terms(id, term, df) VALUES (?, ?, 0)", self.terms)
        if self.rows:
            self.rows.sort()
            db.executemany("INSERT INTO postings(term, chunk, tf) VALUES (?,?,?)", self.rows)
            db.executemany("UPDATE terms SET df = df + ? WHERE id = ?",
                           [(n, term) for term, n in sorted(self.df.items())])
        self.clear()

    def clear(self) -> None:
        """Drop what is held (the transaction rolled back)."""
        self.terms, self.rows, self.df = [], [], Counter()

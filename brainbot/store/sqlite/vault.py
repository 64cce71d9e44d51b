"""The SQLite store's vault tables: links, tags, dates, languages, and the filters on them.

Mixed into ``SQLiteStore`` (``self.db`` is its connection). The reads that are one query
on both stores (links, backlinks, find_note, the filters) are ``store/reads.py``'s; here are
the writes and the reads whose SQL is SQLite's own. Writing happens inside the store's
batch transaction; ``resolve_links`` runs after a batch, since a link may name a note
written later in the same run.
"""

from __future__ import annotations

from collections.abc import Sequence

from brainbot.store.reads import SharedReads
from brainbot.store.rows import fact_rows


class VaultTables(SharedReads):
    """Links, tags, dates and languages of an open SQLite index (see module docstring)."""

    db = None  # the store's connection

    # -- writing ---------------------------------------------------------------------------
    def write_facts(self, document_id: int, facts, chunk_rows: dict[int, int]) -> None:
        """A note's links (from the chunk each sits in), tags and date."""
        if facts is None:
            return
        self.db.execute("UPDATE documents SET date = ?, date_source = ? WHERE id = ?",
                        (facts.date, facts.date_source, document_id))
        tags, links = fact_rows(document_id, facts, chunk_rows)
        self.db.executemany("INSERT INTO tags(document, tag, source) VALUES (?, ?, ?)", tags)
        self.db.executemany(
            "INSERT INTO links(source_chunk, source_document, line, kind, target, "
            "target_heading, alias) VALUES (?,?,?,?,?,?,?)", links)

    def record_facts(self, document_id: int, facts, english: Sequence[bool]) -> None:
        """Fill the facts of a note indexed before they were kept (its chunks as stored)."""
        rows = dict(self.db.execute(
            "SELECT chunk_index, id FROM chunks WHERE document_id = ?", (document_id,)))
        self.db.execute("DELETE FROM links WHERE source_document = ?", (document_id,))
        self.db.execute("DELETE FROM tags WHERE document = ?", (document_id,))
        self.write_facts(document_id, facts, rows)
        self.db.executemany("UPDATE chunks SET english = ? WHERE document_id = ? AND "
                            "chunk_index = ?",
                            [(int(e), document_id, i) for i, e in enumerate(english)])

    def resolve_links(self) -> int:
        """Point every link at the note it names now; returns how many changed."""
        changes = self._relinked()
        self.db.executemany("UPDATE links SET target_document = ?, resolved = ? WHERE id = ?",
                            [(t, int(t is not None), i) for t, i in changes])
        return len(changes)

    # -- reading ---------------------------------------------------------------------------
    def language_share(self) -> tuple[int, int]:
        """(chunks that do not read as English, chunks whose language is known)."""
        row = self.db.execute("SELECT sum(english = 0), count(english) FROM chunks").fetchone()
        return int(row[0] or 0), int(row[1] or 0)

    def tagged_documents(self, name: str) -> set[int]:
        """Documents tagged ``name`` or a tag below it (``a/b``: ``a/b`` and ``a/b/c``)."""
        return {r[0] for r in self._sql(
            "SELECT document FROM tags WHERE tag = ? OR substr(tag, 1, ?) = ?",
            (name, len(name) + 1, name + "/"))}

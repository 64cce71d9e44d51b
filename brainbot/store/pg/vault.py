"""The Postgres store's vault tables: links, tags, dates, languages, and the filters on them.

Mixed into ``PostgresStore`` (``self.conn`` is its connection, ``self._pending`` the
batch's queued rows), with the meaning of ``store/sqlite/vault.VaultTables`` over the
same tables (migration 4 of both stores). The reads that are one query on both stores
(links, backlinks, find_note, the filters, resolving's inputs) are ``store/reads.py``'s;
here are the writes and the reads whose SQL is Postgres's own.

A new note's tags and links travel with its chunks by binary COPY (``pg_write``); here
are the facts of notes already stored (filled after migration 4 without re-embedding),
resolution after a run, the tag prefix and the language share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from brainbot.store.reads import SharedReads


class PgVault(SharedReads):
    """Links, tags, dates and languages of an open Postgres index (see the docstring)."""

    conn: Any  # the store's connection (a psycopg Connection)

    # -- writing (inside the store's batch) --------------------------------------------------
    def record_facts(self, document_id: int, facts, english: Sequence[bool]) -> None:
        """Fill the facts of a note indexed before they were kept (its chunks as stored):
        its links and tags are queued for the batch's COPY."""
        pending = self._flushed()
        rows = dict(self.conn.execute(
            "SELECT chunk_index, id FROM chunks WHERE document_id = %s", (document_id,)))
        self.conn.execute("DELETE FROM links WHERE source_document = %s", (document_id,))
        self.conn.execute("DELETE FROM tags WHERE document = %s", (document_id,))
        if facts is not None:
            self.conn.execute("UPDATE documents SET date = %s, date_source = %s WHERE id = %s",
                              (facts.date, facts.date_source, document_id))
            pending.add_facts(document_id, facts, rows)
        self.conn.execute(
            "UPDATE chunks c SET english = u.english FROM unnest(%s::int[], %s::bool[]) "
            "AS u(chunk_index, english) WHERE c.document_id = %s "
            "AND c.chunk_index = u.chunk_index",
            (list(range(len(english))), [bool(e) for e in english], document_id))

    def resolve_links(self) -> int:
        """Point every link at the note it names now; returns how many changed."""
        self._flushed()
        changes = self._relinked()
        if changes:
            targets, ids = (list(x) for x in zip(*changes))
            self.conn.execute(
                "UPDATE links l SET target_document = u.target, "
                "resolved = u.target IS NOT NULL "
                "FROM unnest(%s::bigint[], %s::bigint[]) AS u(target, id) WHERE l.id = u.id",
                (targets, ids))
        return len(changes)

    # -- reading -------------------------------------------------------------------------------
    def language_share(self) -> tuple[int, int]:
        """(chunks that do not read as English, chunks whose language is known)."""
        row = self.conn.execute("SELECT count(*) FILTER (WHERE NOT english), count(english) "
                                "FROM chunks").fetchone()
        return int(row[0]), int(row[1])

    def tagged_documents(self, name: str) -> set[int]:
        """Documents tagged ``name`` or a tag below it (``a/b``: ``a/b`` and ``a/b/c``)."""
        below = name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"
        return {r[0] for r in self.conn.execute(  # a LIKE prefix: the tags_tag index serves it
            "SELECT document FROM tags WHERE tag = %s OR tag LIKE %s", (name, below))}

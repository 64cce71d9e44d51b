"""The Postgres store's vault tables: links, tags, dates, languages, and the filters on them.

Mixed into ``PostgresStore`` (``self.conn`` is its connection, ``self._pending`` the
batch's queued rows), with the meaning of ``sqlite_vault.VaultTables`` over the same
tables (migration 4 of both stores). What is not SQL is shared with it: resolving
(``vault.relink``), the filter's rules (``Filter.select``), the rows of a note's facts
and of a link (``store.fact_rows``, ``store.link_row``).

A new note's tags and links travel with its chunks by binary COPY (``pg_write``); here
are the facts of notes already stored (filled after migration 4 without re-embedding),
resolution after a run, the reads, and the filters. Orders that compare text use the
"C" collation, SQLite's binary order, whatever the database's own collation is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from brainbot.store.interface import DocumentRow, Filter, LinkRow, exported_facts, link_row

_LINK_COLUMNS = ("s.path, l.line, l.kind, l.target, l.target_heading, l.alias, t.path, "
                 "c.source_text, c.start_line")
_LINK_FROM = ("FROM links l JOIN documents s ON s.id = l.source_document "
              "JOIN chunks c ON c.id = l.source_chunk "
              "LEFT JOIN documents t ON t.id = l.target_document")
_BY_SOURCE = 'ORDER BY s.path COLLATE "C", l.line, l.id'


class PgVault:
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
        from brainbot.notes.vault import (  # imported here: a query never pays for vault/inline
            relink,
        )

        changes = relink(
            self.conn.execute("SELECT id, root, path FROM documents").fetchall(),
            self.conn.execute("SELECT l.id, d.root, d.path, l.kind, l.target, "
                              "l.target_document FROM links l "
                              "JOIN documents d ON d.id = l.source_document").fetchall())
        if changes:
            targets, ids = (list(x) for x in zip(*changes))
            self.conn.execute(
                "UPDATE links l SET target_document = u.target, "
                "resolved = u.target IS NOT NULL "
                "FROM unnest(%s::bigint[], %s::bigint[]) AS u(target, id) WHERE l.id = u.id",
                (targets, ids))
        return len(changes)

    # -- reading -------------------------------------------------------------------------------
    def links_from(self, document_id: int) -> list[LinkRow]:
        return [link_row(r) for r in self.conn.execute(
            f"SELECT {_LINK_COLUMNS} {_LINK_FROM} WHERE l.source_document = %s "
            "ORDER BY l.line, l.id", (document_id,))]

    def links_to(self, document_id: int) -> list[LinkRow]:
        return [link_row(r) for r in self.conn.execute(
            f"SELECT {_LINK_COLUMNS} {_LINK_FROM} WHERE l.target_document = %s "
            f"AND l.source_document != %s {_BY_SOURCE}", (document_id, document_id))]

    def unresolved_links(self) -> list[LinkRow]:
        return [link_row(r) for r in self.conn.execute(
            f"SELECT {_LINK_COLUMNS} {_LINK_FROM} WHERE l.target_document IS NULL "
            f"{_BY_SOURCE}")]

    def tag_counts(self) -> dict[str, int]:
        return dict(self.conn.execute(
            'SELECT tag, count(*) FROM tags GROUP BY tag ORDER BY count(*) DESC, tag COLLATE "C"'))

    def language_share(self) -> tuple[int, int]:
        """(chunks that do not read as English, chunks whose language is known)."""
        row = self.conn.execute("SELECT count(*) FILTER (WHERE NOT english), count(english) "
                                "FROM chunks").fetchone()
        return int(row[0]), int(row[1])

    def find_note(self, note: str):
        """A note named by path or like a wikilink (or ROOT::NAME), resolved in each indexed
        folder; NotFoundError when none has it, InputError when several do."""
        from brainbot.errors import NotFoundError
        from brainbot.notes.vault import find_in_roots

        found = find_in_roots(self.conn.execute(
            "SELECT root, path FROM documents WHERE kind = 'note'").fetchall(), note)
        if found is None:
            raise NotFoundError(f"no note named {note!r} in this index")
        return next(d for d in self.documents_at(found[1]) if d.root == found[0])

    # -- filters -------------------------------------------------------------------------------
    def filtered_documents(self, flt: Filter) -> list[int]:
        """Ids of the documents a filter lets through."""
        return flt.select(
            self.conn.execute("SELECT id, path, date FROM documents").fetchall(),
            self.tagged_documents,
            lambda note: self.linked_documents(self.find_note(note).id))

    def tagged_documents(self, name: str) -> set[int]:
        """Documents tagged ``name`` or a tag below it (``a/b``: ``a/b`` and ``a/b/c``)."""
        below = name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"
        return {r[0] for r in self.conn.execute(  # a LIKE prefix: the tags_tag index serves it
            "SELECT document FROM tags WHERE tag = %s OR tag LIKE %s", (name, below))}

    def linked_documents(self, target: int) -> set[int]:
        """Documents that link to ``target`` or that it links to (not the note itself)."""
        rows = self.conn.execute(
            "SELECT source_document FROM links WHERE target_document = %s UNION "
            "SELECT target_document FROM links WHERE source_document = %s AND "
            "target_document IS NOT NULL", (target, target))
        return {r[0] for r in rows} - {target}


def export_facts(conn, docs: list) -> dict:
    """The facts of a page of export (documents rows, date at 10), for ``pg_export``."""
    ids = [d[0] for d in docs]
    links = conn.execute(
        "SELECT l.source_document, c.chunk_index, l.line, l.kind, l.target, "
        "l.target_heading, l.alias FROM links l JOIN chunks c ON c.id = l.source_chunk "
        "WHERE l.source_document = ANY(%s) ORDER BY l.source_document, l.id", (ids,))
    tags = conn.execute("SELECT document, tag, source FROM tags WHERE document = ANY(%s)",
                        (ids,))
    return exported_facts(docs, links, tags)

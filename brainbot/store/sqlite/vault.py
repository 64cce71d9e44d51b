"""The SQLite store's vault tables: links, tags, dates, languages, and the filters on them.

Mixed into ``SQLiteStore`` (``self.db`` is its connection); the Postgres store has the
same methods over the same tables. Writing happens inside the store's batch transaction;
``resolve_links`` runs after a batch, since a link may name a note written later in the
same run.
"""

from __future__ import annotations

from collections.abc import Sequence

from brainbot.store.interface import Filter, LinkRow, exported_facts, fact_rows, link_row

_LINK_COLUMNS = ("s.path, l.line, l.kind, l.target, l.target_heading, l.alias, t.path, "
                 "c.source_text, c.start_line")
_LINK_FROM = ("FROM links l JOIN documents s ON s.id = l.source_document "
              "JOIN chunks c ON c.id = l.source_chunk "
              "LEFT JOIN documents t ON t.id = l.target_document")


class VaultTables:
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
        from brainbot.notes.vault import (  # imported here: a query never pays for vault/inline
            relink,
        )

        changes = relink(
            self.db.execute("SELECT id, root, path FROM documents").fetchall(),
            self.db.execute("SELECT l.id, d.root, d.path, l.kind, l.target, l.target_document "
                            "FROM links l JOIN documents d ON d.id = l.source_document"
                            ).fetchall())
        self.db.executemany("UPDATE links SET target_document = ?, resolved = ? WHERE id = ?",
                            [(t, int(t is not None), i) for t, i in changes])
        return len(changes)

    # -- reading ---------------------------------------------------------------------------
    def links_from(self, document_id: int) -> list[LinkRow]:
        return [link_row(r) for r in self.db.execute(
            f"SELECT {_LINK_COLUMNS} {_LINK_FROM} WHERE l.source_document = ? "
            "ORDER BY l.line, l.id", (document_id,))]

    def links_to(self, document_id: int) -> list[LinkRow]:
        return [link_row(r) for r in self.db.execute(
            f"SELECT {_LINK_COLUMNS} {_LINK_FROM} WHERE l.target_document = ? "
            "AND l.source_document != ? ORDER BY s.path, l.line, l.id", (document_id, document_id))]

    def unresolved_links(self) -> list[LinkRow]:
        return [link_row(r) for r in self.db.execute(
            f"SELECT {_LINK_COLUMNS} {_LINK_FROM} WHERE l.target_document IS NULL "
            "ORDER BY s.path, l.line, l.id")]

    def tag_counts(self) -> dict[str, int]:
        return dict(self.db.execute(
            "SELECT tag, count(*) FROM tags GROUP BY tag ORDER BY count(*) DESC, tag"))

    def language_share(self) -> tuple[int, int]:
        """(chunks that do not read as English, chunks whose language is known)."""
        row = self.db.execute("SELECT sum(english = 0), count(english) FROM chunks").fetchone()
        return int(row[0] or 0), int(row[1] or 0)

    def export_facts(self, docs: list) -> dict:
        """The facts of a page of export_documents (documents rows, date at 10)."""
        ids = [d[0] for d in docs]
        marks = ",".join("?" * len(ids))
        links = self.db.execute(
            "SELECT l.source_document, c.chunk_index, l.line, l.kind, l.target, "
            "l.target_heading, l.alias FROM links l JOIN chunks c ON c.id = l.source_chunk "
            f"WHERE l.source_document IN ({marks}) ORDER BY l.source_document, l.id", ids)
        tags = self.db.execute(
            f"SELECT document, tag, source FROM tags WHERE document IN ({marks})", ids)
        return exported_facts(docs, links, tags)

    # -- filters ---------------------------------------------------------------------------
    def filtered_documents(self, flt: Filter) -> list[int]:
        """Ids of the documents a filter lets through."""
        return flt.select(
            self.db.execute("SELECT id, path, date FROM documents").fetchall(),
            self.tagged_documents,
            lambda note: self.linked_documents(self.find_note(note).id))

    def tagged_documents(self, name: str) -> set[int]:
        """Documents tagged ``name`` or a tag below it (``a/b``: ``a/b`` and ``a/b/c``)."""
        return {r[0] for r in self.db.execute(
            "SELECT document FROM tags WHERE tag = ? OR substr(tag, 1, ?) = ?",
            (name, len(name) + 1, name + "/"))}

    def linked_documents(self, target: int) -> set[int]:
        """Documents that link to ``target`` or that it links to (not the note itself)."""
        rows = self.db.execute(
            "SELECT source_document FROM links WHERE target_document = ? UNION "
            "SELECT target_document FROM links WHERE source_document = ? AND "
            "target_document IS NOT NULL", (target, target))
        return {r[0] for r in rows} - {target}

    def find_note(self, note: str):
        """A note named by path or like a wikilink (or ROOT::NAME), resolved in each indexed
        folder; NotFoundError when none has it, InputError when several do."""
        from brainbot.errors import NotFoundError
        from brainbot.notes.vault import find_in_roots

        found = find_in_roots(self.db.execute(
            "SELECT root, path FROM documents WHERE kind = 'note'").fetchall(), note)
        if found is None:
            raise NotFoundError(f"no note named {note!r} in this index")
        return next(d for d in self.documents_at(found[1]) if d.root == found[0])


def chunk_ids_of(db, document_ids: list[int]) -> list[int]:
    ids: list[int] = []
    for i in range(0, len(document_ids), 500):
        part = document_ids[i:i + 500]
        marks = ",".join("?" * len(part))
        ids += [r[0] for r in db.execute(
            f"SELECT id FROM chunks WHERE document_id IN ({marks})", part)]
    return ids

"""The SQLite store's vault tables: links, tags, dates, languages, and the filters on them.

Mixed into ``SQLiteStore`` (``self.db`` is its connection); the Postgres store has the
same methods over the same tables. Writing happens inside the store's batch transaction;
``resolve_links`` runs after a batch, since a link may name a note written later in the
same run.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from .store import Filter, LinkRow
from .vault import Resolver, normal_tag

_LINK_COLUMNS = ("s.path, l.line, l.kind, l.target, l.target_heading, l.alias, t.path, "
                 "c.source_text, c.start_line")
_LINK_FROM = ("FROM links l JOIN documents s ON s.id = l.source_document "
              "JOIN chunks c ON c.id = l.source_chunk "
              "LEFT JOIN documents t ON t.id = l.target_document")


def _link(r) -> LinkRow:
    lines = r[7].split("\n")
    k = r[1] - r[8]
    return LinkRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6],
                   lines[k].strip() if 0 <= k < len(lines) else "")


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
        self.db.executemany(
            "INSERT INTO tags(document, tag, source) VALUES (?, ?, ?)",
            [(document_id, tag, source) for tag, source in sorted(facts.tags.items())])
        self.db.executemany(
            "INSERT INTO links(source_chunk, source_document, line, kind, target, "
            "target_heading, alias) VALUES (?,?,?,?,?,?,?)",
            [(chunk_rows[link.chunk_index], document_id, link.line, link.kind, link.target,
              link.heading, link.alias) for link in facts.links
             if link.chunk_index in chunk_rows])

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
        paths: dict[str, dict[str, int]] = {}
        for doc_id, root, path in self.db.execute("SELECT id, root, path FROM documents"):
            paths.setdefault(root, {})[path] = doc_id
        resolvers = {root: Resolver(docs) for root, docs in paths.items()}
        changes = []
        for link_id, root, source, kind, target, current in self.db.execute(
                "SELECT l.id, d.root, d.path, l.kind, l.target, l.target_document FROM links l "
                "JOIN documents d ON d.id = l.source_document"):
            found = resolvers[root].resolve(source, kind, target)
            target_id = paths[root].get(found) if found else None
            if target_id != current:
                changes.append((target_id, int(target_id is not None), link_id))
        self.db.executemany("UPDATE links SET target_document = ?, resolved = ? WHERE id = ?",
                            changes)
        return len(changes)

    # -- reading ---------------------------------------------------------------------------
    def links_from(self, document_id: int) -> list[LinkRow]:
        return [_link(r) for r in self.db.execute(
            f"SELECT {_LINK_COLUMNS} {_LINK_FROM} WHERE l.source_document = ? "
            "ORDER BY l.line, l.id", (document_id,))]

    def links_to(self, document_id: int) -> list[LinkRow]:
        return [_link(r) for r in self.db.execute(
            f"SELECT {_LINK_COLUMNS} {_LINK_FROM} WHERE l.target_document = ? "
            "AND l.source_document != ? ORDER BY s.path, l.line", (document_id, document_id))]

    def unresolved_links(self) -> list[LinkRow]:
        return [_link(r) for r in self.db.execute(
            f"SELECT {_LINK_COLUMNS} {_LINK_FROM} WHERE l.target_document IS NULL "
            "ORDER BY s.path, l.line")]

    def tag_counts(self) -> dict[str, int]:
        return dict(self.db.execute(
            "SELECT tag, count(*) FROM tags GROUP BY tag ORDER BY count(*) DESC, tag"))

    def language_share(self) -> tuple[int, int]:
        """(chunks that do not read as English, chunks whose language is known)."""
        row = self.db.execute("SELECT sum(english = 0), count(english) FROM chunks").fetchone()
        return int(row[0] or 0), int(row[1] or 0)

    # -- filters ---------------------------------------------------------------------------
    def filtered_documents(self, flt: Filter) -> list[int]:
        """Ids of the documents a filter lets through."""
        rows = self.db.execute("SELECT id, path, date FROM documents").fetchall()
        allowed = {doc_id for doc_id, path, date in rows
                   if (not flt.path_glob or fnmatch.fnmatchcase(path, flt.path_glob))
                   and (not flt.since or (date or "") >= flt.since)
                   and (not flt.before or (date or "9999") < flt.before)}
        for tag in flt.tags:
            name = normal_tag(tag)
            allowed &= {r[0] for r in self.db.execute(
                "SELECT document FROM tags WHERE tag = ? OR substr(tag, 1, ?) = ?",
                (name, len(name) + 1, name + "/"))}
        if flt.linked_to:
            allowed &= self.linked_documents(self.find_note(flt.linked_to).id)
        return sorted(allowed)

    def linked_documents(self, target: int) -> set[int]:
        """Documents that link to ``target`` or that it links to (not the note itself)."""
        rows = self.db.execute(
            "SELECT source_document FROM links WHERE target_document = ? UNION "
            "SELECT target_document FROM links WHERE source_document = ? AND "
            "target_document IS NOT NULL", (target, target))
        return {r[0] for r in rows} - {target}

    def find_note(self, note: str):
        """A note named by path or like a wikilink; NotFoundError when none is."""
        from .errors import NotFoundError

        paths = [r[0] for r in self.db.execute("SELECT path FROM documents WHERE kind = 'note'")]
        found = Resolver(paths).note(note.strip())
        if found is None:
            raise NotFoundError(f"no note named {note!r} in this index")
        return self.document(found)


def chunk_ids_of(db, document_ids: list[int]) -> list[int]:
    ids: list[int] = []
    for i in range(0, len(document_ids), 500):
        part = document_ids[i:i + 500]
        marks = ",".join("?" * len(part))
        ids += [r[0] for r in db.execute(
            f"SELECT id FROM chunks WHERE document_id IN ({marks})", part)]
    return ids

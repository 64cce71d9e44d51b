"""The reads both stores share: one SQL text over the same tables, for SQLite and Postgres.

Both stores keep the same tables with the same columns (migration 4 of each), so a read
that is the same query in both dialects lives here once, in ``SharedReads``, which
``SQLiteStore`` and ``PostgresStore`` inherit. Each store supplies the small seam that
really differs between the two drivers:

- ``_sql(query, params)``: run ``query`` (written with ``?`` placeholders) and return its
  rows as a list; SQLite runs it as written, Postgres rewrites ``?`` to ``%s``. Driver
  errors leave it as the store's one-line StoreError.
- ``_sql_in(query, values)``: the same for a query whose ``{in}`` is a membership test on
  ``values`` (its only parameters): ``IN (?, ?, …)`` in batches of 500 on SQLite (its
  variable limit), ``= ANY(%s)`` with one array on Postgres.
- ``COLLATE``: the collation token after a text ORDER BY. SQLite orders text byte-wise;
  Postgres takes ``COLLATE "C"`` for that same order, whatever the database's collation.
- ``_errors()``: the context in which driver errors become StoreErrors naming the index
  (``translated`` wraps a method in it).
- ``_vector(value)``: a stored vector as float32 numpy (a BLOB on SQLite, pgvector's
  Vector on Postgres), for the export.

What differs for real stays in each store: the legs, the write path, the DDL and
migrations, streaming, and the few reads whose SQL is dialect-specific (tag prefixes,
language share, chunk count).
"""

from __future__ import annotations

import functools
import json
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager

import numpy as np

from .identity import new_index_id
from .records import ChunkRow, DocState, DocumentRow, Filter, LinkRow, NewDocument
from .rows import (
    CHUNK_COLUMNS,
    DOC_COLUMNS,
    chunk_row,
    document_row,
    exported_facts,
    link_row,
    new_chunk,
    new_document,
)

EXPORT_PAGE = 200  # documents a page: ~500 chunks of NFCorpus, ~2 MB of rows
TABLES = ("documents", "chunks", "embeddings", "terms", "postings")  # what counts() counts

_LINK_SELECT = ("SELECT s.path, l.line, l.kind, l.target, l.target_heading, l.alias, t.path, "
                "c.source_text, c.start_line FROM links l "
                "JOIN documents s ON s.id = l.source_document "
                "JOIN chunks c ON c.id = l.source_chunk "
                "LEFT JOIN documents t ON t.id = l.target_document")
_EXPORT_DOCS = ("SELECT id, root, path, sha256, size, mtime_ns, title, front_matter, kind, "
                "warnings, date, date_source, read_ns FROM documents WHERE id > ? ORDER BY id "
                "LIMIT ?")
# the columns interface.new_chunk reads, in its order, and the vector (or NULL) at 16
_EXPORT_CHUNKS = ("SELECT c.id, c.document_id, c.chunk_id, c.chunk_index, c.heading_path, "
                  "c.source_text, c.retrieval_text, c.start_line, c.end_line, c.start_char, "
                  "c.end_char, c.source_tokens, c.retrieval_tokens, c.text_sha256, "
                  "c.lexical_length, c.english, e.vector FROM chunks c "
                  "LEFT JOIN embeddings e ON e.chunk = c.id "
                  "WHERE c.document_id {in} ORDER BY c.document_id, c.chunk_index")
_EXPORT_POSTINGS = ("SELECT p.chunk, t.term, p.tf FROM postings p JOIN terms t "
                    "ON t.id = p.term WHERE p.chunk {in}")
_EXPORT_LINKS = ("SELECT l.source_document, c.chunk_index, l.line, l.kind, l.target, "
                 "l.target_heading, l.alias FROM links l JOIN chunks c ON c.id = l.source_chunk "
                 "WHERE l.source_document {in} ORDER BY l.source_document, l.id")


def translated(method):
    """A store method whose driver errors leave it as the store's StoreError (``_errors``)."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._errors():
            return method(self, *args, **kwargs)
    return wrapper


def chunk_records_sql(collate: str) -> str:
    """The query ``interface.chunk_record`` reads, by path (in ``collate``) and index."""
    return ("SELECT c.chunk_id, c.chunk_index, c.source_text, c.retrieval_text, d.path, "
            "c.heading_path, c.start_line, c.end_line, c.start_char, c.end_char, "
            "c.source_tokens, c.retrieval_tokens FROM chunks c JOIN documents d "
            f"ON d.id = c.document_id ORDER BY d.path{collate}, c.chunk_index")


class SharedReads:
    """The reads of the ``Store`` interface that are one query on both stores."""

    COLLATE = ""
    _meta: dict[str, str] | None = None

    def close(self) -> None:
        raise NotImplementedError

    def _errors(self) -> AbstractContextManager:
        """Driver errors raised inside as one-line StoreErrors naming the index."""
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _sql(self, query: str, params: Sequence = ()) -> list[tuple]:
        raise NotImplementedError

    def _sql_in(self, query: str, values: Sequence) -> list[tuple]:
        raise NotImplementedError

    def _vector(self, value) -> np.ndarray:
        raise NotImplementedError

    # -- meta and counts ---------------------------------------------------------------
    def meta(self) -> dict[str, str]:
        if self._meta is None:
            self._meta = dict(self._sql("SELECT key, value FROM meta"))
        return dict(self._meta)

    def generation(self) -> int:
        rows = self._sql("SELECT value FROM meta WHERE key = 'generation'")
        return int(rows[0][0]) if rows else 0

    def _first_meta(self) -> dict[str, str]:
        """What a writer adds to meta when the index has none yet (at creation, or the
        first writer of an index from before them): its ``index_id``, and which roots were
        indexed as folders, for an older index the old guess: roots of more than one note."""
        meta, out = self.meta(), {}
        if "index_id" not in meta:
            out["index_id"] = new_index_id()
        if "folder_roots" not in meta:
            out["folder_roots"] = json.dumps(sorted(r[0] for r in self._sql(
                "SELECT root FROM documents WHERE kind = 'note' GROUP BY root "
                "HAVING count(*) > 1")), ensure_ascii=False)
        return out

    def refused_path(self, root: str, path: str) -> str | None:
        """Why a note at ``path`` under ``root`` cannot be indexed in this store (None: it
        can). SQLite holds any path; Postgres refuses what its btree cannot."""
        return None

    def folder_roots(self) -> set[str] | None:
        """The roots indexed as folders (meta ``folder_roots``), not as single files: only
        they count notes not yet indexed as new. None for an index from before they were
        recorded."""
        raw = self.meta().get("folder_roots")
        return None if raw is None else set(json.loads(raw))

    def add_folder_roots(self, roots: Sequence[str]) -> None:
        """Record ``roots`` as indexed as folders (a writer, after a run), with the others
        that still hold documents; written only when that changes."""
        recorded = self.folder_roots()
        held = {r[0] for r in self._sql("SELECT DISTINCT root FROM documents "
                                        "WHERE kind = 'note'")}
        wanted = {r for r in recorded or () if r in held} | set(roots)
        if wanted != recorded:
            with self.batch():
                self.set_meta("folder_roots", json.dumps(sorted(wanted), ensure_ascii=False))

    def counts(self) -> dict[str, int]:
        return {table: int(self._sql(f"SELECT count(*) FROM {table}")[0][0])
                for table in TABLES}

    def doc_freqs(self, terms: Sequence[str]) -> dict[str, int]:
        terms = sorted(set(terms))
        return dict(self._sql_in("SELECT term, df FROM terms WHERE term {in}", terms))

    def known_documents(self, root: str) -> dict[str, DocState]:
        return {path: DocState(i, sha, size, mtime, read) for i, path, sha, size, mtime, read in
                self._sql("SELECT id, path, sha256, size, mtime_ns, read_ns FROM documents "
                          "WHERE root = ?", (root,))}

    def unembedded_chunks(self, after: int, limit: int) -> list[tuple[int, str, str]]:
        """(chunk id, text hash, retrieval text) of chunks without a vector, id > after,
        in id order."""
        return self._sql(
            "SELECT c.id, c.text_sha256, c.retrieval_text FROM chunks c WHERE c.id > ? AND "
            "NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.chunk = c.id) ORDER BY c.id "
            "LIMIT ?", (after, limit))

    # -- documents and chunks ------------------------------------------------------------
    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        return {r[0]: chunk_row(r) for r in self._sql_in(
            f"SELECT {CHUNK_COLUMNS} FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE c.id {in}", [int(i) for i in ids])}

    def document_chunks(self, document_id: int) -> list[ChunkRow]:
        return [chunk_row(r) for r in self._sql(
            f"SELECT {CHUNK_COLUMNS} FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE c.document_id = ? ORDER BY c.start_char, c.id", (document_id,))]

    def chunk_by_public_id(self, chunk_id: str) -> ChunkRow | None:
        rows = self._sql(
            f"SELECT {CHUNK_COLUMNS} FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE c.chunk_id = ? ORDER BY c.id LIMIT 1", (chunk_id,))
        return chunk_row(rows[0]) if rows else None

    def document(self, path: str) -> DocumentRow | None:
        rows = self._sql(f"SELECT {DOC_COLUMNS} FROM documents d WHERE d.path = ? "
                         "ORDER BY d.id LIMIT 1", (path,))
        return document_row(rows[0]) if rows else None

    def documents_at(self, path: str) -> list[DocumentRow]:
        """The documents at ``path`` under each indexed folder that has one."""
        return [document_row(r) for r in self._sql(
            f"SELECT {DOC_COLUMNS} FROM documents d WHERE d.path = ? "
            f"ORDER BY d.root{self.COLLATE}", (path,))]

    def documents(self) -> list[DocumentRow]:
        c = self.COLLATE
        return [document_row(r) for r in self._sql(
            f"SELECT {DOC_COLUMNS} FROM documents d ORDER BY d.root{c}, d.path{c}")]

    def document_vectors(self, document_id: int) -> list[tuple[int, np.ndarray | None]]:
        """(chunk id, vector; None when not embedded yet) of a document's chunks, in order."""
        return [(r[0], None if r[1] is None else self._vector(r[1])) for r in self._sql(
            "SELECT c.id, e.vector FROM chunks c LEFT JOIN embeddings e ON e.chunk = c.id "
            "WHERE c.document_id = ? ORDER BY c.chunk_index", (document_id,))]

    def heading_at(self, document_id: int, line: int) -> list[str]:
        rows = self._sql(
            "SELECT heading_path FROM chunks WHERE document_id = ? AND start_line <= ? "
            "ORDER BY start_line DESC LIMIT 1", (document_id, line))
        return json.loads(rows[0][0]) if rows else []

    # -- links and tags ------------------------------------------------------------------
    def links_from(self, document_id: int) -> list[LinkRow]:
        return [link_row(r) for r in self._sql(
            f"{_LINK_SELECT} WHERE l.source_document = ? ORDER BY l.line, l.id",
            (document_id,))]

    def links_to(self, document_id: int) -> list[LinkRow]:
        return [link_row(r) for r in self._sql(
            f"{_LINK_SELECT} WHERE l.target_document = ? AND l.source_document != ? "
            f"ORDER BY s.path{self.COLLATE}, l.line, l.id", (document_id, document_id))]

    def unresolved_links(self) -> list[LinkRow]:
        return [link_row(r) for r in self._sql(
            f"{_LINK_SELECT} WHERE l.target_document IS NULL "
            f"ORDER BY s.path{self.COLLATE}, l.line, l.id")]

    def tag_counts(self) -> dict[str, int]:
        return dict(self._sql("SELECT tag, count(*) FROM tags GROUP BY tag "
                              f"ORDER BY count(*) DESC, tag{self.COLLATE}"))

    def find_note(self, note: str) -> DocumentRow:
        """A note named by path or like a wikilink (or ROOT::NAME), resolved in each indexed
        folder; NotFoundError when none has it, InputError when several do."""
        from brainbot.errors import NotFoundError
        from brainbot.notes.vault import find_in_roots

        found = find_in_roots(
            self._sql("SELECT root, path FROM documents WHERE kind = 'note'"), note)
        if found is None:
            raise NotFoundError(f"no note named {note!r} in this index")
        return next(d for d in self.documents_at(found[1]) if d.root == found[0])

    def _relinked(self) -> list[tuple[int | None, int]]:
        """(target document or None, link id) for every link whose target changed."""
        from brainbot.notes.vault import (  # imported here: a query never pays for vault/inline
            relink,
        )

        return relink(
            self._sql("SELECT id, root, path FROM documents"),
            self._sql("SELECT l.id, d.root, d.path, l.kind, l.target, l.target_document "
                      "FROM links l JOIN documents d ON d.id = l.source_document"))

    # -- filters -------------------------------------------------------------------------
    def filtered_documents(self, flt: Filter) -> list[int]:
        """Ids of the documents a filter lets through."""
        return flt.select(
            self._sql("SELECT id, path, date FROM documents"),
            self.tagged_documents,
            lambda note: self.linked_documents(self.find_note(note).id))

    def tagged_documents(self, name: str) -> set[int]:
        raise NotImplementedError

    def linked_documents(self, target: int) -> set[int]:
        """Documents that link to ``target`` or that it links to (not the note itself)."""
        rows = self._sql(
            "SELECT source_document FROM links WHERE target_document = ? UNION "
            "SELECT target_document FROM links WHERE source_document = ? AND "
            "target_document IS NOT NULL", (target, target))
        return {r[0] for r in rows} - {target}

    # -- the export ----------------------------------------------------------------------
    def _export_pages(self) -> Iterator[NewDocument]:
        """Every document with its chunks, vectors, terms and facts, ids kept, in id
        order, a page of ``EXPORT_PAGE`` documents at a time (keyset paging, so memory
        stays bounded by a page). The caller holds the snapshot."""
        last = 0
        while True:
            docs = self._sql(_EXPORT_DOCS, (last, EXPORT_PAGE))
            if not docs:
                return
            last = docs[-1][0]
            yield from self._export_page(docs)

    def _export_page(self, docs: list) -> Iterator[NewDocument]:
        rows = self._sql_in(_EXPORT_CHUNKS, [d[0] for d in docs])
        terms: dict[int, Counter] = defaultdict(Counter)
        for chunk, term, tf in self._sql_in(_EXPORT_POSTINGS, [r[0] for r in rows]):
            terms[chunk][term] = tf
        by_doc: dict[int, list] = defaultdict(list)
        paths = {d[0]: d[2] for d in docs}
        for r in rows:
            vector = None if r[16] is None else self._vector(r[16])  # None: not embedded yet
            by_doc[r[1]].append(new_chunk(r, paths[r[1]], vector, terms[r[0]]))
        ids = [d[0] for d in docs]
        facts = exported_facts(
            docs, self._sql_in(_EXPORT_LINKS, ids),
            self._sql_in("SELECT document, tag, source FROM tags WHERE document {in}", ids))
        for d in docs:
            yield new_document(d, by_doc[d[0]], facts[d[0]])

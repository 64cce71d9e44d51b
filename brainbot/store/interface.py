"""The store interface: what the indexer, search, answers, eval, status and doctor may ask
of an index, and the records that cross it.

Two implementations: ``SQLiteStore`` (``store/sqlite/store.py``: one file, the legs scored by
the C kernel over arrays loaded once) and ``PostgresStore`` (``store/pg/store.py``: pgvector
and BM25 in SQL). ``db.open_store`` picks one from ``--db``: a ``postgresql://`` URL or
a path. Fusion and re-ranking sit above this interface, so both stores rank alike.

A store owns its SQL. Nothing above it writes a query.
"""

from __future__ import annotations

import fnmatch
import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .identity import IndexIdentity

if TYPE_CHECKING:  # notes/vault.py (and notes/inline.py under it) costs ~14 ms: a query never needs it
    from brainbot.notes.vault import NoteFacts


# -- records ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DocState:
    """What the indexer compares a file on disk with."""

    id: int
    sha256: str
    size: int
    mtime_ns: int
    read_ns: int | None = None  # when it was read (None: before schema 5)


@dataclass(frozen=True)
class DocumentRow:
    """One indexed document."""

    id: int
    root: str
    path: str
    sha256: str
    size: int
    mtime_ns: int
    title: str
    kind: str  # "note": a file under root; "record": a dataset record, no file
    warnings: tuple[str, ...] = ()
    date: str | None = None  # YYYY-MM-DD
    date_source: str | None = None  # front_matter | filename | mtime
    read_ns: int | None = None  # when the indexer read it (None: before schema 5)

    @property
    def on_disk(self) -> bool:
        return self.kind == "note"


@dataclass(frozen=True)
class ChunkRow:
    """One indexed chunk, with where it lives and what its file looked like when indexed."""

    id: int
    chunk_id: str
    path: str
    root: str
    heading_path: list[str]
    start_line: int
    end_line: int
    start_char: int
    end_char: int
    text: str
    document: DocumentRow
    embedded: bool = True  # has a vector: a partly embedded index holds chunks without


@dataclass
class NewDocument:
    """A document the indexer writes, with its chunks."""

    root: str
    path: str
    sha256: str
    size: int
    mtime_ns: int
    title: str
    front_matter: dict
    kind: str = "note"
    warnings: list[str] = field(default_factory=list)
    chunks: list[NewChunk] = field(default_factory=list)
    facts: object = None  # vault.NoteFacts: links, tags, date (None for dataset records)
    id: int | None = None  # None: the store assigns one; set by a copy to keep ids
    read_ns: int | None = None  # time.time_ns() before the file was read

    def front_matter_json(self) -> str:
        return json.dumps(self.front_matter, ensure_ascii=False, default=str, sort_keys=True)


@dataclass
class NewChunk:
    """A chunk to write: the chunker's record, its vector and its BM25 terms."""

    chunk: object  # chunking.Chunk
    text_sha256: str
    vector: np.ndarray | None  # float32 (dim,), L2-normalised; None: not embedded yet
    terms: Counter
    length: int  # analyzed terms: BM25's document length
    english: bool | None = True  # language.looks_english of its retrieval text; None:
    # not known yet (an index from before migration 4, until its next run)
    id: int | None = None  # None: the store assigns one; set by a copy to keep ids


@dataclass(frozen=True)
class LinkRow:
    """A link between two notes, as written and as resolved, with its line."""

    source: str  # path of the linking note
    line: int
    kind: str  # wikilink | embed | markdown
    target: str  # as written
    heading: str | None
    alias: str | None
    target_path: str | None  # the note it resolves to; None when unresolved
    line_text: str = ""  # the linking line, as indexed


@dataclass(frozen=True)
class Filter:
    """Which documents a query may return. Empty: all of them."""

    path_glob: str | None = None
    tags: tuple[str, ...] = ()  # each must match; "a/b" also matches "a/b/c"
    since: str | None = None  # YYYY-MM-DD, inclusive (a note's date)
    before: str | None = None  # YYYY-MM-DD, exclusive
    linked_to: str | None = None  # a note (path or name): notes linking to it or linked from it

    def __bool__(self) -> bool:
        return bool(self.path_glob or self.tags or self.since or self.before or self.linked_to)

    def select(self, documents: Iterable[tuple[int, str, str | None]],
               tagged: Callable[[str], set[int]], linked: Callable[[str], set[int]]
               ) -> list[int]:
        """The ids of ``documents`` ((id, path, date) rows) that pass, sorted. Both stores
        filter through here so that they agree: the path glob with fnmatch's case-sensitive
        meaning; the dates as ISO strings (a note without a date passes neither bound);
        each tag through ``tagged(name)`` (the documents carrying it or a tag below it);
        ``linked_to`` through ``linked(note)`` (the notes linking to it or linked from it,
        not the note itself)."""
        allowed = {doc_id for doc_id, path, date in documents
                   if (not self.path_glob or fnmatch.fnmatchcase(path, self.path_glob))
                   and (not self.since or (date or "") >= self.since)
                   and (not self.before or (date or "9999") < self.before)}
        if self.tags:
            from brainbot.notes.vault import normal_tag

            for tag in self.tags:
                allowed &= tagged(normal_tag(tag))
        if self.linked_to:
            allowed &= linked(self.linked_to)
        return sorted(allowed)


def now_iso() -> str:
    """A document's indexed_at: UTC, to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# -- rows of the stores' tables, to and from the records above --------------------------
# Both stores keep the same columns in the same order, so these are shared: what one
# writes, the other reads back the same way (a copy round-trips exactly).
# The select lists that document_row and chunk_row read (the queries are store/reads.py's).
DOC_COLUMNS = ("d.id, d.root, d.path, d.sha256, d.size, d.mtime_ns, d.title, d.kind, "
               "d.warnings, d.date, d.date_source, d.read_ns")
CHUNK_COLUMNS = ("c.id, c.chunk_id, c.heading_path, c.start_line, c.end_line, c.start_char, "
                 "c.end_char, c.source_text, " + DOC_COLUMNS
                 + ", EXISTS (SELECT 1 FROM embeddings e WHERE e.chunk = c.id)")


def document_row(r) -> DocumentRow:
    """A DocumentRow from a row selecting DOC_COLUMNS."""
    return DocumentRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6] or "", r[7],
                       tuple(json.loads(r[8] or "[]")), r[9], r[10], r[11])


def chunk_row(r) -> ChunkRow:
    """A ChunkRow from a row selecting CHUNK_COLUMNS."""
    doc = document_row(r[8:20])
    return ChunkRow(r[0], r[1], doc.path, doc.root, json.loads(r[2]), r[3], r[4], r[5], r[6],
                    r[7], doc, bool(r[20]))


def chunk_record(r) -> dict:
    """The chunk record (README "The chunk record") from a row of reads.chunk_records_sql."""
    return {"chunk_id": r[0], "chunk_index": r[1], "source_text": r[2], "retrieval_text": r[3],
            "metadata": {"source_file": r[4], "heading_path": json.loads(r[5]),
                         "start_line": r[6], "end_line": r[7], "start_char": r[8],
                         "end_char": r[9]},
            "measurements": {"source_tokens": r[10], "retrieval_tokens": r[11]}}


def new_document(d, chunks: list[NewChunk], facts: NoteFacts | None = None) -> NewDocument:
    """A NewDocument from a documents row (id, root, path, sha256, size, mtime_ns, title,
    front_matter, kind, warnings, date, date_source, read_ns)."""
    return NewDocument(d[1], d[2], d[3], d[4], d[5], d[6] or "", json.loads(d[7]), d[8],
                       json.loads(d[9] or "[]"), chunks, facts, id=d[0], read_ns=d[12])


def new_chunk(r, path: str, vector, terms: Counter) -> NewChunk:
    """A NewChunk from a chunks row as the exports select it (id, document id, chunk_id,
    chunk_index, heading_path, texts, spans, tokens, text_sha256, length, english, ...)."""
    from brainbot.text.chunking import Chunk

    chunk = Chunk(r[2], r[3], path, tuple(json.loads(r[4])), r[5], r[6], r[7], r[8], r[9],
                  r[10], r[11], r[12])
    english = None if r[15] is None else bool(r[15])
    return NewChunk(chunk, r[13], vector, terms, r[14], english, id=r[0])


def exported_facts(docs, links, tags) -> dict[int, NoteFacts | None]:
    """Each document's facts, from its row (date and date_source at 10 and 11), its links
    ((document, chunk_index, line, kind, target, heading, alias), in the order written)
    and its tags ((document, tag, source)). None for a document with none (a dataset
    record; a note not yet re-read after migration 4), as the indexer writes them."""
    from brainbot.notes.vault import NoteFacts, NoteLink

    by_links: dict[int, list[NoteLink]] = defaultdict(list)
    for r in links:
        by_links[r[0]].append(NoteLink(*r[1:7]))
    by_tags: dict[int, dict[str, str]] = defaultdict(dict)
    for doc, tag, source in tags:
        by_tags[doc][tag] = source
    return {d[0]: NoteFacts(tuple(by_links[d[0]]), dict(sorted(by_tags[d[0]].items())),
                            d[10], d[11])
            if d[10] is not None or by_links[d[0]] or by_tags[d[0]] else None
            for d in docs}


def fact_rows(document_id: int, facts: NoteFacts, chunk_rows: dict[int, int]
              ) -> tuple[list[tuple], list[tuple]]:
    """A note's rows for the tags table (document, tag, source) and the links table
    (source_chunk, source_document, line, kind, target, target_heading, alias), given its
    chunks' ids by chunk_index."""
    tags = [(document_id, tag, source) for tag, source in sorted(facts.tags.items())]
    links = [(chunk_rows[link.chunk_index], document_id, link.line, link.kind, link.target,
              link.heading, link.alias) for link in facts.links
             if link.chunk_index in chunk_rows]
    return tags, links


def link_row(r) -> LinkRow:
    """A LinkRow from (source path, line, kind, target, heading, alias, target path, the
    source chunk's text and start line): the linking line is cut from the chunk."""
    lines = r[7].split("\n")
    k = r[1] - r[8]
    return LinkRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6],
                   lines[k].strip() if 0 <= k < len(lines) else "")


# -- the interface ----------------------------------------------------------------------
class Store(Protocol):
    """An open index. Readers and the one writer use the same object type."""

    target: str  # the path or the URL (password hidden), for messages

    def close(self) -> None: ...
    def __enter__(self) -> Store: ...
    def __exit__(self, *exc) -> None: ...
    def meta(self) -> dict[str, str]: ...
    def generation(self) -> int: ...
    def folder_roots(self) -> set[str] | None: ...  # roots indexed as folders

    # -- writing (only on a store opened with write=True: it holds the writer lock) ----
    def batch(self) -> AbstractContextManager: ...
    def record_identity(self, identity: IndexIdentity) -> None: ...
    def set_meta(self, key: str, value: str | None) -> None: ...
    def known_documents(self, root: str) -> dict[str, DocState]: ...
    def refused_path(self, root: str, path: str) -> str | None: ...  # None: may be indexed
    def vectors_for(self, text_hashes: Sequence[str]) -> dict[str, np.ndarray]: ...
    def touch_documents(self, updates: Sequence[tuple[int, int, int, int | None]]) -> None: ...
    def delete_documents(self, doc_ids: Sequence[int]) -> None: ...
    def add_document(self, doc: NewDocument) -> int: ...
    # the semantic phase: chunks written without a vector, and their vectors
    def unembedded_chunks(self, after: int, limit: int) -> list[tuple[int, str, str]]: ...
    def add_vectors(self, rows: Sequence[tuple[int, str, np.ndarray]]) -> None: ...
    def bulk_load(self) -> AbstractContextManager: ...  # around a load into an empty index
    def add_folder_roots(self, roots: Sequence[str]) -> None: ...  # after a run

    # -- the legs: (chunk ids int64, scores float32), best first, -1 / -inf padded ------
    def bm25_topk(self, terms: Counter, n: int, flt: Filter | None = None): ...
    def vector_topk(self, qvec: np.ndarray, n: int, flt: Filter | None = None): ...
    def refresh(self) -> bool: ...

    # -- reading back ------------------------------------------------------------------
    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]: ...
    def chunk_by_public_id(self, chunk_id: str) -> ChunkRow | None: ...
    def document_chunks(self, document_id: int) -> list[ChunkRow]: ...  # in text order
    def document(self, path: str) -> DocumentRow | None: ...
    def documents_at(self, path: str) -> list[DocumentRow]: ...  # one per root holding it
    def documents(self) -> list[DocumentRow]: ...
    def heading_at(self, document_id: int, line: int) -> list[str]: ...
    def document_vectors(self, document_id: int) -> list[tuple[int, np.ndarray | None]]: ...
    def linked_documents(self, target: int) -> set[int]: ...  # linking to it or linked from it
    def chunk_records(self) -> Iterator[dict]: ...
    def export_documents(self) -> Iterator[NewDocument]: ...  # ids, vectors, terms kept

    # -- the vault: links, tags, language ------------------------------------------------
    def resolve_links(self) -> int: ...
    def find_note(self, note: str) -> DocumentRow: ...
    def links_from(self, document_id: int) -> list[LinkRow]: ...
    def links_to(self, document_id: int) -> list[LinkRow]: ...
    def unresolved_links(self) -> list[LinkRow]: ...
    def tag_counts(self) -> dict[str, int]: ...
    def language_share(self) -> tuple[int, int]: ...
    def record_facts(self, document_id: int, facts, english: Sequence[bool]) -> None: ...
    def doc_freqs(self, terms: Sequence[str]) -> dict[str, int]: ...
    def chunk_count(self) -> int: ...
    def vector_count(self) -> int: ...  # chunks with a vector (the rest await the semantic phase)
    def counts(self) -> dict[str, int]: ...
    def integrity(self) -> str: ...
    def size_bytes(self) -> int: ...

"""The records that cross the store interface (``store/interface.py``): a document and a
chunk as indexed, what the indexer writes, a link, and the Filter a query passes.
Both stores return these same types, so everything above them ranks and prints alike.
"""

from __future__ import annotations

import fnmatch
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np


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

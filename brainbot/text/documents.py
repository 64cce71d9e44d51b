"""From paths to chunks: the one loop that finds notes, reads them, parses and chunks them.

``brainbot index``, ``brainbot chunks`` and ``brainbot report PATH`` all go through here:
``roots`` validates the paths and discovers the notes under each, ``read`` turns a found
file into a Document, ``chunk`` parses and chunks one, and ``chunk_paths`` runs the three
for the commands that want every chunk. The indexer runs the same three steps with its
incremental checks between them (skip a file whose stat is unchanged, touch one whose
hash is).

A Document is either a note on disk or a record of a dataset (BEIR): records have no
file, and their text has no heading to stand in for (``fallback_heading=""``).

This module does not embed, store or rank anything.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from brainbot.errors import InputError
from brainbot.notes import files as notes


@dataclass
class Document:
    """One document to index: a note read from disk, or a dataset record."""

    root: str  # absolute POSIX folder of a note; "dataset:NAME" for a record
    relpath: str
    text: str
    sha256: str
    size: int
    mtime_ns: int
    warnings: tuple[str, ...] = ()
    kind: str = "note"  # "note" | "record"
    read_ns: int | None = None  # time.time_ns() just before the file was read

    @property
    def on_disk(self) -> bool:
        return self.kind == "note"


@dataclass
class Chunked:
    """A document parsed and chunked; ``warnings`` adds what parsing found (bad YAML);
    ``facts`` its links, tags and date (``notes/vault.py``; None for a dataset record)."""

    doc: Document
    parsed: object  # markdown.ParsedNote
    chunks: list
    warnings: tuple[str, ...] = ()
    facts: object = None
    # parallel.chunk_in_order(analyze=...): per chunk, (terms, length, looks_english,
    # language) of its retrieval text, as analyzers.note_analysis gives them.
    lexical: list | None = None

    @property
    def title(self) -> str:
        return self.parsed.title or Path(self.doc.relpath).stem


@dataclass
class Root:
    """One indexed path: a folder (scope None: every note under it) or a single file."""

    path: str  # absolute POSIX
    scope: set[str] | None
    files: list[notes.NoteFile] = field(default_factory=list)
    problems: list[notes.Problem] = field(default_factory=list)


def roots(paths: Iterable[str | Path]) -> Iterator[Root]:
    """Each path as a Root with its notes found, or InputError for a missing path."""
    for raw in paths:
        target = Path(raw)
        if not target.exists():
            raise InputError(f"{raw}: no such file or folder")
        found = notes.discover(target)
        if target.is_file():
            root, scope = target.absolute().parent, {target.name}
        else:
            root, scope = target.absolute(), None
        yield Root(root.as_posix(), scope, found.files, found.problems)


def read(note: notes.NoteFile) -> Document:
    """Read, hash and decode a found note; raises notes.UnreadableNote."""
    read_ns = time.time_ns()  # before the read: index/freshness.racy errs towards re-reading
    text = notes.read_note(note.path)
    return Document(note.root.as_posix(), note.relpath, text.text, text.sha256, note.size,
                    note.mtime_ns, text.warnings, read_ns=read_ns)


def record(root: str, relpath: str, text: str) -> Document:
    """A dataset record (no file on disk), hashed like a note."""
    import hashlib

    data = text.encode("utf-8")
    return Document(root, relpath, text, hashlib.sha256(data).hexdigest(), len(data), 0,
                    kind="record")


def chunk(doc: Document, counter, params=None) -> Chunked:
    """Parse and chunk one document; a front-matter error becomes a warning."""
    from brainbot.notes.inline import InlineMarkup
    from brainbot.notes.markdown import parse
    from brainbot.notes.vault import facts

    from .chunking import ChunkParams, chunk_note

    parsed = parse(doc.text)
    markup = InlineMarkup.of_note(parsed)
    chunks = chunk_note(parsed, doc.relpath, counter, params or ChunkParams(),
                        fallback_heading=None if doc.on_disk else "", markup=markup)
    extra = ()
    if parsed.front_matter_error:
        extra = (f"{parsed.front_matter_error}; its title, tags and date are ignored",)
    found = facts(parsed, markup, chunks, doc.relpath, doc.mtime_ns) if doc.on_disk else None
    extra += found.warnings if found else ()
    return Chunked(doc, parsed, chunks, doc.warnings + extra, found)


def readable(paths: Iterable[str | Path]) -> Iterator[Document | notes.Problem]:
    """Every note under ``paths``, read, in order; what cannot be read is a Problem."""
    for root in roots(paths):
        yield from root.problems
        for note in root.files:
            try:
                yield read(note)
            except notes.UnreadableNote as exc:
                yield notes.Problem(note.relpath, str(exc))


def chunk_paths(paths: Iterable[str | Path], counter,
                params=None) -> Iterator[Chunked | notes.Problem]:
    """Every note under ``paths``, chunked, in order, in this process; what cannot be read
    is a Problem. ``parallel.chunk_paths`` gives the same on every core."""
    for doc in readable(paths):
        yield chunk(doc, counter, params) if isinstance(doc, Document) else doc

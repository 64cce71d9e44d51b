"""Reading indexed notes back: line ranges of a document, a chunk by its id, a file's text.

``brainbot get``, citation checks and the agent's read_note tool all go through here, so
what can be read is exactly what is in the index: a path that is not a document of the
index is refused, whatever exists on disk. `get` of a note that changed on disk since it
was indexed reads its current file and says so (``stale``); a citation check and the
agent's read_note, which must quote what was indexed, refuse it. A note whose folder is
not on this machine (a Postgres reader elsewhere) is read from the text the index holds,
with ``stale`` None: nothing here can tell. A path indexed under several folders is
refused with both named, unless ``ROOT::PATH`` picks one. Whether a file is still the
indexed one is ``index/freshness``'s to say; here is what each reader does about it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from brainbot.errors import InputError, NotFoundError
from brainbot.store.interface import Store
from brainbot.store.records import DocumentRow

_TARGET = re.compile(r"^(?P<path>.+?)(?::(?P<line>\d+)(?::(?P<count>\d+))?)?$")
CHUNK_ID = re.compile(r"^[0-9a-f]{16}$")


def document(store: Store, path: str) -> DocumentRow:
    """An indexed document by its path (``ROOT::PATH`` picks one of several indexed folders
    holding that path), or NotFoundError; InputError when the path is in several."""
    from brainbot.notes.vault import one_root, split_root

    spec, rel = split_root(path)
    docs = store.documents_at(path) if spec is not None else []
    if not docs:  # a path that itself holds "::" stays a path when it is indexed as one
        docs = {d.root: d for d in store.documents_at(rel)}
        root = one_root(rel, list(docs), spec)
        docs = [docs[root]] if root is not None else []
    if not docs:
        raise NotFoundError(f"{path} is not a document of this index")
    return docs[0]


def stored_lines(store: Store, doc: DocumentRow) -> list[str]:
    """The note's lines as indexed: from disk when its bytes are the indexed ones, from the
    index when its folder is not on this machine; NotFoundError when it changed."""
    lines, stale = current_lines(store, doc)
    if stale:
        raise NotFoundError(f"{doc.path} changed on disk since it was indexed; "
                            "run `brainbot index` again")
    return lines


def current_lines(store: Store, doc: DocumentRow) -> tuple[list[str], bool | None]:
    """The note's lines as they are on disk now, and whether they differ from the indexed
    ones (stale). Only an indexed document's own file is read; a note gone from disk (or
    replaced by a symlink or something other than a file) is NotFoundError. When its folder
    is not on this machine, the lines the index holds, and None: nobody here can tell."""
    from .freshness import read, root_present

    if not root_present(doc.root):
        return indexed_lines(store, doc), None
    found = read(doc.root, doc.path)
    if found is not None:
        stale = found.sha256 != doc.sha256
        if found.inside or not stale:  # the indexed bytes themselves reveal nothing new
            return found.text.split("\n"), stale
    raise NotFoundError(f"{doc.path} vanished from disk (or is no longer a note file inside "
                        "its folder) since it was indexed; run `brainbot index` again")


def indexed_lines(store: Store, doc: DocumentRow) -> list[str]:
    """The note's lines as the index holds them: each chunk's text at its lines. A line no
    chunk holds (front matter, a run of blank lines) reads as empty, and the note ends with
    its last chunk."""
    text, line, pos = [], 1, 0
    for c in sorted(store.document_chunks(doc.id), key=lambda c: (c.start_char, c.end_char)):
        if c.start_char >= pos:  # a gap the chunks do not cover: keep the line numbers
            text.append("\n" * max(0, c.start_line - line))
            line, pos = max(line, c.start_line), c.start_char
        new = c.text[pos - c.start_char:]
        text.append(new)
        line += new.count("\n")
        pos = max(pos, c.start_char + len(c.text))
    return "".join(text).split("\n") if text else []


def parse_ref(ref: str) -> tuple[str, int | None, int | None]:
    """PATH[:LINE[:COUNT]] as (path, line, count)."""
    m = _TARGET.match(ref)
    if not m:
        raise InputError(f"cannot read {ref!r}: use PATH[:LINE[:COUNT]] or a chunk id")
    line, count = m.group("line"), m.group("count")
    return m.group("path"), int(line) if line else None, int(count) if count else None


@dataclass
class Reading:
    """What `get` read: numbered lines, and whether the note changed since it was indexed
    (the lines are then the current file's, the chunk ids and hits the indexed one's)."""

    lines: list[tuple[int, str]]
    stale: bool | None  # None: the note's folder is not on this machine; lines from the index
    path: str
    root: str


def get_lines(store: Store, ref: str, count: int | None = None) -> Reading:
    """Numbered lines for [ROOT::]PATH[:LINE[:COUNT]] or a chunk id; ``count`` wins over one
    in ``ref``. A chunk id reads the indexed chunk; a path reads the note's current file."""
    if count is not None and count < 1:
        raise InputError(f"count must be at least 1, not {count}")
    if CHUNK_ID.match(ref):
        row = store.chunk_by_public_id(ref)
        if row is not None:
            from .freshness import Freshness

            lines = list(zip(range(row.start_line, row.end_line + 1), row.text.split("\n")))
            return Reading(lines[:count] if count else lines,
                           Freshness().stale(row.document), row.path, row.root)
    path, start, in_ref = parse_ref(ref)
    doc = document(store, path)
    lines, stale = current_lines(store, doc)
    start = 1 if start is None else start  # PATH:0 is out of range, not line 1 (review L21)
    count = count if count is not None else in_ref
    if count is not None and count < 1:
        raise InputError(f"count must be at least 1, not {count}")
    if start < 1 or start > len(lines):
        raise InputError(f"{doc.path} has {len(lines)} lines; line {start} is out of range")
    end = len(lines) if count is None else min(len(lines), start + count - 1)
    return Reading([(n, lines[n - 1]) for n in range(start, end + 1)], stale, doc.path,
                   doc.root)

"""Reading indexed notes back: line ranges of a document, a chunk by its id, a file's text.

``brainbot get``, citation checks and the agent's read_note tool all go through here, so
what can be read is exactly what is in the index: a path that is not a document of the
index is refused, whatever exists on disk. `get` of a note that changed on disk since it
was indexed reads its current file and says so (``stale``); a citation check and the
agent's read_note, which must quote what was indexed, refuse it. A path indexed under
several folders is refused with both named, unless ``ROOT::PATH`` picks one.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from brainbot.errors import InputError, NotFoundError
from brainbot.store.interface import DocumentRow, Store

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


def read_document(root: str, path: str) -> tuple[str, str] | None:
    """The note's current text on disk (universal newlines) and the sha256 of its bytes,
    or None if it cannot be read."""
    from brainbot.notes.files import decode

    try:
        data = (Path(root) / path).read_bytes()
    except OSError:
        return None
    return decode(data)[0], hashlib.sha256(data).hexdigest()


def _read_file(doc: DocumentRow) -> tuple[bytes, bool]:
    """The bytes of an indexed note's file (OSError unless it is a regular file), and
    whether it lies inside its root once symlinks are followed, as discovery requires."""
    path = Path(doc.root) / doc.path
    if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block the read
        raise OSError(f"{doc.path} is no longer a regular file")
    try:
        inside = path.resolve().is_relative_to(Path(doc.root).resolve())
    except (OSError, RuntimeError):
        inside = False
    return path.read_bytes(), inside


def stored_lines(doc: DocumentRow) -> list[str]:
    """The note's lines as indexed: from disk when its bytes are the indexed ones."""
    lines, stale = current_lines(doc)
    if stale:
        raise NotFoundError(f"{doc.path} changed on disk since it was indexed; "
                            "run `brainbot index` again")
    return lines


def current_lines(doc: DocumentRow) -> tuple[list[str], bool]:
    """The note's lines as they are on disk now, and whether they differ from the indexed
    ones (stale). Only an indexed document's own file is read; a note gone from disk (or
    replaced by a symlink or something other than a file) is NotFoundError."""
    from brainbot.notes.files import decode

    try:
        data, inside = _read_file(doc)
    except OSError:
        inside = False
    else:
        stale = hashlib.sha256(data).hexdigest() != doc.sha256
        if inside or not stale:  # the indexed bytes themselves reveal nothing new
            return decode(data)[0].split("\n"), stale
    raise NotFoundError(f"{doc.path} vanished from disk (or is no longer a note file inside "
                        "its folder) since it was indexed; run `brainbot index` again")


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
    stale: bool
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
    lines, stale = current_lines(doc)
    start = start or 1
    count = count if count is not None else in_ref
    if count is not None and count < 1:
        raise InputError(f"count must be at least 1, not {count}")
    if start < 1 or start > len(lines):
        raise InputError(f"{doc.path} has {len(lines)} lines; line {start} is out of range")
    end = len(lines) if count is None else min(len(lines), start + count - 1)
    return Reading([(n, lines[n - 1]) for n in range(start, end + 1)], stale, doc.path,
                   doc.root)


def _link_dict(link, side: str) -> dict:
    return {side: link.source if side == "source" else link.target_path, "line": link.line,
            "kind": link.kind, "target": link.target, "heading": link.heading,
            "alias": link.alias, "line_text": link.line_text}


def note_links(store: Store, note: str) -> dict:
    """A note's outgoing links, backlinks (with the linking line) and unresolved links;
    ``note`` is a path relative to the root or a name resolved like a wikilink."""
    doc = store.find_note(note)
    outgoing = store.links_from(doc.id)
    return {"note": doc.path, "root": doc.root,
            "outgoing": [_link_dict(x, "target") for x in outgoing if x.target_path],
            "backlinks": [_link_dict(x, "source") for x in store.links_to(doc.id)],
            "unresolved": [_link_dict(x, "target") for x in outgoing if not x.target_path]}


def backlinks_of(store: Store, ref: str) -> list[dict]:
    """The links into the note that ``ref`` (PATH[:LINE[:COUNT]] or a chunk id) reads."""
    row = store.chunk_by_public_id(ref) if CHUNK_ID.match(ref) else None
    doc = row.document if row is not None else document(store, parse_ref(ref)[0])
    return [_link_dict(x, "source") for x in store.links_to(doc.id)]

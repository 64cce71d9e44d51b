"""Reading indexed notes back: line ranges of a document, a chunk by its id, a file's text.

``brainbot get``, citation checks and the agent's read_note tool all go through here, so
what can be read is exactly what is in the index: a path that is not a document of the
index is refused, whatever exists on disk, and a note that changed on disk since it was
indexed is not passed off as the indexed one.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from brainbot.errors import InputError, NotFoundError
from brainbot.store.interface import DocumentRow, Store

_TARGET = re.compile(r"^(?P<path>.+?)(?::(?P<line>\d+)(?::(?P<count>\d+))?)?$")
CHUNK_ID = re.compile(r"^[0-9a-f]{16}$")


def document(store: Store, path: str) -> DocumentRow:
    """An indexed document by its path, or NotFoundError."""
    doc = store.document(path)
    if doc is None:
        raise NotFoundError(f"{path} is not a document of this index")
    return doc


def read_document(root: str, path: str) -> tuple[str, str] | None:
    """The note's current text on disk (universal newlines) and the sha256 of its bytes,
    or None if it cannot be read."""
    from brainbot.notes.files import decode

    try:
        data = (Path(root) / path).read_bytes()
    except OSError:
        return None
    return decode(data)[0], hashlib.sha256(data).hexdigest()


def stored_lines(doc: DocumentRow) -> list[str]:
    """The note's lines as indexed: from disk when its bytes are the indexed ones."""
    from brainbot.notes.files import decode

    try:
        data = (Path(doc.root) / doc.path).read_bytes()
        if hashlib.sha256(data).hexdigest() == doc.sha256:
            return decode(data)[0].split("\n")
    except OSError:
        pass
    raise NotFoundError(f"{doc.path} changed or vanished on disk since it was indexed; "
                        "run `brainbot index` again")


def parse_ref(ref: str) -> tuple[str, int | None, int | None]:
    """PATH[:LINE[:COUNT]] as (path, line, count)."""
    m = _TARGET.match(ref)
    if not m:
        raise InputError(f"cannot read {ref!r}: use PATH[:LINE[:COUNT]] or a chunk id")
    line, count = m.group("line"), m.group("count")
    return m.group("path"), int(line) if line else None, int(count) if count else None


def get_lines(store: Store, ref: str, count: int | None = None) -> list[tuple[int, str]]:
    """Numbered lines for PATH[:LINE[:COUNT]] or a chunk id; ``count`` wins over one in
    ``ref``."""
    if CHUNK_ID.match(ref):
        row = store.chunk_by_public_id(ref)
        if row is not None:
            lines = list(zip(range(row.start_line, row.end_line + 1), row.text.split("\n")))
            return lines[:count] if count else lines
    path, start, in_ref = parse_ref(ref)
    lines = stored_lines(document(store, path))
    start = start or 1
    count = count if count is not None else in_ref
    if count is not None and count < 1:
        raise InputError(f"count must be at least 1, not {count}")
    if start < 1 or start > len(lines):
        raise InputError(f"{path} has {len(lines)} lines; line {start} is out of range")
    end = len(lines) if count is None else min(len(lines), start + count - 1)
    return [(n, lines[n - 1]) for n in range(start, end + 1)]


def _link_dict(link, side: str) -> dict:
    return {side: link.source if side == "source" else link.target_path, "line": link.line,
            "kind": link.kind, "target": link.target, "heading": link.heading,
            "alias": link.alias, "line_text": link.line_text}


def note_links(store: Store, note: str) -> dict:
    """A note's outgoing links, backlinks (with the linking line) and unresolved links;
    ``note`` is a path relative to the root or a name resolved like a wikilink."""
    doc = store.find_note(note)
    outgoing = store.links_from(doc.id)
    return {"note": doc.path,
            "outgoing": [_link_dict(x, "target") for x in outgoing if x.target_path],
            "backlinks": [_link_dict(x, "source") for x in store.links_to(doc.id)],
            "unresolved": [_link_dict(x, "target") for x in outgoing if not x.target_path]}


def backlinks_of(store: Store, ref: str) -> list[dict]:
    """The links into the note that ``ref`` (PATH[:LINE[:COUNT]] or a chunk id) reads."""
    row = store.chunk_by_public_id(ref) if CHUNK_ID.match(ref) else None
    doc = row.document if row is not None else store.document(parse_ref(ref)[0])
    return [] if doc is None else [_link_dict(x, "source") for x in store.links_to(doc.id)]

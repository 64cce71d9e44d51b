"""Reading indexed notes back: line ranges, chunk records, and staleness.

``brainbot get``, ``brainbot report --db``, citation checks and the agent's read_note
tool all go through here, so what can be read is exactly what is in the index: a path
that is not a document of the index is refused, whatever exists on disk.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from . import store
from .errors import InputError, NotFoundError

_TARGET = re.compile(r"^(?P<path>.+?)(?::(?P<line>\d+)(?::(?P<count>\d+))?)?$")
_CHUNK_ID = re.compile(r"^[0-9a-f]{16}$")


def document_row(db, path: str):
    """(id, root, path, sha256) of an indexed document, or NotFoundError."""
    row = db.execute("SELECT id, root, path, sha256 FROM documents WHERE path = ? "
                     "ORDER BY id LIMIT 1", (path,)).fetchone()
    if row is None:
        raise NotFoundError(f"{path} is not a document of this index")
    return row


def read_document_text(root: str, path: str) -> str | None:
    """The note's current text on disk (universal newlines), or None if unreadable."""
    from .notes import decode

    try:
        data = (Path(root) / path).read_bytes()
    except OSError:
        return None
    return decode(data)[0]


def stored_lines(db, path: str) -> list[str]:
    """The note's lines as indexed: from disk when unchanged, else rebuilt from chunks."""
    _, root, rel, sha = document_row(db, path)
    try:
        data = (Path(root) / rel).read_bytes()
        if hashlib.sha256(data).hexdigest() == sha:
            from .notes import decode

            return decode(data)[0].split("\n")
    except OSError:
        pass
    raise NotFoundError(f"{path} changed or vanished on disk since it was indexed; "
                        "run `brainbot index` again")


def get_lines(db_path, target: str) -> list[tuple[int, str]]:
    """Numbered lines for PATH[:LINE[:COUNT]] or a chunk id."""
    db = store.open_index(db_path, readonly=True)
    try:
        if _CHUNK_ID.match(target):
            row = db.execute(
                "SELECT d.path, c.start_line, c.end_line, c.source_text FROM chunks c "
                "JOIN documents d ON d.id = c.document_id WHERE c.chunk_id = ?",
                (target,)).fetchone()
            if row is not None:
                return list(zip(range(row[1], row[2] + 1), row[3].split("\n")))
        m = _TARGET.match(target)
        if not m:
            raise InputError(f"cannot read {target!r}: use PATH[:LINE[:COUNT]] or a chunk id")
        path = m.group("path")
        lines = stored_lines(db, path)
        start = int(m.group("line") or 1)
        count = int(m.group("count")) if m.group("count") else len(lines)
        if start < 1 or start > len(lines):
            raise InputError(f"{path} has {len(lines)} lines; line {start} is out of range")
        end = min(len(lines), start + count - 1)
        return [(n, lines[n - 1]) for n in range(start, end + 1)]
    finally:
        db.close()


def records_from_db(db_path) -> list[dict]:
    """The chunk records (DESIGN.md contract) of every chunk in an index."""
    db = store.open_index(db_path, readonly=True)
    try:
        rows = db.execute(
            "SELECT c.chunk_id, c.chunk_index, c.source_text, c.retrieval_text, d.path, "
            "c.heading_path, c.start_line, c.end_line, c.start_char, c.end_char, "
            "c.source_tokens, c.retrieval_tokens FROM chunks c JOIN documents d "
            "ON d.id = c.document_id ORDER BY d.path, c.chunk_index").fetchall()
    finally:
        db.close()
    return [{"chunk_id": r[0], "chunk_index": r[1], "source_text": r[2],
             "retrieval_text": r[3],
             "metadata": {"source_file": r[4], "heading_path": json.loads(r[5]),
                          "start_line": r[6], "end_line": r[7], "start_char": r[8],
                          "end_char": r[9]},
             "measurements": {"source_tokens": r[10], "retrieval_tokens": r[11]}}
            for r in rows]


def records_from_paths(paths: list[str]):
    """Chunk records for files or folders on disk, and the files that were skipped."""
    from .chunking import chunk_note
    from .markdown import parse
    from .notes import Problem, UnreadableNote, discover, read_note
    from .tokens import TokenCounter

    counter = TokenCounter()
    records, problems = [], []
    for raw in paths:
        if not Path(raw).exists():
            raise InputError(f"{raw}: no such file or folder")
        found = discover(Path(raw))
        problems.extend(found.problems)
        for f in found.files:
            try:
                note = read_note(f.path)
            except UnreadableNote as exc:
                problems.append(Problem(f.relpath, str(exc)))
                continue
            records.extend(c.to_record() for c in chunk_note(parse(note.text), f.relpath, counter))
    return records, problems

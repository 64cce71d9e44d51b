"""Is this still the indexed file? The one answer, for hits, `get`, citations and status.

``Freshness.state(doc)`` looks at an indexed document's file and says SAME, CHANGED, GONE
(missing, unreadable, or no longer a regular file) or UNKNOWN: the document's folder is not
on this machine (a Postgres reader elsewhere, a vault moved away), so nothing can be told
and the index's stored text stands in for the file. It stats first and hashes only when
the stat cannot vouch for the bytes: the size or mtime differ, or the file was racily
clean when it was read (``racy``), so a touched file is not stale and a search never reads
the whole vault. ``read`` and ``span_state`` read a file once per instance for the callers
that compare text. Dataset records have no file and are always SAME.

The callers choose the policy: hits flag ``stale`` (``mark``: None when unknown); `get`
reads the current lines and flags them; read_note and citation checks refuse or drop what
changed (``index/reading.stored_lines``, ``ask/citations.check_fresh``) and flag a cited file
that changed elsewhere (``ask/citations.is_stale``).

``vault_changes`` walks the indexed folders present here (directory listings and stats; it
reads only racily clean files) for ``status``, ``doctor`` and the note a refusal adds when
the index is out of date: "3 notes changed since the last index; run `brainbot index`". A
reader can then tell "not in your notes" from "the index is out of date". Folders not present here are reported as
such (``missing_roots``), never as deleted notes.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path

from brainbot.store.interface import Store
from brainbot.store.records import DocumentRow

_HASH_BLOCK = 1 << 20
SAME, CHANGED, GONE, UNKNOWN = "same", "changed", "gone", "unknown"
# The coarsest mtime granularity among the filesystems notes live on (FAT/exFAT 2 s; HFS+,
# SMB and NFS 1 s). A file modified within this long of being read may be modified again
# with the same size and mtime: its stat cannot vouch for its bytes (git's "racily clean").
RACY_NS = 2_000_000_000


def as_stale(state: str) -> bool | None:
    """A state as a ``stale`` flag: True when changed or gone, None when unknown."""
    return {SAME: False, CHANGED: True, GONE: True, UNKNOWN: None}[state]


def racy(mtime_ns: int, read_ns: int | None) -> bool:
    """Whether a file read at ``read_ns`` (None: not recorded, from before schema 5) had an
    mtime too close to that moment for a matching stat to prove its bytes unchanged."""
    return read_ns is not None and mtime_ns > read_ns - RACY_NS


def stat_vouches(indexed, size: int, mtime_ns: int) -> bool:
    """Whether a file whose stat says (size, mtime_ns) still holds the bytes ``indexed``
    (a DocumentRow or DocState) recorded, without reading it."""
    return ((size, mtime_ns) == (indexed.size, indexed.mtime_ns)
            and not racy(indexed.mtime_ns, indexed.read_ns))


def root_present(root: str) -> bool:
    """Whether an indexed folder exists on this machine."""
    return os.path.isdir(root)


def _sha256(path: str) -> str | None:
    """The file's sha256; None when it is missing, unreadable or not a regular file
    (never opened then: a FIFO would block, review M5)."""
    from brainbot.notes.files import open_regular

    digest = hashlib.sha256()
    try:
        with open_regular(path) as handle:
            while block := handle.read(_HASH_BLOCK):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


@dataclass(frozen=True)
class OnDisk:
    """A note file as read now: its text (decoded, universal newlines), the sha256 of its
    bytes, and whether it lies inside its folder once symlinks are followed (as discovery
    requires of a note)."""

    text: str
    sha256: str
    inside: bool


def read(root: str, path: str) -> OnDisk | None:
    """The file of ``path`` under ``root``, or None when it is missing, unreadable or not a
    regular file (a FIFO would block the read)."""
    from brainbot.notes.files import decode, read_regular

    full = Path(root) / path
    try:
        data = read_regular(full)
    except OSError:
        return None
    try:
        inside = full.resolve().is_relative_to(Path(root).resolve())
    except (OSError, RuntimeError):
        inside = False
    return OnDisk(decode(data)[0], hashlib.sha256(data).hexdigest(), inside)


class Freshness:
    """Whether indexed files still hold what was indexed, each looked at once per instance."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], str] = {}
        self._read: dict[tuple[str, str], OnDisk | None] = {}
        self._roots: dict[str, bool] = {}

    def present(self, root: str) -> bool:
        """``root_present(root)``, once per instance."""
        if root not in self._roots:
            self._roots[root] = root_present(root)
        return self._roots[root]

    def stale(self, doc: DocumentRow | None) -> bool | None:
        """True when the file changed or vanished, None when this machine cannot tell."""
        return False if doc is None else as_stale(self.state(doc))

    def state(self, doc: DocumentRow) -> str:
        if not doc.on_disk:
            return SAME
        key = (doc.root, doc.path)
        if key not in self._known:
            self._known[key] = self._check(doc)
        return self._known[key]

    def _check(self, doc: DocumentRow) -> str:
        if not self.present(doc.root):
            return UNKNOWN
        path = os.path.join(doc.root, doc.path)
        try:
            st = os.stat(path)
        except OSError:
            return GONE  # gone (or unreadable): not what was indexed
        if not stat.S_ISREG(st.st_mode):
            return GONE  # a FIFO, a device, a folder: not a note, and never opened
        if stat_vouches(doc, st.st_size, st.st_mtime_ns):
            return SAME
        digest = _sha256(path)
        return GONE if digest is None else SAME if digest == doc.sha256 else CHANGED

    def read(self, root: str, path: str) -> OnDisk | None:
        """``read(root, path)``, once per instance."""
        key = (root, path)
        if key not in self._read:
            self._read[key] = read(root, path)
        return self._read[key]

    def span_state(self, root: str, path: str, start_char: int, end_char: int,
                   text: str) -> str:
        """Whether the file still holds ``text`` at [start_char, end_char) of its text."""
        if not self.present(root):
            return UNKNOWN
        found = self.read(root, path)
        if found is None:
            return GONE
        # an index written before NUL became U+FFFD on both stores may still hold a NUL
        return SAME if found.text[start_char:end_char] == text.replace("\x00", "\ufffd") \
            else CHANGED

    def bytes_state(self, root: str, path: str, sha256: str) -> str:
        """Whether the file's bytes are still the ones that hashed to ``sha256`` (empty:
        not known, so only a vanished file counts)."""
        if not self.present(root):
            return UNKNOWN
        found = self.read(root, path)
        if found is None:
            return GONE
        return CHANGED if sha256 and found.sha256 != sha256 else SAME


def mark(hits) -> None:
    """Set ``stale`` on each hit (any object with ``document`` and ``stale``)."""
    check = Freshness()
    for hit in hits:
        hit.stale = check.stale(hit.document)


def vault_changes(store: Store) -> dict[str, list[str]]:
    """Indexed notes that changed or vanished on disk, and new notes not yet indexed, in
    the folders present here (``missing_roots`` has the others: nothing can be told)."""
    from brainbot.notes.files import discover

    changed, missing, new = [], [], []
    folders = store.folder_roots()  # None: an index from before they were recorded
    roots: dict[str, dict[str, DocumentRow]] = {}
    for doc in store.documents():
        if doc.on_disk:
            roots.setdefault(doc.root, {})[doc.path] = doc
    for root, docs in roots.items():
        if not root_present(root):
            continue
        found = {f.relpath: f for f in discover(Path(root)).files}
        for path, doc in docs.items():
            f = found.get(path)
            if f is None:
                missing.append(path)
            elif (f.size, f.mtime_ns) != (doc.size, doc.mtime_ns):
                changed.append(path)  # a touched file counts too: this reads nothing
            elif not stat_vouches(doc, f.size, f.mtime_ns) and _sha256(str(f.path)) != doc.sha256:
                changed.append(path)  # racily clean: only its bytes can tell
        # a single indexed file's folder holds unrelated notes: only folders count new ones
        if root in folders if folders is not None else len(docs) > 1:
            new.extend(p for p in found if p not in docs)
    return {"changed": sorted(changed), "missing": sorted(missing), "new": sorted(new)}


def out_of_date_note(store: Store) -> str | None:
    """One sentence saying how far the index is behind the vault, or None when it is not."""
    changes = vault_changes(store)
    parts = [(len(changes["changed"]), "changed"), (len(changes["missing"]), "deleted"),
             (len(changes["new"]), "new")]
    parts = [(n, what) for n, what in parts if n]
    absent = sum(missing_roots(store).values())
    said = []
    if parts:
        total = sum(n for n, _ in parts)
        detail = ", ".join(f"{n} {what}" for n, what in parts)
        said.append(f"{total} note{'s' if total != 1 else ''} changed since the last index "
                    f"({detail})")
    if absent:
        said.append(f"{absent} note{' is' if absent == 1 else 's are'} in a folder not present "
                    "here (moved, or on another machine), so whether they changed is unknown")
    if not said:
        return None
    roots = present_roots(store)
    command = f"brainbot index {' '.join(shlex.quote(r) for r in roots) or 'NOTES'}"
    command += f" --db {shlex.quote(store.target)}" + (" --prune" if absent else "")
    return "; ".join(said) + f"; {'if it moved, ' if absent else ''}run `{command}`"


def _note_roots(store: Store) -> dict[str, int]:
    """Each root that holds notes (files, not dataset records), with how many."""
    counts: dict[str, int] = {}
    for doc in store.documents():
        if doc.on_disk:
            counts[doc.root] = counts.get(doc.root, 0) + 1
    return counts


def present_roots(store: Store) -> list[str]:
    """The indexed roots that exist on this machine: the ones a command may name."""
    return sorted(r for r in _note_roots(store) if root_present(r))


def missing_roots(store: Store) -> dict[str, int]:
    """Indexed roots not present on this machine (moved, renamed, an unmounted drive), with
    the notes the index keeps for each; `brainbot index --prune` removes them."""
    return {r: n for r, n in sorted(_note_roots(store).items()) if not root_present(r)}


def missing_root_line(root: str, notes: int, db: str | None = None) -> str:
    """What to say about a root that is not present: its notes are kept until a prune."""
    command = "brainbot index --prune" + (f" --db {shlex.quote(db)}" if db else "")
    kept = f"{notes} note is" if notes == 1 else f"{notes} notes are"
    return f"root {root} is not present: its {kept} kept; `{command}` removes them"

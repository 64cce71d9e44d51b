"""Is the index still what is on disk? Per hit, and for a whole vault.

A hit is stale when its file is missing or its bytes differ from what was indexed. The
check stats each returned file once and hashes it only when the size or mtime differ, so
a file that was merely touched is not stale and a search never reads the whole vault.
Dataset records have no file and are never stale.

``vault_changes`` walks the indexed folders (directory listings and stats, no reads) for
``status``, ``doctor`` and the note a refusal adds when the index is out of date: "3 notes
changed since the last index; run `brainbot index`". A reader can then tell "not in your
notes" from "the index is out of date".
"""

from __future__ import annotations

import hashlib
import os
import shlex
from pathlib import Path

from brainbot.store.interface import DocumentRow, Store

_HASH_BLOCK = 1 << 20


def _sha256(path: str) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while block := handle.read(_HASH_BLOCK):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


class Freshness:
    """Staleness of indexed documents, each file looked at once per instance."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], bool] = {}

    def stale(self, doc: DocumentRow | None) -> bool:
        if doc is None or not doc.on_disk:
            return False
        key = (doc.root, doc.path)
        if key not in self._known:
            self._known[key] = self._check(doc)
        return self._known[key]

    @staticmethod
    def _check(doc: DocumentRow) -> bool:
        path = os.path.join(doc.root, doc.path)
        try:
            st = os.stat(path)
        except OSError:
            return True  # gone (or unreadable): not what was indexed
        if st.st_size == doc.size and st.st_mtime_ns == doc.mtime_ns:
            return False
        return _sha256(path) != doc.sha256


def mark(hits) -> None:
    """Set ``stale`` on each hit (any object with ``document`` and ``stale``)."""
    check = Freshness()
    for hit in hits:
        hit.stale = check.stale(hit.document)


def vault_changes(store: Store) -> dict[str, list[str]]:
    """Indexed notes that changed or vanished on disk, and new notes not yet indexed."""
    from brainbot.notes.files import discover

    changed, missing, new = [], [], []
    folders = store.folder_roots()  # None: an index from before they were recorded
    roots: dict[str, dict[str, tuple[int, int]]] = {}
    for doc in store.documents():
        if doc.on_disk:
            roots.setdefault(doc.root, {})[doc.path] = (doc.size, doc.mtime_ns)
    for root, docs in roots.items():
        if not Path(root).is_dir():
            missing.extend(docs)
            continue
        found = {f.relpath: f for f in discover(Path(root)).files}
        for path, (size, mtime) in docs.items():
            f = found.get(path)
            if f is None:
                missing.append(path)
            elif (f.size, f.mtime_ns) != (size, mtime):
                changed.append(path)
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
    if not parts:
        return None
    total = sum(n for n, _ in parts)
    detail = ", ".join(f"{n} {what}" for n, what in parts)
    roots = present_roots(store)
    command = f"brainbot index {' '.join(shlex.quote(r) for r in roots) or 'NOTES'}"
    command += f" --db {shlex.quote(store.target)}" + (" --prune" if missing_roots(store) else "")
    return (f"{total} note{'s' if total != 1 else ''} changed since the last index ({detail}); "
            f"run `{command}`")


def _note_roots(store: Store) -> dict[str, int]:
    """Each root that holds notes (files, not dataset records), with how many."""
    counts: dict[str, int] = {}
    for doc in store.documents():
        if doc.on_disk:
            counts[doc.root] = counts.get(doc.root, 0) + 1
    return counts


def present_roots(store: Store) -> list[str]:
    """The indexed roots that exist on this machine: the ones a command may name."""
    return sorted(r for r in _note_roots(store) if Path(r).is_dir())


def missing_roots(store: Store) -> dict[str, int]:
    """Indexed roots not present on this machine (moved, renamed, an unmounted drive), with
    the notes the index keeps for each; `brainbot index --prune` removes them."""
    return {r: n for r, n in sorted(_note_roots(store).items()) if not Path(r).is_dir()}


def missing_root_line(root: str, notes: int, db: str | None = None) -> str:
    """What to say about a root that is not present: its notes are kept until a prune."""
    command = "brainbot index --prune" + (f" --db {shlex.quote(db)}" if db else "")
    kept = f"{notes} note is" if notes == 1 else f"{notes} notes are"
    return f"root {root} is not present: its {kept} kept; `{command}` removes them"

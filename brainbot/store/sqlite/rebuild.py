"""`--rebuild` and `copy --replace` on SQLite: a new file is written beside the target and
moved over it only when it is complete, so the path always holds a whole index.

Until the move, the old file stays at its path, untouched: readers and servers keep
answering from it, its vectors are read from it as the rebuild needs them
(``store/sqlite/salvage.py``), and a kill at any moment leaves it whole (with, at worst, a
leftover ``<db>.rebuild`` that the next writer removes). The move itself:

1. the new file's WAL is checkpointed into it and its connection closed, so the file is
   whole on its own (SQLite removes its -wal and -shm with the last connection);
2. the old file's WAL is checkpointed too, then its -wal and -shm are unlinked: they are
   named after the path, and a connection to the new file must never pair with the old
   file's WAL or wal-index (a reader still on the old file keeps its own descriptors);
3. ``os.replace`` moves the new file over the path (atomic on POSIX), and the folder is
   synced.

The writer lock is held on the old file from the start and on the new one from its
creation, so a second writer is refused before, during and after the move (``lock.py``
has it check, after locking, that the path still names the file it locked). A reader
that holds the old file notices the new one at its next refresh and reopens
(``store.SQLiteStore.refresh``); SQLite's connections to a file no longer at its path
neither checkpoint nor delete the WAL by name when they close, so the old file's last
reader cannot remove the new file's -wal.

Only brainbot's own files are ever removed or overwritten (review M11): the target must be
missing, empty, or a brainbot index (a damaged one may be rebuilt: that is what
`--rebuild` is for); anything else is refused with NotAnIndexError and left byte for
byte. A leftover ``<db>.rebuild`` is removed only when nobody holds its lock and it is
empty or a brainbot file.

Postgres writes the new index into a schema of its own and swaps it in with one
transaction: ``store/pg/rebuild.py``.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

import sqlean as sqlite3

from brainbot.errors import NotAnIndexError, StoreBusyError, StoreError

from . import file as sf
from .lock import WriterLock, release_stale
from .salvage import Salvage

SUFFIX = ".rebuild"  # the new file, beside the target: <db>.rebuild
JOURNALS = ("-wal", "-shm", "-journal")
_HEADER = b"SQLite format 3\x00"
# A damaged file SQLite cannot read a schema from is still brainbot's when its first
# pages hold brainbot's own CREATE TABLE statements (sqlite_master is page 1).
_SCHEMA_MARKS = (b"CREATE TABLE meta", b"CREATE TABLE chunks")
_SCAN_BYTES = 1 << 16


def temp_path(target: Path) -> Path:
    return target.with_name(target.name + SUFFIX)


def real_path(path: Path) -> Path:
    """The file a path names, symlinks followed: the rebuild replaces that file, so a
    symlinked --db stays a symlink."""
    return Path(os.path.realpath(path))


def check_replaceable(path: Path) -> None:
    """Refuse to replace ``path`` unless it is missing, empty or a brainbot index."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(f"{path} is not a file")
    if st.st_size and not _ours(path):
        raise NotAnIndexError(path, replacing=True)


def _ours(path: Path) -> bool:
    """Whether a non-empty file is a brainbot index (or an empty SQLite database), whole or
    damaged."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(_SCAN_BYTES)
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}") from None
    if not head.startswith(_HEADER):
        return False
    try:
        db = sf.connect(path, readonly=True)
    except StoreError:
        return all(mark in head for mark in _SCHEMA_MARKS)
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error:  # damaged: its first pages tell
        return all(mark in head for mark in _SCHEMA_MARKS)
    finally:
        db.close()
    return not tables or {"meta", "chunks"} <= tables


def clear_leftover(target: Path, *, refuse: bool) -> None:
    """Remove the ``<db>.rebuild`` a killed rebuild left, when it is one: nobody holds
    its lock and it is empty or a brainbot file. Something else by that name is left
    alone, and refused (StoreError) when ``refuse``: a rebuild needs the name."""
    temp = temp_path(target)
    if not os.path.lexists(temp):
        return
    if os.path.islink(temp) or not os.path.isfile(temp) or not _ours(temp):
        if refuse:
            raise StoreError(f"{temp} is in the way of the rebuild and is not a brainbot "
                             f"file: move it away and run again")
        return
    try:
        with WriterLock(temp):  # a rebuild still writing it holds this
            remove(temp)
    except StoreBusyError:
        if refuse:
            raise
    release_stale()


def remove(path: Path) -> None:
    """A database file and its journals, each if it exists."""
    for suffix in ("", *JOURNALS):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(path) + suffix)


class Rebuild:
    """What a store writing a new file keeps until the move: the target, the target's
    lock (held from the start), and the old file's vectors (``identity``: those made as it
    would make them; None: none wanted)."""

    def __init__(self, target: Path, lock: WriterLock, identity=None) -> None:
        self.target = target
        self.lock = lock
        self.salvage = Salvage(target, identity) if identity is not None else None

    def vectors(self, text_hashes) -> dict[str, bytes]:
        return self.salvage.vectors(text_hashes) if self.salvage is not None else {}

    def replaced(self, new: set[tuple[str, str]]) -> tuple[int, int]:
        """(documents of the old file, how many of them the new file, holding the (root,
        path) ``new``, lacks); (0, 0) for an old file that is missing or cannot be read: a
        damaged index has nothing left to keep."""
        try:
            old = sf.connect(self.target, readonly=True)
        except (StoreError, sqlite3.Error, OSError):
            return 0, 0
        total = lacking = 0
        try:
            for key in old.execute("SELECT root, path FROM documents"):
                total += 1
                lacking += key not in new
        except sqlite3.Error:  # damaged past its documents (or empty: no table)
            return 0, 0
        finally:
            old.close()
        return total, lacking

    def move_over(self, db, temp: Path, temp_lock: WriterLock) -> None:
        """Move the new file (``db`` its connection, closed here) over the target; the
        target's lock passes to ``temp_lock``, which holds the new file (module
        docstring, steps 1-3)."""
        self._close_salvage()
        try:
            row = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error as exc:
            db.close()
            raise sf.translate(exc, temp) from None
        db.close()
        if row[0]:  # nothing else has the new file open: a busy checkpoint is a bug
            raise StoreError(f"{temp}: its WAL could not be checkpointed; run again")
        for suffix in ("-wal", "-shm"):  # emptied by the checkpoint, if close left them
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(temp) + suffix)
        _fsync(temp)
        _quiesce(self.target)
        try:
            os.replace(temp, self.target)
        except OSError as exc:
            raise StoreError(f"cannot move {temp} over {self.target}: {exc.strerror}") from None
        _fsync(self.target.parent)
        temp_lock.path = self.target
        self.lock.__exit__()
        release_stale()

    def discard(self, db, temp: Path, temp_lock: WriterLock) -> None:
        """The rebuild ends without its move: the new file goes, the old one stays."""
        self._close_salvage()
        try:
            if db is not None:
                db.close()
        finally:
            remove(temp)
            temp_lock.__exit__()
            self.lock.__exit__()
            release_stale()

    def _close_salvage(self) -> None:
        if self.salvage is not None:
            self.salvage.close()


def _quiesce(target: Path) -> None:
    """Checkpoint the old file's WAL into it, then unlink its journals: the old file is
    whole on its own, and nothing named after the path is left for the new file to pair
    with. A damaged or foreign-mode old file is only unlinked from.

    The checkpoint waits (busy_timeout) for readers still reading the WAL. Should one hold
    a read transaction past that, the old file may lack its last commits once its WAL is
    unlinked: only a kill between here and the move (microseconds) would leave it at the
    path like that, an older whole state of the index it is replacing. Unlinking the WAL
    after the move instead would let a connection to the new file pair with the old WAL,
    and checkpoint its frames into the new file."""
    try:
        db = sf.connect(target)
    except StoreError:
        db = None
    if db is not None:
        try:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error:  # damaged (a rebuild may repair one): nothing to keep
            pass
        finally:
            db.close()
    for suffix in JOURNALS:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(target) + suffix)


def _fsync(path: Path) -> None:
    """Make the file's (or folder's) state durable before the move is (a power cut must
    not leave the path naming a file whose pages never reached the disk)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems cannot sync a folder: the move still is atomic
        pass
    finally:
        os.close(fd)

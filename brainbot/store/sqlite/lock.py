"""The SQLite writer's lock: an exclusive flock on the index file, and the rule that its
descriptors are never closed.

One writer at a time: ``brainbot index``, ``watch`` and ``copy`` take this lock from opening
the store for writing to closing it, and a second writer is refused at once with
StoreBusyError (in this process too: each lock is taken on a descriptor of its own).
flock locks are separate from the POSIX record locks SQLite uses, so readers are never
blocked by it.

The never-close rule: closing any descriptor of a file drops every POSIX lock this
process holds on it, the ones SQLite's own connections hold included, so a reader in the
same process (the MCP server with --watch) would then fail with "disk I/O error" on its
next read. A released lock's descriptor is kept, by (device, inode), for the next
WriterLock on the same file: one stays open per index file and process.

POSIX only (fcntl); brainbot does not run on Windows.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from brainbot.errors import StoreBusyError, StoreError

# unlocked descriptors kept for the next WriterLock, by (device, inode): never closed
_IDLE_FDS: dict[tuple[int, int], list[int]] = {}


class WriterLock:
    """An exclusive advisory lock (flock) on the database file, held by its one writer.

    flock locks are separate from the POSIX record locks SQLite uses, so this does not
    interfere with readers; it only keeps a second writer out (in this process too: each
    lock is taken on a descriptor of its own)."""

    def __init__(self, db_path: Path):
        self.path = Path(db_path)
        self.fd: int | None = None
        self.key: tuple[int, int] | None = None

    def _descriptor(self) -> int:
        try:
            st = os.stat(self.path)
            idle = _IDLE_FDS.get((st.st_dev, st.st_ino))
            if idle:
                return idle.pop()
        except FileNotFoundError:
            pass
        try:
            return os.open(self.path, os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot open {self.path}: {exc.strerror}") from None

    def __enter__(self) -> WriterLock:
        fd = self._descriptor()
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _IDLE_FDS.setdefault(key, []).append(fd)
            raise StoreBusyError(
                f"another `brainbot index` is writing {self.path}; wait for it to finish "
                "and run again") from None
        self.fd, self.key = fd, key
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            _IDLE_FDS.setdefault(self.key, []).append(self.fd)
            self.fd = None


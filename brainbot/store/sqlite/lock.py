"""The SQLite writer's lock: an exclusive flock on the index file, and the rule that its
descriptors are closed only once nothing of this process holds the file.

One writer at a time: ``brainbot index``, ``watch`` and ``copy`` take this lock from opening
the store for writing to closing it, and a second writer is refused at once with
StoreBusyError (in this process too: each lock is taken on a descriptor of its own).
flock locks are separate from the POSIX record locks SQLite uses, so readers are never
blocked by it. The lock is on the file, so a rebuild that moves a new file over the path
(``store/sqlite/rebuild.py``) locks the new file before the move, and a writer that locked
the old file a moment before the move sees it is no longer the file at the path and
locks again (the usual lock-file race: flock, then check the path still names the file).

The close rule: closing any descriptor of a file drops every POSIX lock this process
holds on it, the ones SQLite's own connections hold included, so a reader in the same
process (the servers with --watch) would then fail with "disk I/O error" on its next
read. A released lock's descriptor is kept, by (device, inode), for the next WriterLock on
the same file. Once the file is no longer at its path (rebuilt, replaced) and no other
descriptor of this process is open on it (every SQLite connection to it is closed), its
kept descriptors are closed: they would keep a deleted index's blocks allocated for as long
as the process lives (review M12). Telling that needs /proc/self/fd; elsewhere they are
kept, as before.

POSIX only (fcntl); brainbot does not run on Windows.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from brainbot.errors import WRITERS, StoreBusyError, StoreError

# unlocked descriptors kept for the next WriterLock, by (device, inode), with the path
# they were opened at: closed once that path names another file and nothing else of this
# process has theirs open (release_stale)
_IDLE_FDS: dict[tuple[int, int], tuple[str, list[int]]] = {}
# flock, then the path turned out to name another file (a rebuild moved one over it):
# lock again. A move needs the lock, so a few tries always settle.
_RETRIES = 8


def _key(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _keep(key: tuple[int, int], path: Path, fd: int) -> None:
    _IDLE_FDS.setdefault(key, (str(path), []))[1].append(fd)


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
        release_stale()
        try:
            entry = _IDLE_FDS.get(_key(os.stat(self.path)))
            if entry and entry[1]:
                return entry[1].pop()
        except FileNotFoundError:
            pass
        try:
            return os.open(self.path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot open {self.path}: {exc.strerror}") from None

    def __enter__(self) -> WriterLock:
        for _ in range(_RETRIES):
            fd = self._descriptor()
            key = _key(os.fstat(fd))
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                _keep(key, self.path, fd)
                raise StoreBusyError(f"{_holder(key)} is writing {self.path}; wait for it "
                                     "to finish and run again") from None
            try:
                here = _key(os.stat(self.path))
            except FileNotFoundError:
                here = None
            if here == key:
                self.fd, self.key = fd, key
                return self
            fcntl.flock(fd, fcntl.LOCK_UN)  # a file moved over the path meanwhile
            _keep(key, self.path, fd)
        raise StoreBusyError(f"{self.path} keeps being replaced by another writer; wait "
                             "for it to finish and run again")

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            _keep(self.key, self.path, self.fd)
            self.fd = None


def release_stale() -> None:
    """Close the kept descriptors of files no longer at their path, once no other
    descriptor of this process is open on them (see the module docstring)."""
    stale = []
    for key, (path, _) in _IDLE_FDS.items():
        try:
            here = _key(os.stat(path))
        except OSError:
            here = None
        if here != key:
            stale.append(key)
    if not stale:
        return
    others = _open_elsewhere(set(stale))
    if others is None:  # no /proc: cannot tell, so keep them (the old behaviour)
        return
    for key in stale:
        if key in others:
            continue
        _, fds = _IDLE_FDS.pop(key)
        for fd in fds:
            os.close(fd)


def _open_elsewhere(keys: set[tuple[int, int]]) -> set[tuple[int, int]] | None:
    """Which of ``keys`` a descriptor of this process other than the kept ones has open
    (a SQLite connection, a held lock); None when this system cannot list them."""
    kept = {fd for _, fds in _IDLE_FDS.values() for fd in fds}
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return None
    found = set()
    for name in names:
        fd = int(name)
        if fd in kept:
            continue
        try:
            key = _key(os.fstat(fd))
        except OSError:  # the listing's own descriptor, or one closed meanwhile
            continue
        if key in keys:
            found.add(key)
    return found


def _holder(key: tuple[int, int]) -> str:
    """Who holds the lock on the file ``key``, as a busy message names it: the writer's
    command when /proc tells (Linux), else the writers that may hold it."""
    generic = WRITERS
    pid = _flock_pid(key)
    if pid is None:
        return generic
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().decode("utf-8", "replace").split("\0")
    except OSError:
        return generic
    command = _brainbot_command(argv)
    if command is None or pid == os.getpid():
        return generic if command is None else f"another `{command}` in this process"
    return f"another `{command}` (pid {pid})"


def _flock_pid(key: tuple[int, int]) -> int | None:
    """The pid /proc/locks gives for the exclusive flock on the file ``key``."""
    dev, ino = key
    where = f"{os.major(dev):02x}:{os.minor(dev):02x}:{ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as handle:
            for line in handle:
                fields = line.split()
                if "->" in fields:  # a waiter, not the holder
                    continue
                if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == where:
                    pid = int(fields[4])
                    return pid if pid > 0 else None
    except (OSError, ValueError):
        return None
    return None


def _brainbot_command(argv: list[str]) -> str | None:
    """``brainbot index``, ``brainbot serve --watch``, ... from a process's argv."""
    for i, arg in enumerate(argv):
        if arg.rsplit("/", 1)[-1] == "brainbot":  # .venv/bin/brainbot, python -m brainbot
            rest = [a for a in argv[i + 1:] if a]
            if not rest:
                return None
            command = f"brainbot {rest[0]}"
            if rest[0] in ("serve", "mcp") and "--watch" in rest:
                command += " --watch"
            return command
    return None

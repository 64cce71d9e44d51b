"""Finding and reading markdown notes: ignore rules, encodings, hashing.

Discovery walks each indexed root for ``.md`` and ``.markdown`` files, skipping hidden
folders (``.git``, ``.obsidian``), whatever ``.brainbotignore`` (gitignore syntax) at the
root excludes, symlinks that lead outside the root and symlink loops. A file or folder
whose name is not valid UTF-8 (an old archive's Latin-1 name) is reported and skipped: no
index can store its path as text. Reading decodes
UTF-8 (a BOM is dropped; invalid bytes become U+FFFD with a warning), normalises CRLF and
lone CR to ``\\n`` (as Python's universal newlines do, so ``open(path).read()`` gives the
same text the chunk offsets index), and refuses binary files.

Nothing here parses markdown or touches the database.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

EXTENSIONS = (".md", ".markdown")
IGNORE_FILE = ".brainbotignore"
# Notes past this size are reported and skipped: 50 MiB is far beyond any real note and
# keeps one pathological file from holding the index hostage (measured: a 20 MB note
# chunks in seconds).
MAX_FILE_BYTES = 50 * 1024 * 1024
# A NUL byte in the first 8 KiB marks a binary file, as git and ripgrep decide.
BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class NoteFile:
    """A markdown file found under a root."""

    root: Path
    relpath: str  # POSIX, relative to root
    size: int
    mtime_ns: int

    @property
    def path(self) -> Path:
        return self.root / self.relpath


@dataclass
class Problem:
    """A file that was reported and skipped (or read with a warning)."""

    path: str
    reason: str
    skipped: bool = True


@dataclass
class Discovery:
    files: list[NoteFile] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def undecodable(name: str) -> bool:
    """Whether a name from the file system was not valid UTF-8: Python keeps such bytes
    as lone surrogates ("caf\\udce9.md"), which neither SQLite nor Postgres can store."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def shown(path: str) -> str:
    """``path`` with the bytes that are not UTF-8 as ``\\xNN`` ("caf\\xe9.md"): the name as
    the user can tell it, printable and storable."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _not_utf8(rel: str, what: str) -> Problem:
    return Problem(shown(rel), f"the {what} name is not valid UTF-8; rename it to index it")


def _ignore_spec(root: Path):
    ignore = root / IGNORE_FILE
    if not ignore.is_file():
        return None
    import pathspec

    try:
        data = read_regular(ignore)
    except OSError:  # replaced by something else since is_file(): no rules to read
        return None
    lines = data.decode("utf-8", errors="replace").splitlines()
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _inside(path: Path, root_real: Path) -> bool:
    try:
        path.resolve().relative_to(root_real)
        return True
    except (ValueError, OSError, RuntimeError):
        return False


def discover(root: Path, *, follow_outside: bool = False) -> Discovery:
    """Every note under ``root`` (a folder or a single file), sorted by relative path."""
    found = Discovery()
    root = root.absolute()
    if undecodable(str(root)):
        from brainbot.errors import InputError

        raise InputError(f"{shown(str(root))}: the path is not valid UTF-8, so no index can "
                         "store it; rename it (or index it through a symlink whose path is)")
    if root.is_file():
        st = root.stat()
        found.files.append(NoteFile(root.parent, root.name, st.st_size, st.st_mtime_ns))
        return found
    root_real = root.resolve()
    spec = _ignore_spec(root)
    seen_dirs: set[tuple[int, int]] = set()

    def unreadable(exc: OSError) -> None:  # a folder os.walk cannot list: report it
        where = Path(exc.filename) if exc.filename else root
        try:
            rel = where.relative_to(root).as_posix()
        except ValueError:
            rel = str(where)
        found.problems.append(Problem(rel, f"unreadable folder: {exc.strerror or exc}"))

    for dirpath, dirnames, filenames in os.walk(root, followlinks=True, onerror=unreadable):
        here = Path(dirpath)
        try:
            st = here.stat()
        except OSError as exc:
            found.problems.append(Problem(str(here), f"unreadable folder: {exc.strerror}"))
            dirnames[:] = []
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen_dirs:  # a symlink loop or a second way into the same folder
            dirnames[:] = []
            continue
        seen_dirs.add(key)
        rel_dir = here.relative_to(root)
        dirnames[:] = [name for name in sorted(dirnames) if _descend(
            found, spec, here / name, (rel_dir / name).as_posix(), root_real, follow_outside)]
        for name in filenames:
            if not name.lower().endswith(EXTENSIONS) or name.startswith("."):
                continue
            rel = (rel_dir / name).as_posix()
            if spec is not None and spec.match_file(rel):
                continue
            if undecodable(name):
                found.problems.append(_not_utf8(rel, "file"))
                continue
            _add_file(found, root, root_real, here / name, rel, follow_outside)
    found.files.sort(key=lambda f: f.relpath)
    return found


def _descend(found: Discovery, spec, sub: Path, rel: str, root_real: Path,
             follow_outside: bool) -> bool:
    """Whether discovery walks into the folder ``sub``: not hidden, not ignored, named in
    UTF-8 and (a symlink) inside the root; what is refused for a reason is reported."""
    if sub.name.startswith(".") or (spec is not None and spec.match_file(rel + "/")):
        return False
    if undecodable(sub.name):
        found.problems.append(_not_utf8(rel, "folder"))
        return False
    if sub.is_symlink() and not follow_outside and not _inside(sub, root_real):
        found.problems.append(Problem(rel, "symlink leads outside the indexed folder"))
        return False
    return True


def _add_file(found: Discovery, root: Path, root_real: Path, path: Path, rel: str,
              follow_outside: bool) -> None:
    try:
        st = path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            reason = "symlink loop"
        elif path.is_symlink() and exc.errno == errno.ENOENT:
            reason = "broken symlink: its target does not exist"
        else:
            reason = f"cannot stat: {exc.strerror or exc}"
        found.problems.append(Problem(rel, reason))
        return
    if path.is_symlink() and not follow_outside and not _inside(path, root_real):
        found.problems.append(Problem(rel, "symlink leads outside the indexed folder"))
        return
    if not stat.S_ISREG(st.st_mode):
        # A FIFO would block the reader forever; a socket or a device is no note either.
        found.problems.append(Problem(rel, "not a regular file (a FIFO, socket or device)"))
        return
    found.files.append(NoteFile(root, rel, st.st_size, st.st_mtime_ns))


def discover_some(root: Path, relpaths, *, follow_outside: bool = False) -> Discovery:
    """The notes among ``relpaths`` (POSIX, relative to the folder ``root``) that
    ``discover(root)`` would find: the same hidden-folder, extension, ignore-file and
    symlink rules, without walking the folder. Paths that are not there are left out."""
    found = Discovery()
    root = root.absolute()
    root_real = root.resolve()
    spec = _ignore_spec(root)
    for rel in sorted(set(relpaths)):
        parts = rel.split("/")
        if any(p.startswith(".") or p in ("", "..") for p in parts):
            continue
        if not parts[-1].lower().endswith(EXTENSIONS):
            continue
        dirs = ["/".join(parts[:i]) + "/" for i in range(1, len(parts))]
        if spec is not None and (spec.match_file(rel) or any(spec.match_file(d) for d in dirs)):
            continue
        path = root / rel
        if not follow_outside and not _inside(path.parent, root_real):
            continue  # under a symlinked folder that leads outside
        if not (path.exists() or path.is_symlink()):
            continue
        if undecodable(rel):
            found.problems.append(_not_utf8(rel, "file" if undecodable(parts[-1]) else "folder"))
        else:
            _add_file(found, root, root_real, path, rel, follow_outside)
    return found


@dataclass(frozen=True)
class NoteText:
    text: str
    sha256: str
    warnings: tuple[str, ...] = ()


class UnreadableNote(Exception):
    """A note that cannot be indexed (binary, too large, unreadable); reported, skipped."""


def decode(data: bytes) -> tuple[str, list[str]]:
    """Bytes to text: UTF-8 (BOM dropped, bad bytes replaced), newlines normalised, NUL as
    U+FFFD (Postgres text cannot hold it; one character for one, so both stores hold the
    same text at the same offsets, and a citation of it verifies against the file on both)."""
    warnings = []
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8-sig", errors="replace")
        warnings.append(f"invalid UTF-8 at byte {exc.start}; bad bytes replaced with U+FFFD")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    return text, warnings


def open_regular(path: str | os.PathLike):
    """``path`` opened for reading in binary, if it is a regular file; OSError otherwise.

    Opening a FIFO blocks until a writer comes (and reading a device may never end): a
    note replaced by one hung every search that checked it, and the daemon's lock with it
    (review M5). So the file is opened without blocking and its type checked on the open
    descriptor (a stat before the open could be of another file)."""
    if not stat.S_ISREG(os.stat(path).st_mode):  # a device is not even opened
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike) -> bytes:
    """The bytes of a regular file (``open_regular``); OSError for anything else."""
    with open_regular(path) as handle:
        return handle.read()


def read_note(path: Path, *, max_bytes: int = MAX_FILE_BYTES) -> NoteText:
    """Read, hash and decode one note, or raise UnreadableNote with the reason."""
    try:
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:
                raise UnreadableNote(
                    f"too large ({size / 2**20:.1f} MiB > {max_bytes / 2**20:.0f} MiB limit)")
            data = handle.read()
    except OSError as exc:
        raise UnreadableNote(f"cannot read: {exc.strerror or exc}") from None
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise UnreadableNote("binary file (NUL bytes), not markdown")
    text, warnings = decode(data)
    return NoteText(text, hashlib.sha256(data).hexdigest(), tuple(warnings))


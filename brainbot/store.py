"""The SQLite file: schema, migrations, transactions, fingerprint.

One file holds everything: documents, chunks, vectors and the BM25 postings, in plain
tables that any SQLite tool can read without an extension. Vectors are dim x float32
little-endian BLOBs, L2-normalised: the bytes sqlite-vec's ``vec_f32()`` reads, so
``vec_distance_cosine(vector, vec_f32(?))`` works wherever sqlite-vec is loaded.

We open the file with sqlean.py (a drop-in for ``sqlite3`` that can load extensions; the
stdlib module on many machines cannot). sqlite-vec is loaded when available and its
absence is reported by ``vec_available()``, never hidden.

This module knows nothing of markdown, embeddings or ranking: it stores and fetches.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import sqlean as sqlite3

from .errors import IncompatibleIndexError, InputError, StoreBusyError, StoreError

SCHEMA_VERSION = 1
# Readers wait this long for a writer's commit instead of failing with "database is
# locked"; WAL keeps readers and the single writer out of each other's way otherwise.
# BRAINBOT_BUSY_TIMEOUT_MS overrides it (tests lower it; a slow network disk may raise it).
BUSY_TIMEOUT_MS = 30_000
BUSY_TIMEOUT_ENV = "BRAINBOT_BUSY_TIMEOUT_MS"


_M001_INITIAL = """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE documents (
            id INTEGER PRIMARY KEY,
            root TEXT NOT NULL,            -- absolute POSIX path of the indexed folder
            path TEXT NOT NULL,            -- POSIX path relative to root
            sha256 TEXT NOT NULL,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            title TEXT,
            front_matter TEXT NOT NULL DEFAULT '{}',   -- JSON object
            indexed_at TEXT NOT NULL,
            UNIQUE (root, path)
        );
        CREATE TABLE chunks (
            id INTEGER PRIMARY KEY,        -- dense key used by the search kernels
            chunk_id TEXT NOT NULL,        -- public id: hash of file, index and text
            document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            chunk_index INTEGER NOT NULL,
            heading_path TEXT NOT NULL,    -- JSON array of strings
            source_text TEXT NOT NULL,
            retrieval_text TEXT NOT NULL,  -- what was embedded
            start_line INTEGER NOT NULL,
            end_line INTEGER NOT NULL,
            start_char INTEGER NOT NULL,
            end_char INTEGER NOT NULL,
            source_tokens INTEGER NOT NULL,
            retrieval_tokens INTEGER NOT NULL,
            text_sha256 TEXT NOT NULL,     -- sha256 of retrieval_text: vector reuse key
            lexical_length INTEGER NOT NULL,  -- analyzed terms, BM25's document length
            UNIQUE (document_id, chunk_index)
        );
        CREATE INDEX chunks_chunk_id ON chunks(chunk_id);
        CREATE INDEX chunks_text_sha256 ON chunks(text_sha256);
        CREATE TABLE embeddings (
            chunk INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
            vector BLOB NOT NULL           -- dim x float32 little-endian, L2-normalised
        );
        CREATE TABLE terms (
            id INTEGER PRIMARY KEY,
            term TEXT NOT NULL UNIQUE,
            df INTEGER NOT NULL DEFAULT 0  -- chunks containing the term
        );
        CREATE TABLE postings (
            term INTEGER NOT NULL REFERENCES terms(id),
            chunk INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
            tf INTEGER NOT NULL,
            PRIMARY KEY (term, chunk)
        ) WITHOUT ROWID;
        CREATE INDEX postings_chunk ON postings(chunk);
        CREATE VIEW chunk_view AS
            SELECT c.chunk_id, d.path, c.heading_path, c.start_line, c.end_line,
                   c.source_text AS text
            FROM chunks c JOIN documents d ON d.id = c.document_id
            ORDER BY d.path, c.chunk_index;
"""

# Numbered migrations: MIGRATIONS[i] is the SQL that brings a file from version i to
# i + 1. Each runs in one transaction together with its user_version bump.
MIGRATIONS = [_M001_INITIAL]


@dataclass(frozen=True)
class IndexIdentity:
    """What must match between a database and the code reading or writing it."""

    model: str
    model_sha256: str
    dimension: int
    tokenizer: str
    chunker: str
    embedder: str

    def fingerprint(self) -> str:
        import hashlib

        blob = json.dumps(self.__dict__, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def as_meta(self) -> dict[str, str]:
        meta = {k: str(v) for k, v in self.__dict__.items()}
        meta["fingerprint"] = self.fingerprint()
        return meta


def busy_timeout_ms() -> int:
    """BUSY_TIMEOUT_MS, or the BRAINBOT_BUSY_TIMEOUT_MS override."""
    raw = os.environ.get(BUSY_TIMEOUT_ENV)
    if raw is None or not raw.strip():
        return BUSY_TIMEOUT_MS
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise InputError(f"{BUSY_TIMEOUT_ENV} must be a whole number of milliseconds, not {raw!r}")
    return value


def _read_only_medium(target: Path) -> bool:
    """Whether ``target`` lies on a read-only mount: SQLite cannot create the -shm file
    a WAL reader needs there, and no writer can be changing the file either."""
    try:
        read_only = bool(os.statvfs(target).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # AttributeError: no statvfs (Windows)
        return False
    wal = Path(str(target) + "-wal")
    return read_only and (not wal.exists() or wal.stat().st_size == 0)


def connect(path: str | os.PathLike, *, readonly: bool = False) -> sqlite3.Connection:
    """Open a SQLite connection with brainbot's pragmas (no schema checks).

    WAL mode is switched on by open_index() once the file is known to be a brainbot
    index: switching it here would rewrite the header of another application's file.
    """
    target = Path(path)
    if readonly and not target.exists():
        raise StoreError(f"no index at {target}; create it with `brainbot index NOTES --db {target}`")
    if target.exists() and not target.is_file():
        raise StoreError(f"{target} is not a file")
    try:
        if readonly and _read_only_medium(target):
            # On a read-only mount SQLite cannot create the -shm file a WAL reader needs;
            # nothing can write there either, so the file may be read as immutable.
            uri = f"file:{quote(target.absolute().as_posix())}?mode=ro&immutable=1"
            db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        else:
            # Readers open the file normally (not ?mode=ro): a read-only connection to a
            # WAL file fails when the -shm file does not exist yet. They simply never write.
            db = sqlite3.connect(str(target), isolation_level=None, check_same_thread=False)
    except sqlite3.DatabaseError as exc:
        raise _translate(exc, target) from None
    try:
        db.execute(f"PRAGMA busy_timeout = {busy_timeout_ms()}")
        db.execute("PRAGMA foreign_keys = ON")
        if not readonly:
            db.execute("PRAGMA synchronous = NORMAL")
    except BaseException as exc:
        db.close()
        if isinstance(exc, sqlite3.DatabaseError):
            raise _translate(exc, target) from None
        raise
    return db


def _translate(exc: Exception, target: Path) -> StoreError:
    """A SQLite error as one sentence that names the file and what to do."""
    text = str(exc)
    if "not a database" in text or "malformed" in text or "file is encrypted" in text:
        return IncompatibleIndexError(
            f"{target} is not a brainbot index or is damaged (SQLite says: {text}); pass "
            "another --db or move the file away (if it is a damaged brainbot index, rebuild "
            f"it with `brainbot index NOTES --db {target} --rebuild`)"
        )
    if "locked" in text or "busy" in text:
        return StoreBusyError(f"{target} is locked by another process ({text}); wait for it "
                              "to finish and try again")
    if ("readonly" in text or "read-only" in text
            or ("unable to open" in text and not os.access(target.parent, os.W_OK))):
        return StoreError(f"{target} is read-only ({text}); it and its folder must be "
                          "writable (check permissions, `chattr -i`, the mount) or pass "
                          "another --db")
    if "disk" in text and "full" in text:
        return StoreError(f"disk full while writing {target}; nothing from this batch was "
                          "kept: free some space and run again")
    if "disk I/O error" in text:
        return StoreError(f"I/O error on {target} ({text}); check the disk, then run again")
    return StoreError(f"{target}: {text}")


@contextmanager
def translate_errors(target: str | os.PathLike) -> Iterator[None]:
    """Turn SQLite errors raised inside the block into StoreError naming ``target``."""
    try:
        yield
    except sqlite3.Error as exc:
        raise _translate(exc, Path(target)) from None


def schema_version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def _is_empty(db: sqlite3.Connection) -> bool:
    row = db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return row[0] == 0


def _check_ours(db: sqlite3.Connection, target: Path) -> None:
    """Refuse a SQLite file of another application before anything reads its version
    (its user_version means nothing to us) or writes to it."""
    if _is_empty(db):
        return
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "meta" not in names or "chunks" not in names:
        raise IncompatibleIndexError(
            f"{target} is a SQLite file but not a brainbot index; pass another --db"
        )


def migrate(db: sqlite3.Connection, target: Path) -> None:
    """Bring the file up to SCHEMA_VERSION, one numbered migration at a time."""
    _check_ours(db, target)
    version = schema_version(db)
    if version > SCHEMA_VERSION:
        raise IncompatibleIndexError(
            f"{target} was written by a newer brainbot (schema {version}, this one reads "
            f"{SCHEMA_VERSION}); upgrade brainbot or use another --db"
        )
    for step in range(version, SCHEMA_VERSION):
        # executescript() commits whatever is open before it runs, so the transaction
        # lives inside the script itself.
        try:
            db.executescript(f"BEGIN IMMEDIATE;\n{MIGRATIONS[step]}\n"
                             f"PRAGMA user_version = {step + 1};\nCOMMIT;")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise


@contextmanager
def transaction(db: sqlite3.Connection, *, immediate: bool = True) -> Iterator[None]:
    """One atomic write: everything inside commits together or not at all."""
    db.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        # After some errors (a full disk, an I/O error) SQLite has already rolled back;
        # a second error from ROLLBACK must not hide the first one.
        if db.in_transaction:
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        raise


def read_meta(db: sqlite3.Connection) -> dict[str, str]:
    try:
        return dict(db.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.OperationalError:
        return {}


def check_identity(db: sqlite3.Connection, identity: IndexIdentity, target: Path) -> None:
    """Refuse a file built by another model, tokenizer or chunker."""
    meta = read_meta(db)
    if "fingerprint" not in meta:
        return
    for key, ours in identity.as_meta().items():
        if key == "fingerprint":
            continue
        theirs = meta.get(key)
        if theirs is not None and theirs != ours:
            raise IncompatibleIndexError(
                f"{target} was built with {key} {theirs!r}, this brainbot uses {ours!r}; "
                f"rebuild it with `brainbot index NOTES --db {target} --rebuild` or use another --db"
            )


def _identity_rows(identity: IndexIdentity) -> list[tuple[str, str]]:
    return list(identity.as_meta().items()) + [("schema_version", str(SCHEMA_VERSION))]


def identity_recorded(db: sqlite3.Connection, identity: IndexIdentity) -> bool:
    """Whether meta already holds ``identity``: then there is nothing to write, and a run
    with nothing to do leaves the file as it was, byte for byte, and needs no write lock."""
    meta = read_meta(db)
    return all(meta.get(key) == value for key, value in _identity_rows(identity))


def write_identity(db: sqlite3.Connection, identity: IndexIdentity) -> None:
    db.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                   _identity_rows(identity))


def open_index(path: str | os.PathLike, identity: IndexIdentity | None = None,
               *, create: bool = False, readonly: bool = False) -> sqlite3.Connection:
    """Open (or create) a brainbot index, migrated and checked against ``identity``."""
    target = Path(path)
    if not create and not target.exists():
        raise StoreError(f"no index at {target}; create it with `brainbot index NOTES --db {target}`")
    if create and not target.parent.exists():
        raise StoreError(f"folder {target.parent} does not exist")
    db = connect(target, readonly=readonly)
    try:
        if readonly:
            _check_ours(db, target)
            version = schema_version(db)
            if version != SCHEMA_VERSION:
                if version > SCHEMA_VERSION:
                    raise IncompatibleIndexError(
                        f"{target} was written by a newer brainbot (schema {version}); "
                        "upgrade brainbot or use another --db")
                raise IncompatibleIndexError(
                    f"{target} is not a brainbot index (schema {version}); index into it first")
        else:
            migrate(db, target)
        if identity is not None:
            check_identity(db, identity, target)
        if not readonly:
            db.execute("PRAGMA journal_mode = WAL")
    except sqlite3.DatabaseError as exc:
        db.close()
        raise _translate(exc, target) from None
    except BaseException:
        db.close()
        raise
    return db


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def counts(db: sqlite3.Connection) -> dict[str, int]:
    out = {}
    for table in ("documents", "chunks", "embeddings", "terms", "postings"):
        out[table] = int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    return out


def load_extension_vec(db: sqlite3.Connection) -> bool:
    """Load sqlite-vec into this connection; False (never an exception) when it cannot."""
    try:
        import sqlite_vec

        db.enable_load_extension(True)
        sqlite_vec.load(db)
        db.enable_load_extension(False)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not available", reported by callers
        return False


def vec_available() -> tuple[bool, str]:
    """Whether sqlite-vec loads here, and its version or the reason it does not."""
    db = sqlite3.connect(":memory:")
    try:
        if not load_extension_vec(db):
            return False, "sqlite-vec did not load (pip install sqlite-vec)"
        return True, db.execute("SELECT vec_version()").fetchone()[0]
    finally:
        db.close()


def integrity(db: sqlite3.Connection) -> str:
    rows = db.execute("PRAGMA integrity_check").fetchall()
    return "; ".join(r[0] for r in rows)

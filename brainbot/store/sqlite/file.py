"""The SQLite file itself: opening it, its pragmas, its schema and migrations, its errors.

One file holds everything: documents, chunks, vectors and the BM25 postings, in plain
tables that any SQLite tool can read without an extension. Vectors are dim x float32
little-endian BLOBs, L2-normalised: the bytes sqlite-vec's ``vec_f32()`` reads, so
``vec_distance_cosine(vector, vec_f32(?))`` works wherever sqlite-vec is loaded.

We open the file with sqlean.py (a drop-in for ``sqlite3`` that can load extensions; the
stdlib module on many machines cannot). sqlite-vec is loaded when available and its
absence is reported by ``vec_available()``, never hidden.

This module knows nothing of documents or ranking: ``store/sqlite/store.py`` reads and writes
through the connections opened here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import sqlean as sqlite3

from brainbot.errors import (
    InputError,
    NewerSchemaError,
    NoIndexError,
    NotAnIndexError,
    OlderSchemaError,
    ReadOnlyStoreError,
    StoreBusyError,
    StoreError,
)
from brainbot.store.identity import stamp

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

# Issue 12: a note's warnings (bad front matter, replaced bytes) are kept, so `status`
# and `report` can show them after the run that found them; and whether a document is a
# file on disk or a record of a dataset (BEIR) is a column, not a prefix of its root.
_M002_WARNINGS_AND_KIND = """
        ALTER TABLE documents ADD COLUMN warnings TEXT NOT NULL DEFAULT '[]';  -- JSON array
        ALTER TABLE documents ADD COLUMN kind TEXT NOT NULL DEFAULT 'note';    -- note | record
        UPDATE documents SET kind = 'record' WHERE root LIKE 'dataset:%';
"""

# Issue 11: every committed index batch bumps meta's generation, and each chunk records
# the generation that wrote it, so a long-lived reader (the MCP server) reloads only the
# chunks written since it last looked (SQLite may give a deleted chunk's id to a new one:
# the generation tells them apart). The covering index lets it list ids, lengths and
# generations without reading any chunk text.
_M003_GENERATION = """
        ALTER TABLE chunks ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX chunks_scan ON chunks(id, lexical_length, generation);
        INSERT OR IGNORE INTO meta(key, value) VALUES ('generation', '0');
"""

# Issue 15: a vault's links (each from the chunk it sits in, to the document it resolves
# to, if any), its tags (front matter and inline, once per note), a date for each note
# (and where it came from), and whether each chunk reads as English. The next writer
# re-parses unchanged notes to fill them, without re-embedding (meta vault_refresh).
_M004_VAULT = """
        CREATE TABLE links (
            id INTEGER PRIMARY KEY,
            source_chunk INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
            source_document INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            line INTEGER NOT NULL,           -- 1-based line of the link in its note
            kind TEXT NOT NULL,              -- wikilink | embed | markdown
            target TEXT NOT NULL,            -- as written: 'Note', 'dir/Note.md', '../x.md'
            target_heading TEXT,             -- after '#', NULL when none
            alias TEXT,                      -- the text shown instead, NULL when none
            target_document INTEGER REFERENCES documents(id) ON DELETE SET NULL,
            resolved INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX links_source ON links(source_document);
        CREATE INDEX links_target ON links(target_document);
        CREATE TABLE tags (
            document INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            tag TEXT NOT NULL,               -- lowercase, no '#': 'project/alpha'
            source TEXT NOT NULL,            -- front_matter | inline | both
            PRIMARY KEY (document, tag)
        ) WITHOUT ROWID;
        CREATE INDEX tags_tag ON tags(tag);
        ALTER TABLE documents ADD COLUMN date TEXT;         -- YYYY-MM-DD, local time
        ALTER TABLE documents ADD COLUMN date_source TEXT;  -- front_matter | filename | mtime
        ALTER TABLE chunks ADD COLUMN english INTEGER;      -- 1 | 0; NULL until filled
        INSERT OR REPLACE INTO meta(key, value) VALUES ('vault_refresh', '1');
"""

# Issue 20 (M10): when the indexer read each file, so that a file modified within the
# filesystem's mtime granularity of being read is re-hashed rather than trusted by its
# stat (index/freshness.racy). NULL for a file last read before this migration.
_M005_READ_TIME = """
        ALTER TABLE documents ADD COLUMN read_ns INTEGER;  -- time.time_ns() before the read
"""

# Numbered migrations: MIGRATIONS[i] is the SQL that brings a file from version i to
# i + 1. Each runs in one transaction together with its user_version bump. Numbers are
# given in the order migrations land, and the Postgres store mirrors them.
MIGRATIONS = [_M001_INITIAL, _M002_WARNINGS_AND_KIND, _M003_GENERATION, _M004_VAULT,
              _M005_READ_TIME]
SCHEMA_VERSION = len(MIGRATIONS)


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

    WAL mode is switched on by open_file() once the file is known to be a brainbot
    index: switching it here would rewrite the header of another application's file.
    """
    target = Path(path)
    if readonly and not target.exists():
        raise NoIndexError(target)
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
        raise translate(exc, target) from None
    try:
        db.execute(f"PRAGMA busy_timeout = {busy_timeout_ms()}")
        db.execute("PRAGMA foreign_keys = ON")
        if not readonly:
            db.execute("PRAGMA synchronous = NORMAL")
    except BaseException as exc:
        db.close()
        if isinstance(exc, sqlite3.DatabaseError):
            raise translate(exc, target) from None
        raise
    return db


def translate(exc: Exception, target: Path) -> StoreError:
    """A SQLite error as one sentence that names the file and what to do."""
    text = str(exc)
    if "not a database" in text or "malformed" in text or "file is encrypted" in text:
        return NotAnIndexError(target, text)
    if "locked" in text or "busy" in text:
        return StoreBusyError(f"{target} is locked by another process ({text}); wait for it "
                              "to finish and try again")
    if ("readonly" in text or "read-only" in text
            or ("unable to open" in text and not os.access(target.parent, os.W_OK))):
        return ReadOnlyStoreError(f"{target} is read-only ({text}); it and its folder must be "
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
        raise translate(exc, Path(target)) from None


def schema_version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def is_empty(db: sqlite3.Connection) -> bool:
    return db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0


def check_ours(db: sqlite3.Connection, target: Path) -> None:
    """Refuse a SQLite file of another application before anything reads its version
    (its user_version means nothing to us) or writes to it."""
    if is_empty(db):
        return
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "meta" not in names or "chunks" not in names:
        raise NotAnIndexError(target)


def check_readable(db: sqlite3.Connection, target: Path) -> None:
    """A reader needs a brainbot file at exactly this schema version."""
    if is_empty(db):
        raise NoIndexError(target)
    check_ours(db, target)
    version = schema_version(db)
    if version > SCHEMA_VERSION:
        raise NewerSchemaError(target, version, SCHEMA_VERSION)
    if version < SCHEMA_VERSION:
        raise OlderSchemaError(target, version, SCHEMA_VERSION)


def migrate(db: sqlite3.Connection, target: Path) -> None:
    """Bring the file up to SCHEMA_VERSION, one numbered migration at a time."""
    check_ours(db, target)
    version = schema_version(db)
    if version > SCHEMA_VERSION:
        raise NewerSchemaError(target, version, SCHEMA_VERSION)
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


def peek_meta(path: Path) -> dict[str, str]:
    """The meta of the index at ``path``, read without writing anything; {} when there is
    no readable index there (opening it will say why)."""
    try:
        db = connect(path, readonly=True)
    except StoreError:
        return {}
    try:
        return read_meta(db)
    except sqlite3.Error:  # not a database
        return {}
    finally:
        db.close()


def whereabouts(path: Path) -> tuple[tuple | None, tuple | None]:
    """(the file's (st_dev, st_ino), its (index_id, generation)), read without writing
    anything; (None, None) when there is no file, and no stamp when it records no
    index_id."""
    try:
        st = os.stat(path)
    except OSError:
        return None, None
    place = ("file", st.st_dev, st.st_ino)
    try:
        db = connect(path, readonly=True)  # as any reader opens it: nothing is written
    except StoreError:  # a folder, an unreadable file: no index_id to compare
        return place, None
    try:
        return place, stamp(read_meta(db))
    except sqlite3.Error:  # not a database: no index_id
        return place, None
    finally:
        db.close()


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

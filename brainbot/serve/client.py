"""The CLI's way to a running `brainbot serve`: found through a small file next to the index.

A `serve` of a SQLite index writes ``<index>.serve.json`` (its port, pid, brainbot's
version and the index file's identity: device and inode) once it listens, and removes it
when it shuts down. `brainbot query` reads it and, when the daemon is alive, of this
version and serving this very file, sends the search there and prints what comes back,
which is what it would have printed itself: the model, the vectors and the postings are
already loaded there. Anything else (no file, a dead pid, another version, a replaced
index, a refused or failed request, a token the CLI does not have) falls back to the
in-process search, silently.

This module imports only the standard library: neither numpy nor onnxruntime is loaded
on the way to the daemon.
"""

from __future__ import annotations

import http.client
import json
import os
from functools import lru_cache

SUFFIX = ".serve.json"
TIMEOUT_S = 30.0  # a search the daemon has accepted; connecting fails fast on loopback


@lru_cache(maxsize=1)
def version() -> str:
    """The installed brainbot's version (the package's own __init__ is above serve/)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("brainbot")
    except PackageNotFoundError:
        return "unknown"


def port_file(db) -> str | None:
    """The daemon file of a SQLite index; None for a Postgres URL."""
    text = str(db)
    return None if "://" in text else text + SUFFIX


def index_id(db) -> str | None:
    """The index file's identity (device:inode): a file replaced under the same name
    is another index."""
    try:
        st = os.stat(db)
    except OSError:
        return None
    return f"{st.st_dev}:{st.st_ino}"


def announcement(db, port: int) -> dict:
    return {"port": port, "pid": os.getpid(), "version": version(), "index_id": index_id(db)}


def find(db) -> int | None:
    """The port of a live daemon of this version serving ``db``, or None."""
    path = port_file(db)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
        os.kill(int(info["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if info.get("version") != version() or info.get("index_id") != index_id(db):
        return None
    return int(info["port"])


def search(db, body: dict) -> dict | None:
    """POST /api/search to the daemon of ``db``: its reply, or None to search here."""
    port = find(db)
    if port is None:
        return None
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    try:
        conn.request("POST", "/api/search", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        reply = json.loads(resp.read())
    except (OSError, ValueError, http.client.HTTPException):
        return None
    finally:
        conn.close()
    return reply if resp.status == 200 and isinstance(reply, dict) else None

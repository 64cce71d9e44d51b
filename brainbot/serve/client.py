"""The CLI's way to a running `brainbot serve`: found through a small file next to the index.

A `serve` of a SQLite index writes ``<index>.serve.json`` once it listens, and removes it
when it shuts down. The file names its port, pid and brainbot's version, and the index
it serves by the store's own identity: the file's real path and the ``index_id`` in its
meta (store/identity.py; a rebuild or ``copy --replace`` writes a new one), kept current
by the daemon. It also holds a salted hash of what selects the Claude an `ask` reaches
(``ANTHROPIC_*``, ``BRAINBOT_MODEL``, ``BRAINBOT_RERANK``, the SDK's config folder), so
an `ask` goes to the daemon only when it would reach the same one: the key never leaves
the CLI.

`brainbot query` and `brainbot ask` read the file and, when the daemon is alive, of this
version and serving this very path, send the request there with the path and the
``index_id`` they read from the index file itself; the daemon answers only when that is
what it searched (else 409), and the CLI prints what comes back, which is what it would
have printed itself: the model, the vectors and the postings are already loaded there.
Anything else (no file, a dead pid, another version, another path, an index with no
``index_id`` yet, a refused or failed request, a token the CLI does not have) falls back
to the in-process search, silently.

This module imports only the standard library and the SQLite file's meta reader
(no numpy, no onnxruntime) on the way to the daemon.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

SUFFIX = ".serve.json"
TIMEOUT_S = 30.0  # a search the daemon has accepted; connecting fails fast on loopback
ASK_TIMEOUT_S = 600.0  # an answer may take several model turns
CLAUDE_ENV = ("BRAINBOT_MODEL", "BRAINBOT_RERANK")


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


def identity(db) -> dict | None:
    """The index now at ``db`` as the store identifies it: {"path": its real path,
    "index_id": from its meta}; None with no index there, or one with no index_id yet."""
    from brainbot.store.sqlite.file import whereabouts

    _, stamp = whereabouts(Path(db))
    if stamp is None:
        return None
    return {"path": os.path.realpath(db), "index_id": stamp[0]}


def claude_setting(salt: str) -> str:
    """A salted hash of what decides which Claude (if any) an `ask` reaches and how."""
    blob = {k: v for k, v in os.environ.items()
            if k.startswith("ANTHROPIC_") or k in CLAUDE_ENV}
    config = Path.home() / ".config" / "anthropic"
    if config.is_dir():
        blob["config"] = sorted((str(p.relative_to(config)), p.stat().st_size,
                                 p.stat().st_mtime_ns) for p in config.rglob("*") if p.is_file())
    return hashlib.sha256((salt + json.dumps(blob, sort_keys=True)).encode()).hexdigest()


def announcement(db, port: int, index_id: str | None) -> dict:
    salt = os.urandom(16).hex()
    return {"port": port, "pid": os.getpid(), "version": version(),
            "path": os.path.realpath(db), "index_id": index_id, "salt": salt,
            "claude": claude_setting(salt)}


def find(db) -> dict | None:
    """The daemon file's record of a live daemon of this version serving ``db``'s path,
    or None."""
    path = port_file(db)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
        os.kill(int(info["pid"]), 0)
        int(info["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if info.get("version") != version() or info.get("path") != os.path.realpath(db):
        return None
    return info


def search(db, body: dict) -> dict | None:
    """POST /api/search to the daemon of ``db``: its reply, or None to search here."""
    return _call(db, "/api/search", body, TIMEOUT_S)


def ask(db, body: dict) -> dict | None:
    """POST /api/ask to the daemon of ``db`` when it would reach the same Claude as this
    process: its reply, or None to answer here."""
    info = find(db)
    if info is None or info.get("claude") != claude_setting(str(info.get("salt"))):
        return None
    return _call(db, "/api/ask", body, ASK_TIMEOUT_S, info)


def _call(db, route: str, body: dict, timeout: float, info: dict | None = None
          ) -> dict | None:
    info = info or find(db)
    index = identity(db) if info is not None else None
    if index is None:
        return None
    import http.client  # here, not at the top: a query with no daemon never needs it

    conn = http.client.HTTPConnection("127.0.0.1", int(info["port"]), timeout=timeout)
    try:
        conn.request("POST", route, body=json.dumps({**body, "index": index}).encode(),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        reply = json.loads(resp.read())
    except (OSError, ValueError, http.client.HTTPException):
        return None
    finally:
        conn.close()
    return reply if resp.status == 200 and isinstance(reply, dict) else None

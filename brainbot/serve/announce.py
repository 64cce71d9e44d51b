"""The daemon file's writer: how `brainbot serve` says, next to the index, that it serves it.

``<index>.serve.json`` (read by the CLI: serve/client.py) is written once the server
has its socket and is about to listen (uvicorn's lifespan startup, which `serve` runs
only after binding), rewritten when a request finds another index_id at the path (a
rebuild or ``copy --replace``), and removed when the server shuts down. It is readable by
its owner only: it names the port of a daemon over notes other users may not read.

One daemon a file: the file of another live daemon serving the same index (its pid
alive, its port answering on loopback) is never overwritten or removed. A second
`serve` of the same index on another port is then not announced: the CLI goes on using
the first, and the second's exit leaves the first's file as it is (issue 32, M8). A file
whose daemon is gone (killed with SIGKILL, its pid dead or reused) is written over.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket

log = logging.getLogger("brainbot.serve.announce")


class Announced:
    """ASGI wrapper around the app: the daemon file for ``service``'s index, naming
    ``port`` (the bound one)."""

    def __init__(self, app, service, port: int) -> None:
        from .client import port_file

        self.app, self.service, self.port = app, service, port
        self.db, self.path = service.db, port_file(service.db)
        self.index_id: str | None = None
        self.announced = False

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "lifespan" or self.path is None:
            return await self.app(scope, receive, send)

        async def announce(message):
            if message["type"] == "lifespan.startup.complete":
                with self.service.lock:
                    self.write(self.service.searcher.store.meta().get("index_id"))
            return await send(message)

        async def withdraw():
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                self.remove()
            return message

        try:
            await self.app(scope, withdraw, announce)
        finally:
            self.remove()

    def track(self, index_id: str | None) -> None:
        """Say the index_id the store now serves, if it changed (under the lock)."""
        if self.announced and index_id != self.index_id:
            self.write(index_id)

    def write(self, index_id: str | None) -> None:
        """Write the file (owner-only), unless another live daemon's is there."""
        from .client import announcement

        other = self.holder()
        if other is not None:
            log.info("%s names pid %s on port %s, which serves this index too: `brainbot "
                     "query` and `ask` go on using that one", self.path, other["pid"],
                     other["port"])
            return
        self.index_id, self.announced = index_id, True
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)  # os.open's mode applies to a file it creates only
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(announcement(self.db, self.port, index_id), f)
            os.replace(tmp, self.path)
        except OSError as exc:  # a read-only folder: the CLI just won't find the daemon
            log.warning("cannot write %s: %s", self.path, exc)

    def holder(self) -> dict | None:
        """The file's record when it names another daemon that is alive and serves this
        index, else None (no file, this process's own, a dead one's, another index's)."""
        try:
            with open(self.path, encoding="utf-8") as f:
                info = json.load(f)
            pid, port = int(info["pid"]), int(info["port"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if pid == os.getpid() or info.get("path") != os.path.realpath(self.db):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:  # alive, another user's
            pass
        return info if _answers(port) else None

    def remove(self) -> None:
        """Remove the file if it is this process's own."""
        self.announced = False
        try:
            with open(self.path, encoding="utf-8") as f:
                ours = json.load(f).get("pid") == os.getpid()
            if ours:
                os.remove(self.path)
        except (OSError, ValueError, AttributeError):
            pass


def _answers(port: int) -> bool:
    """Whether something listens on ``port`` on loopback (where the CLI connects): a pid
    alive but nothing there is a reused pid, not a daemon."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False

"""`brainbot serve`: one warm daemon on loopback with MCP over HTTP, a JSON API and a page.

One process holds the Searcher (model, vectors, postings loaded once, reloaded by the
index's generation like `brainbot mcp`). It serves, on one port:

- ``/mcp``: the stdio server's own tools (``serve/mcp.build``) over the MCP SDK's
  Streamable HTTP transport (stateless, JSON responses);
- ``/api/...``: the same records as the CLI's ``--json`` and the MCP tools;
- ``/``: the page, from the package's static files.

Security: bound to loopback by default. Every request whose ``Host`` is not a loopback
name (or the bound address) with this port, or whose ``Origin`` is not this server's own
origin, gets 403 (DNS rebinding: a web page cannot reach the daemon through a name it
controls). No CORS headers are ever sent, and the page may not be framed. A non-loopback
``--host`` needs ``--token`` (or ``BRAINBOT_TOKEN``, which `ps` does not show), and then
every request needs ``Authorization: Bearer <token>``. Bad input is a 400 carrying
brainbot's one-line message as JSON, a body over MAX_BODY a 413, an ask past the queue a
503; an unexpected failure is a 500 with one line, and the daemon goes on. An ask whose
request says ``Accept: text/event-stream`` is answered as Server-Sent Events, its text as
it comes and then the same JSON (serve/sse.py).

The port is bound before anything else: a port in use is one line and exit 2 before the
index is even opened, and the daemon file (serve/announce.py) is written only once the
socket is this process's, never over the file of another live daemon of the same index.
Searches and the other calls run under the index lock in anyio's thread pool; asks in
threads of their own, taking the lock only for their index work (serve/service.py).
"""

from __future__ import annotations

import errno
import functools
import hmac
import ipaddress
import json
import logging
import os
import socket
from importlib import resources
from typing import TYPE_CHECKING

from brainbot.errors import BrainbotError, InputError, ServerBusyError

from . import sse

if TYPE_CHECKING:
    from .announce import Announced

log = logging.getLogger("brainbot.serve.http")

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
STATIC_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
MAX_BODY = 64 * 1024


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Guard:
    """ASGI middleware: the Host, Origin and token rules, before anything else runs.
    ``port`` is the bound one (``--port 0`` binds any free port); ``host`` the address
    bound, itself a name of this server (127.0.0.2 is loopback too)."""

    def __init__(self, app, port: int, token: str | None, loopback: bool,
                 host: str = "127.0.0.1") -> None:
        self.app, self.port, self.token, self.loopback = app, port, token, loopback
        names = {*LOOPBACK_NAMES, f"[{host.strip('[]')}]" if ":" in host else host}
        self.hosts = {f"{n}:{port}" for n in names}
        if port == 80:  # a browser leaves the default port out of Host
            self.hosts |= names

    def refusal(self, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        if self.loopback and host not in self.hosts:
            return 403, f"refused: Host {host!r} is not this server (127.0.0.1:{self.port})"
        origin = headers.get("origin")
        if origin is not None and origin != f"http://{host}":
            return 403, f"refused: Origin {origin!r} is not this server's origin"
        if self.token is not None:
            given = headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
                return 401, "refused: this server needs Authorization: Bearer <token>"
        return None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", ())}
        refused = self.refusal(headers)
        if refused is None:
            return await self.app(scope, receive, send)
        from starlette.responses import JSONResponse

        await JSONResponse({"error": refused[1]}, status_code=refused[0])(scope, receive, send)


class Refused(Exception):
    """A request this server will not answer: an HTTP status and one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _route(handler):
    """A route handler whose record is a JSON reply (a streamed answer is its own response,
    serve/sse.py) and whose failures are one-line JSON replies (``_failure``)."""
    @functools.wraps(handler)
    async def route(self, request):
        from starlette.responses import JSONResponse

        try:
            reply = await handler(self, request)
        except Exception as exc:  # noqa: BLE001 - one request fails, the daemon goes on
            return _error(*_failure(exc))
        return JSONResponse(reply) if isinstance(reply, dict) else reply

    return route


def _failure(exc: Exception) -> tuple[int, str]:
    """A failure's status and one line: Refused with its own status, a full ask queue 503,
    brainbot's other errors 400, anything else 500 (logged with its traceback)."""
    if isinstance(exc, Refused):
        return exc.status, str(exc)
    if isinstance(exc, ServerBusyError):
        return 503, str(exc)
    if isinstance(exc, BrainbotError):
        return 400, str(exc)
    log.error("request failed", exc_info=exc)
    return 500, f"internal error: {type(exc).__name__}"


class Api:
    """The JSON API's handlers: each runs the Service's body in a worker thread under
    the index lock; an ask runs in an ask's thread and takes the lock only for its index
    work (serve/service.py)."""

    def __init__(self, service, announced: Announced | None = None) -> None:
        self.service, self.announced = service, announced

    async def locked(self, fn, *args):
        from starlette.concurrency import run_in_threadpool

        return await run_in_threadpool(self.service.locked, fn, *args)

    @_route
    async def search(self, request):
        body = await _json_body(request)
        cli = body.pop("cli", None)  # {"colour": bool}: `brainbot query` asks for its text
        index = _index_field(body)
        return await self.locked(self._search, _search_args(body), cli, index)

    def _search(self, args: tuple, cli: dict | None, index: dict | None) -> dict:
        """The hits, the CLI's partial-index note (``partial``), the MCP search's
        ``partial_index`` line and, for the CLI, its text output."""
        from brainbot.render import Style, hit_block

        self._check(index)
        hits = self.service.hits(*args)
        self._check(index)
        reply = {"hits": [h.to_dict() for h in hits],
                 "partial": self.service.searcher.partial_note(args[2])}
        if args[2] != "bm25":  # as the MCP search: what a partly embedded index misses
            reply = self.service.noted(reply)
        if isinstance(cli, dict):
            style = Style(bool(cli.get("colour")))
            reply["text"] = "\n\n".join(hit_block(i + 1, h, args[0], style)
                                         for i, h in enumerate(hits))
        return reply

    @_route
    async def get(self, request):
        ref = request.query_params.get("ref")
        if not ref:
            raise InputError("give ref=PATH[:LINE[:COUNT]] or a chunk id")
        count = request.query_params.get("count")
        return await self.locked(self.service.get, ref,
                                 None if count is None else _whole(count, "count"))

    @_route
    async def ask(self, request):
        body = await _json_body(request)
        question = body.get("question")
        if not isinstance(question, str) or not question.strip():
            raise InputError("give {\"question\": \"...\"}")
        k = 8 if body.get("k") is None else body["k"]  # ask's own default
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 50:
            raise InputError("k must be a whole number from 1 to 50")
        args = (question, k, bool(body.get("cli")), _index_field(body), _thread_fields(body))
        if sse.wanted(request.headers.get("accept", "")):
            return sse.AnswerStream(self.service.asks, self._ask, args,
                                    lambda exc: _failure(exc)[1])
        return await self.service.asks.run(self._ask, *args)

    def _ask(self, question: str, k: int, cli: bool, index: dict | None,
             thread: tuple = (None, False), on_text=None) -> dict:
        """What `ask --json` prints, with ``partial_index``; for the CLI (``cli``) also
        its text output and its partial-index note (``partial``). In an ask's thread: the
        lock is taken for the checks and by the ask itself, never around the model.
        ``thread``: the conversation to continue, and whether to continue the latest;
        ``on_text``: where the model's text goes as it comes (a streamed ask)."""
        with self.service.index_lock:
            self._check(index)
        answer = self.service.answer(question, k, *thread, on_text=on_text)
        with self.service.index_lock:
            self._check(index)
            reply = self.service.noted(answer.to_dict())
            if cli:
                from brainbot.ask.terminal import format_answer

                reply["text"] = format_answer(answer)
                reply["partial"] = self.service.searcher.partial_note("hybrid")
        return reply

    def _check(self, index: dict | None) -> None:
        """Nothing when ``index`` is None or names the index this server searches (the
        CLI sends the path and index_id it read from the file); else Refused (409).
        Checked before and after a search or an ask: the answer came from that index."""
        if index is None:
            return
        now = {"path": os.path.realpath(self.service.db),
               "index_id": self.service.searcher.store.meta().get("index_id")}
        if self.announced is not None:
            self.announced.track(now["index_id"])
        if index != now:
            raise Refused(409, f"this server serves {now['path']} (index_id "
                               f"{now['index_id']}), not {index.get('path')} (index_id "
                               f"{index.get('index_id')})")

    @_route
    async def related(self, request):
        params = request.query_params
        note = params.get("note")
        if not note:
            raise InputError("give note=PATH or a note's name")
        k = _whole(params.get("k", "10"), "k")
        if not 1 <= k <= 50:
            raise InputError("k must be a whole number from 1 to 50")
        unlinked = params.get("unlinked", "false").lower() in ("1", "true", "yes")
        return await self.locked(self.service.related, note, k, unlinked)

    @_route
    async def resolve(self, request):
        """The note a link names: from=[ROOT::]PATH (the note it is written in), kind
        (wikilink, embed or markdown) and target (as written, without #heading)."""
        params = request.query_params
        source, target = params.get("from"), params.get("target")
        if not source or target is None:
            raise InputError("give from=[ROOT::]PATH, kind=wikilink|embed|markdown and "
                             "target=NAME")
        return await self.locked(self.service.resolve, source,
                                 params.get("kind", "wikilink"), target)

    @_route
    async def roots(self, request):
        """The indexed folders on this machine, each with the Obsidian vault holding it
        (the page links hits there with obsidian:// URIs) or null."""
        from brainbot.index.freshness import present_roots

        def listing():
            return {"roots": [{"root": r, "obsidian": obsidian_vault(r)}
                              for r in present_roots(self.service.searcher.store)]}

        return await self.locked(listing)

    @_route
    async def status(self, request):
        return await self.locked(self.service.status)

    async def health(self, request):
        from starlette.responses import JSONResponse

        return JSONResponse({"ok": True})


def obsidian_vault(root: str) -> dict | None:
    """{"name", "prefix"} of the Obsidian vault (the nearest folder holding ``.obsidian/``)
    that ``root`` is or lies in; prefix is root's path inside it ("" or "notes/")."""
    from pathlib import Path

    here = Path(root)
    for folder in (here, *here.parents):
        if (folder / ".obsidian").is_dir():
            inside = here.relative_to(folder).as_posix()
            return {"name": folder.name, "prefix": "" if inside == "." else inside + "/"}
    return None


def _error(status: int, message: str):
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status)


def _whole(value: str, name: str) -> int:
    """A query parameter as a whole number; ASCII digits only ("²" is a digit to
    str.isdigit, not to int: issue 32, L13)."""
    if not (value.isascii() and value.isdigit()):
        raise InputError(f"{name} must be a whole number")
    return int(value)


async def _json_body(request) -> dict:
    """The request's JSON object. A body over MAX_BODY is refused (413) by its
    Content-Length, or while it streams in, before it is all read (issue 32, L16)."""
    too_big = Refused(413, f"the request body is over {MAX_BODY} bytes")
    length = request.headers.get("content-length", "")
    if length.isascii() and length.isdigit() and int(length) > MAX_BODY:
        raise too_big
    raw = bytearray()
    async for part in request.stream():
        raw += part
        if len(raw) > MAX_BODY:
            raise too_big
    try:
        body = json.loads(bytes(raw) or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"the request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InputError("the request body must be an object")
    return body


def _index_field(body: dict) -> dict | None:
    """The ``index`` a CLI request names ({"path", "index_id"}: what it read from the
    index file), popped from ``body``; None when not given (the page, other clients)."""
    index = body.pop("index", None)
    if index is None:
        return None
    if not (isinstance(index, dict) and set(index) == {"path", "index_id"}
            and all(isinstance(v, str) for v in index.values())):
        raise InputError('index must be {"path": "...", "index_id": "..."}')
    return index


SEARCH_FIELDS = {"query": str, "k": int, "mode": str, "path": str, "tag": str, "since": str,
                 "before": str, "linked_to": str}


def _thread_fields(body: dict) -> tuple[str | None, bool]:
    """``conversation`` (an id to continue) and ``follow_up`` (continue the latest)."""
    cid, follow_up = body.get("conversation"), body.get("follow_up", False)
    if cid is not None and (not isinstance(cid, str) or not cid.strip()):
        raise InputError("conversation must be the id of a conversation, a string")
    if not isinstance(follow_up, bool):
        raise InputError("follow_up must be true or false")
    return cid, follow_up


def _search_args(body: dict) -> tuple:
    """Service.search's arguments from a request body, each field's type checked."""
    for name, value in body.items():
        kind = SEARCH_FIELDS.get(name)
        if kind is None:
            raise InputError(f"unknown field {name!r}; fields: {', '.join(SEARCH_FIELDS)}")
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise InputError(f"{name} must be a {kind.__name__}")
    query = body.get("query")
    if not query or not query.strip():
        raise InputError("give {\"query\": \"...\"}")
    k = 10 if body.get("k") is None else body["k"]
    if not 1 <= k <= 50:
        raise InputError("k must be from 1 to 50")
    return (query, k, body.get("mode") or "hybrid", body.get("path"), body.get("tag"),
            body.get("since"), body.get("before"), body.get("linked_to"))


async def static(request):
    """The page and its files: only names in the package's static folder."""
    from starlette.responses import JSONResponse, Response

    name = request.path_params.get("name") or "index.html"
    folder = resources.files("brainbot.serve") / "static"
    kind = STATIC_TYPES.get("." + name.rsplit(".", 1)[-1]) if "." in name else None
    if kind is None or "/" in name or name.startswith(".") or not (folder / name).is_file():
        return JSONResponse({"error": "not found"}, status_code=404)
    # Never framed (issue 32, L19): a foreign page could frame it and clickjack "Ask",
    # which spends the user's Claude tokens.
    return Response((folder / name).read_bytes(), media_type=kind,
                    headers={"Cache-Control": "no-cache",
                             "Content-Security-Policy": "default-src 'self'; "
                                                        "frame-ancestors 'none'",
                             "X-Frame-Options": "DENY",
                             "X-Content-Type-Options": "nosniff"})


def make_app(service, port: int, token: str | None = None, loopback: bool = True,
             host: str = "127.0.0.1"):
    """The whole ASGI app: the SDK's Streamable HTTP app for /mcp, our routes, the guard,
    and the daemon file (serve/announce.py). ``port``: the bound port."""
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.routing import Route

    from .announce import Announced
    from .mcp import build

    server = build(service)
    app = server.streamable_http_app(
        stateless_http=True, json_response=True,
        # The Guard checks Host and Origin for every path, /mcp included.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    announced = Announced(None, service, port)
    api = Api(service, announced)
    app.router.routes.extend([
        Route("/health", api.health, methods=["GET"]),
        Route("/api/status", api.status, methods=["GET"]),
        Route("/api/search", api.search, methods=["POST"]),
        Route("/api/get", api.get, methods=["GET"]),
        Route("/api/ask", api.ask, methods=["POST"]),
        Route("/api/related", api.related, methods=["GET"]),
        Route("/api/resolve", api.resolve, methods=["GET"]),
        Route("/api/roots", api.roots, methods=["GET"]),
        Route("/", static, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
    ])
    announced.app = Guard(app, port, token, loopback, host)
    return announced


def check_bind(host: str, token: str | None) -> bool:
    """Whether ``host`` is loopback; a non-loopback one without a token is refused."""
    loopback = is_loopback(host)
    if not loopback and not token:
        raise InputError(f"--host {host} is reachable from other machines; give --token T "
                         "or set BRAINBOT_TOKEN (then every request needs Authorization: "
                         "Bearer T)")
    return loopback


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (not listening yet: uvicorn listens once the
    app has started), IPv4 first for a name such as localhost (the CLI connects to
    127.0.0.1); a port in use is one line (InputError), before the index is opened."""
    try:
        found = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise InputError(f"cannot listen on {host}: {exc.strerror}") from None
    family, kind, proto, _, address = sorted(found, key=lambda a: a[0] != socket.AF_INET)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise InputError(f"port {port} is in use on {host} (another brainbot serve, or "
                             "another program); pass another --port") from None
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return sock


def serve(db, watch_paths=None, host: str = "127.0.0.1", port: int = 8765,
          token: str | None = None) -> int:
    """Serve until SIGINT/SIGTERM; with ``watch_paths``, keep the index fresh meanwhile."""
    import contextlib
    import sys

    from .mcp import _open, _stop, _watcher, watch_thread

    token = token or os.environ.get("BRAINBOT_TOKEN") or None
    loopback = check_bind(host, token)
    with contextlib.closing(bind(host, port)) as sock:
        port = sock.getsockname()[1]  # --port 0: the one the system chose
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                            format="brainbot serve: %(message)s")
        logging.getLogger("brainbot").setLevel(logging.INFO)
        watcher = _watcher(db, watch_paths) if watch_paths else None
        service = _open(db, watcher)
        thread = None
        try:
            service.warm()
            thread = watch_thread(service, watcher, "serve")
            if thread is not None:
                thread.start()
            app = make_app(service, port, token, loopback, host)
            shown = f"[{host.strip('[]')}]" if ":" in host else host
            _server(app, f"serving http://{shown}:{port}/ (MCP at /mcp)").run(sockets=[sock])
        finally:
            if thread is not None:
                _stop(watcher, thread)
            service.close()
    return 0


def _server(app, line: str):
    """uvicorn's Server for ``app``, which logs ``line`` once it listens: a user (or a
    script) reading it may connect at once."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.started:
                log.info("%s", line)

    return Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))

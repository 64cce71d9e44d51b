"""`brainbot serve`: one warm daemon on loopback with MCP over HTTP, a JSON API and a page.

One process holds the Searcher (model, vectors, postings loaded once, reloaded by the
index's generation like `brainbot mcp`). It serves, on one port:

- ``/mcp``: the stdio server's own tools (``serve/mcp.build``) over the MCP SDK's
  Streamable HTTP transport (stateless, JSON responses);
- ``/api/...``: the same records as the CLI's ``--json`` and the MCP tools;
- ``/``: the page, from the package's static files.

Security: bound to loopback by default. Every request whose ``Host`` is not a loopback
name with this port, or whose ``Origin`` is not this server's own origin, gets 403
(DNS rebinding: a web page cannot reach the daemon through a name it controls). No CORS
headers are ever sent. A non-loopback ``--host`` needs ``--token``, and then every request
needs ``Authorization: Bearer <token>``. Bad input is a 400 carrying brainbot's one-line
message as JSON; an unexpected failure is a 500 with one line, and the daemon goes on.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import threading
from importlib import resources

from brainbot.errors import BrainbotError, InputError

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
    """ASGI middleware: the Host, Origin and token rules, before anything else runs."""

    def __init__(self, app, port: int, token: str | None, loopback: bool) -> None:
        self.app, self.port, self.token, self.loopback = app, port, token, loopback

    def refusal(self, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        if self.loopback and host not in {f"{n}:{self.port}" for n in LOOPBACK_NAMES}:
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


class Api:
    """The JSON API's handlers: each runs the Service's body in a worker thread, under
    the Service's lock, and maps brainbot's errors to 400."""

    def __init__(self, service, announced: Announced | None = None) -> None:
        self.service, self.announced = service, announced

    async def run(self, fn, *args):
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import JSONResponse

        try:
            return JSONResponse(await run_in_threadpool(self.service.locked, fn, *args))
        except Refused as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        except BrainbotError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        except Exception as exc:  # noqa: BLE001 - one request fails, the daemon goes on
            log.exception("request failed")
            return JSONResponse({"error": f"internal error: {type(exc).__name__}"},
                                status_code=500)

    async def search(self, request):
        body = await _json_body(request)
        if isinstance(body, BrainbotError):
            return _bad(body)
        cli = body.pop("cli", None)  # {"colour": bool}: `brainbot query` asks for its text
        try:
            index = _index_field(body)
            args = _search_args(body)
        except InputError as exc:
            return _bad(exc)
        return await self.run(self._search, args, cli, index)

    def _search(self, args: tuple, cli: dict | None, index: dict | None) -> dict:
        """The hits, the CLI's partial-index note (``partial``), the MCP search's
        ``partial_index`` line and, for the CLI, its text output."""
        from brainbot.render import Style, hit_block

        hits = self.serving(index, self.service.hits, *args)
        reply = {"hits": [h.to_dict() for h in hits],
                 "partial": self.service.searcher.partial_note(args[2])}
        if args[2] != "bm25":  # as the MCP search: what a partly embedded index misses
            reply = self.service.noted(reply)
        if isinstance(cli, dict):
            style = Style(bool(cli.get("colour")))
            reply["text"] = "\n\n".join(hit_block(i + 1, h, args[0], style)
                                         for i, h in enumerate(hits))
        return reply

    async def get(self, request):
        ref = request.query_params.get("ref")
        if not ref:
            return _bad(InputError("give ref=PATH[:LINE[:COUNT]] or a chunk id"))
        count = request.query_params.get("count")
        if count is not None and not count.isdigit():
            return _bad(InputError("count must be a whole number"))
        return await self.run(self.service.get, ref, int(count) if count else None)

    async def ask(self, request):
        body = await _json_body(request)
        if isinstance(body, BrainbotError):
            return _bad(body)
        question = body.get("question")
        if not isinstance(question, str) or not question.strip():
            return _bad(InputError("give {\"question\": \"...\"}"))
        k = 8 if body.get("k") is None else body["k"]  # ask's own default
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 50:
            return _bad(InputError("k must be a whole number from 1 to 50"))
        try:
            index = _index_field(body)
        except InputError as exc:
            return _bad(exc)
        return await self.run(self._ask, question, k, bool(body.get("cli")), index)

    def _ask(self, question: str, k: int, cli: bool, index: dict | None) -> dict:
        """What `ask --json` prints, with ``partial_index``; for the CLI (``cli``) also
        its text output and its partial-index note (``partial``)."""
        answer = self.serving(index, self.service.answer, question, k)
        reply = self.service.noted(answer.to_dict())
        if cli:
            from brainbot.ask.terminal import format_answer

            reply["text"] = format_answer(answer)
            reply["partial"] = self.service.searcher.partial_note("hybrid")
        return reply

    def serving(self, index: dict | None, fn, *args):
        """``fn(*args)``, when this server searches the index ``index`` names (the CLI
        sends the path and index_id it read from the file); else Refused (409). Checked
        before (after a reload) and after: the answer came from that very index."""
        if index is not None:
            self.service.searcher.store.refresh()
            self._check(index)
        result = fn(*args)
        if index is not None:
            self._check(index)
        return result

    def _check(self, index: dict) -> None:
        now = {"path": os.path.realpath(self.service.db),
               "index_id": self.service.searcher.store.meta().get("index_id")}
        if self.announced is not None:
            self.announced.track(now["index_id"])
        if index != now:
            raise Refused(409, f"this server serves {now['path']} (index_id "
                               f"{now['index_id']}), not {index.get('path')} (index_id "
                               f"{index.get('index_id')})")

    async def related(self, request):
        params = request.query_params
        note, k = params.get("note"), params.get("k", "10")
        if not note:
            return _bad(InputError("give note=PATH or a note's name"))
        if not k.isdigit() or not 1 <= int(k) <= 50:
            return _bad(InputError("k must be a whole number from 1 to 50"))
        unlinked = params.get("unlinked", "false").lower() in ("1", "true", "yes")
        return await self.run(self.service.related, note, int(k), unlinked)

    async def roots(self, request):
        """The indexed folders on this machine, each with the Obsidian vault holding it
        (the page links hits there with obsidian:// URIs) or null."""
        from brainbot.index.freshness import present_roots

        def listing():
            return {"roots": [{"root": r, "obsidian": obsidian_vault(r)}
                              for r in present_roots(self.service.searcher.store)]}

        return await self.run(listing)

    async def status(self, request):
        return await self.run(self.service.status)

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


def _bad(exc: BrainbotError):
    from starlette.responses import JSONResponse

    return JSONResponse({"error": str(exc)}, status_code=400)


async def _json_body(request):
    raw = await request.body()
    if len(raw) > MAX_BODY:
        return InputError(f"the request body is over {MAX_BODY} bytes")
    try:
        body = json.loads(raw or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        return InputError(f"the request body is not JSON: {exc}")
    return body if isinstance(body, dict) else InputError("the request body must be an object")


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
    return Response((folder / name).read_bytes(), media_type=kind,
                    headers={"Cache-Control": "no-cache",
                             "Content-Security-Policy": "default-src 'self'",
                             "X-Content-Type-Options": "nosniff"})


class Announced:
    """ASGI wrapper: once the server listens, the daemon file next to the index
    (serve/client.py) names its port and the index it serves (its real path and
    index_id), so `brainbot query` and `ask` can use it; it is rewritten when a request
    finds the index_id changed (the file was rebuilt or replaced, and the store reopened
    it), and removed when the server shuts down (uvicorn's lifespan shutdown, before it
    re-raises SIGTERM)."""

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
        from .client import announcement

        if self.path is None:
            return
        self.index_id, self.announced = index_id, True
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(announcement(self.db, self.port, index_id), f)
            os.replace(tmp, self.path)
        except OSError as exc:  # a read-only folder: the CLI just won't find the daemon
            log.warning("cannot write %s: %s", self.path, exc)

    def remove(self) -> None:
        from .client import find

        self.announced = False
        try:
            info = find(self.db)
            if info is not None and info["pid"] == os.getpid():  # not a newer daemon's
                os.remove(self.path)
        except OSError:
            pass


def make_app(service, port: int, token: str | None = None, loopback: bool = True):
    """The whole ASGI app: the SDK's Streamable HTTP app for /mcp, our routes, the guard."""
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.routing import Route

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
        Route("/api/roots", api.roots, methods=["GET"]),
        Route("/", static, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
    ])
    announced.app = Guard(app, port, token, loopback)
    return announced


def check_bind(host: str, token: str | None) -> bool:
    """Whether ``host`` is loopback; a non-loopback one without a token is refused."""
    loopback = is_loopback(host)
    if not loopback and not token:
        raise InputError(f"--host {host} is reachable from other machines; give --token T "
                         "(then every request needs Authorization: Bearer T)")
    return loopback


def serve(db, watch_paths=None, host: str = "127.0.0.1", port: int = 8765,
          token: str | None = None) -> int:
    """Serve until SIGINT/SIGTERM; with ``watch_paths``, keep the index fresh meanwhile."""
    import sys

    import uvicorn

    from .mcp import _open, _stop, _watch, _watcher

    loopback = check_bind(host, token)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="brainbot serve: %(message)s")
    logging.getLogger("brainbot").setLevel(logging.INFO)
    watcher = _watcher(db, watch_paths) if watch_paths else None
    service = _open(db, watcher)
    service.warm()
    if watcher is not None:
        watcher.share(service.searcher.embedder)
        thread = threading.Thread(target=_watch, args=(watcher,), name="watch", daemon=True)
        service.watching = (watcher, thread)
        thread.start()
    app = make_app(service, port, token, loopback)
    log.info("serving http://%s:%d/ (MCP at /mcp)", host, port)
    try:
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                      access_log=False, lifespan="on")).run()
    finally:
        if watcher is not None:
            _stop(watcher, thread)
        service.close()
    return 0

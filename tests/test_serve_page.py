"""The page `brainbot serve` answers at `/`: served from the package, no CDN, note text
never inserted as HTML. (Behaviour in a real browser: tests/test_serve_browser.py, when
it lands.)"""

from __future__ import annotations

import re
from importlib import resources

import pytest
from test_serve import Daemon

STATIC = resources.files("brainbot.serve") / "static"


@pytest.fixture(scope="module")
def page_daemon(examples_db):
    d = Daemon(examples_db)
    yield d
    d.stop()


def test_the_page_and_its_files_are_served_from_the_package(page_daemon):
    status, headers, page = page_daemon.request("GET", "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert page == (STATIC / "index.html").read_bytes()
    for name, kind in (("app.js", "javascript"), ("style.css", "text/css")):
        status, headers, body = page_daemon.request("GET", f"/static/{name}")
        assert status == 200 and kind in headers["content-type"]
        assert body == (STATIC / name).read_bytes()
        assert f"/static/{name}".encode() in page


def test_nothing_is_loaded_from_elsewhere():
    for name in ("index.html", "app.js", "style.css"):
        text = (STATIC / name).read_text()
        assert not re.search(r"(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text), name
        assert "@import" not in text


def test_note_text_is_never_inserted_as_html():
    js = (STATIC / "app.js").read_text()
    assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write", js)
    assert "textContent" in js


def test_the_page_has_what_the_issue_asks_for():
    html = (STATIC / "index.html").read_text()
    js = (STATIC / "app.js").read_text()
    css = (STATIC / "style.css").read_text()
    for needle in ('id="q"', 'id="mode"', 'id="tag"', 'id="path"', 'id="since"',
                   'id="ask"'):
        assert needle in html
    for needle in ("/api/search", "/api/ask", "/api/get", "DEBOUNCE_MS = 250", '"/"',
                   "stale", "embedded"):
        assert needle in js
    assert "prefers-color-scheme: dark" in css

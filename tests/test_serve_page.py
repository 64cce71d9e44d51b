"""The page `brainbot serve` answers at `/`: served from the package, no CDN, note text
never inserted as HTML, the Obsidian vaults it links to. (Behaviour in a real browser:
tests/test_browser.py.)"""

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
    for name, kind in (("app.js", "javascript"), ("markdown.js", "javascript"),
                       ("style.css", "text/css")):
        status, headers, body = page_daemon.request("GET", f"/static/{name}")
        assert status == 200 and kind in headers["content-type"]
        assert body == (STATIC / name).read_bytes()
        assert f"/static/{name}".encode() in page


def test_nothing_is_loaded_from_elsewhere():
    for name in ("index.html", "app.js", "markdown.js", "style.css"):
        text = (STATIC / name).read_text()
        assert not re.search(r"(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text), name
        assert "@import" not in text


def test_note_text_is_never_inserted_as_html():
    for name in ("app.js", "markdown.js"):
        js = (STATIC / name).read_text()
        assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|"
                             r"DOMParser|createContextualFragment|srcdoc|\beval\(|"
                             r"new Function", js), name
    assert "textContent" in (STATIC / "app.js").read_text()


def test_the_page_has_what_the_issue_asks_for():
    html = (STATIC / "index.html").read_text()
    js = (STATIC / "app.js").read_text()
    css = (STATIC / "style.css").read_text()
    for needle in ('id="q"', 'id="mode"', 'id="tag"', 'id="path"', 'id="since"',
                   'id="ask"', 'id="follow-up"', 'id="new-conversation"'):
        assert needle in html
    for needle in ("/api/search", "/api/ask", "/api/get", "DEBOUNCE_MS = 250", '"/"',
                   "stale", "embedded", "text/event-stream", "getReader()"):
        assert needle in js
    assert "prefers-color-scheme: dark" in css


def test_obsidian_vault_is_found_at_or_above_the_root(tmp_path):
    from brainbot.serve.http import obsidian_vault

    vault = tmp_path / "Work Vault"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / "notes" / "sub").mkdir(parents=True)
    (tmp_path / "plain").mkdir()
    assert obsidian_vault(str(vault)) == {"name": "Work Vault", "prefix": ""}
    assert obsidian_vault(str(vault / "notes" / "sub")) == {"name": "Work Vault",
                                                             "prefix": "notes/sub/"}
    assert obsidian_vault(str(tmp_path / "plain")) is None


def test_api_roots_names_each_indexed_folder(page_daemon):
    status, reply = page_daemon.json("GET", "/api/roots")
    assert status == 200 and [r["obsidian"] for r in reply["roots"]] == [None]
    assert reply["roots"][0]["root"].endswith("examples/notes")


def test_api_resolve_names_the_note_a_link_points_to(page_daemon):
    """The page's note links: the index's own resolution of a link the note holds; else
    resolved now as the indexer would, among the notes of the source's folder."""
    def resolve(**params):
        from urllib.parse import urlencode

        return page_daemon.json("GET", "/api/resolve?" + urlencode(params))

    status, reply = resolve(**{"from": "cooking/sourdough.md", "kind": "wikilink",
                               "target": "compost"})
    assert status == 200 and reply["path"] == "garden/compost.md"
    assert reply["root"].endswith("examples/notes")
    status, reply = resolve(**{"from": "cooking/sourdough.md", "kind": "wikilink",
                               "target": "Ramen"})  # not a link sourdough.md holds
    assert (status, reply["path"]) == (200, "cooking/ramen.md")
    status, reply = resolve(**{"from": "garden/compost.md", "kind": "markdown",
                               "target": "../cooking/ramen.md"})
    assert (status, reply["path"]) == (200, "cooking/ramen.md")
    status, reply = resolve(**{"from": "garden/compost.md", "kind": "embed", "target": ""})
    assert (status, reply["path"]) == (200, "garden/compost.md")
    status, reply = resolve(**{"from": "garden/compost.md", "kind": "wikilink",
                               "target": "no such note"})
    assert status == 400 and "no note named 'no such note'" in reply["error"]
    status, reply = resolve(**{"from": "garden/compost.md", "kind": "javascript",
                               "target": "x"})
    assert status == 400 and "kind must be one of wikilink, embed, markdown" in reply["error"]
    status, reply = resolve(target="x")
    assert status == 400 and "give from=" in reply["error"]

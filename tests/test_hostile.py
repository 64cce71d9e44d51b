"""Hostile files in a vault: odd names, symlink loops and escapes, unreadable and special
files, a 100 MB note, 200 nested folders, a 1 MB line, a note of nothing but `#`, binary
and invalid UTF-8, CRLF and lone CR, empty and front-matter-only notes.

Each file is either indexed (with spans that hold against the decoded text) or reported on
stderr and skipped; the rest of the vault is always indexed and `brainbot index` exits 0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sqlean
from conftest import REPO

from brainbot.notes import files as notes
from brainbot.render import printable

NEWLINE_NAME = "new\nline.md"
NEWLINE_BINARY = "bad\nbinary.md"


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["NO_COLOR"] = "1"
    env.pop("BRAINBOT_DB", None)
    return env


def run_cli(*argv, prefix=(), cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "brainbot", *map(str, argv)],
                          cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=900)


def unreadable_prefix(probe_dir: Path) -> tuple[str, ...] | None:
    """How to run brainbot so that `chmod 000` bites: as is when not root; as root, in a
    new user namespace (`unshare --user`: uid 0 there has no CAP_DAC_OVERRIDE over the
    host's files); None when neither works here."""
    probe = probe_dir / "probe.txt"
    probe.write_text("x")
    probe.chmod(0)
    try:
        if os.geteuid() != 0:
            return ()
        if shutil.which("unshare") is None:
            return None
        r = subprocess.run(["unshare", "--user", "cat", str(probe)], capture_output=True)
        return ("unshare", "--user") if r.returncode != 0 else None
    finally:
        probe.unlink()


# What goes into the vault, and what `brainbot index` must do with each entry.
INDEXED = {
    "normal.md": "# Normal\n\nTomatoes need full sun and deep watering.\n",
    "with space.md": "# Space\n\nA name with spaces.\n",
    "ünïcødé 漢字 😀.md": "# Ünïcødé\n\nA unicode file name.\n",
    NEWLINE_NAME: "# Newline\n\nA newline in the file name.\n",
    "-dash.md": "# Dash\n\nA leading dash in the file name.\n",
    "dir.md/inside.md": "# Inside\n\nA note inside a folder named like a note.\n",
    "notes.markdown": "# Markdown extension\n\nThe long extension.\n",
}


def build_vault(root: Path, outside: Path) -> dict[str, str]:
    """The hostile vault; returns {relpath: expected skip reason} of the skipped entries."""
    for rel, text in INDEXED.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    deep = root.joinpath(*["d"] * 200)
    deep.mkdir(parents=True)
    (deep / "deep.md").write_text("# Deep\n\nTwo hundred folders down.\n", encoding="utf-8")
    (root / "longline.md").write_text("word " * 200_000, encoding="utf-8")  # 1 MB, one line
    (root / "hashes.md").write_text("#" * 100_000, encoding="utf-8")
    (root / "badutf8.md").write_bytes(b"# Bad\n\ncaf\xe9 au lait \xff\xfe and more text.\n")
    (root / "crlf.md").write_bytes(b"# CRLF\r\n\r\nLine one.\r\nLine two.\r\n\r\n## Next\r\nEnd.\r\n")
    (root / "cr.md").write_bytes(b"# CR\r\rLone CR one.\rLone CR two.\r")
    (root / "bom.md").write_bytes(b"\xef\xbb\xbf# BOM\n\nA byte order mark.\n")
    (root / "empty.md").write_bytes(b"")
    (root / "frontonly.md").write_text("---\ntitle: Only front\ntags: [a, b]\n---\n",
                                       encoding="utf-8")
    (root / "binary.md").write_bytes(bytes(range(256)) * 40)
    (root / NEWLINE_BINARY).write_bytes(b"\x00\x01binary")
    with open(root / "big.md", "wb") as f:  # 100 MB, sparse: instant to make
        f.truncate(100 * 1024 * 1024)
    os.mkfifo(root / "fifo.md")
    (outside / "secret.md").write_text("# Secret\n\nOutside the vault: never indexed.\n",
                                       encoding="utf-8")
    (root / "outlink").symlink_to(outside, target_is_directory=True)
    (root / "outfile.md").symlink_to(outside / "secret.md")
    (root / "alias.md").symlink_to(root / "normal.md")  # inside the root: followed
    (root / "loop").mkdir()
    (root / "loop" / "up").symlink_to("..", target_is_directory=True)
    (root / "loop" / "self").symlink_to("../loop", target_is_directory=True)
    (root / "self.md").symlink_to("self.md")
    (root / "ping.md").symlink_to("pong.md")
    (root / "pong.md").symlink_to("ping.md")
    (root / "dangling.md").symlink_to("nowhere.md")
    return {
        "outlink": "symlink leads outside the indexed folder",
        "outfile.md": "symlink leads outside the indexed folder",
        "self.md": "symlink loop",
        "ping.md": "symlink loop",
        "pong.md": "symlink loop",
        "dangling.md": "broken symlink",
        "fifo.md": "not a regular file",
        "big.md": "too large (100.0 MiB > 50 MiB limit)",
        "binary.md": "binary file",
        NEWLINE_BINARY: "binary file",
    }


EXPECTED_DOCS = {*INDEXED, "d/" * 200 + "deep.md", "longline.md", "hashes.md", "badutf8.md",
                 "crlf.md", "cr.md", "bom.md", "empty.md", "frontonly.md", "alias.md"}


def stderr_entries(stderr: str) -> dict[str, str]:
    """{printable path: reason} of the `skipped`/`warning` lines; every line must be one."""
    out = {}
    for line in stderr.splitlines():
        kind, _, rest = line.removeprefix("brainbot: ").partition(" ")
        if kind == "note:" or rest.startswith("phase "):  # about the whole index (its
            continue  # languages, the semantic phase's end), not a file
        assert kind in ("skipped", "warning"), line
        path, _, reason = rest.partition(": ")
        out[path] = reason
    return out


def documents(db: Path) -> dict[str, tuple]:
    conn = sqlean.connect(str(db))
    try:
        return {r[0]: r[1:] for r in conn.execute(
            "SELECT path, title, front_matter, (SELECT count(*) FROM chunks c "
            "WHERE c.document_id = d.id) FROM documents d")}
    finally:
        conn.close()


def check_spans(db: Path, root: Path) -> None:
    """Every stored chunk is exactly its span of the decoded note (no \\r anywhere)."""
    conn = sqlean.connect(str(db))
    try:
        rows = conn.execute("SELECT d.path, c.source_text, c.start_char, c.end_char "
                            "FROM chunks c JOIN documents d ON d.id = c.document_id").fetchall()
    finally:
        conn.close()
    texts: dict[str, str] = {}
    for path, source, start, end in rows:
        if path not in texts:
            texts[path] = notes.read_note(root / path).text
        assert texts[path][start:end] == source and "\r" not in source, path


@pytest.mark.slow
def test_hostile_vault_is_indexed_or_reported(tmp_path):
    root, outside = tmp_path / "vault", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    skipped = build_vault(root, outside)
    db = tmp_path / "h.db"
    result = run_cli("index", root, "--db", db)
    assert result.returncode == 0, result.stderr
    reported = stderr_entries(result.stderr)
    for rel, reason in skipped.items():
        assert reason in reported.pop(printable(rel)), (rel, result.stderr)
    assert "invalid UTF-8" in reported.pop("badutf8.md")
    assert reported == {}, reported  # nothing else was complained about
    docs = documents(db)
    assert set(docs) == EXPECTED_DOCS
    assert docs["frontonly.md"][:2] == ("Only front", '{"tags": ["a", "b"], "title": "Only front"}')
    assert docs["empty.md"][2] == 0 and docs["frontonly.md"][2] == 0
    assert docs["longline.md"][2] > 100 and docs["hashes.md"][2] > 10
    check_spans(db, root)
    conn = sqlean.connect(str(db))
    everything = "\n".join(r[0] for r in conn.execute("SELECT source_text FROM chunks"))
    assert "Outside the vault" not in everything and "\r" not in everything
    assert "caf\ufffd au lait" in everything
    conn.close()

    again = run_cli("index", root, "--db", db, "--json")  # stable: a second run is a no-op
    stats = json.loads(again.stdout)
    assert again.returncode == 0
    assert (stats["new"], stats["updated"], stats["embedded"]) == (0, 0, 0)
    assert stats["unchanged"] == len(EXPECTED_DOCS)
    assert {s["path"] for s in stats["skipped"]} == set(skipped)

    query = run_cli("query", "unicode file name", "--db", db, "--json", "--mode", "bm25")
    assert json.loads(query.stdout)[0]["path"] == "ünïcødé 漢字 😀.md"


def test_unreadable_file_and_folder_are_reported(tmp_path):
    prefix = unreadable_prefix(tmp_path)
    if prefix is None:
        pytest.skip("running as root without user namespaces: chmod 000 cannot be made to "
                    "bite here (see test_unreadable_file_simulated for the in-process check)")
    root = tmp_path / "vault"
    (root / "locked").mkdir(parents=True)
    (root / "ok.md").write_text("# Ok\n\nReadable note about compost.\n", encoding="utf-8")
    (root / "locked" / "inner.md").write_text("# Inner\n", encoding="utf-8")
    (root / "secret.md").write_text("# Secret\n", encoding="utf-8")
    (root / "secret.md").chmod(0)
    (root / "locked").chmod(0)
    try:
        result = run_cli("index", root, "--db", tmp_path / "u.db", prefix=prefix)
    finally:
        (root / "locked").chmod(0o755)
    assert result.returncode == 0, result.stderr
    reported = stderr_entries(result.stderr)
    assert reported == {"secret.md": "cannot read: Permission denied",
                        "locked": "unreadable folder: Permission denied"}
    assert set(documents(tmp_path / "u.db")) == {"ok.md"}


def test_unreadable_file_simulated(tmp_path, vault, counting, monkeypatch):
    """Everywhere (root or not): a read that fails with EACCES, and a file that vanishes
    between discovery and reading, are reported and skipped; the rest is indexed."""
    from brainbot.index.indexer import Indexer

    real_open = notes.open_regular

    def guarded_open(path):
        if Path(path).name == "gamma.md":
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path)

    monkeypatch.setattr(notes, "open_regular", guarded_open)
    original = notes.discover

    def vanishing(root, **kwargs):  # alpha.md disappears between discovery and reading
        found = original(root, **kwargs)
        (root / "alpha.md").unlink()
        return found

    monkeypatch.setattr(notes, "discover", vanishing)
    with Indexer(tmp_path / "b.db", embedder=counting) as ix:
        stats = ix.index_paths([vault])
    assert {p.path: p.reason for p in stats.skipped} == {
        "gamma.md": "cannot read: Permission denied",
        "alpha.md": "cannot read: No such file or directory"}
    assert stats.new == 1 and set(documents(tmp_path / "b.db")) == {"sub/beta.md"}


def test_names_that_are_not_utf8_are_reported_and_the_rest_indexed(tmp_path):
    """A Latin-1 file or folder name (an old archive) cannot be stored as text: it is a
    per-file problem like any other, and `brainbot index` exits 0 as for those."""
    root = tmp_path / "vault"
    root.mkdir()
    (root / "ok.md").write_text("# Ok\n\nThe café list is in another note.\n", encoding="utf-8")
    with open(os.fsencode(root) + b"/caf\xe9.md", "w", encoding="utf-8") as f:
        f.write("# Caf\n\nA note named in Latin-1.\n")
    os.mkdir(os.fsencode(root) + b"/d\xe9p\xf4t")
    with open(os.fsencode(root) + b"/d\xe9p\xf4t/inner.md", "w", encoding="utf-8") as f:
        f.write("# Inner\n\nIn a folder named in Latin-1.\n")
    db = tmp_path / "u.db"
    result = run_cli("index", root, "--db", db)
    assert result.returncode == 0, result.stderr
    assert stderr_entries(result.stderr) == {
        "caf\\xe9.md": "the file name is not valid UTF-8; rename it to index it",
        "d\\xe9p\\xf4t": "the folder name is not valid UTF-8; rename it to index it"}
    assert set(documents(db)) == {"ok.md"}
    again = run_cli("index", root, "--db", db, "--json")
    assert again.returncode == 0, again.stderr
    assert {p["path"] for p in json.loads(again.stdout)["skipped"]} == {"caf\\xe9.md",
                                                                       "d\\xe9p\\xf4t"}
    bad_root = os.fsdecode(os.fsencode(root) + b"/d\xe9p\xf4t")
    refused = run_cli("index", bad_root, "--db", tmp_path / "r.db")
    assert refused.returncode == 2 and "not valid UTF-8" in refused.stderr
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr


def test_leading_dash_file_indexed_after_double_dash(tmp_path):
    root = tmp_path / "vault"
    root.mkdir()
    (root / "-rf.md").write_text("# Dash\n\nA note whose name looks like an option.\n",
                                 encoding="utf-8")
    result = run_cli("index", "--db", tmp_path / "d.db", "--", "-rf.md", cwd=root)
    assert result.returncode == 0, result.stderr
    assert set(documents(tmp_path / "d.db")) == {"-rf.md"}


def test_discovery_reports_special_files_without_opening_them(tmp_path):
    """A FIFO must never be opened (the read would block forever)."""
    os.mkfifo(tmp_path / "pipe.md")
    (tmp_path / "note.md").write_text("x", encoding="utf-8")
    found = notes.discover(tmp_path)
    assert [f.relpath for f in found.files] == ["note.md"]
    assert [(p.path, p.reason) for p in found.problems] == [
        ("pipe.md", "not a regular file (a FIFO, socket or device)")]


@pytest.mark.parametrize("data, text, warned", [
    (b"a\r\nb\rc\n", "a\nb\nc\n", False),
    (b"\r\r\n\r", "\n\n\n", False),
    (b"\xef\xbb\xbfhi", "hi", False),
    (b"ok \xc3\x28 bad", "ok \ufffd( bad", True),
    (b"\xed\xa0\x80 surrogate", "\ufffd\ufffd\ufffd surrogate", True),
    (b"", "", False),
])
def test_decode(data, text, warned):
    out, warnings = notes.decode(data)
    assert out == text and bool(warnings) == warned


# Terminal escapes a hostile note (a web clip, a shared vault) may carry: OSC 52 sets the
# clipboard on some terminals, OSC 0 the window title; U+009B and U+009D are CSI and OSC
# as single (C1) characters.
OSC52 = "\x1b]52;c;SGVsbG8gd29ybGQ=\x07"
TITLE = "\x1b]0;pwned\x07"
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\x9d")
HOSTILE_NAME = f"{TITLE}name.md"


def test_terminal_escapes_in_notes_tags_and_names_never_reach_the_terminal(tmp_path):
    root = tmp_path / "vault"
    root.mkdir()
    (root / "clip.md").write_text(
        '---\ntags: ["\\e]0;tagtitle\\a", "\\e]52;c;dGFn\\a", plain]\n---\n'
        f"# Clipped page {TITLE}\n\nThe lighthouse keeper logs the fog {OSC52} every "
        "hour.\nA second line with \x9b31m colour and \x9d0;osc\x07 text.\n", encoding="utf-8")
    (root / HOSTILE_NAME).write_text("# Named\n\nThe lighthouse is linked from here: "
                                     "[[clip]].\n", encoding="utf-8")
    db = tmp_path / "t.db"
    runs = {"index": run_cli("index", root, "--db", db)}
    assert runs["index"].returncode == 0, runs["index"].stderr
    for name, argv in {
        "query": ("query", "lighthouse fog", "--db", db, "--mode", "bm25"),
        "query --json": ("query", "lighthouse fog", "--db", db, "--mode", "bm25", "--json"),
        "query --jsonl": ("query", "lighthouse", "--db", db, "--mode", "bm25", "--jsonl"),
        "get": ("get", "clip.md", "--db", db),
        "get name": ("get", HOSTILE_NAME, "--db", db),
        "links": ("links", "clip", "--db", db),
        "tags": ("tags", "--db", db),
        "tags --json": ("tags", "--db", db, "--json"),
        "report": ("report", root),
        "report --db": ("report", "--db", db),
        "status": ("status", "--db", db),
        "status --json": ("status", "--db", db, "--json"),
        "doctor": ("doctor", "--db", db),
        "ask": ("ask", "how often does the lighthouse keeper log the fog?", "--db", db),
        "chunks": ("chunks", root),
    }.items():
        runs[name] = run_cli(*argv)
    (root / "clip.md").write_text("changed", encoding="utf-8")  # stale: status names it
    runs["status stale"] = run_cli("status", "--db", db)
    for name, result in runs.items():
        for stream in (result.stdout, result.stderr):
            assert not any(c in stream for c in RAW_CONTROLS), (name, stream)
    assert "\\x1b]52;c;SGVsbG8gd29ybGQ=\\x07" in runs["get"].stdout
    assert "\\x9b31m" in runs["get"].stdout
    assert "\\x1b]0;pwned\\x07name.md" in runs["get"].stdout  # a backlink's source
    assert "\\x1b]0;tagtitle\\x07" in runs["tags"].stdout
    assert {t["tag"] for t in json.loads(runs["tags --json"].stdout)} == {
        "\x1b]0;tagtitle\x07", "\x1b]52;c;dgfn\x07", "plain"}  # JSON keeps the value
    assert "\\x1b]0;pwned\\x07name.md" in runs["status stale"].stdout + runs["report"].stdout

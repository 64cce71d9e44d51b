"""docs/ is what generates it (issue 35): docs/commands.md from the argparse definitions,
docs/schema.md from a real index. `make docs` regenerates both; these tests fail, naming
it, when a file differs from what its generator gives now (an option or a column added
without it), and run the schema page's SQL against a real index."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def generator(name: str):
    sys.path.insert(0, str(REPO / "docs"))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(REPO / "docs"))


def assert_same(path: Path, want: str, script: str) -> None:
    have = path.read_text(encoding="utf-8") if path.exists() else ""
    if have == want:
        return
    got, new = have.splitlines(), want.splitlines()
    first = next((i for i, (a, b) in enumerate(zip(got, new)) if a != b),
                 min(len(got), len(new)))
    raise AssertionError(
        f"{path.relative_to(REPO)} is not what `python {script}` writes now: run `make docs` "
        f"and commit it. First difference, line {first + 1}:\n"
        f"file:      {got[first] if first < len(got) else '<end>'}\n"
        f"generated: {new[first] if first < len(new) else '<end>'}")


def test_commands_md_is_what_the_parser_says():
    make_commands = generator("make_commands")
    assert_same(REPO / "docs" / "commands.md", make_commands.build(),
                "docs/make_commands.py")


def test_commands_md_has_every_option_of_every_command():
    """What the comparison above keeps true, checked directly once."""
    from brainbot.cli import build_parser
    from brainbot.shell.completion import commands

    text = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    for c in commands(build_parser()):
        section = text.split(f"## `brainbot {c.name}`", 1)[1].split("\n## ", 1)[0]
        assert "```console\n$ " in section, c.name
        for a in c.args:
            for flag in a.flags:
                if flag not in ("-h", "--help"):
                    assert re.search(rf"`{re.escape(flag)}\b", section), (c.name, flag)


def test_examples_split_on_or_and_keep_remarks_as_comments():
    make_commands = generator("make_commands")
    assert make_commands.examples("Example: brainbot a x   or   brainbot b (then y)") == [
        "brainbot a x", "brainbot b  # then y"]


def test_schema_md_is_what_a_real_index_holds():
    make_schema = generator("make_schema")
    assert_same(REPO / "docs" / "schema.md", make_schema.build(), "docs/make_schema.py")


def test_schema_check_names_a_column_or_table_missing_from_the_page(tmp_path):
    make_schema = generator("make_schema")
    schema, conversations = make_schema.read_both(tmp_path)
    schema["tables"]["chunks"]["columns"].append(("new_col", "TEXT", False, None, 0, None))
    schema["tables"]["novel"] = {"columns": [], "indexes": [], "without_rowid": False,
                                 "unique": []}
    del schema["meta"]["index_id"]
    conversations["tables"]["conversation_turns"]["columns"].pop()
    with pytest.raises(SystemExit) as caught:
        make_schema.render(schema, conversations)
    message = str(caught.value)
    assert "column of chunks: new_col is in the index but not described" in message
    assert "table novel is in the index but not described" in message
    assert "meta key index_id is described in docs/make_schema.py but not in the index" \
        in message
    assert "column of conversation_turns: searched is described" in message


def sql_statements(text: str) -> list[str]:
    block = text.split("```sql\n", 1)[1].split("```", 1)[0]
    body = "\n".join(line for line in block.splitlines() if not line.startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]


def test_the_schema_page_sql_runs_on_a_real_index(examples_db):
    import sqlean as sqlite3

    make_schema = generator("make_schema")
    statements = sql_statements(make_schema.QUERIES)
    assert len(statements) == 5
    db = sqlite3.connect(f"file:{examples_db}?mode=ro", uri=True)
    try:
        results = [db.execute(s).fetchall() for s in statements]
    finally:
        db.close()
    counts, backlinks, unresolved, tagged, proof = results
    assert counts and backlinks and tagged and proof
    assert all(path.startswith("cooking/") for _, path in tagged)
    assert unresolved == []  # examples/notes links resolve; the query runs all the same


def test_the_vector_example_finds_the_note(examples_db, tmp_path, monkeypatch):
    make_schema = generator("make_schema")
    code = make_schema.VECTORS.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.db").symlink_to(examples_db)
    scope: dict = {}
    exec(compile(code, "docs/schema.md", "exec"), scope)  # noqa: S102 - the page's own code
    rows = scope["rows"]
    assert len(rows) == 5 and rows[0][0] == "cooking/sourdough.md"
    assert all(0 <= d <= 2 for _, _, d in rows) and rows == sorted(rows, key=lambda r: r[2])


def test_the_conversations_sql_runs_beside_a_real_index(tmp_path, monkeypatch):
    import sqlean as sqlite3

    make_schema = generator("make_schema")
    db = make_schema.build_index(tmp_path)
    make_schema.build_conversations(db)
    monkeypatch.chdir(tmp_path)
    text = make_schema.CONVERSATIONS.format(app_id="", version="")
    con = sqlite3.connect(str(db))
    try:
        rows = [con.execute(s).fetchall() for s in sql_statements(text)]
    finally:
        con.close()
    assert rows[-1] == [(1, "How often do I feed the starter?", "answer")]


def _prose(text: str) -> str:
    """The page without its fenced blocks and code spans' link-like text kept apart."""
    return re.sub(r"(?ms)^```.*?^```", "", text)


def _flags_of_the_parser() -> set[str]:
    from brainbot.cli import build_parser
    from brainbot.shell.completion import commands

    parser = build_parser()
    flags = {f for a in parser._actions for f in a.option_strings}
    return flags | {f for c in commands(parser) for a in c.args for f in a.flags}


@pytest.mark.parametrize("page", ["README.md", "docs/guide.md"])
def test_every_option_a_page_names_exists(page):
    """The front page and docs/guide.md are written by hand: an option renamed or dropped
    must not live on there."""
    text = (REPO / page).read_text(encoding="utf-8")
    named = set(re.findall(r"(?<![\w-])brainbot [a-z]+[^`\n]*?(--[a-z][a-z0-9-]*)", text))
    named |= set(re.findall(r"`(--[a-z][a-z0-9-]*)", text))
    known = _flags_of_the_parser()
    # Options of other tools the guide quotes (pytest, pip, claude mcp add).
    others = {"--no-deps", "--scope", "--transport"} & named - known
    assert named - known - others == set(), sorted(named - known - others)


@pytest.mark.parametrize("page", ["README.md", "docs/guide.md", "docs/scaling.md",
                                  "docs/schema.md", "docs/commands.md", "ARCHITECTURE.md"])
def test_relative_links_lead_somewhere(page):
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from headline import slug
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    path = REPO / page
    text = re.sub(r"`[^`\n]*`", "", _prose(path.read_text(encoding="utf-8")))
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        assert dest.exists(), f"{page} links to {target}: no such file"
        if anchor and dest.suffix == ".md":
            headings = re.findall(r"(?m)^#+ (.+)$", _prose(dest.read_text(encoding="utf-8")))
            assert anchor in {slug(h) for h in headings}, f"{page} links to {target}: no heading"

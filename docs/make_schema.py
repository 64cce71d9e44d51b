"""Write docs/schema.md: brainbot's SQLite file for people who open it in another tool.

The tables, columns, types, keys, indexes, views and meta keys are read from a REAL index:
examples/notes indexed into a temporary folder (the lexical phase only: the schema is the
same with vectors, and it takes seconds), and its conversations file (issue 34) from one
turn saved beside it. What each one holds is written by hand below, in
TABLES, COLUMNS and META; a table, column or meta key the index has and these do not (or
the reverse) stops the generator with its name, so the page never describes a file that
no longer exists.

    python docs/make_schema.py [--out docs/schema.md]      (or: make docs)

tests/test_docs.py fails when docs/schema.md differs from what this writes, and runs the
page's SQL against a real index with vectors.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "schema.md"
EXAMPLES = REPO / "examples" / "notes"

TABLES = {
    "meta": "The index's identity and counters, one row a key (see [meta keys](#meta-keys)).",
    "documents": "One row a note (or a record of a dataset: `brainbot eval --beir`).",
    "chunks": "One row a chunk: the citable passage that is embedded and searched.",
    "embeddings": "One row a chunk that has its vector (a chunk written by the lexical "
                  "phase waits here for the semantic phase).",
    "terms": "The BM25 vocabulary: one row an analyzed term.",
    "postings": "BM25's inverted index: which chunks hold a term, how often.",
    "links": "Every link of a note: wikilinks, embeds and markdown links to other notes.",
    "tags": "A note's tags, from its front matter and its #inline tags.",
}
VIEWS = {
    "chunk_view": "Each chunk with its note's path, in reading order: what a person "
                  "browsing the file wants first.",
}
COLUMNS = {
    "meta": {"key": "the key", "value": "its value, as text"},
    "documents": {
        "id": "the document's key",
        "root": "absolute POSIX path of the indexed folder (`dataset:NAME` for a dataset)",
        "path": "POSIX path relative to `root`",
        "sha256": "sha256 of the file's bytes when it was indexed",
        "size": "its size in bytes",
        "mtime_ns": "its modification time, ns",
        "title": "the first heading, or the file name",
        "front_matter": "the YAML front matter, as a JSON object",
        "indexed_at": "when it was indexed (ISO 8601, UTC)",
        "warnings": "JSON array: bad front matter, replaced bytes, dropped tags",
        "kind": "`note` (a file under `root`) or `record` (a dataset's)",
        "date": "the note's date, YYYY-MM-DD (what --since and --before filter on)",
        "date_source": "where the date came from: `front_matter`, `filename` or `mtime`",
        "read_ns": "`time.time_ns()` just before the indexer read the file (NULL if last "
                   "read before migration 5)",
    },
    "chunks": {
        "id": "dense key: the row the search kernels score",
        "chunk_id": "public id (16 hex): a hash of the file, the chunk's index and its text; "
                    "what `brainbot get` and the hits name",
        "document_id": "its note",
        "chunk_index": "its place in the note, from 0",
        "heading_path": "JSON array of the headings it sits under",
        "source_text": "the note's text, exactly: `text[start_char:end_char]`",
        "retrieval_text": "what is embedded and indexed for BM25: the heading path and the "
                          "text a reader sees (HTML comments and link targets left out)",
        "start_line": "first line, 1-based",
        "end_line": "last line, inclusive",
        "start_char": "offset of its first character in the note (Python str indices)",
        "end_char": "offset just past its last character",
        "source_tokens": "MiniLM wordpieces of `source_text`",
        "retrieval_tokens": "MiniLM wordpieces of `retrieval_text`, special tokens "
                            "included: at most 256",
        "text_sha256": "sha256 of `retrieval_text`: an unchanged text keeps its vector",
        "lexical_length": "analyzed terms: BM25's document length",
        "generation": "the committed batch that wrote it (meta `generation`)",
        "english": "1 if it reads as English (the stemmer applies), 0 if not",
    },
    "embeddings": {
        "chunk": "the chunk (`chunks.id`)",
        "vector": "384 × float32, little-endian, L2-normalised (see [vectors](#vectors))",
    },
    "terms": {"id": "the term's key", "term": "the analyzed term (stemmed, folded)",
              "df": "how many chunks hold it"},
    "postings": {"term": "the term (`terms.id`)", "chunk": "the chunk (`chunks.id`)",
                 "tf": "how often the term occurs in the chunk"},
    "links": {
        "id": "the link's key",
        "source_chunk": "the chunk it is written in",
        "source_document": "the note it is written in",
        "line": "its line in that note, 1-based",
        "kind": "`wikilink`, `embed` (`![[…]]`) or `markdown`",
        "target": "as written: `Note`, `dir/Note.md`, `../x.md`",
        "target_heading": "after `#`, NULL when none",
        "alias": "the text shown instead (`[[Note|alias]]`, a markdown link's text), NULL "
                 "when none",
        "target_document": "the note it resolves to, NULL while unresolved",
        "resolved": "1 when `target_document` is set",
    },
    "tags": {
        "document": "the note",
        "tag": "lowercase, without `#`, nested as written: `project/alpha`",
        "source": "`front_matter`, `inline` or `both`",
    },
}
META = {
    "schema_version": "the schema's migration number (also `PRAGMA user_version`)",
    "model": "the embedding model",
    "model_sha256": "sha256 of its weights",
    "dimension": "the vectors' length",
    "tokenizer": "hash of the tokenizer's files",
    "chunker": "the chunker's version and parameters",
    "analyzer": "the BM25 analyzer's version",
    "embedder": "model, weights, precision and export version of the vectors",
    "fingerprint": "hash of all of the above: an index made otherwise is refused",
    "generation": "bumped by every committed batch: how a long-lived reader knows what "
                  "to reload",
    "index_id": "a UUID written when the index is created, new after `--rebuild`, never "
                "copied",
    "folder_roots": "JSON array of the folders indexed as folders (only they count new "
                    "notes)",
    "languages": "JSON object: the chunks written in each language's BM25 analysis (a "
                 "query is analysed in the index's main languages)",
}
# What each migration of store/sqlite/file.py brought, in order: the file's user_version
# must be their number.
MIGRATIONS = ["the tables", "document warnings and kind", "the generation counter",
              "links, tags, dates and languages", "each document's read time"]
# Keys whose value is the same for every index this code writes; the others vary (an
# index's id, its batches, the folders it was given).
STABLE = {"schema_version", "model", "model_sha256", "dimension", "tokenizer", "chunker",
          "analyzer", "embedder", "fingerprint"}

INTRO = """\
# The SQLite file

One index is one SQLite file with plain tables: the `sqlite3` shell or Datasette read it
with no extension loaded (`datasette notes.db`; sqlite-vec only for the vector functions).
It is in WAL mode: copy it with `sqlite3 notes.db ".backup copy.db"` or while nothing
writes, never half-way through a write.

This page is generated by `make docs` (`python docs/make_schema.py`) from an index of
examples/notes, the descriptions written beside the code that reads the schema;
`tests/test_docs.py` fails when a table, column or meta key is added or dropped without
this page following, and runs the SQL below against a real index.

Migrations are numbered in the order they landed (`brainbot/store/sqlite/file.py`; the
Postgres store has the same tables in the index's schema, and the same numbers): {migrations}.
A writer migrates; a reader of an older file says to run `brainbot index` once. A file
written by a newer schema, another model, chunker or analyzer is refused with the fix
(`--rebuild` or another `--db`).

The schema declares its foreign keys (`REFERENCES … ON DELETE CASCADE`) and `PRAGMA
foreign_key_check` finds nothing; brainbot's writer runs with `foreign_keys` off and
deletes a note's postings, vectors, links, tags and chunks itself (checking two parents
for each of millions of postings was a seventh of a big vault's lexical phase). The
lexical phase commits a batch once it holds 64 chunks and 2 s have passed, or at 4,096
chunks: a kill loses at most that batch.
"""

VECTORS = """\
## Vectors

`embeddings.vector` is 384 float32 numbers, little-endian, L2-normalised: 1,536 bytes,
exactly what sqlite-vec's `vec_f32()` reads, so `vec_distance_cosine(vector, vec_f32(?))`
works wherever sqlite-vec is loaded (its cosine distance is 1 − the dot product here).
In Python, `numpy.frombuffer(blob, dtype="<f4")` is the vector. The model is
all-MiniLM-L6-v2 (mean pooling, then normalisation), run by brainbot's own ONNX export;
the query must be embedded the same way:

```python
import sqlean as sqlite3          # or sqlite3, where it can load extensions
import sqlite_vec
from brainbot.model.embed import Embedder

db = sqlite3.connect("notes.db")
db.enable_load_extension(True)
sqlite_vec.load(db)
query = Embedder().embed(["how long does the dough proof"])[0]
rows = db.execute(
    "SELECT d.path, c.start_line, vec_distance_cosine(e.vector, vec_f32(?)) AS distance "
    "FROM embeddings e JOIN chunks c ON c.id = e.chunk "
    "JOIN documents d ON d.id = c.document_id ORDER BY distance LIMIT 5",
    [query.astype("<f4").tobytes()]).fetchall()
```

brainbot itself never asks SQLite for this: it loads the vectors once and scans them with
its C kernel. sqlite-vec is for you, in the shell or a notebook.
"""

QUERIES = """\
## Queries to start from

```sql
-- the notes and their chunk counts
SELECT d.path, count(*) AS chunks FROM documents d JOIN chunks c ON c.document_id = d.id
GROUP BY d.id ORDER BY chunks DESC LIMIT 5;

-- backlinks of a note
SELECT s.path, l.line FROM links l JOIN documents s ON s.id = l.source_document
JOIN documents t ON t.id = l.target_document WHERE t.path = 'cooking/sourdough.md';

-- links that resolve to no note
SELECT s.path, l.line, l.target FROM links l JOIN documents s ON s.id = l.source_document
WHERE l.target_document IS NULL;

-- notes by tag
SELECT t.tag, d.path FROM tags t JOIN documents d ON d.id = t.document
WHERE t.tag = 'recipe' OR t.tag LIKE 'recipe/%';

-- the chunks holding a BM25 term (terms are stemmed: proofing, proofed, proofs -> proof)
SELECT v.path, v.start_line, p.tf FROM postings p JOIN terms t ON t.id = p.term
JOIN chunks c ON c.id = p.chunk JOIN chunk_view v ON v.chunk_id = c.chunk_id
WHERE t.term = 'proof' ORDER BY p.tf DESC LIMIT 5;
```
"""

CHUNK_RECORD = """\
## The chunk record

`brainbot chunks PATH` writes the same chunks as JSON Lines, without an index:

```json
{"chunk_id": "…", "chunk_index": 12, "source_text": "…", "retrieval_text": "Topic > Sub-section\\n\\n…",
 "metadata": {"source_file": "topic.md", "heading_path": ["Topic", "Sub-section"],
              "start_line": 87, "end_line": 93, "start_char": 18420, "end_char": 20176},
 "measurements": {"source_tokens": 231, "retrieval_tokens": 240}}
```

`retrieval_text` (heading path + the text a reader sees: HTML comments and link targets
left out, `[text](url)` as its text, `[[Note|alias]]` as its alias) always fits the model:
≤ 256 wordpieces counted with MiniLM's own tokenizer, special tokens included. It is what
is embedded and what BM25 indexes; `source_text` and the spans stay exact.
`text[start_char:end_char]` is the source text, where `text` is the file decoded as UTF-8
with universal newlines (what Python's `open(path).read()` returns).
"""

# The conversations file beside a SQLite index (issue 34: store/sqlite/conversations.py),
# read from one made by saving a turn, and checked against these as the index is.
CONVERSATION_TABLES = {
    "conversations": "One row a conversation.",
    "conversation_turns": "One row a question asked in a conversation, and its answer.",
}
CONVERSATION_COLUMNS = {
    "conversations": {
        "id": "12 hex digits: what `ask --conversation ID` and `brainbot conversations` take",
        "started": "its first turn's time (ISO 8601, UTC, milliseconds)",
        "updated": "its last turn's time: the latest conversation is what `--follow-up` "
                   "continues",
    },
    "conversation_turns": {
        "conversation": "its conversation",
        "n": "1, 2, … within its conversation",
        "asked_at": "when it was asked (ISO 8601, UTC, milliseconds)",
        "question": "the question as asked",
        "answer": "the answer's text",
        "outcome": "`answer`, `passages` or `not_found`",
        "mode": "`claude` or `extractive`",
        "citations": "JSON array: the answer's citations (root, path, lines, verified)",
        "searched": "what retrieval searched for it (a follow-up is searched with its "
                    "conversation's earlier questions)",
    },
}
CONVERSATIONS = """\
## Conversations: `<index>.conversations`

`brainbot ask`, `chat` and the daemon keep the turns of their conversations in a second
SQLite file beside the index, named after the index's real path plus `.conversations`,
never in the index itself: a rebuild or `brainbot copy` of the index leaves it alone
(`copy` carries its conversations to the target). It is created by the first saved turn,
marked as brainbot's (`PRAGMA application_id` {app_id}, `PRAGMA user_version`
{version}), and keeps SQLite's rollback journal, not WAL. A Postgres index keeps the same
two tables in its own schema. In the `sqlite3` shell, beside the index:

```sql
ATTACH 'notes.db.conversations' AS c;
-- the latest conversation's questions, in order
SELECT t.n, t.question, t.outcome FROM c.conversation_turns t
WHERE t.conversation = (SELECT id FROM c.conversations ORDER BY updated DESC LIMIT 1)
ORDER BY t.n;
```
"""


def build_index(folder: Path) -> Path:
    """examples/notes indexed into ``folder`` (lexical phase only): the file to read."""
    sys.path.insert(0, str(REPO))
    from brainbot.index.indexer import Indexer

    db = folder / "notes.db"
    with Indexer(db, embed=False) as ix:
        ix.index_paths([EXAMPLES])
    return db


def build_conversations(db: Path) -> Path:
    """The conversations file beside the index ``db``, made by saving one turn."""
    from brainbot.store.conversations import Turn
    from brainbot.store.sqlite.conversations import SidecarConversations, sidecar_path

    SidecarConversations(db).append("3f2a9c1b8e0d", Turn(
        question="How often do I feed the starter?", answer="Twice a day.",
        outcome="answer", mode="extractive"))
    return sidecar_path(db)


def read_schema(db_path: Path) -> dict:
    """Tables (columns, keys, indexes, WITHOUT ROWID), views (their SQL), meta keys
    and values, and user_version, as the file itself says."""
    import sqlean as sqlite3

    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE "
                          "'sqlite_%' ORDER BY name").fetchall()
        tables = {}
        for kind, name, sql in rows:
            if kind != "table":
                continue
            fks = {r[3]: (r[2], r[4], r[6]) for r in
                   db.execute(f"PRAGMA foreign_key_list('{name}')")}
            indexes = [(r[1], [c[2] for c in db.execute(f"PRAGMA index_info('{r[1]}')")],
                        bool(r[2])) for r in db.execute(f"PRAGMA index_list('{name}')")
                       if not r[1].startswith("sqlite_autoindex")]
            tables[name] = {
                "columns": [(r[1], r[2], bool(r[3]), r[4], r[5], fks.get(r[1]))
                            for r in db.execute(f"PRAGMA table_info('{name}')")],
                "indexes": sorted(indexes),
                "without_rowid": "WITHOUT ROWID" in (sql or "").upper(),
                "unique": [u for u in _uniques(db, name)],
            }
        views = {name: sql for kind, name, sql in rows if kind == "view"}
        meta = dict(db.execute("SELECT key, value FROM meta")) if "meta" in tables else {}
        version = db.execute("PRAGMA user_version").fetchone()[0]
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
    finally:
        db.close()
    return {"tables": tables, "views": views, "meta": meta, "user_version": version,
            "application_id": app_id}


def _uniques(db, table: str) -> list[list[str]]:
    """The UNIQUE constraints that are not the primary key."""
    out = []
    for r in db.execute(f"PRAGMA index_list('{table}')"):
        if r[1].startswith("sqlite_autoindex") and r[3] == "u":
            out.append([c[2] for c in db.execute(f"PRAGMA index_info('{r[1]}')")])
    return out


def check(schema: dict, conversations: dict | None = None) -> None:
    """SystemExit naming each table, view, column or meta key that the files and the
    descriptions above do not both have."""
    problems = []

    def compare(what: str, found, described) -> None:
        for name in sorted(set(found) - set(described)):
            problems.append(f"{what} {name} is in the index but not described in "
                            "docs/make_schema.py")
        for name in sorted(set(described) - set(found)):
            problems.append(f"{what} {name} is described in docs/make_schema.py but not in "
                            "the index")

    compare("table", schema["tables"], TABLES)
    compare("view", schema["views"], VIEWS)
    compare("meta key", schema["meta"], META)
    if schema["user_version"] != len(MIGRATIONS):
        problems.append(f"the index is at migration {schema['user_version']}; "
                        f"docs/make_schema.py's MIGRATIONS names {len(MIGRATIONS)}")
    for table, info in schema["tables"].items():
        compare(f"column of {table}:", [c[0] for c in info["columns"]], COLUMNS.get(table, {}))
    if conversations is not None:
        compare("conversations table", conversations["tables"], CONVERSATION_TABLES)
        for table, info in conversations["tables"].items():
            compare(f"column of {table}:", [c[0] for c in info["columns"]],
                    CONVERSATION_COLUMNS.get(table, {}))
    if problems:
        raise SystemExit("\n".join(problems))


def _key(table: dict, column) -> str:
    name, _, _, _, pk, fk = column
    parts = []
    if pk:
        pk_cols = [c[0] for c in table["columns"] if c[4]]
        parts.append("primary key" if len(pk_cols) == 1 else
                     f"primary key ({', '.join(pk_cols)})")
    if fk:
        target, to, on_delete = fk
        parts.append(f"→ `{target}.{to}`" + ("" if on_delete == "NO ACTION" else
                                              f", on delete {on_delete.lower()}"))
    return "; ".join(parts)


def _cell(text: str) -> str:
    """``text`` in a markdown table's cell (a | would end the cell, in code too)."""
    return text.replace("|", "\\|")


def table_section(name: str, info: dict, tables=TABLES, columns=COLUMNS) -> str:
    lines = [f"### `{name}`", "", tables[name], ""]
    lines += ["| column | type | null | key | what it holds |", "|---|---|---|---|---|"]
    for col in info["columns"]:
        cname, ctype, notnull, default, pk, _ = col
        null = "" if notnull or pk else "yes"
        what = columns[name][cname] + (f" (default `{default}`)" if default not in
                                        (None, "") else "")
        lines.append(f"| `{cname}` | {ctype or 'any'} | {null} | {_key(info, col)} | "
                     f"{_cell(what)} |")
    extra = []
    if info["without_rowid"]:
        extra.append("`WITHOUT ROWID`: stored in its primary key's order")
    extra += [f"unique ({', '.join(u)})" for u in info["unique"]]
    extra += [f"index `{n}` on ({', '.join(cols)})" for n, cols, _ in info["indexes"]]
    if extra:
        lines += ["", "; ".join(extra) + "."]
    return "\n".join(lines) + "\n"


def meta_section(meta: dict) -> str:
    lines = ["## Meta keys", "", "`SELECT key, value FROM meta`; the values shown are those "
             "every index this version writes has.", "",
             "| key | value | what it holds |", "|---|---|---|"]
    for key in sorted(META):
        value = f"`{meta[key]}`" if key in STABLE else "(this index's own)"
        lines.append(f"| `{key}` | {_cell(value)} | {_cell(META[key])} |")
    return "\n".join(lines) + "\n"


def render(schema: dict, conversations: dict) -> str:
    check(schema, conversations)
    order = list(TABLES)
    migrations = ", ".join(f"{n} {what}" for n, what in enumerate(MIGRATIONS, 1))
    parts = [INTRO.format(migrations=migrations),
             f"`PRAGMA user_version` is {schema['user_version']}.", "",
             "## Tables", ""]
    parts += [table_section(name, schema["tables"][name]) for name in order]
    parts += ["## Views", ""]
    for name, sql in sorted(schema["views"].items()):
        first, _, rest = sql.strip().partition("\n")
        body = textwrap.indent(textwrap.dedent(rest), "    ")
        parts += [f"### `{name}`", "", VIEWS[name], "", "```sql", first, body, "```", ""]
    parts += [meta_section(schema["meta"]), VECTORS, QUERIES, CHUNK_RECORD,
              CONVERSATIONS.format(app_id=hex(conversations["application_id"]),
                                   version=conversations["user_version"])]
    parts += [table_section(name, conversations["tables"][name], CONVERSATION_TABLES,
                            CONVERSATION_COLUMNS) for name in CONVERSATION_TABLES]
    return "\n".join(parts).rstrip("\n") + "\n"


def read_both(folder: Path) -> tuple[dict, dict]:
    """The schema of an index of examples/notes made in ``folder``, and of its
    conversations file."""
    db = build_index(folder)
    return read_schema(db), read_schema(build_conversations(db))


def build() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        return render(*read_both(Path(tmp)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    args.out.write_text(build(), encoding="utf-8")
    print(args.out)


if __name__ == "__main__":
    main()

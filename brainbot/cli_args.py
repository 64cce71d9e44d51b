"""The `brainbot` command's grammar: every subcommand, its options and its help text.

Each parser names the function of brainbot/cli.py that runs it (``func``, a name), so this
module imports nothing of the library and `brainbot --help` stays instant; `--version`
reads the model's id and the C extension's kernel path only when it is asked for.
"""

from __future__ import annotations

import argparse
import os

DEFAULT_DB = "brainbot.db"


def _db_default() -> str:
    return os.environ.get("BRAINBOT_DB", DEFAULT_DB)


def _db_option(p: argparse.ArgumentParser, default=True) -> None:
    p.add_argument("--db", default=_db_default() if default else None, metavar="FILE|URL",
                   help=f"the index: a SQLite file or a postgresql:// URL "
                        f"(default: $BRAINBOT_DB or ./{DEFAULT_DB})")


def version_line() -> str:
    """What a bug report needs: brainbot's version, Python's, the default embedding model
    (an index records its own) and the kernel path this CPU runs. Loads neither numpy nor
    the model (a few ms: the C extension's import and model/records' constants)."""
    import platform

    from . import __version__
    from .model.records import record

    MODEL_ID = record().model_id
    try:
        from ._kernel import ffi, lib
    except ImportError:
        kernel = "numpy kernels (the C extension is not built)"
    else:
        # kernel/native's BRAINBOT_SIMD rule, without its numpy import: scalar forces the
        # plain C twins, anything else is the CPU's best path (0).
        forced = 1 if os.environ.get("BRAINBOT_SIMD") == "scalar" else 0
        kernel = f"C kernel {ffi.string(lib.bb_backend(forced)).decode()}"
    return (f"brainbot {__version__} (Python {platform.python_version()}) · model {MODEL_ID} "
            f"· {kernel}")


class Version(argparse.Action):
    """--version, its line made only when asked: `brainbot --help` stays instant."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kwargs) -> None:
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(version_line())
        parser.exit()


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _model_names() -> list[str]:
    from .model.records import RECORDS

    return list(RECORDS)


def _add_index(sub) -> None:
    p = sub.add_parser("index", help="index notes into the database",
                       epilog="Example: brainbot index ~/notes --db notes.db")
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="folders or markdown files to index (again: only what changed)")
    _db_option(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--rebuild", action="store_true",
                   help="start the index over from the folders given (needs them); the old "
                        "index answers until the new one is complete")
    p.add_argument("--allow-empty", action="store_true",
                   help="let --rebuild replace an index holding notes with an empty one "
                        "(refused otherwise: an empty or mistyped folder)")
    p.add_argument("--prune", action="store_true",
                   help="remove the notes of indexed roots not present on this machine")
    p.add_argument("--precision", choices=["fp32", "int8"], default=None,
                   help="embedding precision of a new index (default int8; an existing "
                        "index keeps its own; fp32: sentence-transformers' exact vectors)")
    p.add_argument("--model", choices=_model_names(), default=None,
                   help="embedding model of a new index (default: all-MiniLM-L6-v2, or "
                        "multilingual-e5-small when most notes are not English; an existing "
                        "index keeps its own: switch with --rebuild)")
    p.add_argument("--no-embed", action="store_true",
                   help="stop after the lexical phase (BM25, links, tags, filters); a later "
                        "index or watch embeds the chunks")
    p.set_defaults(func="cmd_index")


def _add_query(sub) -> None:
    p = sub.add_parser("query", help="search the notes",
                       epilog="Example: brainbot query 'how long to proof dough' -k 5 --explain")
    p.add_argument("text", metavar="QUERY", help="the query, in your words")
    _db_option(p)
    p.add_argument("-k", type=_positive, default=10, help="results to show (default 10)")
    p.add_argument("--mode", choices=["bm25", "vector", "hybrid"], default="hybrid",
                   help="bm25 (words), vector (meaning) or hybrid (both, fused; default)")
    p.add_argument("--rerank", action="store_true", help="re-rank the fused candidates")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print a JSON array")
    out.add_argument("--jsonl", action="store_true", help="print one JSON object a line")
    p.add_argument("--explain", action="store_true", help="show each leg's rank and score")
    p.add_argument("--path", metavar="GLOB", help="only notes whose path matches GLOB")
    p.add_argument("--tag", action="append", metavar="TAG",
                   help="only notes tagged TAG or TAG/... (front matter or #inline; repeatable)")
    p.add_argument("--since", metavar="DATE",
                   help="only notes dated DATE or later (YYYY-MM-DD, or 7d, 3w, 2m, 1y ago)")
    p.add_argument("--before", metavar="DATE", help="only notes dated before DATE")
    p.add_argument("--linked-to", metavar="NOTE",
                   help="only notes that link to NOTE or that NOTE links to")
    p.add_argument("--min-score", type=float, metavar="X", help="drop hits scoring below X")
    p.set_defaults(func="cmd_query")


def _add_get(sub) -> None:
    p = sub.add_parser("get", help="print a note's lines or a chunk, numbered",
                       epilog="Example: brainbot get cooking/bread.md:10:20")
    p.add_argument("target", metavar="PATH[:LINE[:COUNT]]|CHUNK_ID",
                   help="a note's path as indexed (ROOT::PATH picks one of several "
                        "folders), from LINE, COUNT lines; or a hit's chunk id")
    _db_option(p)
    p.set_defaults(func="cmd_get")


def _add_links_and_tags(sub) -> None:
    p = sub.add_parser("links", help="a note's links, backlinks and unresolved links",
                       epilog="Example: brainbot links 'Garden Plan' --db notes.db")
    p.add_argument("note", metavar="NOTE", help="a path, or a name as in a [[wikilink]]")
    _db_option(p)
    p.add_argument("--json", action="store_true", help="print them as JSON")
    p.set_defaults(func="cmd_links")
    p = sub.add_parser("tags", help="every tag with the number of notes that carry it",
                       epilog="Example: brainbot tags --db notes.db")
    _db_option(p)
    p.add_argument("--json", action="store_true", help="print them as a JSON object")
    p.set_defaults(func="cmd_tags")


def _add_chunks(sub) -> None:
    p = sub.add_parser("chunks", help="write chunk records as JSON Lines",
                       epilog="Example: brainbot chunks ~/notes --jsonl chunks.jsonl")
    p.add_argument("paths", nargs="+", metavar="PATH", help="folders or markdown files")
    p.add_argument("--jsonl", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--workers", type=_positive, default=None,
                   help="processes to chunk on (default: every usable CPU; 1: this one)")
    p.set_defaults(func="cmd_chunks")


def _add_report(sub) -> None:
    p = sub.add_parser("report", help="score the chunking quality",
                       epilog="Example: brainbot report ~/notes   or   brainbot report --db notes.db")
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="folders or markdown files to chunk and score (or give --db)")
    _db_option(p, default=False)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func="cmd_report")


def _add_status_and_doctor(sub) -> None:
    p = sub.add_parser("status", help="what the database holds and what is active",
                       epilog="Example: brainbot status --db notes.db")
    _db_option(p)
    p.add_argument("--json", action="store_true", help="print it as JSON")
    p.set_defaults(func="cmd_status")
    p = sub.add_parser("doctor", help="check model, export, kernel, sqlite-vec, the database "
                                      "and the model server",
                       epilog="Example: brainbot doctor --db notes.db")
    _db_option(p)
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.add_argument("--no-server", action="store_true",
                   help="do not probe the model server (ANTHROPIC_BASE_URL or Anthropic's "
                        "API): it costs a few hundred tokens")
    p.set_defaults(func="cmd_doctor")


def _add_eval(sub) -> None:
    p = sub.add_parser("eval", help="measure retrieval quality (BEIR or a question set)",
                       epilog="Example: brainbot eval --beir ../shared/data/nfcorpus --db nf.db")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--beir", metavar="DIR", help="a BEIR dataset folder")
    src.add_argument("--questions", metavar="FILE", help="a question set (JSON Lines)")
    src.add_argument("--conversations", metavar="FILE",
                     help="a conversation set: follow-ups alone and within their conversation")
    src.add_argument("--sets", metavar="FILE",
                     help="a manifest of sets (examples/sets.json): each set on its corpus, "
                          "per-set tables with the tuning sets marked")
    _db_option(p, default=False)
    p.add_argument("--split", default="test", help="the BEIR split to score (default test)")
    p.add_argument("--modes", default="bm25,vector,hybrid",
                   help="the search modes to measure, comma-separated (default all three)")
    p.add_argument("--answers", action="store_true",
                   help="with --questions or --sets: measure `brainbot ask` answers, not "
                        "retrieval")
    p.add_argument("--role", choices=["tuning", "test"], default=None,
                   help="with --sets: only the sets of this role (default both)")
    p.add_argument("--corpus", action="append", default=[], metavar="NAME=DIR",
                   help="with --sets: where a corpus of the manifest is (repeatable)")
    p.add_argument("-k", type=_positive, default=10,
                   help="with --questions: hits a question may be found in (default 10)")
    p.add_argument("--limit", type=int, default=None, help="only the first N queries")
    p.add_argument("--precision", choices=["fp32", "int8"], default=None,
                   help="embedding precision of a BEIR index built for the eval (default int8)")
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    p.set_defaults(func="cmd_eval")


def _add_ask(sub) -> None:
    p = sub.add_parser("ask", help="answer a question from the notes, with citations",
                       epilog="Example: brainbot ask 'when do I feed the starter?' && "
                              "brainbot ask --follow-up 'and in the fridge?'")
    p.add_argument("text", metavar="QUESTION", help="the question")
    _db_option(p)
    _answer_options(p)
    p.add_argument("--json", action="store_true",
                   help="print the answer, its citations and outcome as JSON")
    p.add_argument("--show-context", action="store_true",
                   help="print what would be sent to the API and send nothing")
    _thread_options(p)
    p.set_defaults(func="cmd_ask")


def _answer_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-k", type=_positive, default=8, help="chunks to retrieve per search")
    p.add_argument("--model", default=None, help="Claude model (default: $BRAINBOT_MODEL)")


def _thread_options(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument("--conversation", metavar="ID",
                       help="continue conversation ID (`brainbot conversations` lists them)")
    which.add_argument("--follow-up", action="store_true",
                       help="continue the latest conversation of this index")


def _add_chat(sub) -> None:
    p = sub.add_parser("chat", help="ask one question after another: every line follows up",
                       epilog="Example: brainbot chat --db notes.db   (then /help)")
    _db_option(p)
    _answer_options(p)
    _thread_options(p)
    p.set_defaults(func="cmd_chat")


def _add_conversations(sub) -> None:
    p = sub.add_parser("conversations", help="list, show or delete the stored conversations",
                       epilog="Example: brainbot conversations   or   brainbot conversations "
                              "show 3f2a9c1b8e0d   or   brainbot conversations --delete ID")
    p.add_argument("action", nargs="?", choices=["list", "show"], default="list",
                   help="list them (the default), or show one's turns")
    p.add_argument("id", nargs="?", metavar="ID", help="the conversation to show")
    _db_option(p)
    p.add_argument("--json", action="store_true", help="print them (or its turns) as JSON")
    gone = p.add_mutually_exclusive_group()
    gone.add_argument("--delete", metavar="ID", help="delete conversation ID")
    gone.add_argument("--clear", action="store_true", help="delete every conversation")
    p.set_defaults(func="cmd_conversations")


def _add_watch(sub) -> None:
    p = sub.add_parser("watch", help="keep the index fresh while notes change",
                       epilog="Example: brainbot watch ~/notes --db notes.db")
    p.add_argument("paths", nargs="+", metavar="PATH", help="folders of notes to watch")
    _db_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON object per pass")
    p.set_defaults(func="cmd_watch")


def _add_mcp(sub) -> None:
    p = sub.add_parser("mcp", help="serve the index to agents over MCP (stdio)",
                       epilog="Example: claude mcp add brainbot -- brainbot mcp --db "
                              "~/notes.db --watch ~/notes")
    _db_option(p)
    p.add_argument("--watch", nargs="+", metavar="PATH",
                   help="also keep the index fresh from these folders")
    p.set_defaults(func="cmd_mcp")


def _add_serve(sub) -> None:
    p = sub.add_parser("serve", help="one warm daemon: MCP over HTTP, a JSON API and a page",
                       epilog="Example: brainbot serve --db ~/notes.db --watch ~/notes "
                              "(then open http://127.0.0.1:8765/)")
    _db_option(p)
    p.add_argument("--watch", nargs="+", metavar="PATH",
                   help="also keep the index fresh from these folders")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; others need --token)")
    p.add_argument("--port", type=int, default=8765,
                   help="port (default 8765; 0: a free one, said when serving)")
    p.add_argument("--token", default=None,
                   help="require Authorization: Bearer TOKEN on every request (or set "
                        "BRAINBOT_TOKEN, which ps does not show)")
    p.set_defaults(func="cmd_serve")


def _add_model(sub) -> None:
    p = sub.add_parser("model", help="get, export or show the embedding model",
                       epilog="Example: brainbot model pull")
    p.add_argument("action", choices=["pull", "export", "info"],
                   help="pull: install the model files; export: build the ONNX graph and "
                        "print its path; info: the model, its folder and checksum")
    p.add_argument("--precision", choices=["fp32", "int8"], default="int8",
                   help="the graph to export (default int8)")
    p.add_argument("--model", choices=_model_names(), default=None,
                   help="which model (default all-MiniLM-L6-v2)")
    p.set_defaults(func="cmd_model")


def _add_copy(sub) -> None:
    p = sub.add_parser(
        "copy", help="copy an index between SQLite and Postgres, without re-embedding",
        epilog="Example: brainbot copy --from notes.db --to postgresql://me@db.example/notes")
    p.add_argument("--from", dest="source", required=True, metavar="FILE|URL",
                   help="the index to read")
    p.add_argument("--to", dest="target", required=True, metavar="FILE|URL",
                   help="the index to write (must be empty, or pass --replace)")
    p.add_argument("--replace", action="store_true",
                   help="replace a target that already holds an index (it answers until "
                        "the copy is complete)")
    p.add_argument("--allow-empty", action="store_true",
                   help="let --replace put an index without notes in the place of one that "
                        "has some (refused otherwise)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func="cmd_copy")


def _add_related(sub) -> None:
    p = sub.add_parser("related", help="the notes most similar to a note, by their vectors",
                       epilog="Example: brainbot related 'Garden Plan' -k 5 --unlinked")
    p.add_argument("note", metavar="NOTE", help="a path, or a name as in a [[wikilink]]")
    _db_option(p)
    p.add_argument("-k", type=_positive, default=10, help="notes to show (default 10)")
    p.add_argument("--unlinked", action="store_true",
                   help="hide the notes NOTE links to and those linking to it")
    p.add_argument("--json", action="store_true", help="print them as JSON")
    p.set_defaults(func="cmd_related")


def _add_completion(sub) -> None:
    p = sub.add_parser(
        "completion", help="print a shell completion script (bash or zsh)",
        epilog="Example: brainbot completion bash > ~/.local/share/bash-completion/"
               "completions/brainbot   or   brainbot completion zsh > ~/.zfunc/_brainbot "
               "(with fpath+=~/.zfunc before compinit in ~/.zshrc)")
    p.add_argument("shell", choices=["bash", "zsh"], help="the shell to complete in")
    p.set_defaults(func="cmd_completion")


COMMANDS = (_add_index, _add_query, _add_get, _add_links_and_tags, _add_chunks, _add_report,
            _add_status_and_doctor, _add_eval, _add_ask, _add_chat, _add_conversations,
            _add_watch, _add_mcp, _add_serve,
            _add_model, _add_copy, _add_related, _add_completion)

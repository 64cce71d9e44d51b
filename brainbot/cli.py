"""The `brainbot` command: parse, call the library, print (text or --json).

Every command's work lives in the library; this module only wires arguments to it and
turns BrainbotError into one line on stderr and a non-zero exit. Imports of heavy
modules happen inside the commands, so `brainbot --help` is instant.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .cli_args import COMMANDS, Version, _db_default
from .errors import BrainbotError, InputError, NotUTF8Error

# The arguments of each command that are text, not file names: a lone surrogate in one is
# argv bytes that were not UTF-8, which neither the tokenizer nor SQLite takes (issue 32,
# M10). A folder or file name that is not UTF-8 is the indexer's to report.
TEXT_ARGS = {
    "query": {"text": "the query", "path": "--path", "tag": "--tag", "since": "--since",
              "before": "--before", "linked_to": "--linked-to"},
    "ask": {"text": "the question", "model": "--model", "conversation": "--conversation"},
    "chat": {"model": "--model", "conversation": "--conversation"},
    "conversations": {"id": "the conversation", "delete": "--delete"},
    "get": {"target": "the note reference"},
    "related": {"note": "the note"},
    "links": {"note": "the note"},
}


def _emit_json(data) -> None:
    from .render import printable_json

    sys.stdout.write(printable_json(json.dumps(data, ensure_ascii=False, indent=2)) + "\n")


def _json_line(data) -> str:
    from .render import printable_json

    return printable_json(json.dumps(data, ensure_ascii=False))


def _warn(text: str | None) -> None:
    from .render import printable

    if text:  # None or "": nothing to say
        print(f"brainbot: {printable(text)}", file=sys.stderr)


# -- commands -------------------------------------------------------------------------
def cmd_index(args) -> int:
    from brainbot.index.freshness import missing_root_line, missing_roots
    from brainbot.index.indexer import Indexer, choose_model

    from .render import progress_printer

    if not args.paths and (args.rebuild or not args.prune):  # a rebuild of nothing is empty
        raise InputError("--rebuild starts the index over: give the folders to index"
                         if args.rebuild else "give the folders or files to index (or --prune alone)")
    choice = choose_model(args.db, args.paths, args.model)
    if choice.line and not args.json:
        _warn(choice.line)
    with Indexer(args.db, precision=args.precision, rebuild=args.rebuild, model=choice,
                 progress=None if args.json else progress_printer(),
                 embed=not args.no_embed, allow_empty=args.allow_empty,
                 embed_progress=None if args.json else progress_printer(unit="chunk")) as ix:
        stats = ix.index_paths(args.paths)
        missing = missing_roots(ix.store)
        for root in missing if args.prune else ():
            stats = ix.forget_root(root)
    if args.json:
        _emit_json({**stats.to_dict(), "missing_roots": {} if args.prune else missing,
                    "pruned_roots": missing if args.prune else {}})
    else:
        db = None if args.db == _db_default() else args.db
        for root, n in missing.items():
            _warn(f"pruned root {root} (not present): {n} removed" if args.prune
                  else missing_root_line(root, n, db))
        for p in stats.skipped:
            _warn(f"skipped {p.path}: {p.reason}")
        for p in stats.warnings:
            _warn(f"warning {p.path}: {p.reason}")
        if stats.language_note:
            _warn(f"note: {stats.language_note}")
        print(stats.summary())
        print(_phase_line(stats), file=sys.stderr)
    return 0


def _phase_line(stats) -> str:
    """The one line the index ends with: how far the semantic phase got."""
    if stats.partial:
        return (f"brainbot: lexical phase done in {stats.lexical_seconds:.1f} s; "
                f"{stats.embedded_line()}: run `brainbot index` again (or `watch`) to embed "
                "the rest")
    return (f"brainbot: semantic phase done: {stats.embedded:,} embedded in "
            f"{stats.embed_seconds:.1f} s, {stats.embedded_line()}")


def _daemon_query(args) -> dict | None:
    """What a running `brainbot serve` of this index answers (serve/client.py), or None."""
    if args.rerank or args.explain or args.min_score is not None or len(args.tag or ()) > 1:
        return None  # options the daemon's API does not take: search here
    from .render import use_colour
    from .serve import client

    body = {"query": args.text, "k": args.k, "mode": args.mode, "path": args.path,
            "tag": args.tag[0] if args.tag else None, "since": args.since,
            "before": args.before, "linked_to": args.linked_to,
            "cli": {"colour": not (args.json or args.jsonl) and use_colour(sys.stdout)}}
    return client.search(args.db, body)


def cmd_query(args) -> int:
    reply = _daemon_query(args)
    if reply is not None:
        return _print_query(args, reply["hits"], reply.get("partial"), reply.get("text", ""))
    from brainbot.search.searcher import Searcher

    from .render import Style, hit_block, use_colour

    since, before = _dates(args)
    with Searcher(args.db) as searcher:
        hits = searcher.search(args.text, args.k, mode=args.mode, rerank=args.rerank,
                               path_glob=args.path, tags=args.tag, min_score=args.min_score,
                               since=since, before=before, linked_to=args.linked_to)
        note = searcher.partial_note(args.mode)
    text = "" if args.json or args.jsonl else "\n\n".join(
        hit_block(i + 1, h, args.text, Style(use_colour(sys.stdout)), args.explain)
        for i, h in enumerate(hits))
    return _print_query(args, [h.to_dict(args.explain) for h in hits], note, text)


def _dates(args) -> tuple[str | None, str | None]:
    """--since and --before as ISO dates; the vault module (link and date parsing, its
    regexes) is imported only when one is given, not by every cold query."""
    if not (args.since or args.before):
        return None, None
    from brainbot.notes.vault import parse_when

    return (parse_when(args.since) if args.since else None,
            parse_when(args.before) if args.before else None)


def _print_query(args, records: list[dict], note: str | None, text: str) -> int:
    if note:
        print(note, file=sys.stderr)  # never in --json stdout
    if args.json:
        _emit_json(records)
    elif args.jsonl:
        for record in records:
            print(_json_line(record))
    else:
        if not records:
            print("no matches", file=sys.stderr)
            return 1
        print(text)
    return 0


def cmd_get(args) -> int:
    from brainbot.index.links import backlinks_of
    from brainbot.index.reading import get_lines
    from brainbot.store.target import open_store

    from .render import printable

    with open_store(args.db) as store:
        reading = get_lines(store, args.target)
        backlinks = backlinks_of(store, args.target)
    if reading.stale:
        print(printable(f"note: {reading.path} changed on disk since it was indexed; "
                        "these are its current lines (run `brainbot index` to catch up)"),
              file=sys.stderr)
    elif reading.stale is None:
        print(printable(f"note: {reading.root} is not present here; these are the lines of "
                        f"{reading.path} as indexed"), file=sys.stderr)
    for number, line in reading.lines:
        print(printable(f"{number:>6}  {line}", keep_newlines=True))
    if backlinks:
        print("\nBacklinks:")
        for b in backlinks:
            print(printable(f"  {b['source']}:{b['line']}  {b['line_text']}"))
    return 0


def cmd_links(args) -> int:
    from brainbot.index.links import note_links
    from brainbot.store.target import open_store

    from .render import printable

    with open_store(args.db) as store:
        report = note_links(store, args.note)
    if args.json:
        _emit_json(report)
        return 0
    print(printable(report["note"]))
    for title, key, side in (("links to", "outgoing", "target"),
                             ("linked from", "backlinks", "source"),
                             ("unresolved", "unresolved", "target")):
        print(f"\n{title} ({len(report[key])}):")
        for x in report[key]:
            where = x[side] if side == "source" else x.get(side) or x["target"]
            line = x["line_text"] if side == "source" else f"line {x['line']}"
            print(printable(f"  {where}  {line}"))
    return 0


def cmd_related(args) -> int:
    from brainbot.search.related import related
    from brainbot.store.target import open_store

    from .render import Style, heading, printable, snippet, use_colour

    with open_store(args.db) as store:
        report = related(store, args.note, args.k, unlinked=args.unlinked)
    if report.partial_note:
        print(report.partial_note, file=sys.stderr)  # never in --json stdout
    if args.json:
        _emit_json([r.to_dict() for r in report.related])
        return 0
    if not report.related:
        print(printable(f"no related notes for {report.note.path}"), file=sys.stderr)
        return 1
    style = Style(use_colour(sys.stdout))
    blocks = [printable(f"related to {report.note.path}")]
    for i, r in enumerate(report.related, 1):
        c = r.chunk
        where = f"{r.document.path}:{c.start_line}-{c.end_line}"
        tail = "  linked" if r.linked else ""
        blocks.append(f"{style.bold(f'{i}.')} {style.path(printable(where))}  "
                      f"{style.dim(printable(heading(c.heading_path)))}  "
                      f"{style.dim(f'score {r.score:.4f}{tail}')}\n"
                      f"   {snippet(c.text, '', style)}")
    print("\n\n".join(blocks))
    return 0


def cmd_tags(args) -> int:
    from brainbot.store.target import open_store

    from .render import printable

    with open_store(args.db) as store:
        counts = store.tag_counts()
    if args.json:
        _emit_json([{"tag": t, "notes": n} for t, n in counts.items()])
    else:
        shown = {printable(t): n for t, n in counts.items()}
        width = max((len(t) for t in shown), default=0)
        for tag, n in shown.items():
            print(f"{tag:<{width}}  {n}")
    return 0


def _warn_problems(item) -> None:
    from brainbot.notes.files import Problem

    if isinstance(item, Problem):
        _warn(f"skipped {item.path}: {item.reason}")
    else:
        for w in item.warnings:
            _warn(f"warning {item.doc.relpath}: {w}")


def cmd_chunks(args) -> int:
    from brainbot.text.parallel import chunk_paths
    from brainbot.text.tokens import TokenCounter

    out = open(args.jsonl, "w", encoding="utf-8") if args.jsonl else sys.stdout
    try:
        for item in chunk_paths(args.paths, TokenCounter(), workers=args.workers):
            _warn_problems(item)
            for c in getattr(item, "chunks", ()):
                out.write(_json_line(c.to_record()) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def cmd_report(args) -> int:
    from brainbot.text.quality import assess

    if args.paths:
        from brainbot.text.documents import chunk_paths
        from brainbot.text.tokens import TokenCounter

        records, warnings = [], []
        for item in chunk_paths(args.paths, TokenCounter()):
            _warn_problems(item)
            records += [c.to_record() for c in getattr(item, "chunks", ())]
            warnings += [{"path": item.doc.relpath, "reason": w}
                         for w in getattr(item, "warnings", ())]
    elif args.db:
        from brainbot.store.target import open_store

        from .doctor import warnings_of

        with open_store(args.db) as store:
            records, warnings = list(store.chunk_records()), warnings_of(store)
        for w in warnings:
            _warn(f"warning {w['path']}: {w['reason']}")
    else:
        raise InputError("give notes to chunk (PATH...) or an index (--db FILE)")
    report = assess(records)
    if args.json:
        _emit_json({**report.to_dict(), "warnings": warnings})
    else:
        from .render import printable

        print(printable(report.format_text(), keep_newlines=True))  # it names files
    return 0


def cmd_status(args) -> int:
    from .doctor import status
    from .render import printable

    info = status(args.db)
    if args.json:
        _emit_json(info)
    else:
        width = max(len(k) for k in info)
        for key, value in info.items():
            if isinstance(value, (dict, list)):
                value = json.dumps(value, ensure_ascii=False)
            print(printable(f"{key:<{width}}  {value}"))  # stale_files, warnings: file names
    return 0


def cmd_doctor(args) -> int:
    from .doctor import run_checks
    from .render import printable

    checks = run_checks(args.db, server=not args.no_server)
    bad = [c for c in checks if not c["ok"]]
    if args.json:
        _emit_json({"ok": not bad, "checks": checks})
    else:
        for c in checks:
            mark = "ok  " if c["ok"] else "FAIL"
            print(printable(f"[{mark}] {c['name']}: {c['detail']}"))
            if not c["ok"] and c.get("fix"):
                print(printable(f"       fix: {c['fix']}"))
    return 1 if bad else 0


def cmd_eval(args) -> int:
    from .shell.evaluation import evaluation

    result, show = evaluation(args)
    if args.json:
        _emit_json(result)
    else:
        from .render import printable

        print(printable(show(result), keep_newlines=True))  # questions are the user's text
    return 0


def _daemon_ask(args) -> dict | None:
    """What a running `brainbot serve` of this index answers (serve/client.py), or None:
    also when a Claude answer would stream to this terminal, which the API does not."""
    from brainbot.model.claude import may_have_credentials

    if args.model or args.show_context or (
            sys.stdout.isatty() and not args.json and may_have_credentials()):
        return None
    from .serve import client

    return client.ask(args.db, {"question": args.text, "k": args.k, "cli": True,
                                "conversation": args.conversation,
                                "follow_up": args.follow_up})


def cmd_ask(args) -> int:
    reply = _daemon_ask(args)
    if reply is not None:
        note, text = reply.pop("partial", None), reply.pop("text", "")
        reply.pop("partial_index", None)  # the API's; `ask --json` prints the Answer only
        if note:
            print(note, file=sys.stderr)
        if args.json:
            _emit_json(reply)
        else:
            print(text)
            _warn(reply.get("conversation_note"))  # the turn was not saved: why
        return 0
    from brainbot.ask.conversation import Thread
    from brainbot.ask.terminal import format_answer
    from brainbot.search.searcher import Searcher

    thread = Thread.open(args.db, args.conversation, args.follow_up)
    with Searcher(args.db) as searcher:
        answer = thread.ask(args.text, db=args.db, k=args.k, model=args.model,
                            searcher=searcher, show_context=args.show_context,
                            stream=sys.stdout.isatty() and not args.json)
        note = searcher.partial_note("hybrid")
    if note:
        print(note, file=sys.stderr)  # as query does; never in --json stdout
    if args.show_context:
        _emit_json(answer)  # exactly the request: the earlier turns are in its messages
        return 0
    if args.json:
        _emit_json(answer.to_dict())
    else:
        print(format_answer(answer))
        _warn(answer.conversation_note)
    return 0


def cmd_chat(args) -> int:
    from brainbot.ask.chat import chat

    return chat(args.db, k=args.k, model=args.model, conversation=args.conversation,
                follow_up=args.follow_up)


def cmd_conversations(args) -> int:
    from brainbot.ask import chat
    from brainbot.store.target import open_conversations

    store = open_conversations(args.db)
    if args.delete or args.clear:
        n = store.clear() if args.clear else store.delete(args.delete)
        print(f"deleted {n} conversation{'s' if n != 1 else ''}", file=sys.stderr)
        return 0
    if args.action == "show" and not args.id:
        raise InputError("give the conversation to show: brainbot conversations show ID")
    if args.action == "show":
        turns = store.turns(args.id)
        data = {"id": args.id, "turns": [t.to_dict() for t in turns]}
        text = "\n\n".join(chat.turn_lines(t) for t in turns)
    else:
        listed = store.listing()
        data, text = [c.to_dict() for c in listed], "\n".join(map(chat.listing_line, listed))
    if args.json:
        _emit_json(data)
    elif text:
        from .render import printable

        print(printable(text, keep_newlines=True))
    else:
        print("no conversations", file=sys.stderr)
    return 0


def cmd_watch(args) -> int:
    import threading

    from brainbot.serve.watch import Watcher, install_stop_signals, quiet_library_logs

    stop = threading.Event()
    install_stop_signals(stop)
    quiet_library_logs()

    from .render import printable

    def report(p) -> None:
        if args.json:
            print(_json_line({"root": p.root, "paths": p.paths, "error": p.error,
                              "missing_notes_kept": p.kept, "seconds": round(p.seconds, 3), **p.stats.to_dict(),
                              "phase": "lexical"}),
                  flush=True)
        else:
            print(printable(p.line()), flush=True)

    def report_embed(e) -> None:  # the background semantic phase
        print(_json_line(e.to_dict()) if args.json else printable(e.line()), flush=True)

    Watcher(args.paths, args.db, stop=stop, on_pass=report, on_embed=report_embed).run()
    return 0


def cmd_mcp(args) -> int:
    from brainbot.serve.mcp import serve

    return serve(args.db, args.watch)


def cmd_serve(args) -> int:
    from brainbot.serve.http import serve

    return serve(args.db, args.watch, host=args.host, port=args.port, token=args.token)


def cmd_model(args) -> int:
    from brainbot.model import files as model
    from brainbot.model.onnx_export import onnx_path

    spec = model.record(args.model)
    if args.action == "pull":
        print(f"{spec.name} files ok in {model.pull(model=spec)}")
    elif args.action == "export":
        print(onnx_path(args.precision, spec))
    else:
        print(f"{spec.model_id} · {model.verified_model_dir(spec)} · sha256 {spec.weights_sha256[:12]}")
    return 0


def cmd_completion(args) -> int:
    from .shell.completion import SHELLS

    sys.stdout.write(SHELLS[args.shell](build_parser()))
    return 0


def cmd_copy(args) -> int:
    from brainbot.index.copying import copy_index

    from .render import printable

    stats = copy_index(args.source, args.target, replace=args.replace, allow_empty=args.allow_empty)
    _warn(stats.conversations_note and f"warning: {stats.conversations_note}")
    if args.json:
        _emit_json(stats.to_dict())
    else:
        print(printable(stats.summary()))
    return 0


# -- parser ---------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="brainbot",
        description="Question answering over your markdown notes, from one SQLite file.",
        epilog="Example: brainbot index ~/notes && brainbot query 'sourdough starter'")
    parser.add_argument("--version", action=Version, nargs=0,
                        help="show brainbot's version, its embedding model and the search "
                             "kernel this CPU runs, and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return parser


def _check_text(args) -> None:
    """NotUTF8Error for a text argument that is not valid UTF-8 (TEXT_ARGS)."""
    for dest, what in TEXT_ARGS.get(args.command, {}).items():
        value = getattr(args, dest, None)
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str):
                NotUTF8Error.check(text, what)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _check_text(args)
        return globals()[args.func](args)
    except BrainbotError as exc:
        _warn(f"error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        _warn("interrupted")
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def run() -> None:
    """The console script: main(), then leave without tearing the interpreter down. Exit
    teardown (destroying the onnxruntime session, the modules) cost 33 ms of a 232 ms
    hybrid query (benchmarks/bench_coldstart.py); every command has closed its files and
    database connections by the time main() returns."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a closed pipe or stream: nothing to keep
            pass
    os._exit(code)


if __name__ == "__main__":
    run()

"""`brainbot eval`: which evaluation its arguments ask for, run, and the function that
formats its result. Printing is the CLI's (cli.cmd_eval); the evaluations themselves live in
evaluate.py and evaluation/."""

from __future__ import annotations

from pathlib import Path

from brainbot.cli_args import _db_default
from brainbot.errors import InputError


def evaluation(args):
    """(result, format function) of the evaluation ``args`` name; InputError for a
    combination that names none."""
    from brainbot import evaluate

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.answers and not (args.questions or args.sets):
        raise InputError("--answers needs --questions FILE.jsonl or --sets FILE")
    if (args.role or args.corpus) and not args.sets:
        raise InputError("--role and --corpus go with --sets FILE")
    if args.beir:
        return evaluate.run_beir(Path(args.beir), db=args.db, split=args.split, modes=modes,
                                 limit=args.limit, precision=args.precision), \
            evaluate.format_result
    if args.sets:
        return _sets(args, modes)
    if args.answers:
        return evaluate.run_answers(Path(args.questions), db=args.db or _db_default()), \
            evaluate.format_answers
    if args.conversations:
        from brainbot.evaluation import conversations

        return conversations.run_conversations(Path(args.conversations),
                                               db=args.db or _db_default(), k=args.k), \
            conversations.format_conversations
    if args.questions:
        return evaluate.run_questions(Path(args.questions), db=args.db or _db_default(),
                                      modes=modes, k=args.k), evaluate.format_result
    raise InputError("give --beir DIR, --questions FILE.jsonl, --conversations FILE or "
                     "--sets FILE")


def _sets(args, modes: list[str]):
    """Every set of the manifest ``--sets`` names, each on its corpus (``--corpus
    NAME=DIR`` overrides the manifest's folder), of the roles asked for."""
    from brainbot.evaluation import sets as evaluate_sets

    corpora = {}
    for item in args.corpus:
        name, sep, folder = item.partition("=")
        if not sep or not name or not folder:
            raise InputError(f"--corpus {item!r}: give NAME=DIR")
        corpora[name] = folder
    manifest = evaluate_sets.load_manifest(Path(args.sets), corpora)
    roles = (args.role,) if args.role else evaluate_sets.ROLES
    return (evaluate_sets.run_sets(manifest, answers=args.answers, roles=roles, k=args.k,
                                   modes=modes), evaluate_sets.format_sets)

"""`brainbot status` and `brainbot doctor`: what is there, what is active, what is wrong.

Each check returns {"name", "ok", "detail", "fix"}; doctor prints them and exits
non-zero when any fails. Nothing here repairs anything: it says what to run.

When a model server is configured (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL), doctor also
probes it (model/probe.py): whether a search result reaches the model, whether it
streams, stops and calls tools, and what an ask will do with it (issue 42).
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

from brainbot.index.freshness import missing_root_line, missing_roots, present_roots, vault_changes
from brainbot.index.indexer import embedded_line
from brainbot.index.model_choice import model_fit
from brainbot.model import files as model
from brainbot.store.interface import Store
from brainbot.store.target import is_url, open_store, public_target

from .errors import BrainbotError


def _check(name: str, ok: bool, detail: str, fix: str = "") -> dict:
    return {"name": name, "ok": ok, "detail": detail, "fix": fix if not ok else ""}


def kernel_backend() -> str:
    from brainbot.kernel import native as kernel

    return kernel.active().backend()


def warnings_of(store: Store) -> list[dict]:
    """What indexing reported about notes it kept (bad front matter, replaced bytes)."""
    return [{"path": d.path, "reason": w} for d in store.documents() for w in d.warnings]


def status(db, store: Store | None = None) -> dict:
    """What the index holds and how current it is; ``store``: an open one to reuse."""
    own = store is None
    store = store or open_store(db)
    try:
        meta = store.meta()
        counts = store.counts()
        stale = vault_changes(store)
        missing = missing_roots(store)
        warnings = warnings_of(store)
        size = store.size_bytes()
        generation = store.generation()
        other, known = store.language_share()
        tags = len(store.tag_counts())
    finally:
        if own:
            store.close()
    return {
        "db": store.target, "size_bytes": size,
        "schema": meta.get("schema_version"), "model": meta.get("model"),
        "model_fit": model_fit(meta, other, known)[1],
        "embedder": meta.get("embedder"), "chunker": meta.get("chunker"),
        "analyzer": meta.get("analyzer"), "fingerprint": meta.get("fingerprint"),
        "generation": generation,
        "documents": counts["documents"], "chunks": counts["chunks"],
        "embeddings": counts["embeddings"], "terms": counts["terms"],
        "embedded": embedded_line(counts["embeddings"], counts["chunks"]),
        "non_english": round(other / known, 4) if known else 0.0,
        "tags": tags,
        "stale": {k: len(v) for k, v in stale.items()},
        "stale_files": stale,
        "missing_roots": {r: {"notes": n, "note": missing_root_line(r, n, store.target)}
                          for r, n in missing.items()},
        "warnings": warnings,
        **_conversations(db),
        **_engine_status(db),
    }


def _conversations(db) -> dict:
    """How many conversations are stored beside the index (store/conversations.py); when
    they cannot be read, None and why."""
    from brainbot.store.target import open_conversations

    try:
        return {"conversations": open_conversations(db).count()}
    except BrainbotError as exc:
        return {"conversations": None, "conversations_error": str(exc)}


# On Postgres the legs run in SQL (pgvector, BM25 over brainbot's postings): the C kernel
# only fuses them, and sqlite-vec has nothing to read.
_ON_POSTGRES_KERNEL = "{} active for fusion only; the legs run in SQL on Postgres"
_ON_POSTGRES_VEC = "does not apply: the index is in Postgres (pgvector)"


def _engine_status(db) -> dict:
    if is_url(db):
        return {"kernel": _ON_POSTGRES_KERNEL.format(kernel_backend()),
                "sqlite_vec": _ON_POSTGRES_VEC}
    from brainbot.store.sqlite.file import vec_available

    vec_ok, vec_detail = vec_available()
    return {"kernel": kernel_backend(),
            "sqlite_vec": vec_detail if vec_ok else f"unavailable: {vec_detail}"}


def _model_checks(spec) -> list[dict]:
    """The files and export of ``spec``, the index's model (the default's without one)."""
    out = []
    problems = model.check_files(spec)
    out.append(_check("model files", not problems,
                      problems[0] if problems else f"{spec.model_id}, sha256 verified",
                      spec.pull_command))
    if problems:
        return out
    try:
        from brainbot.model.embed import DEFAULT_PRECISION
        from brainbot.model.onnx_export import onnx_path

        path = onnx_path(DEFAULT_PRECISION, spec)  # what a new index embeds with
        out.append(_check("onnx export", True, str(path)))
    except BrainbotError as exc:
        out.append(_check("onnx export", False, str(exc), "brainbot model export"
                          + ("" if spec.pull_command.endswith("pull") else f" --model {spec.name}")))
    return out


def _roots(store: Store) -> str:
    return " ".join(shlex.quote(r) for r in present_roots(store)) or "NOTES"


def _db_checks(db) -> list[dict]:
    shown = public_target(db)  # messages and fixes never show a password
    if not is_url(db) and not Path(db).exists():
        return [_check("database", False, f"no index at {db}",
                       f"brainbot index NOTES --db {shlex.quote(shown)}")]
    try:
        store = open_store(db)
    except BrainbotError as exc:
        fix = exc.fix or f"brainbot index NOTES --db {shlex.quote(shown)} --rebuild"
        return [_check("database", False, str(exc), fix)]
    with store:
        try:  # a reader opened it; a writer also needs the chunker and embedder to match
            _check_writable(store)
        except BrainbotError as exc:
            return [_check("database", False, str(exc), exc.fix)]
        return _store_checks(store, shown)


def _check_writable(store: Store) -> None:
    from brainbot.store import identity
    from brainbot.text.analyzers import writes_with

    meta = store.meta()
    precision = identity.precision_of(meta) or "fp32"
    writer = replace(identity.current(precision, model=identity.model_of(meta)),
                     analyzer=writes_with(meta.get("analyzer")))
    identity.check(meta, store.target, writer=writer)


def _store_checks(store: Store, db) -> list[dict]:
    out: list[dict] = []
    db_arg = shlex.quote(str(db))
    try:
        roots = _roots(store)
        rebuild = f"brainbot index {roots} --db {db_arg} --rebuild"
        result = store.integrity()
        out.append(_check("database integrity", result == "ok", result,
                          f"restore {db} from a backup or rebuild it: {rebuild}"))
        if result != "ok":
            return out  # the checks below would read the damaged pages
        out.append(_check("fingerprint", True, store.meta().get("fingerprint", "?")))
        stale = vault_changes(store)
        n = sum(len(v) for v in stale.values())
        out.append(_check("stale files", n == 0,
                          f"{len(stale['changed'])} changed, {len(stale['missing'])} missing, "
                          f"{len(stale['new'])} new", f"brainbot index {roots} --db {db_arg}"
                          + (" --prune" if missing_roots(store) else "")))
        out += _absent_roots_check(store, db_arg)
        other, known = store.language_share()
        ok, detail = model_fit(store.meta(), other, known)
        out.append(_check("model", ok, detail,
                          f"brainbot index {roots} --db {db_arg} --rebuild --model "
                          "multilingual-e5-small"))
        out.append(_check("language", True, _language_detail(store.meta(), other, rebuild)))
        warned = {w["path"] for w in warnings_of(store)}
        out.append(_check("note warnings", True, f"{len(warned)} notes indexed with warnings"
                          + (" (brainbot status lists them)" if warned else "")))
        tally = store.counts()
        chunks, vectors = tally["chunks"], tally["embeddings"]
        # A partly embedded index is a normal state (`--no-embed`, a kill in the semantic
        # phase): the next `index` fills the rest in. More vectors than chunks is a fault.
        detail = embedded_line(vectors, chunks)
        if vectors < chunks:
            detail += f"; `brainbot index {roots} --db {db_arg}` embeds the rest"
        out.append(_check("vectors", vectors <= chunks, detail, rebuild))
    except BrainbotError as exc:  # a damaged page met while checking
        out.append(_check("database integrity", False, str(exc),
                          f"restore {db} from a backup or rebuild it: "
                          f"brainbot index NOTES --db {db_arg} --rebuild"))
    return out


def _absent_roots_check(store: Store, db_arg: str) -> list[dict]:
    """Folders of the index not present on this machine: their notes are served from the
    index's text and nothing can tell whether they changed. Normal on Postgres (readers on
    other machines); a SQLite file is local, so there the folder most likely moved."""
    absent = missing_roots(store)
    if not absent:
        return []
    detail = "; ".join(f"{root} is not present here ({n} note{'s' if n != 1 else ''}, read "
                       "from the index)" for root, n in absent.items())
    return [_check("folders", is_url(store.target), detail,
                   f"if it moved or is gone for good: brainbot index --prune --db {db_arg}")]


def _language_detail(meta: dict[str, str], other: int, rebuild: str) -> str:
    """How BM25 analysed the index's chunks: each in its language, or (an index from
    before per-language analysis holding non-English chunks) with English rules, and
    how to analyse them in theirs."""
    from brainbot.text import analyzers, lexical

    if meta.get("analyzer") == lexical.ANALYZER_VERSION:
        if not other:
            return "BM25 analyses every chunk with English rules"
        return (f"BM25 analysed {other:,} non-English chunks with English rules (an index "
                f"from before per-language analysis): {rebuild} analyses each note in its "
                "own language")
    counts = analyzers.recorded_languages(meta)
    shown = ", ".join(f"{lang} {n:,}" for lang, n in
                      sorted(counts.items(), key=lambda kv: -kv[1])[:6])
    return "BM25 analyses each note in its own language" + (f" (chunks: {shown})"
                                                           if shown else "")


def run_checks(db, server: bool = True, client=None) -> list[dict]:
    """Every check; ``server``: probe the model server too (``client``: its client)."""
    from brainbot.model.records import for_index, record
    from brainbot.store.target import recorded_meta

    checks = _model_checks(for_index(recorded_meta(db)) or record())
    checks.extend(_engine_checks(db))
    checks.extend(_db_checks(db))
    if server:
        checks.extend(server_checks(client))
    return checks


OFFLINE = ("none configured (no ANTHROPIC_API_KEY): asks answer offline, quoting your "
           "notes; set ANTHROPIC_API_KEY for Claude, or ANTHROPIC_BASE_URL and "
           "BRAINBOT_MODEL for a local server")


def server_checks(client=None) -> list[dict]:
    """The model server's probe as checks; with none configured, one line saying so."""
    from brainbot.model import claude, probe

    try:
        if client is None and claude.may_have_credentials():
            client = claude.make_client()
        if client is None or not claude.has_credentials(client):
            return [_check("model server", True, OFFLINE)]
        found = probe.run(client, claude.model_name())
    except BrainbotError as exc:  # a bad setting, a profile the SDK cannot load
        return [_check("model server", False, str(exc), "fix the setting it names")]
    return [_check(name, ok, detail, fix) for name, ok, detail, fix in probe.verdicts(found)]


def _engine_checks(db) -> list[dict]:
    backend = kernel_backend()
    if is_url(db):  # numpy fuses two lists of 100 as well: nothing to fix
        return [_check("search kernel", True, _ON_POSTGRES_KERNEL.format(backend)),
                _check("sqlite-vec", True, _ON_POSTGRES_VEC)]
    from brainbot.store.sqlite.file import vec_available

    vec_ok, vec_detail = vec_available()
    return [_check("search kernel", backend.startswith("c"), f"{backend} active",
                   "pip install -e . (builds brainbot._kernel)"),
            _check("sqlite-vec", vec_ok, vec_detail, "pip install sqlite-vec")]

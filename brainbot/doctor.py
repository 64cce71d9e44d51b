"""`brainbot status` and `brainbot doctor`: what is there, what is active, what is wrong.

Each check returns {"name", "ok", "detail", "fix"}; doctor prints them and exits
non-zero when any fails. Nothing here repairs anything: it says what to run.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import sqlean as sqlite3

from . import model, store
from .errors import BrainbotError, StoreBusyError


def _check(name: str, ok: bool, detail: str, fix: str = "") -> dict:
    return {"name": name, "ok": ok, "detail": detail, "fix": fix if not ok else ""}


def kernel_backend() -> str:
    from . import kernel

    return kernel.active().backend()


def stale_files(db) -> dict[str, list[str]]:
    """Indexed files that changed or vanished on disk, and new files not yet indexed."""
    from .notes import discover

    changed, missing, new = [], [], []
    roots: dict[str, dict[str, tuple[int, int]]] = {}
    for root, path, size, mtime in db.execute(
            "SELECT root, path, size, mtime_ns FROM documents"):
        roots.setdefault(root, {})[path] = (size, mtime)
    for root, docs in roots.items():
        if root.startswith("dataset:"):
            continue
        if not Path(root).is_dir():
            missing.extend(docs)
            continue
        found = {f.relpath: f for f in discover(Path(root)).files}
        for path, (size, mtime) in docs.items():
            f = found.get(path)
            if f is None:
                missing.append(path)
            elif (f.size, f.mtime_ns) != (size, mtime):
                changed.append(path)
        # a single indexed file's folder holds unrelated notes: only folders count new ones
        new.extend(p for p in found if p not in docs and len(docs) > 1)
    return {"changed": sorted(changed), "missing": sorted(missing), "new": sorted(new)}


def status(db_path) -> dict:
    db = store.open_index(db_path, readonly=True)
    try:
        meta = store.read_meta(db)
        counts = store.counts(db)
        stale = stale_files(db)
        size = sum(os.path.getsize(str(db_path) + s) for s in ("", "-wal")
                   if os.path.exists(str(db_path) + s))
    finally:
        db.close()
    vec_ok, vec_detail = store.vec_available()
    return {
        "db": str(db_path), "size_bytes": size,
        "schema": meta.get("schema_version"), "model": meta.get("model"),
        "embedder": meta.get("embedder"), "chunker": meta.get("chunker"),
        "fingerprint": meta.get("fingerprint"),
        "documents": counts["documents"], "chunks": counts["chunks"],
        "embeddings": counts["embeddings"], "terms": counts["terms"],
        "stale": {k: len(v) for k, v in stale.items()},
        "stale_files": stale,
        "kernel": kernel_backend(),
        "sqlite_vec": vec_detail if vec_ok else f"unavailable: {vec_detail}",
    }


def _model_checks() -> list[dict]:
    out = []
    problems = model.check_files()
    out.append(_check("model files", not problems,
                      problems[0] if problems else f"{model.MODEL_ID}, sha256 verified",
                      "brainbot model pull"))
    if problems:
        return out
    try:
        from .export import onnx_path

        path = onnx_path("fp32")
        out.append(_check("onnx export", True, str(path)))
    except BrainbotError as exc:
        out.append(_check("onnx export", False, str(exc), "brainbot model export"))
    return out


def _open_fix(exc: BrainbotError, db_path) -> str:
    """What to do about an index that does not open. --rebuild deletes the file, so it is
    offered only for files that are brainbot's own."""
    text, db_path = str(exc), shlex.quote(str(db_path))
    if isinstance(exc, StoreBusyError):
        return "wait for the running `brainbot index` to finish, then run doctor again"
    if "newer brainbot" in text:
        return "upgrade brainbot (pip install -U brainbot) or pass another --db"
    if "not a brainbot index" in text:
        return (f"pass another --db, or move {db_path} away; if it is a damaged brainbot "
                f"index: brainbot index NOTES --db {db_path} --rebuild")
    return f"brainbot index NOTES --db {db_path} --rebuild"


def _roots(db) -> str:
    roots = [r for (r,) in db.execute("SELECT DISTINCT root FROM documents ORDER BY root")
             if not r.startswith("dataset:")]
    return " ".join(shlex.quote(r) for r in roots) or "NOTES"


def _db_checks(db_path) -> list[dict]:
    if not Path(db_path).exists():
        return [_check("database", False, f"no index at {db_path}",
                       f"brainbot index NOTES --db {db_path}")]
    try:
        from .indexer import identity

        db = store.open_index(db_path, identity(), readonly=True)
    except BrainbotError as exc:
        return [_check("database", False, str(exc), _open_fix(exc, db_path))]
    try:
        roots = _roots(db)
    except sqlite3.DatabaseError:
        roots = "NOTES"
    db_arg = shlex.quote(str(db_path))
    rebuild = f"brainbot index {roots} --db {db_arg} --rebuild"
    out: list[dict] = []
    try:
        result = store.integrity(db)
        out.append(_check("database integrity", result == "ok", result,
                          f"restore {db_path} from a backup or rebuild it: {rebuild}"))
        if result != "ok":
            return out  # the checks below would read the damaged pages
        meta = store.read_meta(db)
        out.append(_check("fingerprint", True, meta.get("fingerprint", "?")))
        stale = stale_files(db)
        n = sum(len(v) for v in stale.values())
        out.append(_check("stale files", n == 0,
                          f"{len(stale['changed'])} changed, {len(stale['missing'])} missing, "
                          f"{len(stale['new'])} new",
                          f"brainbot index {roots} --db {db_arg}"))
        tally = store.counts(db)
        chunks, vectors = tally["chunks"], tally["embeddings"]
        out.append(_check("vectors", chunks == vectors, f"{vectors} vectors for {chunks} chunks",
                          rebuild))
    except sqlite3.DatabaseError as exc:  # a damaged page met while checking
        out.append(_check("database integrity", False, f"SQLite says: {exc}",
                          f"restore {db_path} from a backup or rebuild it: {rebuild}"))
    finally:
        db.close()
    return out


def run_checks(db_path) -> list[dict]:
    checks = _model_checks()
    backend = kernel_backend()
    checks.append(_check("search kernel", backend.startswith("c"),
                         f"{backend} active", "pip install -e . (builds brainbot._kernel)"))
    vec_ok, vec_detail = store.vec_available()
    checks.append(_check("sqlite-vec", vec_ok, vec_detail, "pip install sqlite-vec"))
    checks.extend(_db_checks(db_path))
    return checks

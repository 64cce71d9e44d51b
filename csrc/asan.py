"""Run the kernel tests against a sanitizer build of the C core (`make asan`).

Builds brainbot._kernel from csrc/ with AddressSanitizer and UndefinedBehaviorSanitizer
(plus float-cast-overflow, which -fsanitize=undefined leaves out in GCC) into
build/asan/, then runs pytest on tests/test_kernel.py in a Python that has libasan
preloaded (the interpreter itself is not instrumented, so the ASan runtime must be
loaded before anything else) and imports that build instead of the in-place one. Any
sanitizer report aborts the run with a non-zero status.

Not done: LeakSanitizer (CPython keeps objects alive until exit, so it reports noise;
the C core frees its scratch inside each call, which the address checks cover), and
MemorySanitizer / ThreadSanitizer (they need clang or an instrumented interpreter).

    python csrc/asan.py [pytest args]      # from the project root, in the venv
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.join(ROOT, "build", "asan")
SANITIZE = "-fsanitize=address,undefined,float-cast-overflow"
# -O1 keeps stack traces readable; no recovery, so a UBSan finding fails the run.
FLAGS = [SANITIZE, "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g", "-O1"]
ENV = {
    "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:strict_string_checks=1",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
    "PYTHONMALLOC": "malloc",  # Python objects through malloc too, so ASan sees them
}
ENV_MARK = "BRAINBOT_ASAN_KERNEL"


def build() -> str:
    """Compile the sanitizer build; returns the path of the extension module."""
    sys.path.insert(0, HERE)
    import build_kernel

    ffi = build_kernel.make_builder(FLAGS, [SANITIZE], absolute=True)
    os.makedirs(BUILD, exist_ok=True)
    return ffi.compile(tmpdir=BUILD, verbose=False)


def runtime() -> str:
    """The ASan runtime library of the compiler that built the module."""
    cc = os.environ.get("CC", "gcc")
    path = subprocess.run(
        [cc, "-print-file-name=libasan.so"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if not os.path.isabs(path):  # the compiler echoes the bare name when it has none
        sys.exit(f"{cc} has no libasan.so: install the compiler's sanitizer runtime")
    return path


def run_tests(module: str, pytest_args: list[str]) -> int:
    """In the preloaded child: import the sanitizer build as brainbot._kernel, then test."""
    with open("/proc/self/maps", encoding="utf-8") as maps:
        if "libasan" not in maps.read():
            sys.exit("libasan is not loaded: run through `make asan`, not directly")
    sys.path.insert(0, ROOT)  # this checkout's brainbot, whatever is installed
    spec = importlib.util.spec_from_file_location("brainbot._kernel", module)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["brainbot._kernel"] = mod
    spec.loader.exec_module(mod)
    from brainbot.kernel import native as kernel

    assert kernel.available() and kernel._lib is mod.lib, "not the sanitizer build"
    print(f"asan: testing {module} ({kernel.backend()})", flush=True)
    import pytest

    args = pytest_args or ["-q", "-m", "not slow", "tests/test_kernel.py"]
    # --capture=sys: pytest's default fd capture would swallow a sanitizer report, which
    # the C runtime writes straight to fd 2 just before it aborts the process.
    return pytest.main(["-p", "no:cacheprovider", "--capture=sys", *args])


def main() -> int:
    os.chdir(ROOT)
    if os.environ.get(ENV_MARK):
        return run_tests(os.environ[ENV_MARK], sys.argv[1:])
    module = build()
    env = dict(os.environ, **ENV, LD_PRELOAD=runtime())
    env[ENV_MARK] = module
    return subprocess.run([sys.executable, __file__, *sys.argv[1:]], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())

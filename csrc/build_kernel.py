"""cffi build script for brainbot._kernel (out-of-line API mode).

The cdef is read from csrc/kernel.h (the text between BB_CDEF_BEGIN and BB_CDEF_END, with
comments stripped), so the header is the one place the C API is declared. setup.py
points at `ffibuilder` here (`pip install -e .` or `python setup.py build_ext --inplace`);
`python csrc/build_kernel.py` also builds in place.

Flags: -O3 and no -march: SIMD paths are chosen at run time (csrc/dispatch.c), so a
built wheel runs on any CPU of its architecture. -ffp-contract=off keeps the compiler
from fusing a*b+c on its own, so each path computes exactly the float operations its
source spells out (the BM25 scores of C and numpy are then bit-identical).
"""

from __future__ import annotations

import os
import re
import shutil
import sys

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SOURCES = [
    "dispatch.c",
    "topk.c",
    "scan.c",
    "cosine.c",
    "quant.c",
    "bm25.c",
    "fuse.c",
    "probe.c",
    "simd_scalar.c",
    "simd_avx2.c",
    "simd_neon.c",
]


def read_cdef(header: str) -> str:
    """The declarations between the BB_CDEF markers of kernel.h, comments removed."""
    with open(header, encoding="utf-8") as f:
        text = f.read()
    match = re.search(r"/\* BB_CDEF_BEGIN \*/(.*)/\* BB_CDEF_END \*/", text, re.S)
    if match is None:
        raise RuntimeError(f"{header}: BB_CDEF_BEGIN/BB_CDEF_END markers not found")
    body = re.sub(r"/\*.*?\*/", "", match.group(1), flags=re.S)
    return re.sub(r"//[^\n]*", "", body)


def _path(name: str) -> str:
    # setuptools wants source paths relative to the project root, which is the cwd of
    # setup.py / pip; run as a script (cffi compiles inside build/), absolute paths.
    full = os.path.join(HERE, name)
    if __name__ != "__main__" and os.path.abspath(os.getcwd()) == ROOT:
        return os.path.relpath(full, ROOT)
    return full


def _compile_args() -> list[str]:
    if sys.platform == "win32":  # MSVC: not a supported target (pthreads, GCC builtins)
        return ["/O2"]
    return ["-O3", "-std=c11", "-ffp-contract=off", "-fno-math-errno", "-pthread"]


def make_builder(extra_compile_args=(), extra_link_args=(), absolute=False) -> FFI:
    """The cffi builder for brainbot._kernel; the extra flags come after the defaults
    (csrc/asan.py adds the sanitizers). absolute=True: absolute source paths, for a
    compile outside setuptools (cffi then compiles inside its tmpdir)."""
    where = (lambda name: os.path.join(HERE, name)) if absolute else _path
    ffi = FFI()
    ffi.cdef(read_cdef(os.path.join(HERE, "kernel.h")))
    ffi.set_source(
        "brainbot._kernel",
        '#include "kernel.h"',
        sources=[where(name) for name in SOURCES],
        include_dirs=[where("")],
        extra_compile_args=_compile_args() + list(extra_compile_args),
        extra_link_args=([] if sys.platform == "win32" else ["-pthread"]) + list(extra_link_args),
        libraries=[] if sys.platform == "win32" else ["m"],
    )
    return ffi


if __name__ == "__main__":  # run as a script: build in place from the project root
    os.chdir(ROOT)

ffibuilder = make_builder()

if __name__ == "__main__":  # objects stay under build/; only the module is copied out
    built = ffibuilder.compile(tmpdir="build", verbose=False)
    # Copy next to the target, then rename: a process importing the module meanwhile
    # sees the old file or the new one, never a half-written one.
    target = os.path.join("brainbot", os.path.basename(built))
    tmp = target + ".tmp"
    shutil.copy(built, tmp)
    os.replace(tmp, target)

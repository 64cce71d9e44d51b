"""The C core on CPUs other than this one, under qemu-user (Debian's `qemu-user`, which
`make test` installs when it can): a Haswell (AVX2 + FMA, no AVX-512) runs the AVX2 path,
a Nehalem (no AVX) the scalar twin. Each must give the same bytes as the same path here:
an instruction this host has and theirs lacks dies with SIGILL, and a result that only
this CPU produces shows as a difference (issue #19: a fresh clone on an EPYC without
AVX-512 failed 44 tests that passed here).

numpy's own kernels are not trusted under emulation (its top-k of a matrix product came
out wrong under `-cpu Haswell`), so the child only calls brainbot's C core and the
comparison is made here. Skips where qemu-x86_64 is missing (fails instead under
BRAINBOT_REQUIRE_QEMU=1, which .ci/run sets) or the host is not x86-64.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

QEMU = shutil.which("qemu-x86_64")


@pytest.fixture(autouse=True)
def _qemu():
    """Skip without qemu-x86_64 on x86-64, or fail under BRAINBOT_REQUIRE_QEMU=1 (.ci/run)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("an x86-64 host emulates x86-64 CPUs here")
    if QEMU is None:
        reason = "qemu-x86_64 (Debian's qemu-user) is not installed"
        if os.environ.get("BRAINBOT_REQUIRE_QEMU") == "1":
            pytest.fail(f"BRAINBOT_REQUIRE_QEMU=1 but {reason}")
        pytest.skip(reason)

CHILD = """
import sys
import numpy as np
from brainbot.kernel import native as K

rng = np.random.default_rng(7)
m = rng.standard_normal((6000, 384)).astype(np.float32)
m /= np.linalg.norm(m, axis=1, keepdims=True)
qs = rng.standard_normal((4, 384)).astype(np.float32)
mask = (rng.random(6000) > 0.3).astype(np.uint8)
codes, scales = K.quantize_int8(m)
out = {"backend": np.frombuffer(K.backend().encode(), np.uint8), "codes": codes.view(np.uint8)}
for t in (1, 2):
    parts = [K.cosine_topk(m, qs[0], 10, threads=t), K.cosine_topk(m, qs, 10, threads=t),
             K.cosine_topk(m, qs[1], 10, mask=mask, threads=t),
             K.cosine_topk(m, qs[2], 1500, threads=t),
             K.cosine_topk_int8(codes, scales, m, qs[3], 10, threads=t)]
    for j, (ids, scores) in enumerate(parts):
        out[f"{t}-{j}"] = np.concatenate([ids.view(np.uint8).ravel(),
                                          scores.view(np.uint8).ravel()])
out["sums"] = np.array([K.stream_sum(m, streams=s) for s in (2, 4)])
np.savez(sys.argv[1], **out)
"""


def _run(tmp_path: Path, name: str, prefix: list[str], simd: str) -> dict:
    path = tmp_path / f"{name}.npz"
    env = {**os.environ, "BRAINBOT_SIMD": simd, "OPENBLAS_NUM_THREADS": "1"}
    if prefix:
        # OpenBLAS (loaded by numpy's import) picks its kernels by its own CPU detection,
        # which under `qemu-x86_64 -cpu Nehalem` on an AMD EPYC (Zen 5) host chose an AVX
        # core and died with SIGILL before the child ran (numpy 2.4.6, scipy-openblas).
        # The child never calls BLAS; the core type named is the emulated CPU.
        env["OPENBLAS_CORETYPE"] = name
    proc = subprocess.run([*prefix, sys.executable, "-c", CHILD, str(path)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{name}: exit {proc.returncode}\n{proc.stderr[-2000:]}"
    with np.load(path) as got:
        return {k: got[k] for k in got.files}


@pytest.mark.parametrize(("cpu", "simd", "backend"), [
    ("Haswell", "auto", "c/avx2-fma"),
    ("Nehalem", "auto", "c/scalar"),
])
def test_another_cpu_gives_the_same_bytes(tmp_path, cpu, simd, backend):
    here = _run(tmp_path, "here", [], "auto" if backend != "c/scalar" else "scalar")
    if bytes(here["backend"]).decode() != backend:
        pytest.skip(f"this host runs {bytes(here['backend']).decode()}, not {backend}")
    there = _run(tmp_path, cpu, [QEMU, "-cpu", cpu], simd)
    assert bytes(there["backend"]).decode() == backend
    differ = [k for k in here if k != "backend" and not np.array_equal(here[k], there[k])]
    assert not differ, f"{cpu}: {differ} differ from this host's {backend}"

"""How many threads a scan asks the C kernel for: its own rule, unless the CPUs are busy.

The kernel's automatic rule (csrc/dispatch.c) fans a scan out to the CPUs from 12 MB on,
measured on idle machines. When every CPU is already busy, a second thread waits for a
core instead, and the call waits for it: on the 2-vCPU Zen 1 host, at a load average of
13-17, two threads made one f32 query over 5k-20k rows (7.7-31 MB) 23-72x slower and an
int8 one over 50k rows (19 MB) 1.6x slower, while over 100k rows (int8 38 MB, f32 154 MB)
two threads were still faster (0.70x, 0.85x); through `brainbot mcp` at 10k chunks (15 MB)
and a load average of 2.4-3, one thread scanned in 1.5 ms against 3.3-5.0 (medians). So
below LOADED_MIN_BYTES a scan runs on one thread while the 1-minute load average is at
least the CPU count; otherwise the kernel decides. Results do not depend on it: the
kernels are bit-identical for any thread count.
"""

from __future__ import annotations

import os

LOADED_MIN_BYTES = 32 * 1024 * 1024


def scan_threads(nbytes: int) -> int:
    """0 (the kernel's rule) or 1: for a scan reading ``nbytes`` per query."""
    if nbytes >= LOADED_MIN_BYTES:
        return 0
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average on this system
        return 0
    return 1 if load >= (os.cpu_count() or 1) else 0

"""The load-aware thread choice (brainbot/kernel/load.py) and the vector leg that uses it:
one thread for a small scan while every CPU is busy, the kernel's rule otherwise, the
same answer either way. No timing is asserted: the rule's reason is measured, not tested."""

from __future__ import annotations

import os

import numpy as np
import pytest

from brainbot.kernel import load

CPUS = os.cpu_count() or 1


def fake_load(monkeypatch, value):
    def getloadavg():
        if value is None:
            raise OSError("no load average")
        return (value, value, value)

    monkeypatch.setattr(load.os, "getloadavg", getloadavg)


@pytest.mark.parametrize("value, nbytes, want", [
    (CPUS, 1, 1), (CPUS + 3.5, load.LOADED_MIN_BYTES - 1, 1),
    (CPUS - 0.01, 1, 0), (0.0, 15 << 20, 0),
    (CPUS * 10, load.LOADED_MIN_BYTES, 0), (CPUS * 10, 10**12, 0), (None, 1, 0)])
def test_scan_threads(monkeypatch, value, nbytes, want):
    fake_load(monkeypatch, value)
    assert load.scan_threads(nbytes) == want


class Spy:
    """The kernel module, recording the threads each scan asked for."""

    def __init__(self, kern) -> None:
        self.kern, self.threads = kern, []

    def __getattr__(self, name):
        fn = getattr(self.kern, name)
        if not name.startswith("cosine_topk"):
            return fn

        def call(*args, **kwargs):
            self.threads.append(kwargs.get("threads", 0))
            return fn(*args, **kwargs)

        return call


@pytest.mark.parametrize("int8", [False, True])
def test_the_vector_leg_asks_for_one_thread_under_load(examples_db, monkeypatch, int8):
    from brainbot.kernel import int8_scan
    from brainbot.kernel import native as K
    from brainbot.store.sqlite import arrays
    from brainbot.store.target import open_store

    if int8 and not K.available():
        pytest.skip("brainbot._kernel is not built")
    monkeypatch.setattr(int8_scan, "POOL", 8)
    monkeypatch.setattr(arrays, "INT8_SCAN_MIN_ROWS", 0 if int8 else 10**9)
    monkeypatch.setattr(arrays, "INT8_AFTER_SCANS", 0)
    with open_store(examples_db) as store:
        index = store.index
        index.sync(store.generation())
        index.kernel = spy = Spy(index.kernel)
        m = index.ensure_matrix()
        q = m[len(m) // 2] + 0.1
        answers = {}
        for value, want in ((CPUS, 1), (0.0, 0), (CPUS * 4, 1)):
            fake_load(monkeypatch, value)
            spy.threads.clear()
            answers[value] = index.cosine(q, 5)
            assert spy.threads and set(spy.threads) == {want}, (value, spy.threads)
        assert (index.int8 is not None) == int8
        for ids, scores in answers.values():
            np.testing.assert_array_equal(ids, answers[0.0][0])
            np.testing.assert_array_equal(scores, answers[0.0][1])

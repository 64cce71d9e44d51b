"""Waiting on something another thread or process is doing, for every test that does.

A test that waits on a background phase (a watch's pass, the semantic phase, a server
starting, a process ending) waits for a condition, never for a fixed time: the condition
is polled, and "not ready yet" is not a failure. Not ready is a false value (None, 0, an
empty list, a row not written yet), or one of the transient exceptions a half-done state
raises (a store busy with a writer, a file not written yet, a value still None that the
check dereferences: TypeError, AttributeError). Only the time limit fails the test, and
it is generous, because CI hosts are shared and slower than a laptop (issue 32: a test
that passed here failed on a slower host when a snapshot raised on a vector not yet
written).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from brainbot.errors import StoreError

T = TypeVar("T")

# The limit of every wait: a bound on a hang, not a measurement. A save is normally
# seen in well under 2 s; a shared CI host under a CPU hog has taken 10x that.
WAIT_S = 60.0
POLL_S = 0.05
# What a half-done state raises while it is being checked: a store a writer holds or is
# creating (StoreError covers StoreBusyError and "no index yet"), a file not there yet, a
# None not filled in yet.
NOT_YET = (StoreError, OSError, TypeError, AttributeError, KeyError, IndexError, ValueError)


def wait_until(condition: Callable[[], T], what: str, timeout: float = WAIT_S,
               transient: tuple[type[BaseException], ...] = NOT_YET,
               alive: Callable[[], object] | None = None) -> T:
    """Poll ``condition`` until it returns a true value, and return that value. Its
    ``transient`` exceptions count as not yet (the last one is shown if the time runs
    out). ``alive``, when given, is called each round and may raise (a process that
    ended early) to fail at once instead of at the limit."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = condition()
        except transient as exc:
            value, last = None, exc
        if value:
            return value
        if alive is not None:
            alive()
        if time.monotonic() >= deadline:
            detail = f" (last: {type(last).__name__}: {last})" if last is not None else ""
            raise AssertionError(f"not within {timeout:.0f} s: {what}{detail}")
        time.sleep(POLL_S)


def still_running(*procs) -> Callable[[], None]:
    """An ``alive`` check: fails with a process's output when it has ended."""
    def check() -> None:
        for proc in procs:
            if proc.poll() is not None:
                out, err = proc.communicate()
                raise AssertionError(f"process ended early ({proc.returncode}): {err or out}")
    return check


async def until(condition, what: str, timeout: float = WAIT_S,
                transient: tuple[type[BaseException], ...] = NOT_YET):
    """``wait_until`` for a coroutine function (an MCP client session's calls)."""
    import anyio

    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = await condition()
        except transient as exc:
            value, last = None, exc
        if value:
            return value
        if time.monotonic() >= deadline:
            detail = f" (last: {type(last).__name__}: {last})" if last is not None else ""
            raise AssertionError(f"not within {timeout:.0f} s: {what}{detail}")
        await anyio.sleep(POLL_S * 4)

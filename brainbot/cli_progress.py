"""`brainbot index`'s progress bars, drawn from the indexer's progress callbacks.

The indexer only reports: ``progress(done, total)`` per file of the lexical phase and
``embed_progress(done, total)`` per chunk of the semantic phase. This module turns those
calls into a tqdm bar with an ETA on a terminal (nothing when stderr is not one, so piped
and --json output stay clean).
"""

from __future__ import annotations

import sys
from collections.abc import Callable


def progress_printer(stream=None, unit: str = "file") -> Callable[[int, int], None] | None:
    """A tqdm progress bar with ETA when ``stream`` (stderr) is a terminal, else None.
    It is called with (done, total): ``unit="chunk"`` for the semantic phase."""
    stream = stream or sys.stderr  # looked up now: tests and tools swap sys.stderr
    if not stream.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    bar = {"bar": None}

    def update(done: int, total: int) -> None:
        if bar["bar"] is None:
            bar["bar"] = tqdm(total=total, unit=unit, file=stream, leave=False,
                              mininterval=0.5, desc="embedding" if unit == "chunk" else None)
        bar["bar"].update(max(0, done - bar["bar"].n))
        if done >= total:
            bar["bar"].close()

    return update

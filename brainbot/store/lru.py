"""A bounded least-recently-used cache, for what a long-lived reader keeps per query shape
(the SQLite store's filter masks, the Postgres legs' filtered documents): an agent that
varies its filters against a quiet index must not grow the server's memory without end."""

from __future__ import annotations

from collections import OrderedDict

FILTER_CACHE = 64  # distinct filters a reader keeps (the SQLite mask is a byte a chunk)


class LRU(OrderedDict):
    """A dict of at most ``size`` entries; reading or writing one makes it the newest,
    and a write past ``size`` drops the oldest."""

    def __init__(self, size: int = FILTER_CACHE) -> None:
        super().__init__()
        self.size = size

    def get(self, key, default=None):
        if key not in self:
            return default
        self.move_to_end(key)
        return self[key]

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)

"""Redis-backed checkpoint of the reducer: its state, pickled, with the society-topic position it
covers, so a restarted or newly assigned reducer replays only the messages after it instead of
the whole retained topic.

One hash ``{prefix}:reducer:checkpoint`` = {``offset``: next society offset to apply,
``anchor``: SHA-256 of the raw message just before it, ``version``, ``state``}, written with one
HSET, so a reader sees an old or a new checkpoint whole. A checkpoint is used only when
``version`` matches (``streams.reducer.state_version``: a hash of the engines' code and
configuration, so another version's objects, which may not fit, are never loaded) and the
society topic still holds the same message at ``offset - 1`` (a recreated topic, e.g. the
embedded broker keeps no data across restarts, starts over at offset 0: an old checkpoint's
position would skip its first messages). Otherwise the reducer rebuilds
from the topic. The state is a pickle: Redis is moltscope's own store, trusted as the worker.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis


def anchor_of(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True, slots=True)
class Saved:
    offset: int
    size: int


class ReducerCheckpoint:
    """Save and load the reducer's checkpoint; ``version`` tells compatible states apart."""

    def __init__(self, client: redis.Redis, prefix: str, version: str) -> None:
        self.r = client
        self.key = f"{prefix}:reducer:checkpoint"
        self.version = version

    def save(self, offset: int, last_raw: bytes, state: object) -> Saved:
        """Checkpoint ``state`` as of society offset ``offset`` (``last_raw`` = the raw message at
        ``offset - 1``, the last one applied)."""
        blob = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
        self.r.hset(self.key, mapping={"offset": offset, "anchor": anchor_of(last_raw),
                                       "version": self.version, "state": blob})
        return Saved(offset, len(blob))

    def load(self, raw_at: Callable[[int], bytes | None]) -> tuple[int, Any] | None:
        """(offset, state) of a checkpoint that fits this code and this topic, else None.
        ``raw_at(offset)`` reads the society topic's raw message at ``offset`` (None if gone)."""
        saved = self.r.hgetall(self.key)  # one read: a concurrent save cannot mix in
        if not saved or saved.get(b"version", b"").decode() != self.version:
            return None
        offset = int(saved[b"offset"])
        raw = raw_at(offset - 1)
        if raw is None or anchor_of(raw) != saved[b"anchor"].decode():
            return None
        return offset, pickle.loads(saved[b"state"])

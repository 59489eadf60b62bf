"""Redis-backed checkpoint of the reducer: its state, pickled, with the society-topic position it
covers, so a restarted or newly assigned reducer replays only the messages after it instead of
the whole retained topic.

The pickle is streamed in chunks of ``chunk_bytes`` (16 MB): it is never held whole, neither
while saved (a Moltbook peak day's state pickles to ~2 GB, which would double the worker's
memory and exceed Redis's 512 MB limit on one value) nor while loaded. Two slots of chunks,
``{prefix}:reducer:checkpoint:{a|b}:{i}``; a save writes the slot the header does not name, then
switches the header ``{prefix}:reducer:checkpoint`` = {``offset``: next society offset to apply,
``anchor``: SHA-256 of the raw message just before it, ``version``, ``slot``, ``chunks``,
``size``, ``digest``: SHA-256 of the pickle} with one HSET, so a reader sees an old or a new
checkpoint whole; a save that dies half-way leaves the header on the previous checkpoint. A
reader that loses a race with a save (its slot rewritten under it) finds the digest wrong and
rebuilds, as it does without a checkpoint.

A checkpoint is used only when ``version`` matches (``streams.reducer.state_version``: a hash of
the engines' code and configuration, so another version's objects, which may not fit, are never
loaded) and the society topic still holds the same message at ``offset - 1`` (a recreated topic,
e.g. the embedded broker keeps no data across restarts, starts over at offset 0: an old
checkpoint's position would skip its first messages). Otherwise the reducer rebuilds from the
topic. The state is a pickle: Redis is moltscope's own store, trusted as the worker.
"""

from __future__ import annotations

import hashlib
import io
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

CHUNK_BYTES = 16 * 1024 * 1024
SLOTS = ("a", "b")


def anchor_of(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True, slots=True)
class Saved:
    offset: int
    size: int


class _ChunkWriter(io.RawIOBase):
    """The pickler's file: full chunks go to Redis as they fill (the pickler writes ~64 KB
    frames), so at most one chunk is held."""

    def __init__(self, r: redis.Redis, key: str, chunk_bytes: int) -> None:
        self.r, self.key, self.chunk_bytes = r, key, chunk_bytes
        self.buf = bytearray()
        self.chunks = self.size = 0
        self.digest = hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        data = memoryview(b).cast("B")
        self.buf += data
        self.size += len(data)
        self.digest.update(data)
        while len(self.buf) >= self.chunk_bytes:
            self._put(bytes(self.buf[:self.chunk_bytes]))
            del self.buf[:self.chunk_bytes]
        return len(data)

    def finish(self) -> None:
        if self.buf:
            self._put(bytes(self.buf))
            self.buf.clear()

    def _put(self, chunk: bytes) -> None:
        self.r.set(f"{self.key}:{self.chunks}", chunk)
        self.chunks += 1


class _ChunkReader(io.RawIOBase):
    """The unpickler's raw file: one chunk fetched at a time, hashed as it is read."""

    def __init__(self, r: redis.Redis, key: str, chunks: int) -> None:
        self.r, self.key, self.chunks = r, key, chunks
        self.next = 0
        self.chunk = memoryview(b"")
        self.pos = 0
        self.digest = hashlib.sha256()
        self.missing = False

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while self.pos == len(self.chunk):
            if self.next == self.chunks:
                return 0
            data = self.r.get(f"{self.key}:{self.next}")
            self.next += 1
            if data is None:  # rewritten or deleted under us: end early, the digest says so
                self.missing = True
                return 0
            self.digest.update(data)
            self.chunk, self.pos = memoryview(data), 0
        n = min(len(b), len(self.chunk) - self.pos)
        b[:n] = self.chunk[self.pos:self.pos + n]
        self.pos += n
        return n


class ReducerCheckpoint:
    """Save and load the reducer's checkpoint; ``version`` tells compatible states apart."""

    def __init__(self, client: redis.Redis, prefix: str, version: str,
                 chunk_bytes: int = CHUNK_BYTES) -> None:
        if chunk_bytes <= 0:
            raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
        self.r = client
        self.key = f"{prefix}:reducer:checkpoint"
        self.version = version
        self.chunk_bytes = chunk_bytes

    def save(self, offset: int, last_raw: bytes, state: object) -> Saved:
        """Checkpoint ``state`` as of society offset ``offset`` (``last_raw`` = the raw message at
        ``offset - 1``, the last one applied)."""
        current = self.r.hget(self.key, "slot")
        slot = SLOTS[1] if current == SLOTS[0].encode() else SLOTS[0]
        self._clear(slot)  # what a save that died half-way left there
        out = _ChunkWriter(self.r, f"{self.key}:{slot}", self.chunk_bytes)
        pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(state)
        out.finish()
        self.r.hset(self.key, mapping={"offset": offset, "anchor": anchor_of(last_raw),
                                       "version": self.version, "slot": slot,
                                       "chunks": out.chunks, "size": out.size,
                                       "digest": out.digest.hexdigest()})
        self._clear(SLOTS[1] if slot == SLOTS[0] else SLOTS[0])  # the previous one: superseded
        return Saved(offset, out.size)

    def load(self, raw_at: Callable[[int], bytes | None]) -> tuple[int, Any] | None:
        """(offset, state) of a checkpoint that fits this code and this topic, else None.
        ``raw_at(offset)`` reads the society topic's raw message at ``offset`` (None if gone)."""
        head = self.r.hgetall(self.key)  # one read: a concurrent header switch cannot mix in
        if (not head or head.get(b"version", b"").decode() != self.version
                or b"digest" not in head):  # nothing saved, or an older layout's checkpoint
            return None
        offset = int(head[b"offset"])
        raw = raw_at(offset - 1)
        if raw is None or anchor_of(raw) != head[b"anchor"].decode():
            return None
        raw_file = _ChunkReader(self.r, f"{self.key}:{head[b'slot'].decode()}",
                               int(head[b"chunks"]))
        buffered = io.BufferedReader(raw_file, buffer_size=1 << 20)
        failure: Exception | None = None
        try:
            state = pickle.load(buffered)
        except Exception as e:  # judged below: a lost race, or a real error
            failure = e
        buffered.read()  # the rest of the chunks, into the digest
        if raw_file.missing or raw_file.digest.hexdigest() != head[b"digest"].decode():
            return None  # a save rewrote the slot while it was read
        if failure is not None:
            raise failure
        return offset, state

    def _clear(self, slot: str) -> None:
        keys = list(self.r.scan_iter(match=f"{self.key}:{slot}:*", count=1000))
        if keys:
            self.r.delete(*keys)

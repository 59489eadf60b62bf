"""Redis-backed checkpoint of the Moltbook crawler: where discovery stands and what it revisits.

Keys under ``prefix`` (default ``moltscope:crawler``):

- ``{prefix}:discovery`` string: JSON of the discovery walk (cursor/offset, watermark, timers);
- ``{prefix}:posts`` hash: post id -> JSON of its revisit state (schedule, last vote counts,
  ids and counts of the comments seen). Holds only posts in the revisit queue, so it is
  bounded by the posts created within the crawler's horizon;
- ``{prefix}:seen`` set: names ``agent:<name>`` / ``submolt:<name>`` whose entity event was
  emitted (or is pending a profile fetch): bounded by the platform's agents and submolts;
- ``{prefix}:pending`` hash: agent name -> fallback AgentEvent JSON ("" if none) of authors
  whose profile is still to fetch;
- ``{prefix}:progress`` string: JSON of the crawl's progress (what the API's
  ``GET /v1/crawler`` and the live page show: posts tracked, comment deficit, backfill, capture
  ratio, requests), rewritten with every commit; not part of the checkpoint proper.

Every :meth:`CheckpointStore.commit` is one MULTI/EXEC transaction, so a crawler killed at any
point leaves either the old or the new checkpoint, never a mix.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis


@dataclass
class Checkpoint:
    """What a crawler restores on start; empty on a first start."""

    discovery: dict[str, Any] = field(default_factory=dict)
    posts: dict[str, dict[str, Any]] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    pending: dict[str, str] = field(default_factory=dict)


class CheckpointStore:
    """Load and atomically update the crawler's checkpoint in Redis."""

    def __init__(self, client: redis.Redis, prefix: str = "moltscope:crawler") -> None:
        self._r = client
        self._k = {n: f"{prefix}:{n}" for n in ("discovery", "posts", "seen", "pending")}
        self._progress = f"{prefix}:progress"

    def load(self) -> Checkpoint:
        def text(v: bytes | str) -> str:
            return v.decode() if isinstance(v, bytes) else v

        raw = self._r.get(self._k["discovery"])
        return Checkpoint(
            discovery=json.loads(raw) if raw else {},
            posts={text(k): json.loads(v) for k, v in self._r.hgetall(self._k["posts"]).items()},
            seen={text(m) for m in self._r.smembers(self._k["seen"])},
            pending={text(k): text(v) for k, v in self._r.hgetall(self._k["pending"]).items()},
        )

    def commit(
        self,
        *,
        discovery: Mapping[str, Any] | None = None,
        put_posts: Mapping[str, Mapping[str, Any]] | None = None,
        drop_posts: Iterable[str] = (),
        add_seen: Iterable[str] = (),
        add_pending: Mapping[str, str] | None = None,
        done_pending: Iterable[str] = (),
        progress: Mapping[str, Any] | None = None,
    ) -> None:
        """Apply one unit of crawler progress in a single transaction."""
        pipe = self._r.pipeline(transaction=True)
        if progress is not None:
            pipe.set(self._progress, json.dumps(progress))
        if discovery is not None:
            pipe.set(self._k["discovery"], json.dumps(discovery))
        if put_posts:
            pipe.hset(
                self._k["posts"],
                mapping={k: json.dumps(v, separators=(",", ":")) for k, v in put_posts.items()},
            )
        if drop := list(drop_posts):
            pipe.hdel(self._k["posts"], *drop)
        if seen := list(add_seen):
            pipe.sadd(self._k["seen"], *seen)
        if add_pending:
            pipe.hset(self._k["pending"], mapping=dict(add_pending))
        if done := list(done_pending):
            pipe.hdel(self._k["pending"], *done)
        pipe.execute()

    def progress(self) -> dict[str, Any] | None:
        """The crawl's progress as last committed (None: no crawler has reported)."""
        raw = self._r.get(self._progress)
        return json.loads(raw) if raw else None

    def clear(self) -> None:
        self._r.delete(*self._k.values(), self._progress)

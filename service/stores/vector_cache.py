"""Redis-backed vector cache for the embedding stage (see ``streams.embedding.VectorCache``).

Keys are ``<prefix><content hash>``; values are the raw float32 bytes of the unit vector
(1,536 bytes for 384 dims, plus Redis's ~70 bytes of key overhead). ``ttl_seconds`` bounds how
long a text's vector is kept (default 7 days: verbatim duplicates on Moltbook come in bursts);
``None`` keeps them until Redis evicts (run Redis with ``maxmemory`` and an LRU policy).
The prefix names the model and the text rule, so a change of either never reads stale vectors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import redis

DEFAULT_PREFIX = "moltscope:vec:all-MiniLM-L6-v2:2048:"


class RedisVectorCache:
    """get_many / set_many of vector bytes in Redis, one round trip each (MGET, pipelined SET)."""

    def __init__(self, client: redis.Redis, *, prefix: str = DEFAULT_PREFIX,
                 ttl_seconds: int | None = 7 * 24 * 3600) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl_seconds = ttl_seconds

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        values = self.client.mget([self.prefix + k for k in keys])
        return [v if v is None else bytes(v) for v in values]

    def set_many(self, items: Mapping[str, bytes]) -> None:
        if not items:
            return
        pipe = self.client.pipeline(transaction=False)
        for k, v in items.items():
            pipe.set(self.prefix + k, v, ex=self.ttl_seconds)
        pipe.execute()

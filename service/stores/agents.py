"""Per-agent values the API serves (never Prometheus labels): PageRank and rank in the window
and cumulative graphs, super-node records, roles.

Keys (prefix ``moltscope``): ``:pagerank:window`` and ``:pagerank:cumulative`` sorted sets
agent -> PageRank (rank = ``ZREVRANK`` + 1); ``:supernodes`` hash agent -> record JSON;
``:roles`` hash agent -> role (0 = the periphery). Each is replaced whole and atomically
(written under a temporary key, then renamed), so a reader never sees half a vector.
Memory: about 100 bytes an agent a sorted set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import redis

from streams.reducer import AgentValues

Graph = Literal["window", "cumulative"]


class AgentStore:
    def __init__(self, client: redis.Redis, prefix: str = "moltscope") -> None:
        self.r = client
        self.p = prefix

    def _replace(self, key: str, kind: Literal["zset", "hash"], mapping: Mapping[str, Any]) -> None:
        tmp = f"{key}:next"
        pipe = self.r.pipeline(transaction=True)
        pipe.delete(tmp)
        if mapping:
            if kind == "zset":
                pipe.zadd(tmp, dict(mapping))
            else:
                pipe.hset(tmp, mapping={k: json.dumps(v) for k, v in mapping.items()})
            pipe.rename(tmp, key)
        else:
            pipe.delete(key)
        pipe.execute()

    def write(self, values: AgentValues) -> None:
        """Replace every per-agent value with the reducer's latest."""
        self._replace(f"{self.p}:pagerank:window", "zset", values.window)
        self._replace(f"{self.p}:pagerank:cumulative", "zset", values.cumulative)
        self._replace(f"{self.p}:supernodes", "hash", values.supernodes)
        self._replace(f"{self.p}:roles", "hash", values.roles)

    def top(self, graph: Graph, k: int) -> list[dict[str, Any]]:
        rows = self.r.zrevrange(f"{self.p}:pagerank:{graph}", 0, k - 1, withscores=True)
        return [{"agent": a.decode(), "rank": i + 1, "pagerank": s}
                for i, (a, s) in enumerate(rows)]

    def agent(self, name: str) -> dict[str, Any] | None:
        pipe = self.r.pipeline(transaction=False)
        for graph in ("window", "cumulative"):
            pipe.zrevrank(f"{self.p}:pagerank:{graph}", name)
            pipe.zscore(f"{self.p}:pagerank:{graph}", name)
            pipe.zcard(f"{self.p}:pagerank:{graph}")
        pipe.hget(f"{self.p}:supernodes", name)
        pipe.hget(f"{self.p}:roles", name)
        w_rank, w_score, w_n, c_rank, c_score, c_n, record, role = pipe.execute()
        if w_rank is None and c_rank is None and record is None and role is None:
            return None

        def graph_view(rank: int | None, score: float | None, n: int) -> dict[str, Any] | None:
            return None if rank is None else {"rank": rank + 1, "pagerank": score, "of": n}

        return {"agent": name, "window": graph_view(w_rank, w_score, w_n),
                "cumulative": graph_view(c_rank, c_score, c_n),
                "supernode_history": json.loads(record) if record else None,
                "role": None if role is None else int(json.loads(role))}

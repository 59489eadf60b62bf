"""Per-agent values the API serves (never Prometheus labels): PageRank and rank in the window
and cumulative graphs, super-node records, roles.

Keys (prefix ``moltscope``): ``:pagerank:window`` and ``:pagerank:cumulative`` sorted sets
agent -> PageRank (rank = ``ZREVRANK`` + 1); ``:supernodes`` hash agent -> record JSON;
``:roles`` hash agent -> role (0 = the periphery); ``:coaction`` hash agent -> its co-action
in the lockstep detector's window (JSON). Each is replaced whole and atomically
(written under a temporary key, then renamed), so a reader never sees half a vector.
Memory: about 100 bytes an agent a sorted set.

The per-agent stage (:class:`AgentProfileStore`), written by each agents partition's owner:
``:agents:profiles:<partition>`` hash agent -> profile JSON (both planes; an agent's
partition is :func:`streams.agent_stage.agent_partition`), ``:agents:sort:<key>:<partition>``
sorted sets agent -> value, each replaced whole and atomically by its partition's owner, and
``:agents:sort:<key>`` their union (recomputed in the same transaction), which paging reads.
``:agents:society`` (:class:`SocietyStore`): the society inputs the reducer last handed out.
Memory: the profile JSON (~1 KB) and ~100 bytes a sort key, twice (partition and union), an
agent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import redis

from streams.agent_stage import AgentsReport, Society, agent_partition
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
        self._replace(f"{self.p}:coaction", "hash", values.coaction)

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
        pipe.hget(f"{self.p}:coaction", name)
        w_rank, w_score, w_n, c_rank, c_score, c_n, record, role, coaction = pipe.execute()
        if w_rank is None and c_rank is None and record is None and role is None:
            return None

        def graph_view(rank: int | None, score: float | None, n: int) -> dict[str, Any] | None:
            return None if rank is None else {"rank": rank + 1, "pagerank": score, "of": n}

        return {"agent": name, "window": graph_view(w_rank, w_score, w_n),
                "cumulative": graph_view(c_rank, c_score, c_n),
                "supernode_history": json.loads(record) if record else None,
                "role": None if role is None else int(json.loads(role)),
                "coaction": json.loads(coaction) if coaction else None}


class AgentProfileStore:
    def __init__(self, client: redis.Redis, prefix: str = "moltscope", partitions: int = 4) -> None:
        self.r = client
        self.p = prefix
        self.partitions = partitions

    def write(self, partition: int, report: AgentsReport) -> None:
        """Replace the partition's profiles and sort keys; refresh each key's union."""
        pipe = self.r.pipeline(transaction=True)
        self._replace(pipe, f"{self.p}:agents:profiles:{partition}",
                      {a: json.dumps(v, default=str) for a, v in report.profiles.items()}, "hash")
        for key, values in report.sort_keys.items():
            self._replace(pipe, f"{self.p}:agents:sort:{key}:{partition}", values, "zset")
            pipe.zunionstore(f"{self.p}:agents:sort:{key}",
                             [f"{self.p}:agents:sort:{key}:{k}" for k in range(self.partitions)])
        pipe.execute()

    @staticmethod
    def _replace(pipe: Any, key: str, mapping: Mapping[str, Any],
                 kind: Literal["zset", "hash"]) -> None:
        tmp = f"{key}:next"
        pipe.delete(tmp)
        if mapping:
            if kind == "hash":
                pipe.hset(tmp, mapping=dict(mapping))
            else:
                pipe.zadd(tmp, dict(mapping))
            pipe.rename(tmp, key)
        else:
            pipe.delete(key)

    def profile(self, name: str) -> dict[str, Any] | None:
        raw = self.r.hget(f"{self.p}:agents:profiles:{agent_partition(name, self.partitions)}",
                          name)
        return None if raw is None else json.loads(raw)

    def page(self, key: str, offset: int, limit: int, descending: bool = True
             ) -> tuple[int, list[dict[str, Any]]]:
        """(agents with the key, the page of rows: agent, rank, value, profile)."""
        zkey = f"{self.p}:agents:sort:{key}"
        pipe = self.r.pipeline(transaction=False)
        pipe.zcard(zkey)
        (pipe.zrevrange if descending else pipe.zrange)(zkey, offset, offset + limit - 1,
                                                         withscores=True)
        total, rows = pipe.execute()
        names = [a.decode() for a, _ in rows]
        pipe = self.r.pipeline(transaction=False)
        for a in names:
            pipe.hget(f"{self.p}:agents:profiles:{agent_partition(a, self.partitions)}", a)
        profiles = pipe.execute()
        return int(total), [
            {"agent": a, "rank": offset + i + 1, "value": float(v),
             "profile": None if prof is None else json.loads(prof)}
            for i, (a, (_, v), prof) in enumerate(zip(names, rows, profiles, strict=True))]


class SocietyStore:
    """The per-agent stage's society inputs, from the reducer to every agents partition."""

    def __init__(self, client: redis.Redis, prefix: str = "moltscope") -> None:
        self.r = client
        self.key = f"{prefix}:agents:society"

    def publish(self, society: Society) -> None:
        self.r.set(self.key, society.to_json())

    def latest(self) -> Society | None:
        raw = self.r.get(self.key)
        return None if raw is None else Society.from_json(raw)

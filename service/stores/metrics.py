"""What the API serves, kept in Redis: the latest snapshot, recent series, heartbeats, counters.

Keys (prefix ``moltscope``):
- ``:samples`` JSON list of the latest samples; ``:snapshot_at`` its time (unix seconds);
- ``:details`` hash, one JSON value a detail name (series, matrices, top-k lists);
- ``:series:<name>{labels}`` list of ``[t, value]`` points, trimmed to ``series_points``;
- ``:heartbeat:<component>`` unix seconds, expiring after ``ttl``;
- ``:counters`` hash of counters kept by the worker itself (dead letters by reason, ...).
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis

from streams.state.base import Sample, Snapshot


def series_key(name: str, labels: dict[str, str] | tuple[tuple[str, str], ...]) -> str:
    items = sorted(dict(labels).items())
    inner = ",".join(f'{k}="{v}"' for k, v in items)
    return f"{name}{{{inner}}}"


class MetricStore:
    def __init__(self, client: redis.Redis, prefix: str = "moltscope",
                 series_points: int = 1440) -> None:
        self.r = client
        self.p = prefix
        self.series_points = series_points

    def write(self, snapshot: Snapshot, at: float | None = None) -> None:
        at = time.time() if at is None else at
        pipe = self.r.pipeline(transaction=True)
        pipe.set(f"{self.p}:samples", json.dumps([s.as_dict() for s in snapshot.samples]))
        pipe.set(f"{self.p}:snapshot_at", at)
        if snapshot.details:
            pipe.hset(f"{self.p}:details", mapping={
                k: json.dumps(v, default=str) for k, v in snapshot.details.items()})
        for s in snapshot.samples:
            key = f"{self.p}:series:{series_key(s.name, s.labels)}"
            pipe.rpush(key, json.dumps([round(at, 3), s.value]))
            pipe.ltrim(key, -self.series_points, -1)
        pipe.execute()

    def samples(self) -> list[Sample]:
        raw = self.r.get(f"{self.p}:samples")
        if raw is None:
            return []
        return [Sample(d["name"], d["value"], tuple(sorted(d["labels"].items())), d["kind"],
                       d["help"]) for d in json.loads(raw)]

    def snapshot_at(self) -> float | None:
        raw = self.r.get(f"{self.p}:snapshot_at")
        return float(raw) if raw is not None else None

    def detail(self, name: str) -> Any | None:
        raw = self.r.hget(f"{self.p}:details", name)
        return json.loads(raw) if raw is not None else None

    def detail_names(self) -> list[str]:
        return sorted(k.decode() if isinstance(k, bytes) else k
                      for k in self.r.hkeys(f"{self.p}:details"))

    def series(self, name: str, labels: dict[str, str], last: int | None = None
               ) -> list[list[float]]:
        start = -(last or self.series_points)
        raw = self.r.lrange(f"{self.p}:series:{series_key(name, labels)}", start, -1)
        return [json.loads(x) for x in raw]

    def heartbeat(self, component: str, ttl_s: float = 15.0) -> None:
        self.r.set(f"{self.p}:heartbeat:{component}", time.time(), px=int(ttl_s * 1000))

    def alive(self, component: str) -> bool:
        return bool(self.r.exists(f"{self.p}:heartbeat:{component}"))

    def incr(self, counter: str, by: int = 1) -> None:
        self.r.hincrby(f"{self.p}:counters", counter, by)

    def counters(self) -> dict[str, int]:
        raw = self.r.hgetall(f"{self.p}:counters")
        return {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in raw.items()}

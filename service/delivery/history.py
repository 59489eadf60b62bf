"""Alert history in Redis, with bounded retention, filters, and the Prometheus view of it.

One entry per incident (``Alert.incident_id``), holding its latest transition:

- ``<prefix>:alerts:data`` hash incident id -> alert JSON;
- ``<prefix>:alerts:time`` sorted set incident id -> start time (epoch s), for time filters
  and retention: at most ``max_count`` incidents, none that ended more than ``max_age_s`` ago
  (age is counted from the start, which is never later than the end);
- ``<prefix>:alerts:firing`` hash incident id -> type (the open ones);
- ``<prefix>:alerts:total`` hash ``type|severity`` -> incidents fired (never trimmed).

:class:`AlertHistoryCollector` turns the last two into ``moltscope_alerts_firing{type}`` and
``moltscope_alerts_total{type,severity}`` for ``prometheus_client``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import redis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from detectors.alert import Alert


class AlertHistory:
    def __init__(self, client: redis.Redis, prefix: str = "moltscope", max_count: int = 10_000,
                 max_age_s: float = 30 * 86400.0) -> None:
        self.r = client
        self.max_count = max_count
        self.max_age_s = max_age_s
        p = f"{prefix}:alerts"
        self.k_data, self.k_time = f"{p}:data", f"{p}:time"
        self.k_firing, self.k_total = f"{p}:firing", f"{p}:total"

    def record(self, alert: Alert, now: float | None = None) -> bool:
        """Store a transition; an older one (lower sequence) than what is stored is ignored."""
        iid = alert.incident_id
        old = self.r.hget(self.k_data, iid)
        if old is not None and Alert.model_validate_json(old).sequence >= alert.sequence:
            return False
        pipe = self.r.pipeline()
        pipe.hset(self.k_data, iid, alert.model_dump_json())
        pipe.zadd(self.k_time, {iid: alert.starts_at.timestamp()})
        if alert.state == "resolved":
            pipe.hdel(self.k_firing, iid)
        else:
            pipe.hset(self.k_firing, iid, alert.type)
        if alert.state == "firing":
            pipe.hincrby(self.k_total, f"{alert.type}|{alert.severity}", 1)
        pipe.execute()
        self.trim(now if now is not None else alert.updated_at.timestamp())
        return True

    def trim(self, now: float) -> int:
        old = self.r.zrangebyscore(self.k_time, "-inf", now - self.max_age_s)
        extra = self.r.zcard(self.k_time) - len(old) - self.max_count
        if extra > 0:
            old += self.r.zrange(self.k_time, len(old), len(old) + extra - 1)
        if old:
            pipe = self.r.pipeline()
            pipe.zrem(self.k_time, *old)
            pipe.hdel(self.k_data, *old)
            pipe.hdel(self.k_firing, *old)
            pipe.execute()
        return len(old)

    def get(self, incident_id: str) -> Alert | None:
        raw = self.r.hget(self.k_data, incident_id)
        return None if raw is None else Alert.model_validate_json(raw)

    def query(self, *, type: str | None = None, state: str | None = None,
              since: datetime | None = None, until: datetime | None = None,
              fingerprint: str | None = None, limit: int = 100) -> list[Alert]:
        """Newest first; ``since`` / ``until`` bound the start time."""
        lo = since.timestamp() if since else "-inf"
        hi = until.timestamp() if until else "+inf"
        out: list[Alert] = []
        offset, page = 0, max(limit, 200)
        while len(out) < limit:
            ids = self.r.zrevrangebyscore(self.k_time, hi, lo, start=offset, num=page)
            if not ids:
                break
            offset += len(ids)
            for raw in self.r.hmget(self.k_data, ids):
                if raw is None:
                    continue
                a = Alert.model_validate_json(raw)
                if ((type is None or a.type == type) and (state is None or a.state == state)
                        and (fingerprint is None or a.fingerprint == fingerprint)):
                    out.append(a)
                    if len(out) == limit:
                        break
        return out

    def firing_by_type(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for t in self.r.hvals(self.k_firing):
            t = t.decode() if isinstance(t, bytes) else t
            counts[t] = counts.get(t, 0) + 1
        return counts

    def totals(self) -> dict[tuple[str, str], int]:
        out = {}
        for k, v in self.r.hgetall(self.k_total).items():
            k = k.decode() if isinstance(k, bytes) else k
            t, s = k.split("|", 1)
            out[(t, s)] = int(v)
        return out


class AlertHistoryCollector(Collector):
    """``registry.register(AlertHistoryCollector(history))`` in the API process."""

    def __init__(self, history: AlertHistory) -> None:
        self.history = history

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        firing = GaugeMetricFamily("moltscope_alerts_firing", "Open alert incidents",
                                   labels=["type"])
        for t, n in sorted(self.history.firing_by_type().items()):
            firing.add_metric([t], n)
        yield firing
        total = CounterMetricFamily("moltscope_alerts", "Alert incidents fired",
                                    labels=["type", "severity"])
        for (t, s), n in sorted(self.history.totals().items()):
            total.add_metric([t, s], n)
        yield total

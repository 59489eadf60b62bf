"""The pipeline's own health as Prometheus metrics: what the workers measure where the data is
(consumer lag, reducer delay, embedding queue and rate, checkpoint age), kept in Redis, and
exported by every API replica at scrape time (``GET /metrics``).

Redis keys (prefix ``moltscope``):

- ``:health`` hash: ``<metric>|<label>=<value>|...`` -> JSON ``[value, expires_at]``. A gauge
  its worker no longer writes (the worker died, the partition moved to another worker) expires
  and is no longer exported; a gauge several workers write under the same labels (one a
  worker, e.g. its embedding queue) is written under a ``worker`` field and summed on export,
  so no export carries a per-worker label;
- ``:health_counters`` hash: ``<metric>`` -> float total (HINCRBYFLOAT; workers add to it).

Exported families (docs/metrics.md, "Pipeline health"):

==========================================  =======  ==============================================
``moltscope_consumer_lag_records``          gauge    {topic, partition}: log end offset minus the
                                                     next offset the worker's agent reads
``moltscope_reducer_delay_seconds``         gauge    wall clock minus the event time the reducer
                                                     has reached
``moltscope_reducer_checkpoint_age_seconds``  gauge  seconds the reducer's applied state has been
                                                     ahead of its checkpoint (0 when it holds all)
``moltscope_reducer_checkpoint_interval_seconds`` gauge  the configured checkpoint interval
``moltscope_reducer_checkpoint_size_bytes``  gauge   size of the last checkpoint
``moltscope_embedding_queue_texts``         gauge    texts handed to the embedder, not yet encoded
``moltscope_embedded_texts_total``          counter  texts encoded
``moltscope_embedding_seconds_total``       counter  seconds spent encoding
==========================================  =======  ==============================================

Dead letters by reason (``moltscope_dead_letters_total``) are exported by
``service/api/prometheus.py``; the crawler's budget (:func:`crawler_budget_gauge`) by the
crawler process itself.

>>> list(parse_field(field_name("consumer_lag_records", topic="m-events", partition="0")))
['consumer_lag_records', {'partition': '0', 'topic': 'm-events'}]
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping

import redis
from prometheus_client import REGISTRY, CollectorRegistry, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

#: Help of every exported family, by name without the ``moltscope_`` prefix.
GAUGES = {
    "consumer_lag_records": "Records in a topic partition not yet read by the worker's agent "
                            "(log end offset minus its next offset)",
    "reducer_delay_seconds": "Wall clock minus the event time the reducer has reached",
    "reducer_checkpoint_age_seconds": "Seconds the reducer's applied state has been ahead of its "
                                      "checkpoint (0 when the checkpoint holds it all)",
    "reducer_checkpoint_interval_seconds": "Configured seconds between reducer checkpoints "
                                           "(0: checkpoints off)",
    "reducer_checkpoint_size_bytes": "Size of the last reducer checkpoint",
    "embedding_queue_texts": "Texts handed to the embedder and not yet encoded, all workers",
}
COUNTERS = {
    "embedded_texts_total": "Texts encoded by the workers' embedders",
    "embedding_seconds_total": "Seconds the workers' embedders spent encoding",
}
#: Gauges several workers write, each under its own ``worker`` field: summed on export.
SUMMED = frozenset({"embedding_queue_texts"})


def field_name(metric: str, **labels: str) -> str:
    return "|".join([metric, *(f"{k}={v}" for k, v in sorted(labels.items()))])


def parse_field(field: str) -> tuple[str, dict[str, str]]:
    metric, *pairs = field.split("|")
    return metric, dict(p.split("=", 1) for p in pairs)


class HealthStore:
    """The health gauges and counters in Redis (written by workers, read by the API)."""

    def __init__(self, client: redis.Redis, prefix: str = "moltscope") -> None:
        self.r = client
        self.gauges_key = f"{prefix}:health"
        self.counters_key = f"{prefix}:health_counters"

    def write(self, gauges: Mapping[str, float], counters: Mapping[str, float],
              ttl_s: float, now: float | None = None) -> None:
        """Set ``gauges`` (fields of :func:`field_name`) valid for ``ttl_s``; add ``counters``."""
        expires = (time.time() if now is None else now) + ttl_s
        pipe = self.r.pipeline(transaction=True)
        if gauges:
            pipe.hset(self.gauges_key, mapping={f: json.dumps([float(v), expires])
                                                for f, v in gauges.items()})
        for name, by in counters.items():
            if by:
                pipe.hincrbyfloat(self.counters_key, name, by)
        pipe.execute()

    def gauges(self, now: float | None = None) -> dict[str, float]:
        """Fields still valid at ``now``; expired ones are deleted."""
        now = time.time() if now is None else now
        out, stale = {}, []
        for k, raw in self.r.hgetall(self.gauges_key).items():
            field = k.decode() if isinstance(k, bytes) else k
            value, expires = json.loads(raw)
            if expires < now:
                stale.append(field)
            else:
                out[field] = float(value)
        if stale:
            self.r.hdel(self.gauges_key, *stale)
        return out

    def counters(self) -> dict[str, float]:
        return {(k.decode() if isinstance(k, bytes) else k): float(v)
                for k, v in self.r.hgetall(self.counters_key).items()}


def families(gauges: Mapping[str, float], counters: Mapping[str, float]) -> Iterator[Metric]:
    """The Prometheus families of the stored health values (summing the :data:`SUMMED` ones
    over their ``worker`` label, which is never exported).

    >>> fams = list(families({"embedding_queue_texts|worker=a": 3, "embedding_queue_texts|"
    ...                       "worker=b": 4, "reducer_delay_seconds": 2.5},
    ...                      {"embedded_texts_total": 10.0}))
    >>> {f.name: [(s.labels, s.value) for s in f.samples] for f in fams if f.samples}
    ... # doctest: +NORMALIZE_WHITESPACE
    {'moltscope_reducer_delay_seconds': [({}, 2.5)],
     'moltscope_embedding_queue_texts': [({}, 7.0)],
     'moltscope_embedded_texts': [({}, 10.0)],
     'moltscope_embedding_seconds': [({}, 0.0)]}
    """
    grouped: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for field, value in gauges.items():
        metric, labels = parse_field(field)
        if metric not in GAUGES:
            continue
        if metric in SUMMED:
            labels.pop("worker", None)
        key = tuple(sorted(labels.items()))
        series = grouped.setdefault(metric, {})
        series[key] = series.get(key, 0.0) + value
    for metric, help_ in GAUGES.items():
        series = grouped.get(metric, {})
        names = sorted({k for key in series for k, _ in key})
        fam = GaugeMetricFamily(f"moltscope_{metric}", help_, labels=names)
        for key, value in sorted(series.items()):
            fam.add_metric([dict(key).get(n, "") for n in names], value)
        yield fam
    for metric, help_ in COUNTERS.items():  # 0 before the first text: a rate exists at once
        yield CounterMetricFamily(f"moltscope_{metric.removesuffix('_total')}", help_,
                                  value=counters.get(metric, 0.0))


class HealthCollector:
    """A prometheus_client collector reading :class:`HealthStore` at scrape time."""

    def __init__(self, store: HealthStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        yield from families(self.store.gauges(), self.store.counters())


def crawler_budget_gauge(requests_per_minute: float,
                         registry: CollectorRegistry = REGISTRY) -> Gauge:
    """``moltscope_crawler_request_budget_per_second``: the crawler's request pace, so budget
    use is ``rate(moltscope_crawler_requests_total) / moltscope_crawler_request_budget_per_second``.
    """
    g = Gauge("moltscope_crawler_request_budget_per_second",
              "Requests per second the crawler's rate limit allows", registry=registry)
    g.set(requests_per_minute / 60.0)
    return g

"""``GET /metrics``: the worker's latest samples in Prometheus text format.

The samples are read from Redis at scrape time, so any number of API replicas expose the same
values. Names gain the ``moltscope_`` prefix; counters keep their ``_total`` suffix. The probe
campaign's ``moltscope_probe_*`` families (docs/probes.md) are scored from Redis at scrape time.
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter, Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from service.api.deps import RedisDep, SettingsDep
from service.api.probes import collector as probe_collector
from service.delivery.dispatcher import Dispatcher
from service.delivery.history import AlertHistory, AlertHistoryCollector
from service.delivery.webhooks import WebhookRegistry
from service.health_metrics import HealthCollector, HealthStore
from service.stores.metrics import MetricStore
from streams.state.base import Sample

router = APIRouter(tags=["prometheus"])


def families(samples: list[Sample], counters: dict[str, int], snapshot_at: float | None,
             backlog: dict[str, int]) -> Iterator[Metric]:
    grouped: dict[str, list[Sample]] = {}
    for s in samples:
        grouped.setdefault(s.name, []).append(s)
    for name, group in sorted(grouped.items()):
        first = group[0]
        label_names = [k for k, _ in first.labels]
        fam: Metric
        if first.kind == "counter":
            fam = CounterMetricFamily(f"moltscope_{name.removesuffix('_total')}",
                                      first.help or name, labels=label_names)
        else:
            fam = GaugeMetricFamily(f"moltscope_{name}", first.help or name, labels=label_names)
        for s in group:
            fam.add_metric([v for _, v in s.labels], s.value)
        yield fam
    dead = CounterMetricFamily("moltscope_dead_letters", "Records dead-lettered, by reason",
                               labels=["reason"])
    for key, value in sorted(counters.items()):
        if key.startswith("dead_letters:"):
            dead.add_metric([key.split(":", 1)[1]], value)
    yield dead
    dups = CounterMetricFamily("moltscope_duplicate_events", "Events dropped as repeats of an id")
    dups.add_metric([], counters.get("duplicates", 0))
    yield dups
    deliveries = CounterMetricFamily("moltscope_webhook_deliveries",
                                     "Webhook delivery attempts by outcome (delivered, failed = "
                                     "will retry, dead = given up after max age)",
                                     labels=["outcome"])
    for outcome in ("delivered", "failed", "dead"):
        deliveries.add_metric([outcome], counters.get(f"webhook_deliveries:{outcome}", 0))
    yield deliveries
    queued = GaugeMetricFamily("moltscope_webhook_backlog", "Messages waiting per webhook",
                               labels=["webhook"])
    for hook, n in sorted(backlog.items()):
        queued.add_metric([hook], n)
    yield queued
    if snapshot_at is not None:
        yield GaugeMetricFamily("moltscope_snapshot_timestamp_seconds",
                                "When the worker last wrote its snapshot", value=snapshot_at)


class _StoreCollector:
    def __init__(self, store: MetricStore, dispatcher: Dispatcher) -> None:
        self.store = store
        self.dispatcher = dispatcher

    def collect(self) -> Iterator[Metric]:
        # every registered webhook, 0 when nothing waits: a healthy backlog is a series too
        waiting = self.dispatcher.backlog()
        backlog = {h.id: waiting.get(h.id, 0) for h in self.dispatcher.registry.list()}
        yield from families(self.store.samples(), self.store.counters(), self.store.snapshot_at(),
                            backlog)


@router.get("/metrics", include_in_schema=False)
def metrics(r: RedisDep, settings: SettingsDep) -> Response:
    registry = CollectorRegistry(auto_describe=False)
    p = settings.topic_prefix
    registry.register(_StoreCollector(MetricStore(r, prefix=p),
                                      Dispatcher(r, WebhookRegistry(r, p), p)))
    registry.register(AlertHistoryCollector(AlertHistory(r, prefix=p)))
    registry.register(probe_collector(r, settings))  # moltscope_probe_*, docs/probes.md
    registry.register(HealthCollector(HealthStore(r, prefix=p)))  # lag, delays, embedding
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

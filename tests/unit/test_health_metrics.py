"""The pipeline's self-health: what a worker measures (service/worker/health.py), how it is kept
in Redis and exported at /metrics (service/health_metrics.py), and the crawler's budget gauge.
The health timer itself runs against a real broker in tests/integration/test_dashboards.py."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from service.config import Settings
from service.health_metrics import (
    HealthCollector,
    HealthStore,
    crawler_budget_gauge,
    field_name,
)
from service.worker import build
from service.worker.health import (
    MeteredCheckpoints,
    MeteredEmbedder,
    WorkerHealth,
    consumer_lag,
)


def scrape(store: HealthStore) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(HealthCollector(store))
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def driver(latest: float | None, due: bool) -> Any:
    """What the health gauges read of a Driver: its reducer's pipeline time and checkpoint."""
    reducer = SimpleNamespace(pipeline=SimpleNamespace(latest=latest),
                              checkpoint_due=lambda: due)
    return SimpleNamespace(reducer=reducer)


@dataclass
class Tp:
    topic: str
    partition: int

    def __hash__(self) -> int:
        return hash((self.topic, self.partition))


def test_consumer_lag_reads_offsets_and_falls_back_to_the_position() -> None:
    a, b, c, d = Tp("m-events", 0), Tp("m-events", 1), Tp("m-society", 0), Tp("m-alerts", 0)
    lag = consumer_lag([a, b, c, d], end={a: 100, b: 50, c: 9, d: None},
                       read={a: 89, c: 8}, position={b: 20})
    assert lag == {a: 10, b: 30, c: 0}  # d: end offset unknown yet


def test_worker_gauges_exported_without_per_worker_labels(redis_client: redis.Redis) -> None:
    store = HealthStore(redis_client, prefix="h")
    w1 = WorkerHealth(store, worker="w1", interval_s=1.0, checkpoint_interval_s=60.0)
    w2 = WorkerHealth(store, worker="w2", interval_s=1.0, checkpoint_interval_s=60.0)
    w1.embedding_started(5)
    w2.embedding_started(3)
    w2.embedding_done(1, 0.25)
    now = 1_800_000_000.0
    lag = {Tp("h-events", 0): 12, Tp("h-events", 1): 0}
    w1.flush(driver(latest=now - 42.5, due=True), lag, holds_society=True, wall=now)
    w2.flush(driver(latest=None, due=False), {Tp("h-events", 2): 7}, holds_society=False,
             wall=now)
    got = {k: v for k, v in scrape(store).items()}
    assert got[("moltscope_consumer_lag_records",
                (("partition", "0"), ("topic", "h-events")))] == 12
    assert got[("moltscope_consumer_lag_records",
                (("partition", "2"), ("topic", "h-events")))] == 7
    assert got[("moltscope_reducer_delay_seconds", ())] == 42.5
    assert got[("moltscope_embedding_queue_texts", ())] == 5 + 2  # summed over the workers
    assert got[("moltscope_embedded_texts_total", ())] == 1
    assert got[("moltscope_embedding_seconds_total", ())] == 0.25
    assert got[("moltscope_reducer_checkpoint_age_seconds", ())] == 0.0
    assert got[("moltscope_reducer_checkpoint_interval_seconds", ())] == 60.0
    assert not any("worker" in dict(labels) for _, labels in got)
    # the counters add up over flushes; the queue is a gauge
    w2.embedding_done(2, 0.5)
    w2.flush(driver(None, False), {}, holds_society=False, wall=now + 1)
    got = scrape(store)
    assert got[("moltscope_embedded_texts_total", ())] == 3
    assert got[("moltscope_embedding_seconds_total", ())] == 0.75
    assert got[("moltscope_embedding_queue_texts", ())] == 5


def test_gauges_a_worker_stopped_writing_expire(redis_client: redis.Redis) -> None:
    store = HealthStore(redis_client, prefix="h")
    store.write({field_name("consumer_lag_records", topic="t", partition="0"): 3}, {},
                ttl_s=10, now=1000.0)
    store.write({"reducer_delay_seconds": 1.0}, {}, ttl_s=10, now=2000.0)
    assert store.gauges(now=1005.0) == {"consumer_lag_records|partition=0|topic=t": 3.0,
                                        "reducer_delay_seconds": 1.0}
    assert store.gauges(now=1011.0) == {"reducer_delay_seconds": 1.0}
    assert redis_client.hlen("h:health") == 1  # the expired field is gone


def test_checkpoint_age_counts_while_the_state_is_ahead_of_the_checkpoint() -> None:
    class Store:
        version, key = "v", "k"

        def save(self, offset: int, last_raw: bytes, state: object) -> Any:
            return SimpleNamespace(offset=offset, size=1234)

    health = WorkerHealth(None, worker="w", interval_s=1.0, checkpoint_interval_s=30.0)
    checkpoints = MeteredCheckpoints(Store(), health)
    assert (checkpoints.version, checkpoints.key) == ("v", "k")  # the rest passes through
    g = health.gauges(driver(100.0, due=True), {}, holds_society=True, wall=1000.0)
    assert g["reducer_checkpoint_age_seconds"] == 0.0
    g = health.gauges(driver(100.0, due=True), {}, holds_society=True, wall=1095.0)
    assert g["reducer_checkpoint_age_seconds"] == 95.0  # > 3 intervals: alert material
    assert checkpoints.save(7, b"x", object()).size == 1234
    g = health.gauges(driver(100.0, due=False), {}, holds_society=True, wall=1100.0)
    assert g["reducer_checkpoint_age_seconds"] == 0.0
    assert g["reducer_checkpoint_size_bytes"] == 1234
    # a worker that no longer holds the reducer writes none of the reducer's gauges
    g = health.gauges(driver(100.0, due=True), {}, holds_society=False, wall=1200.0)
    assert not any(k.startswith("reducer_") for k in g)
    off = WorkerHealth(None, worker="w", interval_s=1.0, checkpoint_interval_s=0.0)
    g = off.gauges(driver(100.0, due=True), {}, holds_society=True, wall=1200.0)
    assert "reducer_checkpoint_age_seconds" not in g
    assert g["reducer_checkpoint_interval_seconds"] == 0.0


def test_metered_embedder_counts_texts_in_flight() -> None:
    health = WorkerHealth(None, worker="w", interval_s=1.0, checkpoint_interval_s=0.0)
    inside = threading.Event()
    release = threading.Event()

    class Slow:
        def encode_batch(self, texts: Sequence[str]) -> np.ndarray:
            inside.set()
            release.wait(10)
            return np.zeros((len(texts), 4), dtype=np.float32)

    embedder = MeteredEmbedder(Slow(), health)
    worker = threading.Thread(target=embedder.encode_batch, args=(["a", "b", "c"],))
    worker.start()
    assert inside.wait(10)
    assert health.queue == 3
    release.set()
    worker.join(10)
    assert health.queue == 0
    counters = health.counters()
    assert counters["embedded_texts_total"] == 3 and counters["embedding_seconds_total"] > 0
    assert health.counters()["embedded_texts_total"] == 0  # increments, taken once


def test_worker_build_instruments_its_collaborators() -> None:
    s = Settings(kafka_url="kafka://127.0.0.1:9", redis_url="redis://127.0.0.1:9/0",
                 embed=False, topic_prefix="unit")
    app, drv = build(s)
    assert isinstance(drv.io.checkpoints, MeteredCheckpoints)
    assert drv.io.checkpoints.key == "unit:reducer:checkpoint"
    assert "metered_embedder" in drv.io.embedder.__qualname__  # built lazily: no model here
    assert "publish_health" in [t.__name__ for t in app._app_tasks]  # faust's timer list


def test_crawler_budget_gauge() -> None:
    registry = CollectorRegistry()
    crawler_budget_gauge(55.0, registry)
    assert registry.get_sample_value("moltscope_crawler_request_budget_per_second") == \
        pytest.approx(55 / 60)

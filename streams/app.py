"""The Faust app: topics, agents and timers. Agents only turn stream items into engine calls.

Topology (``<p>`` = ``settings.topic_prefix``):

- ``<p>-events`` (keyed by post id, ``settings.partitions`` partitions) -> **ingest**: validate
  (bad records -> ``<p>-deadletters``), de-duplicate by event id (per partition: a key's
  repeats land in its partition), embed text events in batches, forward to ``<p>-society``.
  Stateless but for the de-dup memory, so adding workers scales it.
- ``<p>-society`` (one partition) -> **society**: the single reducer that owns the
  society-wide :class:`~streams.pipeline.Pipeline`; a timer writes its snapshot to Redis.
- ``<p>-deadletters`` (one partition) -> **dead letters**: counted by reason in Redis.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

import faust
import redis
from pydantic import ValidationError

from service.config import Settings
from service.stores.metrics import MetricStore
from streams.events import DeadLetter, parse_event
from streams.messages import decode_society, encode_society
from streams.pipeline import Pipeline
from streams.state.dedup import Dedup

log = logging.getLogger(__name__)


class WorkerState:
    """What one worker process holds: de-dup memory per partition and, on the worker that owns
    the society partition, the reducer's pipeline."""

    def __init__(self, settings: Settings, store: MetricStore | None) -> None:
        self.settings = settings
        self.store = store
        self.dedup: dict[int, Dedup] = {}
        self.pipeline = Pipeline()
        self.dirty = False
        self.duplicates = 0

    def dedup_for(self, partition: int) -> Dedup:
        d = self.dedup.get(partition)
        if d is None:
            d = self.dedup[partition] = Dedup(self.settings.dedup_capacity)
        return d


def _dead_letter(reason: str, raw: bytes, origin: str) -> bytes:
    return DeadLetter(reason=reason, raw=raw[: 1 << 20].decode("utf-8", "replace"),
                      origin=origin, observed_at=datetime.now(UTC)).model_dump_json().encode()


def create_app(settings: Settings, *, store: MetricStore | None = None,
               **overrides: Any) -> tuple[faust.App, WorkerState]:
    """Build the app. ``store`` defaults to a Redis store at ``settings.redis_url``."""
    if store is None:
        store = MetricStore(redis.Redis.from_url(settings.redis_url),
                            prefix=settings.topic_prefix, series_points=settings.series_points)
    conf: dict[str, Any] = {
        "broker": settings.kafka_url,
        "store": "memory://",
        "topic_partitions": settings.partitions,
        "topic_replication_factor": 1,
        "broker_session_timeout": settings.broker_session_timeout_s,
        "broker_heartbeat_interval": settings.broker_heartbeat_interval_s,
        "consumer_auto_offset_reset": "earliest",
        "web_enabled": False,
        "producer_acks": -1,
    }
    conf.update(overrides)
    app = faust.App(f"{settings.topic_prefix}-worker", **conf)
    state = WorkerState(settings, store)

    events = app.topic(settings.topic("events"), value_serializer="raw", key_serializer="raw",
                       partitions=settings.partitions)
    society = app.topic(settings.topic("society"), value_serializer="raw", partitions=1)
    dead = app.topic(settings.topic("deadletters"), value_serializer="raw", partitions=1)

    @app.agent(events)
    async def ingest(stream: faust.StreamT) -> None:
        async for batch in stream.take_events(256, within=0.2):
            out: list[bytes] = []
            for record in batch:
                raw = record.value
                try:
                    ev = parse_event(raw)
                except ValidationError as exc:
                    reason = "bad_json" if exc.errors()[0]["type"] == "json_invalid" else "invalid"
                    await dead.send(value=_dead_letter(reason, raw, events.get_topic_name()))
                    continue
                if not state.dedup_for(record.message.partition).admit(ev.id):
                    state.duplicates += 1
                    continue
                out.append(encode_society(ev, None))
            for payload in out:
                await society.send(value=payload)

    @app.agent(society)
    async def reduce(stream: faust.StreamT) -> None:
        async for payload in stream:
            ev, vector = decode_society(payload)
            state.pipeline.update(ev, vector)
            state.dirty = True

    @app.agent(dead)
    async def dead_letters(stream: faust.StreamT) -> None:
        async for payload in stream:
            try:
                reason = DeadLetter.model_validate_json(payload).reason
            except ValidationError:
                reason = "unreadable"
            if state.store is not None:
                state.store.incr(f"dead_letters:{reason}")

    @app.timer(settings.snapshot_interval_s)
    async def publish_snapshot() -> None:
        if state.store is None:
            return
        state.store.heartbeat("worker", ttl_s=max(10.0, 5 * settings.snapshot_interval_s))
        if state.duplicates:
            state.store.incr("duplicates", state.duplicates)
            state.duplicates = 0
        if state.dirty:
            state.dirty = False
            state.pipeline.expire()
            state.store.write(state.pipeline.snapshot(), at=time.time())

    return app, state

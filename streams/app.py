"""The Faust app: topics, agents and timers. Agents only turn stream items into engine calls.

Topology (``<p>`` = ``settings.topic_prefix``):

- ``<p>-events`` (keyed by post id, ``settings.partitions`` partitions) -> **ingest**: validate
  (bad records -> ``<p>-deadletters``), de-duplicate by event id (per partition: a key's
  repeats land in its partition), embed the texts of a batch (``take_events`` bounded in size
  and time; vectors cached by content hash in Redis), forward event + float16 vector to
  ``<p>-society``. Its state (de-dup memory, per-thread state) is per partition and restored
  from the partition on a handover, so adding workers scales it, and with it the embedding,
  the pipeline's physical limit.
- ``<p>-society`` (one partition) -> **reduce**: the single reducer that owns the society-wide
  :class:`~streams.pipeline.Pipeline` (activity, centroid, 10-NN, n-grams, PageRank, threads,
  cascades, detectors). A timer advances it, writes its snapshot to Redis and publishes alert
  transitions to ``<p>-alerts``; another checkpoints it to Redis.
- ``<p>-alerts`` (one partition) -> **alerts**: history in Redis and the webhook dispatcher's
  durable queue; one worker at a time (a Redis lease) drains that queue to the webhooks.
- ``<p>-deadletters`` (one partition) -> **dead_letters**: counted by reason in Redis.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import faust
import httpx
import redis
from faust.transport.drivers import aiokafka as faust_kafka
from kafka import KafkaConsumer
from kafka import TopicPartition as TP
from kafka.errors import KafkaError
from pydantic import ValidationError

import detectors
import streams
from detectors.alert import Alert
from service.config import Settings
from service.delivery.dispatcher import Dispatcher
from service.delivery.history import AlertHistory
from service.delivery.webhooks import WebhookRegistry
from service.stores.agents import AgentStore
from service.stores.metrics import MetricStore
from service.stores.reducer_checkpoint import ReducerCheckpoint, fingerprint
from service.stores.vector_cache import RedisVectorCache
from streams.embedding import Embedder
from streams.events import DeadLetter, Event, PostEvent, parse_event
from streams.messages import (
    Forwarded,
    ThreadsPartial,
    decode_society,
    encode_society,
    encode_threads,
)
from streams.partition import PartitionState
from streams.pipeline import Pipeline

log = logging.getLogger(__name__)

#: Seconds without events after which the reducer advances event time with the wall clock.
IDLE_AFTER_S = 10.0


class WorkerState:
    """What one worker process holds: de-dup memory per partition, the embedder and, on the
    worker that owns the society partition, the reducer's pipeline."""

    def __init__(self, settings: Settings, client: redis.Redis) -> None:
        self.settings = settings
        self.redis = client
        self.store = MetricStore(client, prefix=settings.topic_prefix,
                                 series_points=settings.series_points)
        self.pipeline = Pipeline(settings.pipeline(threads_local=False))
        # de-dup and per-thread state live with their events partition; the reducer sums the
        # partitions' thread partials
        self.parts: dict[int, PartitionState] = {}
        # reducer: events partition -> next offset applied; the society topic's next offset to
        # apply and the raw message before it (the checkpoint's anchor)
        self.applied: dict[int, int] = {}
        self.society_next = 0
        self.society_last = b""
        self.resumed = False  # a checkpoint was looked for since the society partition came
        self.checkpointed = 0
        self.checkpoint = ReducerCheckpoint(client, settings.topic_prefix,
                                            state_version(self.pipeline.config))
        self.owner = f"{os.getpid()}@{os.uname().nodename}"
        self.embedder: Embedder | None = None
        self.http: httpx.AsyncClient | None = None
        self.topics: dict[str, faust.TopicT] = {}
        self.agents: dict[str, faust.types.AgentT] = {}
        self.dirty = False
        self.agents_dirty = False
        self.last_event_wall = 0.0
        self.duplicates = 0
        self.history = AlertHistory(client, prefix=settings.topic_prefix)
        self.dispatcher = Dispatcher(client, WebhookRegistry(client, settings.topic_prefix),
                                     settings.topic_prefix, settings.delivery)

    def resume_reducer(self) -> None:
        """Take the checkpoint over if it is ahead of this worker's own reducer state (blocking:
        it may read the society topic and unpickle a large state)."""
        try:
            found = self.checkpoint.load(lambda offset: society_message(self.settings, offset))
        except (redis.RedisError, KafkaError) as exc:
            log.warning("reducer: checkpoint unreadable (%s): replaying the society topic", exc)
            return
        if found is None:
            log.info("reducer: no usable checkpoint, replaying the society topic from offset %d",
                     self.society_next)
            return
        offset, (pipeline, applied) = found
        if offset <= self.society_next:
            return
        self.pipeline, self.applied, self.society_next = pipeline, applied, offset
        self.checkpointed = offset
        self.society_last = b""  # set again by the next message applied
        self.last_event_wall = time.time()  # idle time counts from here, not from 1970
        self.dirty = True  # publish the resumed state even before anything new arrives
        log.info("reducer: resumed from the checkpoint at society offset %d", offset)

    def new_partition(self) -> PartitionState:
        return PartitionState(self.settings.dedup_capacity, self.pipeline.config.threads)

    def get_embedder(self) -> Embedder:
        if self.embedder is None:
            cache = RedisVectorCache(self.redis,
                                     ttl_seconds=self.settings.society.vector_cache_ttl_s)
            self.embedder = Embedder(cache=cache, batch_size=self.settings.society.embed_batch)
        return self.embedder


def state_version(config: object) -> str:
    """What a checkpoint must match: the engines' code and the pipeline's configuration."""
    roots = [Path(streams.__file__).parent, Path(detectors.__file__).parent]
    sources = [p.read_text() for root in roots for p in sorted(root.rglob("*.py"))]
    return fingerprint(sources, repr(config))


@contextmanager
def _partition_reader(settings: Settings, topic: str, partition: int) -> Iterator[
        tuple[KafkaConsumer, TP]]:
    """A group-less consumer assigned to one partition of one of our topics, closed after."""
    tp = TP(settings.topic(topic), partition)
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap,
                             enable_auto_commit=False, group_id=None)
    try:
        consumer.assign([tp])
        yield consumer, tp
    finally:
        consumer.close()


def society_message(settings: Settings, offset: int) -> bytes | None:
    """The raw society-topic message at ``offset`` (None if the topic does not hold it)."""
    if offset < 0:
        return None
    with _partition_reader(settings, "society", 0) as (consumer, tp):
        if offset >= consumer.end_offsets([tp])[tp]:  # e.g. a recreated, shorter topic
            return None
        consumer.seek(tp, offset)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000, max_records=1).values():
                return next((r.value for r in records if r.offset == offset), None)
        return None


def restore_partition(settings: Settings, partition: int, until: int,
                      part: PartitionState) -> PartitionState:
    """Replay one events partition from its start up to ``until`` (exclusive) into ``part``:
    a worker handed a partition (a rebalance, a restart) then holds the de-dup memory and thread
    state the partition's earlier records built, and reports the whole history. Blocking: run
    it in an executor. Costs one read of the partition's retained records; logs progress."""
    if until == 0:  # handed from the start: nothing before it
        return part
    with _partition_reader(settings, "events", partition) as (consumer, tp):
        consumer.seek_to_beginning(tp)
        start = consumer.position(tp)
        if start >= until:
            return part
        log.info("partition %d: restoring records %d..%d", partition, start, until)
        reported = time.monotonic()
        while consumer.position(tp) < until:
            for records in consumer.poll(timeout_ms=1000, max_records=5000).values():
                for r in records:
                    if r.offset >= until:
                        break
                    try:
                        part.admit(parse_event(r.value), r.offset)
                    except ValidationError:
                        part.skip(r.offset)
            if time.monotonic() - reported > 5:
                reported = time.monotonic()
                log.info("partition %d: restored %d of %d records", partition,
                         part.next_offset - start, until - start)
        log.info("partition %d: restored %d records, %d threads live", partition, until - start,
                 len(part.threads))
        return part


def _dead_letter(reason: str, raw: bytes, origin: str) -> bytes:
    return DeadLetter(reason=reason, raw=raw[: 1 << 20].decode("utf-8", "replace"),
                      origin=origin, observed_at=datetime.now(UTC)).model_dump_json().encode()


def _text(event: Event) -> str:
    return event.text if isinstance(event, PostEvent) else getattr(event, "content", "")


def _transport(fetch_wait_ms: int) -> type[faust_kafka.Transport]:
    """Faust's aiokafka transport with the fetch wait set: Faust passes a fixed
    ``fetch_max_wait_ms=1500`` to its worker consumer, and aiokafka reads the value at start."""

    class ConsumerThread(faust_kafka.AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            consumer._fetch_max_wait_ms = fetch_wait_ms
            return consumer

    class WaitingConsumer(faust_kafka.Consumer):
        def _new_consumer_thread(self) -> ConsumerThread:
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    class Transport(faust_kafka.Transport):
        Consumer = WaitingConsumer

    return Transport


class _App(faust.App):
    fetch_wait_ms = 1500

    def _new_transport(self) -> Any:
        return _transport(self.fetch_wait_ms)(self.conf.broker_consumer, self)


def create_app(settings: Settings, **overrides: Any) -> tuple[faust.App, WorkerState]:
    datadir = settings.embedded.data_dir / f"{settings.topic_prefix}-worker-data"
    datadir.mkdir(parents=True, exist_ok=True)  # Faust wants it even with memory tables
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
        "datadir": str(datadir),
    }
    conf.update(overrides)
    app = _App(f"{settings.topic_prefix}-worker", **conf)
    app.fetch_wait_ms = settings.kafka_fetch_wait_ms
    state = WorkerState(settings, redis.Redis.from_url(settings.redis_url))
    batch_size = settings.society.embed_batch

    events = app.topic(settings.topic("events"), value_serializer="raw", key_serializer="raw",
                       partitions=settings.partitions)
    # never acked, so never committed: a restarted or newly assigned reducer reads the retained
    # topic from the start, skipping what its checkpoint (if usable) already holds
    society = app.topic(settings.topic("society"), value_serializer="raw", partitions=1,
                        acks=False)
    alerts = app.topic(settings.topic("alerts"), value_serializer="raw", partitions=1)
    dead = app.topic(settings.topic("deadletters"), value_serializer="raw", partitions=1)
    state.topics = {"events": events, "society": society, "alerts": alerts, "deadletters": dead}

    @app.agent(events)
    async def ingest(stream: faust.StreamT) -> None:
        loop = asyncio.get_running_loop()
        async for batch in stream.take_events(batch_size, within=settings.society.embed_wait_s):
            admitted: list[tuple[Event, int, int]] = []
            for record in batch:
                raw, partition, offset = record.value, record.message.partition, \
                    record.message.offset
                part = state.parts.get(partition)
                if part is None:  # first record of a partition this worker was handed
                    part = state.parts[partition] = await loop.run_in_executor(
                        None, restore_partition, settings, partition, offset,
                        state.new_partition())
                elif offset < part.next_offset:  # re-seek to an older commit after a rebalance
                    continue
                try:
                    ev = parse_event(raw)
                except ValidationError as exc:
                    part.skip(offset)
                    reason = "bad_json" if exc.errors()[0]["type"] == "json_invalid" else "invalid"
                    await dead.send(value=_dead_letter(reason, raw, events.get_topic_name()))
                    continue
                if part.admit(ev, offset):
                    admitted.append((ev, partition, offset))
                else:
                    state.duplicates += 1
            wanted = [ev for ev, _, _ in admitted if state.pipeline.wants_vector(ev)]
            vectors = {}
            if wanted:
                # the model holds the GIL little and blocks long: keep the event loop beating
                embedder = state.get_embedder()
                encoded = await loop.run_in_executor(
                    None, embedder.encode_batch, [_text(ev) for ev in wanted])
                vectors = {ev.id: v for ev, v in zip(wanted, encoded, strict=True)}
            if admitted:
                await society.send(
                    value=encode_society([Forwarded(ev, vectors.get(ev.id), partition, offset)
                                          for ev, partition, offset in admitted]))

    def holds_society() -> bool:
        held = TP(society.get_topic_name(), 0) in app.consumer.assignment()
        if not held:  # the next time it is handed here, a newer checkpoint may exist
            state.resumed = False
        return held

    @app.agent(society)
    async def reduce(stream: faust.StreamT) -> None:
        async for event in stream.events():
            if not state.resumed:
                state.resumed = True
                await asyncio.get_running_loop().run_in_executor(None, state.resume_reducer)
            offset = event.message.offset
            if offset < state.society_next:
                # in the checkpoint, or a rebalance re-seeking the topic to its start
                continue
            state.society_next, state.society_last = offset + 1, event.value
            msg = decode_society(event.value)
            if isinstance(msg, ThreadsPartial):
                state.pipeline.absorb_threads(msg.partition, msg.next_offset, msg.partial)
            else:
                for f in msg:
                    # the society topic is re-read from its start after a rebalance, and a
                    # handover may forward a record twice: apply each record once
                    if f.offset < state.applied.get(f.partition, 0):
                        continue
                    state.applied[f.partition] = f.offset + 1
                    state.pipeline.update(f.event, f.vector)
                state.agents_dirty = True
                state.last_event_wall = time.time()
            state.dirty = True

    @app.agent(alerts)
    async def alert_intake(stream: faust.StreamT) -> None:
        async for payload in stream:
            alert = Alert.model_validate_json(payload)
            # a rebuilt reducer re-issues transitions it issued before: history knows them
            if state.history.record(alert):
                state.dispatcher.submit(alert)

    @app.agent(dead)
    async def dead_letters(stream: faust.StreamT) -> None:
        async for payload in stream:
            try:
                reason = DeadLetter.model_validate_json(payload).reason
            except ValidationError:
                reason = "unreadable"
            state.store.incr(f"dead_letters:{reason}")

    @app.timer(settings.snapshot_interval_s)
    async def publish_thread_partials() -> None:
        assigned = {tp.partition for tp in app.consumer.assignment()
                    if tp.topic == events.get_topic_name()}
        for partition in list(state.parts):
            if partition not in assigned:  # moved to another worker: its owner reports now
                del state.parts[partition]
        for partition, part in state.parts.items():
            if part.news and part.latest is not None:
                part.news = False
                part.threads.expire(part.latest)
                await society.send(value=encode_threads(partition, part.next_offset,
                                                        part.threads.partial()))

    @app.timer(settings.snapshot_interval_s)
    async def publish_snapshot() -> None:
        state.store.heartbeat("worker", ttl_s=max(10.0, 5 * settings.snapshot_interval_s))
        if state.duplicates:
            state.store.incr("duplicates", state.duplicates)
            state.duplicates = 0
        latest = state.pipeline.latest
        if latest is None or not holds_society():  # a former reducer's state is stale
            return
        idle = time.time() - state.last_event_wall
        if state.dirty or idle > IDLE_AFTER_S:
            # a quiet stream still moves on: event time advances with the wall clock once
            # nothing has arrived for a while, so windows close and incidents resolve
            now = latest + timedelta(seconds=idle) if idle > IDLE_AFTER_S else latest
            for alert in state.pipeline.advance(now, force=True):
                await alerts.send(value=alert.model_dump_json().encode())
        if state.dirty:
            state.dirty = False
            state.store.write(state.pipeline.snapshot(), at=time.time())

    if settings.checkpoint_interval_s > 0:
        @app.timer(settings.checkpoint_interval_s)
        async def checkpoint() -> None:
            if not holds_society() or state.society_next <= state.checkpointed:
                return
            # between two messages, on the loop: the state is consistent while it is pickled
            started = time.perf_counter()
            saved = state.checkpoint.save(state.society_next, state.society_last,
                                          (state.pipeline, state.applied))
            state.checkpointed = saved.offset
            log.info("reducer checkpoint at society offset %d: %.1f MB in %.2f s", saved.offset,
                     saved.size / 1e6, time.perf_counter() - started)

    agent_store = AgentStore(state.redis, settings.topic_prefix)

    @app.timer(settings.agents_interval_s)
    async def publish_agents() -> None:
        # per-agent values for the API; only the reducer's worker has them
        if not state.agents_dirty:
            return
        state.agents_dirty = False
        influence = state.pipeline.influence
        agent_store.write_scores("window", influence.scores("window"))
        agent_store.write_scores("cumulative", influence.scores("cumulative"))
        agent_store.write_supernodes(influence.supernode_records())
        agent_store.write_roles(state.pipeline.roles.roles())

    lease_key = f"{settings.topic_prefix}:dq:lease"
    lease_owner = state.owner

    @app.timer(state.dispatcher.cfg.poll_s)
    async def dispatch() -> None:
        # one dispatcher drains the durable queue at a time: whoever holds the lease
        holder = state.redis.set(lease_key, lease_owner, nx=True, px=10_000)
        if not holder:
            current = state.redis.get(lease_key)
            if current is None or current.decode() != lease_owner:
                return
            state.redis.pexpire(lease_key, 10_000)
        if state.http is None:
            state.http = state.dispatcher.client()
        result = await state.dispatcher.tick(state.http)
        for outcome in ("delivered", "failed", "dead"):
            if n := getattr(result, outcome):
                state.store.incr(f"webhook_deliveries:{outcome}", n)

    state.agents = {"ingest": ingest, "reduce": reduce, "alerts": alert_intake,
                    "dead_letters": dead_letters}
    return app, state

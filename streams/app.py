"""The Faust driver: topics, agents and timers. Agents only turn stream items into calls on the
pure state (:class:`~streams.partition.PartitionState` per events partition, the
:class:`~streams.reducer.Reducer`) and on the I/O collaborators the worker entry point
(``service/worker``) hands in (:class:`Collaborators`): nothing here knows Redis or the settings.

Topology (``<p>`` = ``DriverConfig.topic_prefix``):

- ``<p>-events`` (keyed by post id, ``partitions`` partitions) -> **ingest**: validate (bad
  records -> ``<p>-deadletters``), de-duplicate by event id (per partition: a key's repeats
  land in its partition), embed the texts of a batch (:func:`batches`, bounded in size and
  time), forward event + float16 vector to ``<p>-society``. Its state (de-dup memory,
  per-thread state) is per partition and restored from the partition on a handover, so adding
  workers scales it, and with it the embedding, the pipeline's physical limit. Its act router
  turns each forwarded event into the acts of the agents it concerns, sent to ``<p>-agents``
  in one batch per agents partition.
- ``<p>-agents`` (keyed by agent: :func:`~streams.agent_stage.agent_partition`, ``partitions``
  partitions) -> **individuals**: the per-agent stage of each partition
  (:class:`~streams.agent_stage.AgentPartition`, restored from the partition on a handover);
  a timer takes the society's inputs the reducer last handed out, writes the partition's
  per-agent profiles and sort keys (``Collaborators.profiles``) and sends its population
  partial to ``<p>-society``.
- ``<p>-society`` (one partition) -> **reduce**: the single reducer that owns the society-wide
  :class:`~streams.pipeline.Pipeline`. It applies the events in event-time order behind a
  watermark over the events partitions and advances the pipeline as event time passes (the
  detectors evaluate once per ``tick`` of event time, as in the replay); a timer applies what
  idle partitions released, advances event time with the wall clock when the stream is quiet,
  publishes the snapshot (with the agents partitions' merged population) and the alert
  transitions to ``<p>-alerts`` and hands the per-agent stage its society inputs
  (``Collaborators.society``); another checkpoints it.
- ``<p>-alerts`` (one partition) -> **alerts**: the alert desk (history and the webhook queue);
  a timer lets the worker holding the delivery lease drain that queue.
- ``<p>-deadletters`` (one partition) -> **dead_letters**: counted by reason.

While the worker is behind (a backlog on a partition it holds: :meth:`Driver.behind`), the
publishing timers (thread partials, snapshot, per-agent profiles, per-agent values) each take
at most :data:`PUBLISH_SHARE` of its CPU time (:class:`Pacer`): a snapshot of a large state
costs a tenth of a second, and published every second it would slow a backlog's drain by as
much. Caught up, they publish on every tick. Only when values are published moves, never what
they are: the reducer applies, advances and raises alerts on every tick regardless. The webhook
delivery round (a few Redis round trips five times a second, whether or not anything is
queued) is paced the same way: while behind, alerts reach the webhooks a little later (well
within the delivery lease), never fewer or others.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import faust
import numpy as np
from kafka import TopicPartition as TP
from mode.utils.futures import maybe_async
from pydantic import ValidationError

from detectors.alert import Alert
from streams.acts import Act
from streams.agent_stage import (
    AgentPartition,
    AgentsReport,
    AgentStage,
    AgentStageConfig,
    Society,
    agent_partition,
)
from streams.embedding import TextEmbedder
from streams.events import DeadLetter, Event
from streams.messages import (
    ActsHandoff,
    Forwarded,
    encode_acts,
    encode_agents,
    encode_society,
    encode_threads,
)
from streams.order import ALLOWED_LATENESS_S, IDLE_PARTITION_S
from streams.partition import PartitionState, Rejected
from streams.pipeline import Pipeline, PipelineConfig
from streams.reducer import IDLE_AFTER_S, AgentValues, Reducer
from streams.state.base import Snapshot
from streams.transport import RawSchema, Records, WaitingApp

log = logging.getLogger(__name__)

Routed = tuple[int, int, Act]  # events partition, events offset, act
Record = tuple[bytes, int, int]  # an events record's value, partition and offset

#: While the worker is behind (a backlog on a partition it holds), each periodic publishing
#: task (thread partials, snapshot, per-agent profiles and values, webhook rounds) takes at
#: most this share of its CPU time (:class:`Pacer`): five of them, 5 % together, and a
#: backlog drains at nearly the pipeline's own rate (a snapshot costing 0.1 s is then
#: published every 10 s of a drain).
PUBLISH_SHARE = 0.01
#: Behind: an events partition with more records not yet taken than this (a live stream's
#: batch wait holds far fewer), or a society or agents partition with more messages (each a
#: batch; caught up, the one in hand at most).
BEHIND_RECORDS = 1000
BEHIND_BATCHES = 4
#: Events records queued for ingest at most (Faust's default stream buffer, 4096 messages).
EVENTS_QUEUED = 4096
#: Records an ingest batch holds at most when no text is embedded (with the model: the
#: model's batch, ``embed_batch``): a batch costs a society and an agents message, each sent,
#: fetched and applied once, whatever it holds.
INGEST_BATCH = 512
#: Bytes of events (JSON and vectors) a society message carries at most: a batch beyond goes
#: in several (the producer's and the broker's limit on a message is 1 MiB).
SOCIETY_MESSAGE_BYTES = 512 * 1024


class Pacer:
    """Paces a periodic task by its own cost while the worker is behind: it runs again only
    once the worker has spent ``cost (1 - share) / share`` CPU seconds (``clock``: this
    process's) since it last ended, so it takes at most ``share`` of the CPU time; caught up,
    it runs whenever its timer fires. Only when values are published moves, never what they
    are (the state does not depend on when it is read).

    >>> clock = iter([0.0, 1.0, 1.5, 20.0]).__next__
    >>> pace = Pacer(0.05, clock=clock)
    >>> with pace.timed():  # took 1 CPU second (0.0 -> 1.0)
    ...     pass
    >>> pace.due(behind=True), pace.due(behind=False)  # 0.5 s since: 19 s needed while behind
    (False, True)
    >>> pace.due(behind=True)  # 19 s since it ended
    True
    """

    def __init__(self, share: float = PUBLISH_SHARE,
                 clock: Callable[[], float] = time.process_time) -> None:
        self.wait = (1.0 - share) / share
        self.clock = clock
        self.cost = 0.0
        self.ended = -float("inf")

    def due(self, behind: bool) -> bool:
        return not behind or self.clock() - self.ended >= self.cost * self.wait

    @contextmanager
    def timed(self) -> Iterator[None]:
        started = self.clock()
        try:
            yield
        finally:
            self.ended = self.clock()
            self.cost = self.ended - started


@dataclass(frozen=True, slots=True)
class DriverConfig:
    """What the driver reads (``service.worker`` builds it from the settings)."""

    topic_prefix: str
    kafka_url: str
    partitions: int
    pipeline: PipelineConfig
    data_dir: Path
    dedup_capacity: int
    embed_batch: int
    embed_wait_s: float
    snapshot_interval_s: float
    checkpoint_interval_s: float
    agents_interval_s: float
    dispatch_interval_s: float
    kafka_fetch_wait_ms: int
    broker_session_timeout_s: float
    broker_heartbeat_interval_s: float
    allowed_lateness_s: float = ALLOWED_LATENESS_S
    idle_partition_s: float = IDLE_PARTITION_S
    idle_after_s: float = IDLE_AFTER_S
    agent_stage: AgentStageConfig = AgentStageConfig()

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}-{name}"


class MetricSink(Protocol):
    def heartbeat(self, component: str, ttl_s: float = ...) -> None: ...

    def incr(self, counter: str, by: int = 1) -> None: ...

    def write(self, snapshot: Snapshot, at: float | None = None) -> None: ...


class AgentSink(Protocol):
    def write(self, values: AgentValues) -> None: ...


class ProfileSink(Protocol):
    def write(self, partition: int, report: AgentsReport) -> None:
        """Replace one agents partition's per-agent profiles and sort keys."""


class SocietyBoard(Protocol):
    """Where the reducer leaves the per-agent stage's society inputs for every worker."""

    def publish(self, society: Society) -> None: ...

    def latest(self) -> Society | None: ...


class AlertDesk(Protocol):
    def receive(self, alert: Alert) -> None:
        """Record a transition and queue it for the webhooks (a repeat is dropped)."""

    async def dispatch(self) -> Mapping[str, int]:
        """One delivery round if this worker holds the delivery lease: counts by outcome."""


class Saved(Protocol):
    offset: int
    size: int


class CheckpointStore(Protocol):
    def save(self, offset: int, last_raw: bytes, state: object) -> Saved: ...

    def load(self, raw_at: Callable[[int], bytes | None]) -> tuple[int, Any] | None: ...


class TopicReader(Protocol):
    """Blocking reads of the retained topics (run in an executor)."""

    def society_message(self, offset: int) -> bytes | None: ...

    def restore_partition(self, partition: int, until: int,
                          part: PartitionState) -> PartitionState: ...

    def restore_agents(self, partition: int, until: int,
                       part: AgentPartition) -> AgentPartition: ...


@dataclass(frozen=True, slots=True)
class Collaborators:
    metrics: MetricSink
    agents: AgentSink
    profiles: ProfileSink
    society: SocietyBoard
    alerts: AlertDesk
    checkpoints: CheckpointStore
    topics: TopicReader
    embedder: Callable[[], TextEmbedder]  # called on the first texts (loads the model)


class Driver:
    """What one worker process holds: the partitions' state, the reducer, the topics and
    agents (for tests), and the collaborators."""

    def __init__(self, config: DriverConfig, io: Collaborators) -> None:
        self.config = config
        self.io = io
        self.reducer = Reducer(Pipeline(config.pipeline), config.partitions,
                               allowed_lateness_s=config.allowed_lateness_s,
                               idle_partition_s=config.idle_partition_s,
                               idle_after_s=config.idle_after_s)
        self.parts: dict[int, PartitionState] = {}
        self.agent_parts: dict[int, AgentPartition] = {}
        # the acts ingest sent to the agents partitions held here, taken instead of decoded
        self.acts_handoff = ActsHandoff()
        self.duplicates = 0
        self.topics: dict[str, faust.TopicT] = {}
        self.agents: dict[str, faust.types.AgentT] = {}
        self._embedder: TextEmbedder | None = None
        # the periodic tasks paced by their cost while the worker is behind
        self.paced = {name: Pacer() for name in ("threads", "snapshot", "agent_stage", "agents",
                                                 "dispatch")}

    @property
    def pipeline(self) -> Pipeline:
        return self.reducer.pipeline

    def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts``; the embedder (the model) is built on the first call."""
        if self._embedder is None:
            self._embedder = self.io.embedder()
        return self._embedder.encode_batch(texts)

    def new_partition(self) -> PartitionState:
        return PartitionState(self.config.dedup_capacity, self.config.pipeline.threads,
                              embed=self.config.pipeline.embed)

    def new_agent_partition(self) -> AgentPartition:
        return AgentPartition(AgentStage(self.config.agent_stage))

    def acts_by_partition(self, admitted: list[tuple[Event, int, int]],
                          vectors: Mapping[str, np.ndarray]) -> dict[int, list[Routed]]:
        """The acts of the admitted events (in order, each routed by its events partition's
        router) grouped by the agents partition of their agent."""
        out: dict[int, list[Routed]] = {}
        n = self.config.partitions
        for ev, partition, offset in admitted:
            for act in self.parts[partition].route(ev, vectors.get(ev.id)):
                out.setdefault(agent_partition(act.agent, n), []).append((partition, offset, act))
        return out

    def behind(self, consumer: Any) -> bool:
        """Whether a partition this worker holds (``consumer``: Faust's, its assignment and
        the highwaters of its last fetches) has a backlog (see :data:`BEHIND_RECORDS`)."""
        held: dict[str, tuple[Callable[[int], int], int]] = {
            self.topics["events"].get_topic_name(): (
                lambda p: self.parts[p].next_offset if p in self.parts else 0, BEHIND_RECORDS),
            self.topics["agents"].get_topic_name(): (
                lambda p: self.agent_parts[p].next_offset if p in self.agent_parts else 0,
                BEHIND_BATCHES),
            self.topics["society"].get_topic_name(): (
                lambda p: self.reducer.next_offset, BEHIND_BATCHES)}
        for tp in consumer.assignment():
            if tp.topic not in held:
                continue
            taken, most = held[tp.topic]
            try:
                end = consumer.highwater(tp)
            except AssertionError:  # unassigned meanwhile
                continue
            if end is not None and end - taken(tp.partition) > most:
                return True
        return False

    async def dispatch(self, behind: bool) -> None:
        """One webhook delivery round (paced while ``behind``), counted by outcome."""
        pace = self.paced["dispatch"]
        if not pace.due(behind):
            return
        with pace.timed():  # the deliveries' awaits count too: paced more, never less
            outcomes = await self.io.alerts.dispatch()
        for outcome, n in outcomes.items():
            if n:
                self.io.metrics.incr(f"webhook_deliveries:{outcome}", n)

    def resume_reducer(self) -> None:
        """Take the checkpoint over if it is ahead of this worker's own reducer state
        (blocking: it may read the society topic and unpickle a large state)."""
        try:
            found = self.io.checkpoints.load(self.io.topics.society_message)
        except Exception as exc:  # whatever the store or the topic raise: rebuild instead
            log.warning("reducer: checkpoint unreadable (%s): replaying the society topic", exc)
            return
        if found is None:
            log.info("reducer: no usable checkpoint, replaying the society topic from offset %d",
                     self.reducer.next_offset)
        elif self.reducer.resume(*found, wall=time.time()):
            log.info("reducer: resumed from the checkpoint at society offset %d", found[0])


async def batches(stream: faust.StreamT, size: int,
                  within: float) -> AsyncIterator[list[Record]]:
    """The records of ``stream`` ((value, partition, offset) each) in batches of at most
    ``size``, each waiting at most ``within`` seconds after its first record to fill; a
    message (one record, or a chunk of them: :class:`~streams.transport.Records`) is acked
    once the consumer's body has run on its every record (the next batch is asked for).

    Read straight from the stream's channel queue, where Faust's conductor delivers them:
    ``Stream.take_events`` costs about a tenth of a millisecond a record in its processor,
    passive drainer and stream iterator, more than ingest's own work on it. The stream's
    processors (none live; a test context's) still see every value.
    """
    channel = aiter(stream.channel)  # subscribes the topic, as iterating the stream does
    queue = channel.queue
    processors = stream._processors  # type: ignore[attr-defined]
    loop = asyncio.get_running_loop()
    # the messages taken whose records are not all yielded yet, with those records
    taken: deque[tuple[faust.types.EventT, list[Record]]] = deque()
    held = 0  # their records

    async def take(event: faust.types.EventT) -> None:
        nonlocal held
        for processor in processors:  # on receipt, as the stream would run them
            await maybe_async(processor(event.value))
        value = event.value
        records = value if type(value) is Records else [
            (value, event.message.partition, event.message.offset)]
        taken.append((event, records))
        held += len(records)

    while not stream.should_stop:
        if not taken:
            await take(await queue.get())
        deadline = loop.time() + within
        while held < size:
            if not queue.empty():
                await take(queue.get_nowait())
                continue
            left = deadline - loop.time()
            if left <= 0:
                break
            # the batch goes on the timeout or when the stream stops (a value got meanwhile
            # is returned: a queue's get loses nothing when it is cancelled)
            got = await stream.wait(queue.get(), timeout=left)
            if got.stopped:
                break
            await take(got.result)
        batch: list[Record] = []
        done: list[faust.types.EventT] = []
        while taken and len(batch) < size:
            event, records = taken[0]
            room = size - len(batch)
            batch += records[:room]
            if len(records) <= room:
                taken.popleft()
                done.append(event)
            else:  # the rest of a chunk goes in the next batch
                taken[0] = (event, records[room:])
        held -= len(batch)
        yield batch
        for event in done:
            await stream.ack(event)


def by_size(items: list[Forwarded], most: int) -> Iterator[list[Forwarded]]:
    """``items`` in runs, in order, of at most ``most`` bytes of JSON and vectors each (an item
    larger than that alone).

    >>> f = [Forwarded(None, None, 0, i, b"x" * n)  # type: ignore[arg-type]
    ...      for i, n in enumerate([3, 3, 5, 2])]
    >>> [[x.offset for x in run] for run in by_size(f, 6)]
    [[0, 1], [2], [3]]
    """
    run: list[Forwarded] = []
    size = 0
    for f in items:
        n = len(f.raw or b"") + (0 if f.vector is None else 2 * f.vector.size)
        if run and size + n > most:
            yield run
            run, size = [], 0
        run.append(f)
        size += n
    if run:
        yield run


def _dead_letter(reason: str, raw: bytes, origin: str) -> bytes:
    return DeadLetter(reason=reason, raw=raw[: 1 << 20].decode("utf-8", "replace"),
                      origin=origin, observed_at=datetime.now(UTC)).model_dump_json().encode()


def create_app(config: DriverConfig, io: Collaborators,
               **overrides: Any) -> tuple[faust.App, Driver]:
    datadir = config.data_dir / f"{config.topic_prefix}-worker-data"
    datadir.mkdir(parents=True, exist_ok=True)  # Faust wants it even with memory tables
    conf: dict[str, Any] = {
        "broker": config.kafka_url,
        "store": "memory://",
        "topic_partitions": config.partitions,
        "topic_replication_factor": 1,
        "broker_session_timeout": config.broker_session_timeout_s,
        "broker_heartbeat_interval": config.broker_heartbeat_interval_s,
        "consumer_auto_offset_reset": "earliest",
        "web_enabled": False,
        "producer_acks": -1,
        "datadir": str(datadir),
    }
    conf.update(overrides)
    app = WaitingApp(f"{config.topic_prefix}-worker", **conf)
    app.fetch_wait_ms = config.kafka_fetch_wait_ms
    driver = Driver(config, io)
    reducer = driver.reducer

    # read a chunk of records a message (streams/transport.py), queued in as many records as
    # a message a record would be; a chunk is an ingest batch
    chunk = max(config.embed_batch if config.pipeline.embed else INGEST_BATCH, 1)
    events = app.topic(config.topic("events"), schema=RawSchema(), partitions=config.partitions,
                       maxsize=max(EVENTS_QUEUED // chunk, 1))
    app.batched = {events.get_topic_name(): chunk}
    # never acked, so never committed: a restarted or newly assigned reducer reads the retained
    # topic from the start, skipping what its checkpoint (if usable) already holds
    society = app.topic(config.topic("society"), schema=RawSchema(), partitions=1, acks=False)
    alerts = app.topic(config.topic("alerts"), schema=RawSchema(), partitions=1)
    dead = app.topic(config.topic("deadletters"), schema=RawSchema(), partitions=1)
    acts = app.topic(config.topic("agents"), schema=RawSchema(), partitions=config.partitions)
    driver.topics = {"events": events, "society": society, "alerts": alerts, "deadletters": dead,
                     "agents": acts}

    @app.agent(events)
    async def ingest(stream: faust.StreamT) -> None:
        loop = asyncio.get_running_loop()
        # a batch waits to fill for the model only: without it, what is queued goes at once
        wait = config.embed_wait_s if config.pipeline.embed else 0.0
        async for batch in batches(stream, chunk, wait):
            admitted: list[tuple[Event, int, int, bytes]] = []
            for raw, partition, offset in batch:
                part = driver.parts.get(partition)
                if part is None:  # first record of a partition this worker was handed
                    part = driver.parts[partition] = await loop.run_in_executor(
                        None, io.topics.restore_partition, partition, offset,
                        driver.new_partition())
                    texts = part.router.unembedded()
                    if texts:  # the restored posts' vectors, for the v* of later comments
                        ids = list(texts)
                        encoded = await loop.run_in_executor(None, driver.embed,
                                                             [texts[i] for i in ids])
                        part.router.set_vectors(dict(zip(ids, encoded, strict=True)))
                elif offset < part.next_offset:  # re-seek to an older commit after a rebalance
                    continue
                taken = part.take(raw, offset)
                if isinstance(taken, Rejected):
                    await dead.send(value=_dead_letter(taken.reason, raw,
                                                       events.get_topic_name()))
                elif taken is None:
                    driver.duplicates += 1
                else:
                    admitted.append((taken, partition, offset, raw))
            wanted = [ev for ev, *_ in admitted if driver.pipeline.wants_vector(ev)]
            vectors = {}
            if wanted:
                # the model loads (first batch) and encodes off the event loop: it holds the
                # GIL little and blocks long, and the loop must keep beating
                encoded = await loop.run_in_executor(None, driver.embed,
                                                     [ev.text for ev in wanted])
                vectors = {ev.id: v for ev, v in zip(wanted, encoded, strict=True)}
            if admitted:
                forwarded = [Forwarded(ev, vectors.get(ev.id), partition, offset, raw)
                             for ev, partition, offset, raw in admitted]
                for run in by_size(forwarded, SOCIETY_MESSAGE_BYTES):
                    payload = encode_society(run)
                    if reducer.resumed:  # this worker's reducer reads the society partition
                        reducer.handoff.put(payload, run)
                    await society.send(value=payload)
                routed = driver.acts_by_partition([a[:3] for a in admitted], vectors)
                for target, batch_acts in sorted(routed.items()):
                    payload = encode_acts(batch_acts)
                    if target in driver.agent_parts:  # this worker's stage reads it
                        driver.acts_handoff.put(target, payload, batch_acts)
                    await acts.send(value=payload, partition=target)

    @app.agent(acts)
    async def individuals(stream: faust.StreamT) -> None:
        loop = asyncio.get_running_loop()
        async for event in stream.events():
            partition, offset = event.message.partition, event.message.offset
            part = driver.agent_parts.get(partition)
            if part is None:  # first record of an agents partition this worker was handed
                part = driver.agent_parts[partition] = await loop.run_in_executor(
                    None, io.topics.restore_agents, partition, offset,
                    driver.new_agent_partition())
            elif offset < part.next_offset:  # re-seek to an older commit after a rebalance
                continue
            part.take(driver.acts_handoff.take(event.value), offset)

    def behind() -> bool:
        return driver.behind(app.consumer)

    paced = driver.paced

    def holds_society() -> bool:
        held = TP(society.get_topic_name(), 0) in app.consumer.assignment()
        if not held:
            reducer.release()
        return held

    @app.agent(society)
    async def reduce(stream: faust.StreamT) -> None:
        async for event in stream.events():
            if not reducer.resumed:
                reducer.resumed = True
                await asyncio.get_running_loop().run_in_executor(None, driver.resume_reducer)
            # skips what the checkpoint holds, a rebalance's re-read, a record forwarded twice
            reducer.apply(event.message.offset, event.value, wall=time.time())

    @app.agent(alerts)
    async def alert_intake(stream: faust.StreamT) -> None:
        async for payload in stream:
            io.alerts.receive(Alert.model_validate_json(payload))

    @app.agent(dead)
    async def dead_letters(stream: faust.StreamT) -> None:
        async for payload in stream:
            try:
                reason = DeadLetter.model_validate_json(payload).reason
            except ValidationError:
                reason = "unreadable"
            io.metrics.incr(f"dead_letters:{reason}")

    @app.timer(config.snapshot_interval_s)
    async def publish_thread_partials() -> None:
        assigned = {tp.partition for tp in app.consumer.assignment()
                    if tp.topic == events.get_topic_name()}
        for partition in list(driver.parts):
            if partition not in assigned:  # moved to another worker: its owner reports now
                del driver.parts[partition]
        pace = paced["threads"]
        if not pace.due(behind()):
            return
        with pace.timed():  # no await inside: ingest cannot restore a partition meanwhile
            partials = [encode_threads(partition, part.next_offset, partial)
                        for partition, part in driver.parts.items()
                        if (partial := part.report()) is not None]
        for partial in partials:
            await society.send(value=partial)

    @app.timer(config.snapshot_interval_s)
    async def publish_snapshot() -> None:
        io.metrics.heartbeat("worker", ttl_s=max(10.0, 5 * config.snapshot_interval_s))
        if driver.duplicates:
            io.metrics.incr("duplicates", driver.duplicates)
            driver.duplicates = 0
        if not holds_society():  # asked every tick: it notices the partition leaving (a
            return  # former reducer's state is stale)
        pace = paced["snapshot"]
        publish = pace.due(behind())
        with pace.timed() if publish else nullcontext():
            tick = reducer.tick(wall=time.time(), publish=publish)
            if tick.snapshot is not None:
                io.metrics.write(tick.snapshot, at=time.time())
            if tick.society is not None:
                io.society.publish(tick.society)
        for alert in tick.alerts:
            await alerts.send(value=alert.model_dump_json().encode())

    @app.timer(config.agents_interval_s)
    async def publish_agent_stage() -> None:
        assigned = {tp.partition for tp in app.consumer.assignment()
                    if tp.topic == acts.get_topic_name()}
        for partition in list(driver.agent_parts):
            if partition not in assigned:  # moved to another worker: its owner reports now
                del driver.agent_parts[partition]
                driver.acts_handoff.drop(partition)  # its stage there decodes them
        pace = paced["agent_stage"]
        if not driver.agent_parts or not pace.due(behind()):
            return
        partials: list[bytes] = []
        with pace.timed():
            inputs = io.society.latest()
            for partition, part in list(driver.agent_parts.items()):
                report = part.report(inputs)
                if report is not None:
                    io.profiles.write(partition, report)
                    partials.append(encode_agents(partition, part.next_offset, report.partial))
        for partial in partials:
            await society.send(value=partial)

    if config.checkpoint_interval_s > 0:
        @app.timer(config.checkpoint_interval_s)
        async def checkpoint() -> None:
            if not holds_society() or not reducer.checkpoint_due():
                return
            # between two messages, on the loop: the state is consistent while it is pickled
            started = time.perf_counter()
            saved = io.checkpoints.save(reducer.next_offset, reducer.last_raw,
                                        reducer.checkpoint_state())
            reducer.checkpointed = saved.offset
            log.info("reducer checkpoint at society offset %d: %.1f MB in %.2f s", saved.offset,
                     saved.size / 1e6, time.perf_counter() - started)

    @app.timer(config.agents_interval_s)
    async def publish_agents() -> None:
        pace = paced["agents"]
        if not pace.due(behind()):
            return
        with pace.timed():
            values = reducer.agents()  # only the reducer's worker has any
            if values is not None:
                io.agents.write(values)

    @app.timer(config.dispatch_interval_s)
    async def dispatch() -> None:
        await driver.dispatch(behind())

    driver.agents = {"ingest": ingest, "individuals": individuals, "reduce": reduce,
                     "alerts": alert_intake, "dead_letters": dead_letters}
    return app, driver

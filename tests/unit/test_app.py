"""The Faust driver without a broker (``agent.test_context()``) and with in-memory collaborators:
validation, de-duplication, dead letters, the reducer's pipeline, the checkpoint resume; the
worker entry point that wires the real collaborators; and the layering (nothing under
``streams/`` imports ``service/``)."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import json
import shutil
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import AsyncMock

import pytest
from kafka import TopicPartition as TP

import streams.reducer
from service.config import Settings
from service.stores.reducer_checkpoint import ReducerCheckpoint
from service.worker import build, driver_config, live_pipeline
from streams.agent_stage import AgentPartition, AgentsReport, Society
from streams.app import (
    BEHIND_BATCHES,
    BEHIND_RECORDS,
    Collaborators,
    Driver,
    Pacer,
    batches,
    create_app,
)
from streams.events import CommentEvent, PostEvent
from streams.messages import Forwarded, decode_society, encode_society, encode_threads
from streams.partition import PartitionState
from streams.reducer import IDLE_AFTER_S, AgentValues, state_version
from streams.state.base import Snapshot
from streams.state.threads import Partial, Sums
from streams.transport import Records

ROOT = Path(__file__).resolve().parents[2]
T = datetime(2026, 2, 1, 12, tzinfo=UTC)


class Metrics:
    def __init__(self) -> None:
        self.counters: Counter[str] = Counter()
        self.snapshots: list[Snapshot] = []

    def heartbeat(self, component: str, ttl_s: float = 15.0) -> None:
        pass

    def incr(self, counter: str, by: int = 1) -> None:
        self.counters[counter] += by

    def write(self, snapshot: Snapshot, at: float | None = None) -> None:
        self.snapshots.append(snapshot)


class Agents:
    def __init__(self) -> None:
        self.values: list[AgentValues] = []

    def write(self, values: AgentValues) -> None:
        self.values.append(values)


class Profiles:
    def __init__(self) -> None:
        self.written: list[tuple[int, AgentsReport]] = []

    def write(self, partition: int, report: AgentsReport) -> None:
        self.written.append((partition, report))


class Board:
    def __init__(self) -> None:
        self.society: Society | None = None

    def publish(self, society: Society) -> None:
        self.society = society

    def latest(self) -> Society | None:
        return self.society


class Desk:
    def __init__(self) -> None:
        self.received: list[Any] = []

    def receive(self, alert: Any) -> None:
        self.received.append(alert)

    async def dispatch(self) -> dict[str, int]:
        return {}


class Topics:
    def __init__(self, society: dict[int, bytes] | None = None) -> None:
        self.society = society or {}
        self.restored: list[tuple[int, int]] = []

    def society_message(self, offset: int) -> bytes | None:
        return self.society.get(offset)

    def restore_partition(self, partition: int, until: int,
                          part: PartitionState) -> PartitionState:
        self.restored.append((partition, until))
        return part

    def restore_agents(self, partition: int, until: int, part: AgentPartition) -> AgentPartition:
        self.restored.append((partition, until))
        return part


def settings(**kw: Any) -> Settings:
    return Settings(**{"kafka_url": "kafka://127.0.0.1:9", "redis_url": "redis://127.0.0.1:9/0",
                       "embed": False, "topic_prefix": "unit", **kw})


def collaborators(checkpoints: Any = None, topics: Topics | None = None) -> Collaborators:
    def no_model() -> Any:
        raise AssertionError("embed=False: the model is never loaded")

    return Collaborators(metrics=Metrics(), agents=Agents(), profiles=Profiles(),
                         society=Board(), alerts=Desk(),
                         checkpoints=checkpoints, topics=topics or Topics(), embedder=no_model)


@pytest.fixture
def worker():  # type: ignore[no-untyped-def]
    app, driver = create_app(driver_config(settings()), collaborators())
    app.finalize()
    app.conf.store = "memory://"
    app.flow_control.resume()
    for name in ("society", "deadletters", "agents"):
        driver.topics[name].send = AsyncMock()  # type: ignore[method-assign]
    return app, driver


def post(pid: str) -> bytes:
    return PostEvent(id=f"post:{pid}", event_time=T, observed_at=T, post_id=pid,
                     author="ann", title="gm", content="hello").model_dump_json().encode()


async def test_ingest_dedups_and_dead_letters(worker) -> None:  # type: ignore[no-untyped-def]
    app, driver = worker
    async with driver.agents["ingest"].test_context() as agent:
        for value in (post("1"), post("2"), post("1"), b"{not json", b'{"kind": "post"}'):
            await agent.put(value=value, key=b"k")
    forwarded = [f.event.id for c in driver.topics["society"].send.await_args_list
                 for f in decode_society(c.kwargs["value"])]
    assert forwarded == ["post:1", "post:2"]
    assert driver.duplicates == 1
    reasons = [json.loads(c.kwargs["value"])["reason"]
               for c in driver.topics["deadletters"].send.await_args_list]
    assert reasons == ["bad_json", "invalid"]
    assert driver.io.topics.restored == [(0, 0)]  # the partition was restored once


async def test_ingest_hands_its_events_to_the_reducer_of_its_worker(worker) -> None:  # type: ignore[no-untyped-def]
    """Once this worker's reducer reads the society partition, ingest leaves the events it
    forwards in the reducer's handoff and the reducer takes them from there (one parse)."""
    app, driver = worker
    send = driver.topics["society"].send

    async def forwarded(n: int) -> None:
        for _ in range(500):
            if send.await_count >= n:
                return
            await asyncio.sleep(0.01)

    async with driver.agents["ingest"].test_context() as agent:
        await agent.put(value=post("1"), key=b"k")
        await forwarded(1)
        assert len(driver.reducer.handoff) == 0  # no reducer here yet
        driver.reducer.resumed = True
        await agent.put(value=post("2"), key=b"k")
        await forwarded(2)
    assert len(driver.reducer.handoff) == 1
    [held] = next(iter(driver.reducer.handoff.held.values()))[1]
    async with driver.agents["reduce"].test_context() as agent:
        for c in send.await_args_list:
            await agent.put(value=c.kwargs["value"])
    assert len(driver.reducer.handoff) == 0 and driver.reducer.buffered == 2
    assert any(entry[4] is held for entry in driver.reducer.order.heap)


async def test_ingest_embeds_posts_off_the_loop_with_one_embedder() -> None:
    """Posts (not comments, by default) are embedded; the embedder is built once, on the
    first texts; the reducer receives the vectors."""
    built: list[int] = []

    class Model:
        def encode_batch(self, texts: list[str]) -> Any:
            import numpy as np

            return np.tile(np.eye(1, 384, dtype=np.float32), (len(texts), 1))

    def embedder() -> Model:
        built.append(1)
        return Model()

    io = dataclasses.replace(collaborators(), embedder=embedder)
    app, driver = create_app(driver_config(settings(embed=True)), io)
    app.finalize()
    app.conf.store = "memory://"
    app.flow_control.resume()
    driver.topics["society"].send = AsyncMock()  # type: ignore[method-assign]
    reply = CommentEvent(id="comment:c", event_time=T, observed_at=T, comment_id="c",
                         post_id="1", author="bob", reply_to="ann", content="hi")
    async with driver.agents["ingest"].test_context() as agent:
        for value in (post("1"), reply.model_dump_json().encode(), post("2")):
            await agent.put(value=value, key=b"k")
        for _ in range(500):  # the batch waits for the executor: let it finish
            if driver.topics["society"].send.await_count:
                break
            await asyncio.sleep(0.01)
    got = [f for c in driver.topics["society"].send.await_args_list
           for f in decode_society(c.kwargs["value"])]
    assert [(f.event.id, f.vector is not None) for f in got] == [
        ("post:1", True), ("comment:c", False), ("post:2", True)]
    assert got[0].vector[0] == pytest.approx(1.0) and built == [1]


async def test_reduce_feeds_the_pipeline(worker) -> None:  # type: ignore[no-untyped-def]
    app, driver = worker
    first = Forwarded(PostEvent.model_validate_json(post("1")), None, 0, 4)
    reply = Forwarded(CommentEvent(id="comment:c", event_time=T, observed_at=T, comment_id="c",
                                   post_id="1", author="bob", reply_to="ann", content="hi"),
                      None, 1, 2)
    async with driver.agents["reduce"].test_context() as agent:
        await agent.put(value=encode_society([first]))
        await agent.put(value=encode_society([reply]))
    assert driver.reducer.buffered == 2  # partitions 2 and 3 may still send older events
    tick = driver.reducer.tick(wall=time.time() + 3600)  # every partition idle: applied
    snap = driver.pipeline.snapshot()
    assert snap.value("posts_total") == 1.0 and snap.value("comments_total") == 1.0
    assert tick.snapshot is not None


async def test_reduce_applies_each_record_once(worker) -> None:  # type: ignore[no-untyped-def]
    """A rebalance re-reads the society topic from its start, and a handover may forward a
    record twice: the events partition and offset each event was read at decide."""
    app, driver = worker
    a = Forwarded(PostEvent.model_validate_json(post("1")), None, 0, 4)
    b = Forwarded(PostEvent.model_validate_json(post("2")), None, 0, 9)
    full = Partial(by_bucket={"0": Sums(posts=2)})
    async with driver.agents["reduce"].test_context() as agent:
        await agent.put(value=encode_society([a]))
        await agent.put(value=encode_threads(0, 10, full))
        await agent.put(value=encode_society([a, b]))  # the new owner forwards 4 again
        await agent.put(value=encode_threads(0, 5, Partial(by_bucket={"0": Sums(posts=1)})))
    driver.reducer.tick(wall=time.time() + 3600)  # every partition idle: the buffer applied
    snap = driver.pipeline.snapshot()
    assert snap.value("posts_total") == 2.0
    assert snap.value("threads", bucket="0") == 2.0  # the stale report covered fewer records


def test_behind_when_a_held_partition_has_a_backlog(worker) -> None:  # type: ignore[no-untyped-def]
    """The publishing timers pace their cost only while the worker is behind: an events
    partition more than BEHIND_RECORDS records ahead of ingest, or the society or an agents
    partition more than BEHIND_BATCHES messages (batches) ahead of the reducer or the stage."""
    _, driver = worker
    name = {k: driver.topics[k].get_topic_name() for k in ("events", "society", "agents")}

    class Consumer:
        def __init__(self, ends: dict[tuple[str, int], int | None]) -> None:
            self.ends = ends

        def assignment(self) -> set[TP]:
            return {TP(t, p) for t, p in self.ends}

        def highwater(self, tp: TP) -> int | None:
            return self.ends[(tp.topic, tp.partition)]

    driver.parts[0] = driver.new_partition()
    driver.parts[0].next_offset = 500
    driver.reducer.next_offset = 10
    caught_up = {(name["events"], 0): 500 + BEHIND_RECORDS, (name["society"], 0): 14,
                 (name["agents"], 1): None, ("elsewhere", 0): 10**6}  # None: not fetched yet
    assert not driver.behind(Consumer(caught_up))
    for key, end in [((name["events"], 0), 501 + BEHIND_RECORDS),
                     ((name["events"], 3), 1 + BEHIND_RECORDS),  # not restored yet: offset 0
                     ((name["society"], 0), 11 + BEHIND_BATCHES),
                     ((name["agents"], 1), 1 + BEHIND_BATCHES)]:
        assert driver.behind(Consumer(caught_up | {key: end})), key


async def test_webhook_rounds_paced_only_while_behind() -> None:
    """A delivery round costs Redis round trips whether or not anything is queued: while the
    worker is behind it takes at most the publishing share of its CPU; caught up, every
    timer tick runs one."""
    rounds: list[int] = []

    class Counting(Desk):
        async def dispatch(self) -> dict[str, int]:
            rounds.append(1)
            return {"delivered": 2, "failed": 0}

    io = dataclasses.replace(collaborators(), alerts=Counting())
    driver = Driver(driver_config(settings()), io)
    now = [0.0]
    driver.paced["dispatch"] = Pacer(0.02, clock=lambda: now[0])
    await driver.dispatch(behind=True)  # the first round (cost 0: the clock stood still)
    now[0] = 1.0
    driver.paced["dispatch"].cost = 1.0  # as if it took 1 CPU second
    await driver.dispatch(behind=True)  # 1 s since: paced out (49 s needed)
    await driver.dispatch(behind=False)  # caught up: runs
    driver.paced["dispatch"].cost = 1.0
    now[0] = 50.0
    await driver.dispatch(behind=True)  # 49 s since it ended: due again
    assert len(rounds) == 3
    assert io.metrics.counters == Counter({"webhook_deliveries:delivered": 6})  # type: ignore[attr-defined]


class Queued:
    """What :func:`streams.app.batches` reads of a Faust stream: its channel's queue, its
    processors, ``wait`` (a value, or stopped on the timeout) and ``ack``."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self._processors: list[Any] = []
        self.should_stop = False
        self.acked: list[Any] = []
        self.channel = self

    def __aiter__(self) -> Queued:
        return self

    async def __anext__(self) -> Any:
        raise StopAsyncIteration

    async def wait(self, coro: Any, timeout: float) -> SimpleNamespace:
        try:
            return SimpleNamespace(result=await asyncio.wait_for(coro, timeout), stopped=False)
        except TimeoutError:
            return SimpleNamespace(result=None, stopped=True)

    async def ack(self, event: Any) -> None:
        self.acked.append(event.value)


def record(v: Any) -> SimpleNamespace:
    """A Faust event of one events record (value ``v`` at offset ``v``)."""
    return SimpleNamespace(value=v, message=SimpleNamespace(partition=0, offset=v))


async def test_ingest_batches_what_is_queued_and_acks_after_the_body() -> None:
    stream = Queued()
    seen: list[Any] = []
    stream._processors.append(seen.append)  # a stream's processors see every value
    for v in range(5):
        stream.queue.put_nowait(record(v))
    it = batches(stream, 2, 0.0)  # type: ignore[arg-type]
    got = []
    for _ in range(3):
        batch = await anext(it)
        got.append([v for v, _, _ in batch])
        assert stream.acked == [v for b in got[:-1] for v in b]  # acked once the body ran
    assert got == [[0, 1], [2, 3], [4]] and seen == [0, 1, 2, 3, 4]

    async def later(v: int, after: float) -> None:
        await asyncio.sleep(after)
        stream.queue.put_nowait(record(v))

    # with a wait, a batch takes what arrives within it after its first record
    waiting = batches(stream, 10, 1.0)  # type: ignore[arg-type]
    stream.queue.put_nowait(record(5))
    pending = [asyncio.ensure_future(later(6, 0.05))]
    filler = asyncio.ensure_future(anext(waiting))
    await asyncio.sleep(0.2)
    assert not filler.done()  # still waiting to fill
    for v in range(7, 10):
        stream.queue.put_nowait(record(v))
    await asyncio.gather(*pending)
    assert [offset for _, _, offset in await filler] == [5, 6, 7, 8, 9]


async def test_ingest_batches_chunks_and_acks_a_chunk_once_all_of_it_ran() -> None:
    """A chunk of records (one message) fills batches of at most ``size`` with the single
    records around it; it is acked after the batch holding its last record."""
    stream = Queued()

    def chunk(*offsets: int) -> SimpleNamespace:
        return SimpleNamespace(value=Records([(b"v", 1, o) for o in offsets]), message=None)

    for event in (record(0), chunk(1, 2, 3), chunk(4), record(5)):
        stream.queue.put_nowait(event)
    it = batches(stream, 3, 0.0)  # type: ignore[arg-type]
    got, acked = [], []
    for _ in range(2):
        got.append([o for _, _, o in await anext(it)])
        acked.append(len(stream.acked))
    assert got == [[0, 1, 2], [3, 4, 5]]
    assert acked == [0, 1]  # the first batch's body ran: record 0 acked, the chunk not yet
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(anext(it), 0.1)
    assert len(stream.acked) == 4


async def test_worker_consumer_runs_a_delivery_inline_unless_it_blocks() -> None:
    """Faust's fetch loop waits on every delivery with four tasks; a delivery that completes
    on its first step needs none, one that blocks (a full queue) still yields to a suspended
    flow (it is cancelled, as Faust's wait would)."""
    app, _ = create_app(driver_config(settings()), collaborators())
    app.finalize()
    consumer = app.consumer
    consumer.wait_first = AsyncMock(wraps=consumer.wait_first)  # type: ignore[method-assign]
    got: list[str] = []

    async def quick(m: str) -> None:
        got.append(m)

    await consumer._deliver(quick, "a")
    assert got == ["a"] and consumer.wait_first.await_count == 0
    gate: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def blocked(m: str) -> None:
        got.append(m + await gate)

    task = asyncio.ensure_future(consumer._deliver(blocked, "b"))
    await asyncio.sleep(0.01)
    assert got == ["a"]
    gate.set_result("!")
    await task
    assert got == ["a", "b!"] and consumer.wait_first.await_count == 1
    stuck: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    cancelled: list[str] = []

    async def abandoned(m: str) -> None:
        try:
            await stuck
        except asyncio.CancelledError:
            cancelled.append(m)
            raise

    task = asyncio.ensure_future(consumer._deliver(abandoned, "c"))
    await asyncio.sleep(0.01)
    consumer.suspend_flow.set()
    await task
    await asyncio.sleep(0.01)
    assert cancelled == ["c"]


async def test_worker_consumer_commits_a_chunk_once_it_and_those_before_are_acked() -> None:
    """A chunk of records is one message at its last record's offset; a commit covers it
    from where it starts (after the last offset read before it) only once it is acked and
    so is every chunk before it."""
    app, _ = create_app(driver_config(settings()), collaborators())
    app.finalize()
    consumer = app.consumer
    tp = TP("unit-events", 0)

    def deliver(last: int, start: int) -> None:
        consumer._chunk_start[tp][last] = start

    def ack(*offsets: int) -> None:
        for o in offsets:
            consumer._acked[tp].append(o)
            consumer._acked_index[tp].add(o)

    def commit() -> int | None:
        offset = consumer._new_offset(tp)
        if offset is not None:
            consumer._committed_offset[tp] = offset
        return offset

    deliver(63, 0)
    deliver(127, 64)
    ack(63)
    assert commit() == 64
    deliver(191, 128)
    ack(191)  # 64..127 not yet processed
    assert commit() is None
    ack(127)
    assert commit() == 192 and not consumer._chunk_start[tp] and not consumer._acked[tp]
    deliver(255, 193)  # a gap of one offset (e.g. a transaction marker) before it: covered
    deliver(319, 256)
    deliver(383, 320)
    ack(255, 383)
    assert commit() == 256 and list(consumer._acked[tp]) == [383]
    ack(319)
    assert commit() == 384


async def test_worker_consumer_takes_the_fetch_wait() -> None:
    """Faust fixes the worker consumer's fetch wait at 1500 ms; the setting replaces it."""
    app, _ = create_app(driver_config(settings(kafka_fetch_wait_ms=123)), collaborators())
    app.finalize()
    thread = app.consumer._new_consumer_thread()
    consumer = thread._create_worker_consumer(app.transport)
    try:
        assert consumer._fetch_max_wait_ms == 123
    finally:
        await consumer.stop()


def test_resumed_reducer_takes_a_checkpoint_ahead_of_it(redis_client) -> None:  # type: ignore[no-untyped-def]
    """From a checkpoint in a real Redis: the state, the offsets, a fresh snapshot, and idle
    time counted from the resume (the reducer advances event time after 10 s without events)."""
    config = driver_config(settings())
    topics = Topics({0: b"zero", 1: b"one"})

    def driver() -> Driver:
        ck = ReducerCheckpoint(redis_client, "unitresume", state_version(config.pipeline))
        return create_app(config, collaborators(ck, topics))[1]

    before = driver()
    before.pipeline.update(PostEvent.model_validate_json(post("1")))
    before.reducer.applied = {0: 5}
    before.io.checkpoints.save(2, topics.society[1], before.reducer.checkpoint_state())

    state = driver()
    state.resume_reducer()
    r = state.reducer
    assert (r.next_offset, r.checkpointed, r.applied) == (2, 2, {0: 5})
    assert state.pipeline.snapshot().value("posts_total") == 1.0
    assert r.dirty and time.time() - r.last_event_wall < IDLE_AFTER_S

    ahead = driver()
    ahead.reducer.next_offset = 3  # its own state is further on: the checkpoint is not taken
    ahead.resume_reducer()
    assert ahead.pipeline.snapshot().value("posts_total") == 0.0


def test_worker_wires_its_collaborators_from_the_settings() -> None:
    s = settings(checkpoint_interval_s=42.0, partitions=3)
    app, driver = build(s)
    assert driver.config.partitions == 3 and driver.config.checkpoint_interval_s == 42.0
    assert driver.config.pipeline == live_pipeline(s)
    assert driver.io.checkpoints.version == state_version(live_pipeline(s))
    assert driver.io.checkpoints.key == "unit:reducer:checkpoint"


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def test_nothing_under_streams_imports_service() -> None:
    """The engines, the detectors and their drivers take their I/O collaborators from
    ``service/``; they never reach for it (imports inside functions included)."""
    files = sorted(p for part in ("streams", "detectors") for p in (ROOT / part).rglob("*.py"))
    offenders = {str(p.relative_to(ROOT)): sorted(m for m in _imports(p)
                                                  if m == "service" or m.startswith("service."))
                 for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}
    assert "streams/app.py" in offenders and len(offenders) > 20  # the scan saw the packages


def test_checkpoint_version_follows_engine_code_and_config_not_drivers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for part in ("streams", "detectors"):
        shutil.copytree(ROOT / part, tmp_path / part,
                        ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(streams.reducer, "_ROOT", tmp_path)
    config = settings().pipeline(threads_local=False)
    base = state_version(config)
    assert base == state_version(dataclasses.replace(config))
    assert state_version(dataclasses.replace(config, verbatim_threshold=7)) != base
    for driver_file in ("streams/app.py", "streams/reducer.py", "streams/replay.py"):
        with (tmp_path / driver_file).open("a") as f:
            f.write("\n# a driver change, e.g. a log line\n")
    assert state_version(config) == base
    for engine_file in ("streams/state/threads.py", "streams/pipeline.py", "detectors/burst.py"):
        with (tmp_path / engine_file).open("a") as f:
            f.write("\n# an engine change\n")
        changed = state_version(config)
        assert changed != base
        base = changed

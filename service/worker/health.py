"""The worker's self-health, measured where the data is and written to Redis
(:class:`~service.health_metrics.HealthStore`) on a timer; the API exports it.

- consumer lag: for every partition of the driver's topics (events, society, alerts, dead
  letters; not Faust's internal ones) assigned to this worker, the log end offset the consumer
  last heard of minus the next offset its agent reads (Faust's monitor: the last offset read
  into a stream; before any read, the consumer's position);
- reducer delay: wall clock minus the event time the reducer's pipeline has reached (only the
  worker holding the society partition writes it);
- checkpoint age: seconds the reducer's applied state has been ahead of its checkpoint,
  counted from the last save (or from when this worker took the reducer over), 0 when the
  checkpoint holds everything applied: what a restart would have to replay;
- embedding: texts handed to the embedder and not yet encoded (a gauge a worker, summed on
  export), texts encoded and seconds spent (counters).

:func:`install` adds the timer to the worker's Faust app; :class:`MeteredEmbedder` and
:class:`MeteredCheckpoints` wrap the collaborators ``service.worker.collaborators`` builds.

>>> health = WorkerHealth(store=None, worker="w1", interval_s=1.0, checkpoint_interval_s=60.0)
>>> health.checkpoint_age(due=True, wall=100.0), health.checkpoint_age(due=True, wall=130.0)
(0.0, 30.0)
>>> health.checkpoint_saved(wall=140.0, size=10)  # more arrived since: counted from the save
>>> health.checkpoint_age(due=True, wall=150.0), health.checkpoint_age(due=False, wall=160.0)
(10.0, 0.0)
>>> health.checkpoint_age(due=True, wall=170.0), health.checkpoint_age(due=True, wall=200.0)
(0.0, 30.0)
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import faust
import numpy as np

from service.health_metrics import HealthStore, field_name
from streams.app import Collaborators, Driver
from streams.embedding import TextEmbedder

log = logging.getLogger(__name__)


def consumer_lag(assigned: Iterable[Any], end: Mapping[Any, int | None],
                 read: Mapping[Any, int], position: Mapping[Any, int | None]) -> dict[Any, int]:
    """Lag of every assigned topic partition whose end offset is known: ``end`` minus the next
    offset to read (``read``: last offset read into a stream; else the fetch ``position``).

    >>> consumer_lag(["a", "b", "c"], {"a": 10, "b": 7, "c": None}, {"a": 3}, {"b": 7})
    {'a': 6, 'b': 0}
    """
    out = {}
    for tp in assigned:
        hw = end.get(tp)
        nxt = read[tp] + 1 if tp in read else position.get(tp)
        if hw is not None and nxt is not None:
            out[tp] = max(0, hw - nxt)
    return out


class WorkerHealth:
    """In-process tallies of one worker, flushed to Redis by :meth:`flush`."""

    def __init__(self, store: HealthStore | None, worker: str, interval_s: float,
                 checkpoint_interval_s: float) -> None:
        self.store = store
        self.worker = worker
        self.interval_s = interval_s
        self.checkpoint_interval_s = checkpoint_interval_s
        self._lock = threading.Lock()  # the embedder runs in an executor thread
        self.queue = 0
        self.embedded = 0
        self.embed_seconds = 0.0
        self.checkpoint_size: int | None = None
        self._behind_since: float | None = None  # first wall time the state was ahead

    # -- tallies, from the embedder's thread and the checkpoint timer

    def embedding_started(self, n: int) -> None:
        with self._lock:
            self.queue += n

    def embedding_done(self, n: int, seconds: float) -> None:
        with self._lock:
            self.queue -= n
            self.embedded += n
            self.embed_seconds += seconds

    def checkpoint_saved(self, wall: float, size: int) -> None:
        self._behind_since = wall
        self.checkpoint_size = size

    def checkpoint_age(self, due: bool, wall: float) -> float:
        """Age of the checkpoint against the applied state (``due``: the state is ahead)."""
        if not due:
            self._behind_since = None
            return 0.0
        if self._behind_since is None:
            self._behind_since = wall
        return wall - self._behind_since

    # -- the timer

    def gauges(self, driver: Driver, lag: Mapping[Any, int], holds_society: bool,
               wall: float) -> dict[str, float]:
        out: dict[str, float] = {
            field_name("consumer_lag_records", topic=tp.topic, partition=str(tp.partition)): n
            for tp, n in lag.items()}
        with self._lock:
            out[field_name("embedding_queue_texts", worker=self.worker)] = self.queue
        if holds_society:
            reducer = driver.reducer
            latest = reducer.pipeline.latest
            if latest is not None:
                out["reducer_delay_seconds"] = wall - latest
            out["reducer_checkpoint_interval_seconds"] = self.checkpoint_interval_s
            if self.checkpoint_interval_s > 0:
                out["reducer_checkpoint_age_seconds"] = self.checkpoint_age(
                    reducer.checkpoint_due(), wall)
            if self.checkpoint_size is not None:
                out["reducer_checkpoint_size_bytes"] = self.checkpoint_size
        else:
            self._behind_since = None  # counted afresh if the reducer comes back
        return out

    def counters(self) -> dict[str, float]:
        """The counters' increments since the last call."""
        with self._lock:
            out = {"embedded_texts_total": float(self.embedded),
                   "embedding_seconds_total": self.embed_seconds}
            self.embedded, self.embed_seconds = 0, 0.0
        return out

    def flush(self, driver: Driver, lag: Mapping[Any, int], holds_society: bool,
              wall: float) -> None:
        assert self.store is not None
        # valid for a few intervals: a gauge whose writer stopped disappears soon after
        self.store.write(self.gauges(driver, lag, holds_society, wall), self.counters(),
                         ttl_s=max(10.0, 5 * self.interval_s), now=wall)


class MeteredEmbedder:
    """A :class:`~streams.embedding.TextEmbedder` that tells :class:`WorkerHealth` what it
    encodes."""

    def __init__(self, inner: TextEmbedder, health: WorkerHealth) -> None:
        self.inner = inner
        self.health = health

    def encode_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.health.embedding_started(len(texts))
        started = time.perf_counter()
        try:
            return self.inner.encode_batch(texts)
        finally:
            self.health.embedding_done(len(texts), time.perf_counter() - started)


def metered_embedder(factory: Callable[[], TextEmbedder],
                     health: WorkerHealth) -> Callable[[], TextEmbedder]:
    return lambda: MeteredEmbedder(factory(), health)


class MeteredCheckpoints:
    """The reducer's checkpoint store, telling :class:`WorkerHealth` of every save; anything
    else goes to the wrapped store."""

    def __init__(self, inner: Any, health: WorkerHealth) -> None:
        self.inner = inner
        self.health = health

    def save(self, offset: int, last_raw: bytes, state: object) -> Any:
        saved = self.inner.save(offset, last_raw, state)
        self.health.checkpoint_saved(time.time(), saved.size)
        return saved

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def install(app: faust.App, driver: Driver, health: WorkerHealth) -> None:
    """Add the health timer to the worker's app (before it starts)."""

    @app.timer(health.interval_s)
    async def publish_health() -> None:
        consumer = app.consumer
        ours = {t.get_topic_name() for t in driver.topics.values()}  # not Faust's own topics
        assigned = [tp for tp in consumer.assignment() if tp.topic in ours]
        read = app.monitor.tp_read_offsets
        end, position = {}, {}
        for tp in assigned:
            try:
                end[tp] = consumer.highwater(tp)
                if tp not in read:
                    position[tp] = await consumer.position(tp)
            except Exception as exc:  # a partition being revoked: measured next tick
                log.debug("health: no offsets for %s (%s)", tp, exc)
        society = driver.topics["society"].get_topic_name()
        held = any(tp.topic == society for tp in assigned)
        health.flush(driver, consumer_lag(assigned, end, read, position), held, time.time())


def instrument(io: Collaborators, health: WorkerHealth) -> Collaborators:
    """``io`` with its embedder and checkpoint store reporting to ``health``."""
    return dataclasses.replace(io, embedder=metered_embedder(io.embedder, health),
                               checkpoints=MeteredCheckpoints(io.checkpoints, health))

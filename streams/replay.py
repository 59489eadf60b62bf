"""Offline replay: the live engines and detectors driven in one process, without Kafka, into a
JSON report.

Events are de-duplicated by id, put in ``(event time, event id)`` order by the live reducer's
:class:`~streams.order.EventTimeOrder` (one partition: an event waits until events
``allowed_lateness_s`` later have been read; one later than that is applied out of order and
counted, as live), embedded in batches (events wait in that order until a batch of texts is
full, so the pipeline still sees them in order), absorbed by the
:class:`~streams.pipeline.Pipeline`, and event time drives the windows and the detectors. The
live reducer applies the same events in the same order with the same ``advance`` calls, so
its figures and alerts are the replay's (before :meth:`~streams.pipeline.Pipeline.close`).

The report has the shape of a snapshot, so its keys are the names the API serves:
``samples`` (``GET /v1/metrics``), ``details`` (``GET /v1/details/{name}``), ``alerts``
(every incident: type, start, end, fingerprint, evidence) and ``input`` (records read,
duplicates, dead letters by reason, embedding counts).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from streams.embedding import TextEmbedder
from streams.events import DeadLetter, Event
from streams.order import ALLOWED_LATENESS_S, EventTimeOrder
from streams.partition import DEDUP_CAPACITY
from streams.pipeline import Pipeline
from streams.state.base import Snapshot
from streams.state.dedup import Dedup

#: Records between two progress reports.
PROGRESS_EVERY = 1000


@dataclass
class ReplayResult:
    pipeline: Pipeline
    order: EventTimeOrder[Event] = field(default_factory=EventTimeOrder)
    read: int = 0
    duplicates: int = 0
    embedded: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)

    def snapshot(self) -> Snapshot:
        """The pipeline's snapshot with the ordering's late count: what the live reducer
        publishes."""
        snap = self.pipeline.snapshot()
        snap.samples.append(self.order.sample())
        return snap

    def report(self) -> dict[str, Any]:
        snap = self.snapshot()
        return {
            "generated_at": datetime.now(UTC).isoformat(),
            "input": {"records": self.read, "events": self.pipeline.events,
                      "duplicates": self.duplicates, "embedded": self.embedded,
                      "dead_letters": dict(sorted(self.dead_letters.items()))},
            **snap.as_dict(),
            "alerts": self.pipeline.alerts_report(),
        }


def replay(items: Iterable[Event | DeadLetter], pipeline: Pipeline | None = None, *,
           embedder: TextEmbedder | None = None, batch: int = 64,
           dedup_capacity: int = DEDUP_CAPACITY,
           allowed_lateness_s: float = ALLOWED_LATENESS_S, close: bool = True,
           progress: Callable[[int], None] | None = None) -> ReplayResult:
    """Feed ``items`` (in event-time order, up to ``allowed_lateness_s``) through
    de-duplication, event-time ordering and the pipeline; ``close``: end with
    :meth:`Pipeline.close` (a final evaluation, open incidents resolved), else leave the
    pipeline as the live reducer holds it once every event is applied.

    Without an ``embedder`` the semantic engines see no vectors (the rest is unchanged).
    ``progress(n)`` hears of every ``n`` records read (every :data:`PROGRESS_EVERY`, and the
    rest at the end), e.g. a progress bar's ``update``.
    """
    order: EventTimeOrder[Event] = EventTimeOrder(1, allowed_lateness_s=allowed_lateness_s)
    result = ReplayResult(pipeline or Pipeline(), order)
    p = result.pipeline
    dedup = Dedup(dedup_capacity)
    waiting: list[Event] = []
    texts: list[str] = []

    def drain() -> None:
        vectors = embedder.encode_batch(texts) if embedder is not None and texts else None
        result.embedded += len(texts)
        i = 0
        for ev in waiting:
            vec = None
            if vectors is not None and p.wants_vector(ev):
                vec = vectors[i]
                i += 1
            p.update(ev, vec)
            p.advance()  # at the latest event time; the pipeline evaluates once per tick
        waiting.clear()
        texts.clear()

    def take(ready: Iterable[Event]) -> None:
        for ev in ready:
            waiting.append(ev)
            if embedder is not None and p.wants_vector(ev):
                texts.append(ev.text)
            # drain when the text batch is full; never let non-text events pile up behind it
            if len(texts) >= batch or not texts or len(waiting) >= 16 * batch:
                drain()

    for item in items:
        result.read += 1
        if isinstance(item, DeadLetter):
            result.dead_letters[item.reason] += 1
        elif not dedup.admit(item.id):
            result.duplicates += 1
        else:
            order.push(item.event_time.timestamp(), item.id, item, partition=0,
                       offset=result.read, wall=0.0)
            take(order.ready(wall=0.0))
        if progress is not None and result.read % PROGRESS_EVERY == 0:
            progress(PROGRESS_EVERY)
    take(order.drain())
    drain()
    if close:
        p.close()
    if progress is not None and result.read % PROGRESS_EVERY:
        progress(result.read % PROGRESS_EVERY)
    return result

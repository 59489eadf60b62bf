"""Offline replay: the live engines and detectors driven in one process, without Kafka, into a
JSON report.

Events are de-duplicated by id, embedded in batches (events wait in arrival order until a
batch of texts is full, so the pipeline still sees them in order), absorbed by the
:class:`~streams.pipeline.Pipeline`, and event time drives the windows and the detectors.

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
from streams.partition import DEDUP_CAPACITY
from streams.pipeline import Pipeline
from streams.state.dedup import Dedup

#: Records between two progress reports.
PROGRESS_EVERY = 1000


@dataclass
class ReplayResult:
    pipeline: Pipeline
    read: int = 0
    duplicates: int = 0
    embedded: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)

    def report(self) -> dict[str, Any]:
        snap = self.pipeline.snapshot()
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
           progress: Callable[[int], None] | None = None) -> ReplayResult:
    """Feed ``items`` (in event-time order) through de-duplication and the pipeline.

    Without an ``embedder`` the semantic engines see no vectors (the rest is unchanged).
    ``progress(n)`` hears of every ``n`` records read (every :data:`PROGRESS_EVERY`, and the
    rest at the end), e.g. a progress bar's ``update``.
    """
    result = ReplayResult(pipeline or Pipeline())
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

    for item in items:
        result.read += 1
        if isinstance(item, DeadLetter):
            result.dead_letters[item.reason] += 1
        elif not dedup.admit(item.id):
            result.duplicates += 1
        else:
            waiting.append(item)
            if embedder is not None and p.wants_vector(item):
                texts.append(item.text)
            # drain when the text batch is full; never let non-text events pile up behind it
            if len(texts) >= batch or not texts or len(waiting) >= 16 * batch:
                drain()
        if progress is not None and result.read % PROGRESS_EVERY == 0:
            progress(PROGRESS_EVERY)
    drain()
    p.close()
    if progress is not None and result.read % PROGRESS_EVERY:
        progress(result.read % PROGRESS_EVERY)
    return result

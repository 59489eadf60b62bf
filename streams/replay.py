"""Offline replay: the live engines driven in one process, without Kafka, into a JSON report.

The report has the shape of a snapshot, so its keys are the names the API serves:
``samples`` (``GET /v1/metrics``), ``details`` (``GET /v1/details/{name}``), plus
``input`` (events read, duplicates, dead letters by reason).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from streams.events import DeadLetter, Event
from streams.pipeline import Pipeline
from streams.state.dedup import Dedup


@dataclass
class ReplayResult:
    pipeline: Pipeline
    read: int = 0
    duplicates: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)

    def report(self) -> dict[str, Any]:
        snap = self.pipeline.snapshot()
        return {
            "generated_at": datetime.now(UTC).isoformat(),
            "input": {"records": self.read, "events": self.pipeline.events,
                      "duplicates": self.duplicates,
                      "dead_letters": dict(sorted(self.dead_letters.items()))},
            **snap.as_dict(),
        }


def replay(items: Iterable[Event | DeadLetter], pipeline: Pipeline | None = None, *,
           dedup_capacity: int = 2_000_000,
           progress: Callable[[int], None] | None = None) -> ReplayResult:
    """Feed ``items`` (in event-time order) through de-duplication and the pipeline."""
    result = ReplayResult(pipeline or Pipeline())
    dedup = Dedup(dedup_capacity)
    for item in items:
        result.read += 1
        if isinstance(item, DeadLetter):
            result.dead_letters[item.reason] += 1
        elif dedup.admit(item.id):
            result.pipeline.update(item)
        else:
            result.duplicates += 1
        if progress is not None:
            progress(1)
    result.pipeline.expire()
    return result

"""The society-wide engines, composed: one object that the Faust reducer and the offline replay
both drive, so live figures and replay reports come from the same code.

>>> from datetime import datetime, timezone
>>> from streams.events import PostEvent
>>> t = datetime(2026, 2, 1, tzinfo=timezone.utc)
>>> p = Pipeline()
>>> p.update(PostEvent(id="post:1", event_time=t, observed_at=t, post_id="1", author="a"))
>>> p.snapshot().value("posts_total")
1.0
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

import numpy as np

from streams.events import Event
from streams.state.activity import ActivityState
from streams.state.base import Sample, Snapshot


class Engine(Protocol):
    def update(self, event: Event) -> None: ...
    def expire(self, now: datetime) -> None: ...
    def snapshot(self) -> Snapshot: ...


class Pipeline:
    """Feed de-duplicated events (with their embedding when they have one), read snapshots."""

    def __init__(self) -> None:
        self.activity = ActivityState()
        self.events = 0
        self.latest: datetime | None = None

    @property
    def engines(self) -> list[Engine]:
        return [self.activity]

    def update(self, event: Event, vector: np.ndarray | None = None) -> None:
        self.events += 1
        if self.latest is None or event.event_time > self.latest:
            self.latest = event.event_time
        for engine in self.engines:
            engine.update(event)

    def expire(self, now: datetime | None = None) -> None:
        """Advance windows to ``now`` (default: the latest event time seen)."""
        now = now or self.latest
        if now is None:
            return
        for engine in self.engines:
            engine.expire(now)

    def snapshot(self) -> Snapshot:
        snap = Snapshot.merge([e.snapshot() for e in self.engines])
        snap.samples.append(Sample("events_processed_total", float(self.events), kind="counter",
                                   help="De-duplicated events absorbed by the engines"))
        if self.latest is not None:
            snap.samples.append(Sample("event_time_latest_seconds", self.latest.timestamp(),
                                       help="Latest event time absorbed (unix seconds)"))
        return snap

"""The detector suite: every detector behind one small surface, for the worker and for replay.

Feed it in event-time order and ask it for alert transitions:

- ``observe_event(event)``: every canonical event (surge, super-node, burst and engagement
  detectors read what they need from raw events);
- ``observe_embedding(t, author, vec)``: one post embedding (semantic shift);
- ``observe_pagerank(t, ranks)``: a PageRank vector from the PageRank engine, used when
  ``supernode.source == "external"`` (by default PageRank is computed from comment events);
- ``evaluate(now)``: transitions (firing / updated / resolved) since the last evaluation;
  ``poll(now)`` does the same at most once per ``evaluate_interval_s`` of event time;
- ``close(now)``: resolves what is still open (end of a replay);
- ``incidents()`` / ``report()``: every incident with its latest state, for the replay report;
- ``samples()``: ``alerts_firing{type}`` and ``alerts_total{type,severity}`` for Prometheus.

>>> from datetime import datetime, timezone
>>> suite = DetectorSuite()
>>> suite.evaluate(datetime(2026, 2, 1, tzinfo=timezone.utc))
[]
>>> sorted(suite.detectors)
['burst', 'engagement', 'shift', 'supernode', 'surge']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np

from detectors.alert import Alert, AlertBook, Finding
from detectors.burst import BurstConfig, BurstDetector
from detectors.engagement import EngagementConfig, EngagementDetector
from detectors.shift import ShiftConfig, ShiftDetector
from detectors.supernode import SupernodeConfig, SupernodeDetector
from detectors.surge import SurgeConfig, SurgeDetector
from streams.events import Event
from streams.state.base import Sample


class Detector(Protocol):
    type: str

    def findings(self, now: float) -> list[Finding]: ...


@dataclass(frozen=True, slots=True)
class LifecycleConfig:
    resolve_after_s: float = 900.0
    update_min_interval_s: float = 60.0
    update_score_ratio: float = 1.5
    cooldown_s: float = 3600.0
    max_closed: int = 10_000


@dataclass(frozen=True, slots=True)
class DetectorConfig:
    """Every threshold and window, with its documented default (see each detector's module)."""

    enabled: tuple[str, ...] = ("surge", "supernode", "burst", "shift", "engagement")
    evaluate_interval_s: float = 1.0
    lifecycle: LifecycleConfig = field(default_factory=LifecycleConfig)
    surge: SurgeConfig = field(default_factory=SurgeConfig)
    supernode: SupernodeConfig = field(default_factory=SupernodeConfig)
    burst: BurstConfig = field(default_factory=BurstConfig)
    shift: ShiftConfig = field(default_factory=ShiftConfig)
    engagement: EngagementConfig = field(default_factory=EngagementConfig)


class DetectorSuite:
    def __init__(self, config: DetectorConfig | None = None) -> None:
        self.cfg = cfg = config or DetectorConfig()
        lc = cfg.lifecycle
        self.book = AlertBook(lc.resolve_after_s, lc.update_min_interval_s,
                              lc.update_score_ratio, lc.cooldown_s, lc.max_closed)
        self.surge = SurgeDetector(cfg.surge)
        self.supernode = SupernodeDetector(cfg.supernode)
        self.burst = BurstDetector(cfg.burst)
        self.shift = ShiftDetector(cfg.shift)
        self.engagement = EngagementDetector(cfg.engagement)
        self.detectors: dict[str, Detector] = {
            d.type: d for d in (self.surge, self.supernode, self.burst, self.shift,
                                self.engagement) if d.type in cfg.enabled}
        self._last_eval: datetime | None = None

    def observe_event(self, event: Event) -> None:
        for d in (self.surge, self.supernode, self.burst, self.engagement):
            if d.type in self.detectors:
                d.observe_event(event)

    def observe_embedding(self, t: datetime, author: str, vec: np.ndarray) -> None:
        if "shift" in self.detectors:
            self.shift.observe_embedding(t.timestamp(), author, vec)

    def observe_pagerank(self, t: datetime, ranks: dict[str, float]) -> None:
        if "supernode" in self.detectors:
            self.supernode.observe_pagerank(t.timestamp(), ranks)

    def evaluate(self, now: datetime) -> list[Alert]:
        self._last_eval = now
        out: list[Alert] = []
        for name, d in self.detectors.items():
            out.extend(self.book.reconcile(now, name, d.findings(now.timestamp())))
        return out

    def poll(self, now: datetime) -> list[Alert]:
        """``evaluate`` at most once per ``evaluate_interval_s`` of event time."""
        if (self._last_eval is not None
                and (now - self._last_eval).total_seconds() < self.cfg.evaluate_interval_s):
            return []
        return self.evaluate(now)

    def close(self, now: datetime) -> list[Alert]:
        return self.book.resolve_all(now)

    def incidents(self) -> list[Alert]:
        return self.book.incidents()

    def report(self) -> list[dict[str, Any]]:
        """One JSON-ready row per incident: type, key, severity, start, end, fingerprint,
        summary and evidence, ordered by start."""
        rows = [{"type": a.type, "key": a.key, "severity": a.severity, "state": a.state,
                 "start": a.starts_at.astimezone(UTC).isoformat(),
                 "end": a.ends_at.astimezone(UTC).isoformat() if a.ends_at else None,
                 "fingerprint": a.fingerprint, "summary": a.summary, "labels": a.labels,
                 "evidence": a.evidence} for a in self.incidents()]
        return sorted(rows, key=lambda r: (r["start"], r["type"], r["key"]))

    def samples(self) -> list[Sample]:
        return self.book.samples()

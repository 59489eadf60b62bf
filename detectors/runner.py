"""The detector suite: every detector behind one engine, for the pipeline and for replay.

It is an :class:`~streams.state.base.Engine`: feed it items in event-time order and ask it for
alert transitions (every time in unix seconds, the engines' one time type):

- ``update(item)``: every item; each detector reads what it needs (surge, burst: the text's
  tokens; super-node, engagement: the events; shift: ``item.vector`` of admitted posts;
  lockstep: who commented on which thread, when);
- ``expire(now)``: each detector drops what left its windows (bounded work per call);
- ``evaluate(now)``: transitions (firing / updated / resolved) since the last evaluation (the
  pipeline calls it once per tick of event time, 10 s by default);
- ``close(now)``: resolves what is still open (end of a replay);
- ``incidents()`` / ``report()``: every incident with its latest state, for the replay report;
- ``snapshot()``: ``alerts_firing{type}`` and ``alerts_total{type,severity}``, and each
  detector's own state samples.

>>> suite = DetectorSuite()
>>> suite.evaluate(1769904000.0)
[]
>>> sorted(suite.detectors)
['burst', 'engagement', 'lockstep', 'shift', 'supernode', 'surge']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, Protocol

from detectors.alert import Alert, AlertBook, Finding
from detectors.burst import BurstConfig, BurstDetector
from detectors.engagement import EngagementConfig, EngagementDetector
from detectors.lockstep import LockstepConfig, LockstepDetector
from detectors.shift import ShiftConfig, ShiftDetector
from detectors.socialisation import SocialisationConfig
from detectors.supernode import SupernodeConfig, SupernodeDetector
from detectors.surge import SurgeConfig, SurgeDetector
from streams.state.base import Item, Snapshot, updates_for


class Detector(Protocol):
    type: str

    def update(self, item: Item) -> None: ...

    def findings(self, now: float) -> list[Finding]: ...

    def snapshot(self) -> Snapshot: ...


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

    enabled: tuple[str, ...] = ("surge", "supernode", "burst", "shift", "engagement", "lockstep")
    lifecycle: LifecycleConfig = field(default_factory=LifecycleConfig)
    surge: SurgeConfig = field(default_factory=SurgeConfig)
    supernode: SupernodeConfig = field(default_factory=SupernodeConfig)
    burst: BurstConfig = field(default_factory=BurstConfig)
    shift: ShiftConfig = field(default_factory=ShiftConfig)
    engagement: EngagementConfig = field(default_factory=EngagementConfig)
    lockstep: LockstepConfig = field(default_factory=LockstepConfig)
    # judged by the reducer (and the replay) on the per-agent stage's merged population
    socialisation: SocialisationConfig = field(default_factory=SocialisationConfig)


class DetectorSuite:
    def __init__(self, config: DetectorConfig | None = None) -> None:
        self.cfg = cfg = config or DetectorConfig()
        lc = cfg.lifecycle
        self.book = AlertBook(lc.resolve_after_s, lc.update_min_interval_s,
                              lc.update_score_ratio, lc.cooldown_s, lc.max_closed)
        every: list[Detector] = [SurgeDetector(cfg.surge), SupernodeDetector(cfg.supernode),
                                 BurstDetector(cfg.burst), ShiftDetector(cfg.shift),
                                 EngagementDetector(cfg.engagement),
                                 LockstepDetector(cfg.lockstep)]
        self.detectors: dict[str, Detector] = {d.type: d for d in every if d.type in cfg.enabled}
        # by event class, the ``update`` of each detector that reads it (a detector may say
        # which it reads, ``kinds``: its ``update`` ignores every other), made at a kind's first
        self._routes: dict[type, list[Callable[[Item], None]]] = {}

    def __getstate__(self) -> dict[str, Any]:  # bound methods are rebuilt, not pickled
        return {k: v for k, v in self.__dict__.items() if k != "_routes"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._routes = {}

    def update(self, item: Item) -> None:
        kind = type(item.event)
        updates = self._routes.get(kind)
        if updates is None:
            updates = self._routes[kind] = updates_for(self.detectors.values(), kind)
        for update in updates:
            update(item)

    def expire(self, now: float) -> None:
        for d in self.detectors.values():
            expire = getattr(d, "expire", None)
            if expire is not None:
                expire(now)

    def evaluate(self, now: float) -> list[Alert]:
        out: list[Alert] = []
        for name, d in self.detectors.items():
            out.extend(self.book.reconcile(now, name, d.findings(now)))
        return out

    def close(self, now: float) -> list[Alert]:
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

    def snapshot(self) -> Snapshot:
        return Snapshot.merge([Snapshot(samples=self.book.samples()),
                               *(d.snapshot() for d in self.detectors.values())])

"""The alert model and its lifecycle: one incident, one fingerprint, firing -> updated -> resolved.

A detector reports :class:`Finding` objects: "this incident (its ``key``) is going on now".
The :class:`AlertBook` turns the findings of successive evaluations into :class:`Alert`
transitions, so that re-evaluating the same incident never fires it twice:

- a finding whose fingerprint has no open alert -> ``firing`` (``starts_at`` = now);
- an open alert whose finding escalates (higher severity, or its score grew by
  ``update_score_ratio`` at least ``update_min_interval_s`` after the last transition)
  -> ``updated``;
- an open alert not reported for ``resolve_after_s`` -> ``resolved`` (``ends_at`` = last seen);
- a finding that comes back within ``cooldown_s`` of its resolution is the same incident:
  it re-opens as ``updated`` with its original ``starts_at`` instead of firing again.

The fingerprint is a hash of (type, key): stable across evaluations, processes and replays.
Every alert's evidence carries ``link``: the path, from the API's root, of the incident's view
on the live page (``/#alert-<incident id>``; the page also opens ``/#alert-<fingerprint>`` on
the newest incident of that fingerprint). The rest of the evidence is the detector's (see
:mod:`detectors.evidence` for the shared exemplars, clusters and timeline).
Time is event time (what the stream says), so a replay gives the same alerts as the live run;
the book takes it as unix seconds (the one time type of the engines) and writes the alerts'
times as aware UTC datetimes (their published form).

>>> t0 = 1770537600.0  # 2026-02-08 08:00 UTC
>>> book = AlertBook(resolve_after_s=60)
>>> f = Finding("surge", "token:CLAW", "warning", "CLAW surge", {"posts": 12}, score=12)
>>> [(a.state, a.evidence["link"]) for a in book.reconcile(t0, "surge", [f])]
[('firing', '/#alert-c5bc81277148a7eb:1770537600')]
>>> book.reconcile(t0 + 10, "surge", [f])   # same incident: nothing new
[]
>>> [(a.state, a.ends_at) for a in book.reconcile(t0 + 80, "surge", [])]
[('resolved', datetime.datetime(2026, 2, 8, 8, 0, 10, tzinfo=datetime.timezone.utc))]
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from streams.state.base import Sample

Severity = Literal["info", "warning", "critical"]
AlertState = Literal["firing", "updated", "resolved"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "critical": 2}


def _at(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def fingerprint(alert_type: str, key: str) -> str:
    """Stable 16-hex-digit identity of an incident (not Python's salted ``hash``)."""
    return hashlib.sha256(f"{alert_type}\x00{key}".encode()).hexdigest()[:16]


def page_link(fp: str, starts_at: datetime) -> str:
    """The incident's view on the live page, as a path from the API's root."""
    return f"/#alert-{fp}:{int(starts_at.timestamp())}"


class Alert(BaseModel):
    """One transition of one incident, as published on the alerts topic and stored in history."""

    model_config = ConfigDict(frozen=True)

    type: str = Field(
        description="surge | supernode | burst | shift | engagement | lockstep | socialisation")
    key: str = Field(description="What the incident is about, e.g. token:CLAW or agent:KingMolt")
    severity: Severity
    fingerprint: str
    state: AlertState
    starts_at: AwareDatetime
    ends_at: AwareDatetime | None = None
    updated_at: AwareDatetime = Field(description="Event time of this transition")
    sequence: int = Field(1, description="1 for firing, +1 for each later transition")
    summary: str
    labels: dict[str, str] = Field(default_factory=dict)
    evidence: dict[str, Any] = Field(default_factory=dict)

    @property
    def incident_id(self) -> str:
        """Fingerprint + start: one id per incident, the same for all its transitions."""
        return f"{self.fingerprint}:{int(self.starts_at.timestamp())}"


@dataclass(slots=True)
class Finding:
    """What a detector sees going on now; ``score`` grows with the incident's size."""

    type: str
    key: str
    severity: Severity
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    score: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _Open:
    alert: Alert
    last_seen: datetime
    score: float
    latest: Finding | None = None  # the newest finding, kept for the resolution's evidence


class AlertBook:
    """Deduplicates incidents by fingerprint and emits their lifecycle transitions.

    Memory: one entry per open incident, plus resolved ones for ``cooldown_s`` and the last
    ``max_closed`` closed incidents for the replay report.
    """

    def __init__(self, resolve_after_s: float = 900.0, update_min_interval_s: float = 60.0,
                 update_score_ratio: float = 1.5, cooldown_s: float = 3600.0,
                 max_closed: int = 10_000) -> None:
        self.resolve_after = timedelta(seconds=resolve_after_s)
        self.update_min_interval = timedelta(seconds=update_min_interval_s)
        self.update_score_ratio = update_score_ratio
        self.cooldown = timedelta(seconds=cooldown_s)
        self._open: dict[str, _Open] = {}
        self._recently_resolved: dict[str, Alert] = {}
        self._closed: deque[Alert] = deque(maxlen=max_closed)
        self.fired_total: dict[tuple[str, str], int] = {}

    def reconcile(self, t: float, alert_type: str, findings: list[Finding]) -> list[Alert]:
        """Transitions caused by one detector's findings at ``t`` (unix seconds; its full
        current list)."""
        now = _at(t)
        self._forget_cooled(now)
        out: list[Alert] = []
        seen: set[str] = set()
        for f in findings:
            fp = fingerprint(alert_type, f.key)
            if fp in seen:
                continue
            seen.add(fp)
            out.extend(self._observe(now, fp, f))
        for fp, entry in list(self._open.items()):
            if (entry.alert.type == alert_type and fp not in seen
                    and now - entry.last_seen >= self.resolve_after):
                out.append(self._resolve(fp, entry, now))
        return out

    def resolve_all(self, t: float) -> list[Alert]:
        """Close every open incident (end of a replay, or shutdown) at ``t`` (unix seconds)."""
        now = _at(t)
        return [self._resolve(fp, e, now) for fp, e in list(self._open.items())]

    def firing(self) -> list[Alert]:
        return [e.alert for e in self._open.values()]

    def incidents(self) -> list[Alert]:
        """Latest state of every incident still remembered (one entry per ``incident_id``)."""
        latest: dict[str, Alert] = {}
        for a in [*self._closed, *self.firing()]:
            latest.pop(a.incident_id, None)
            latest[a.incident_id] = a
        return list(latest.values())

    def samples(self) -> list[Sample]:
        """``alerts_firing{type}`` gauges and ``alerts_total{type,severity}`` counters."""
        firing: dict[str, int] = {}
        for e in self._open.values():
            firing[e.alert.type] = firing.get(e.alert.type, 0) + 1
        out = [Sample("alerts_firing", float(n), (("type", t),), "gauge", "Open incidents")
               for t, n in sorted(firing.items())]
        out += [Sample("alerts_total", float(n), (("severity", s), ("type", t)), "counter",
                       "Incidents fired") for (t, s), n in sorted(self.fired_total.items())]
        return out

    def _observe(self, now: datetime, fp: str, f: Finding) -> list[Alert]:
        entry = self._open.get(fp)
        if entry is None:
            previous = self._recently_resolved.pop(fp, None)
            if previous is not None:  # the same incident coming back: re-open, do not re-fire
                alert = self._alert(f, fp, "updated", previous.starts_at, now,
                                    previous.sequence + 1)
            else:
                alert = self._alert(f, fp, "firing", now, now, 1)
                k = (f.type, f.severity)
                self.fired_total[k] = self.fired_total.get(k, 0) + 1
            self._open[fp] = _Open(alert, now, f.score)
            return [alert]
        entry.last_seen = now
        entry.latest = f
        old = entry.alert
        escalated = SEVERITY_RANK[f.severity] > SEVERITY_RANK[old.severity]
        grew = (f.score >= entry.score * self.update_score_ratio and f.score > entry.score
                and now - old.updated_at >= self.update_min_interval)
        if not (escalated or grew):
            return []
        alert = self._alert(f, fp, "updated", old.starts_at, now, old.sequence + 1)
        self._open[fp] = _Open(alert, now, f.score)
        return [alert]

    def _resolve(self, fp: str, entry: _Open, now: datetime) -> Alert:
        del self._open[fp]
        update: dict = {"state": "resolved", "ends_at": entry.last_seen, "updated_at": now,
                        "sequence": entry.alert.sequence + 1}
        if entry.latest is not None:  # resolve with the incident's final evidence
            update |= {"summary": entry.latest.summary,
                       "evidence": {**entry.latest.evidence,
                                    "link": page_link(fp, entry.alert.starts_at)}}
        alert = entry.alert.model_copy(update=update)
        self._recently_resolved[fp] = alert
        self._closed.append(alert)
        return alert

    def _forget_cooled(self, now: datetime) -> None:
        for fp, a in list(self._recently_resolved.items()):
            if a.ends_at is not None and now - a.ends_at > self.cooldown:
                del self._recently_resolved[fp]

    @staticmethod
    def _alert(f: Finding, fp: str, state: AlertState, starts_at: datetime, now: datetime,
               sequence: int) -> Alert:
        return Alert(type=f.type, key=f.key, severity=f.severity, fingerprint=fp, state=state,
                     starts_at=starts_at, updated_at=now, sequence=sequence, summary=f.summary,
                     labels=dict(f.labels),
                     evidence={**f.evidence, "link": page_link(fp, starts_at)})

"""The society-wide engines and the detectors, composed: one object that the Faust reducer and
the offline replay both drive, so live figures and replay reports come from the same code.

Feed de-duplicated events in (roughly) event-time order with :meth:`Pipeline.update`, passing
the post's embedding when it has one; call :meth:`Pipeline.advance` as event time moves on
(windows expire, PageRank refreshes, detectors evaluate: it returns the alert transitions);
read :meth:`Pipeline.snapshot`.

The engine contract (``streams.state.base``): each event becomes one
:class:`~streams.state.base.Item` (its text tokenised once, event time in unix seconds) that
:meth:`Pipeline.update` hands to every engine of :attr:`Pipeline.engines` in order; each engine
takes what it reads (metrics.md): the verbatim filter marks excluded posts first, so the n-gram,
centroid and 10-NN states see only admitted posts; comments and posts feed the interaction
graph (PageRank, super-nodes), threads and cascades; posts and comments feed the comment
coverage (the platform's ``comment_count`` against the comments received); every event feeds
the detectors. An engine that declares the event kinds it reads (``kinds``) is only called for
those (a call that would do nothing is not made). Each alert transition carries the coverage
at its time in ``evidence["coverage"]`` (:meth:`CoverageState.summary`), as do the report's
alerts.

>>> from datetime import datetime, timezone
>>> from streams.events import PostEvent
>>> t = datetime(2026, 2, 1, tzinfo=timezone.utc)
>>> p = Pipeline(PipelineConfig(embed=False))
>>> p.update(PostEvent(id="post:1", event_time=t, observed_at=t, post_id="1", author="a",
...                    title="gm", content="hello world"))
>>> p.advance(t.timestamp())
[]
>>> p.snapshot().value("posts_total")
1.0
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, timedelta
from typing import Any

import numpy as np

from detectors.alert import Alert
from detectors.runner import DetectorConfig, DetectorSuite
from streams.events import CommentEvent, Event, PostEvent
from streams.state.activity import ActivityState
from streams.state.base import Engine, Item, Sample, Snapshot, updates_for
from streams.state.cascades import CascadeConfig, CascadeEngine
from streams.state.centroid import CentroidState, Window
from streams.state.cooperation import CooperationConfig, CooperationEngine
from streams.state.coverage import CoverageConfig, CoverageState
from streams.state.hazard import HazardConfig, HazardEngine
from streams.state.knn import KnnState
from streams.state.ngrams import MAX_TRACKED, NgramTracker
from streams.state.pagerank import InfluenceConfig, InfluenceEngine
from streams.state.roles import RolesConfig, RolesEngine
from streams.state.threads import Partial, ThreadsConfig, ThreadsEngine, merge, totals_snapshot
from streams.state.verbatim import VerbatimFilter

ALERT_COVERAGE_KEPT = 20_000  # over the alert book's remembered incidents (10,000 closed)


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """What the society-wide stage computes; ``service.config.Settings.pipeline()`` builds it.

    embed: embed posts (the semantic metrics need it); embed_comments: also embed comments
    (they then feed the semantic-shift detector, never the paper's post centroid);
    window: the semantic window (day, as published, or hour); matrix_windows: the centroid
    and pairwise similarity matrices cover the latest this many windows (None: all, as a
    replay report does; live, the snapshot written every second is kept small);
    verbatim_threshold: posts whose exact text was seen this many times are excluded from the
    lexical and semantic metrics (the paper's 1,000); ngram_grace_days: the live death rule's
    grace period; ngram_max_tracked: the live n-gram tables' hard bound (None: unbounded;
    ``streams.state.ngrams``); ngram_batch: also keep the paper's batch rule for a finished archive
    (replay: its table is not bounded);
    threads_local: keep thread state here (replay); live, each ingest partition keeps it and
    the reducer sums their partials (:meth:`Pipeline.absorb_threads`);
    tick: how much event time passes between two ``advance`` evaluations (replay; the live
    reducer forces one each snapshot interval of wall time);
    coverage: the comment coverage's horizon and day rows; cooperation: Molt Dynamics'
    cooperation threads; hazard: the Cox adoption hazard per extra exposure (fitted every
    ``hazard.every`` of event time, and at :meth:`Pipeline.close`).
    """

    embed: bool = True
    embed_comments: bool = False
    window: Window = "day"
    matrix_windows: int | None = None
    knn_k: int = 10
    verbatim_threshold: int = 1000
    verbatim_enabled: bool = True
    ngram_grace_days: int | None = 7
    ngram_batch: bool = False
    ngram_max_tracked: int | None = MAX_TRACKED
    influence: InfluenceConfig = field(default_factory=InfluenceConfig)
    threads: ThreadsConfig = field(default_factory=ThreadsConfig)
    threads_local: bool = True
    cascades: CascadeConfig = field(default_factory=CascadeConfig)
    roles: RolesConfig = field(default_factory=RolesConfig)
    coverage: CoverageConfig = field(default_factory=CoverageConfig)
    cooperation: CooperationConfig = field(default_factory=CooperationConfig)
    hazard: HazardConfig = field(default_factory=HazardConfig)
    detectors: DetectorConfig = field(default_factory=DetectorConfig)
    detectors_enabled: bool = True
    tick: timedelta = timedelta(seconds=10)


class Pipeline:
    def __init__(self, config: PipelineConfig | None = None) -> None:
        self.config = cfg = config or PipelineConfig()
        self.activity = ActivityState()
        self.verbatim = VerbatimFilter(cfg.verbatim_threshold, enabled=cfg.verbatim_enabled)
        self.centroid = CentroidState(cfg.window, matrix_windows=cfg.matrix_windows)
        self.knn = KnnState(k=cfg.knn_k, window=cfg.window)
        self.ngrams = NgramTracker(grace_days=cfg.ngram_grace_days, batch=cfg.ngram_batch,
                                   max_tracked=cfg.ngram_max_tracked)
        self.influence = InfluenceEngine(cfg.influence)
        # cascades and roles read the interaction graph the influence engine feeds
        self.cascades = CascadeEngine(cfg.cascades, graph=self.influence.graph)
        self.roles = RolesEngine(cfg.roles, graph=self.influence.graph)
        self.threads = ThreadsEngine(cfg.threads)
        self.coverage = CoverageState(cfg.coverage)
        self.cooperation = CooperationEngine(cfg.cooperation)
        self.hazard = HazardEngine(cfg.hazard, cascades=self.cascades)  # reads the cascades
        # (fingerprint, start) of an incident: coverage at its last transition
        self._alert_coverage: dict[tuple[str, str], dict[str, Any]] = {}
        self._thread_partials: dict[int, tuple[int, Partial]] = {}  # partition: (offset, sums)
        self.detectors = DetectorSuite(cfg.detectors) if cfg.detectors_enabled else None
        # the order matters: the verbatim filter marks the item before the engines that read it
        self.engines: list[Engine] = [self.activity, self.verbatim, self.ngrams, self.centroid,
                                      self.knn, self.influence, self.cascades, self.roles,
                                      self.coverage, self.cooperation, self.hazard]
        if cfg.threads_local:
            self.engines.append(self.threads)
        if self.detectors is not None:
            self.engines.append(self.detectors)
        self.events = 0
        self.latest: float | None = None
        self._last_tick: float | None = None
        self._tick = cfg.tick.total_seconds()
        self._routes: dict[type, list[Callable[[Item], None]]] = {}  # see :meth:`_route`
        self._routed: list[Engine] | None = None

    def __getstate__(self) -> dict[str, Any]:  # the routes (bound methods) are rebuilt
        return {k: v for k, v in self.__dict__.items() if k not in ("_routes", "_routed")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._routes, self._routed = {}, None

    def wants_vector(self, event: Event) -> bool:
        """Whether the embedding stage should embed this event's text."""
        if not self.config.embed:
            return False
        if isinstance(event, PostEvent):
            return bool(event.text)
        return self.config.embed_comments and isinstance(event, CommentEvent) and bool(
            event.content)

    def update(self, event: Event, vector: np.ndarray | None = None) -> None:
        self.events += 1
        item = Item.of(event, vector)
        if self.latest is None or item.t > self.latest:
            self.latest = item.t
        updates = self._routes.get(type(event)) if self._routed is self.engines else None
        for update in updates if updates is not None else self._route(type(event)):
            update(item)

    def _route(self, kind: type) -> list[Callable[[Item], None]]:
        """The ``update`` of each engine that reads events of ``kind``, in order: an engine
        that declares the kinds it reads (``kinds``, a tuple of event classes: its ``update``
        ignores every other) is not called for the others. Made at the first event of a kind
        (after whoever set :attr:`engines` up), again whenever :attr:`engines` is replaced."""
        if self._routed is not self.engines:
            self._routes, self._routed = {}, self.engines
        out = self._routes[kind] = updates_for(self.engines, kind)
        return out

    def advance(self, now: float | None = None, *, force: bool = False) -> list[Alert]:
        """Expire windows and evaluate detectors at ``now`` (unix seconds; default: the latest
        event time), at most once per ``tick`` of event time unless ``force``; returns alert
        transitions."""
        now = self.latest if now is None else now
        if now is None:
            return []
        if not force and self._last_tick is not None and now - self._last_tick < self._tick:
            return []
        self._last_tick = now
        for engine in self.engines:
            engine.expire(now)
        # The engines' state is long-lived: frozen out of the cyclic collector's reach, it is
        # not rescanned by every full collection (whose cost would grow with the state, and
        # with it every event's). Refcounting still frees what the engines drop.
        gc.freeze()
        return self._with_coverage(self.detectors.evaluate(now)
                                   if self.detectors is not None else [])

    def _with_coverage(self, alerts: list[Alert]) -> list[Alert]:
        """Each transition with the comment coverage of now in its evidence (how much of the
        platform the figures behind it saw); the report's rows get the same."""
        if not alerts:
            return alerts
        cov = self.coverage.summary()
        held = self._alert_coverage
        for a in alerts:
            key = (a.fingerprint, a.starts_at.astimezone(UTC).isoformat())  # as report() has it
            held.pop(key, None)
            held[key] = cov
        while len(held) > ALERT_COVERAGE_KEPT:
            del held[next(iter(held))]
        return [a.model_copy(update={"evidence": {**a.evidence, "coverage": cov}})
                for a in alerts]

    def close(self) -> list[Alert]:
        """End of a replay: final evaluation, then resolve what is still open."""
        out = self.advance(force=True)
        if self.latest is not None:  # the end of an archive: the published figures exact
            self.influence.refresh(self.latest, full=True)  # open days' and cumulative PageRank
            self.cascades.analyse(full=True)  # every exposure against the final graph
            self.hazard.fit(self.latest)  # on the final cascades
        if self.detectors is not None and self.latest is not None:
            out += self._with_coverage(self.detectors.close(self.latest))
        return out

    def snapshot(self) -> Snapshot:
        engines = [e for e in self.engines if e is not self.threads]
        snap = Snapshot.merge([e.snapshot() for e in engines] + [self.threads_snapshot()])
        snap.samples.append(Sample("events_processed_total", float(self.events), kind="counter",
                                   help="De-duplicated events absorbed by the engines"))
        if self.latest is not None:
            snap.samples.append(Sample("event_time_latest_seconds", self.latest,
                                       help="Latest event time absorbed (unix seconds)"))
        return snap

    def absorb_threads(self, partition: int, next_offset: int, partial: Partial) -> None:
        """Live: the thread sums of one ingest partition over its records before
        ``next_offset``. A worker that takes a partition over rebuilds its state from the
        partition's start, so the report covering the most records holds the whole history; a
        late report of the previous owner covers less and is ignored."""
        held = self._thread_partials.get(partition)
        if held is None or next_offset >= held[0]:
            self._thread_partials[partition] = (next_offset, partial)

    def threads_snapshot(self) -> Snapshot:
        if self.config.threads_local:
            return self.threads.snapshot()
        # the partitions' pending verdicts judged at this pipeline's last tick: the time the
        # replay's local thread state was last expired at
        return totals_snapshot(merge(p for _, p in self._thread_partials.values()),
                               self.config.threads.buckets, judge_at=self._last_tick)

    def incidents(self) -> list[Alert]:
        """The detectors' incidents (latest transition each) as published: with the coverage
        of that transition in their evidence."""
        if self.detectors is None:
            return []
        held = self._alert_coverage
        return [a.model_copy(update={"evidence": {**a.evidence, "coverage": held.get(
            (a.fingerprint, a.starts_at.astimezone(UTC).isoformat()))}})
            for a in self.detectors.incidents()]

    def alerts_report(self) -> list[dict[str, Any]]:
        rows = self.detectors.report() if self.detectors is not None else []
        held = self._alert_coverage
        return [{**r, "evidence": {**r["evidence"],
                                   "coverage": held.get((r["fingerprint"], r["start"]))}}
                for r in rows]

    def agent(self, name: str) -> dict[str, Any] | None:
        """Per-agent values (rank, PageRank) for the API: never Prometheus labels."""
        return self.influence.agent(name)

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

Beside the pipeline, one :class:`~streams.acts.ActRouter` turns each applied event into acts and
one :class:`~streams.agent_stage.AgentStage` takes them (live: a router per events partition, a
stage per agents partition); the report's snapshot carries the stage's population, settled
with the society's final inputs as the live reducer hands them, and
:meth:`ReplayResult.agent_profiles` the per-agent table.

The report has the shape of a snapshot, so its keys are the names the API serves:
``samples`` (``GET /v1/metrics``), ``details`` (``GET /v1/details/{name}``), ``alerts``
(every incident: type, start, end, fingerprint, evidence), ``input`` (records read,
duplicates, dead letters by reason, embedding counts) and ``agents`` (acts routed by kind,
events without an act by reason, agents profiled).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from detectors.socialisation import SocialisationDetector
from streams.acts import ActRouter
from streams.agent_stage import AgentStage, current_supernodes
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
    router: ActRouter = field(default_factory=ActRouter)
    stage: AgentStage = field(default_factory=AgentStage)
    socialisation: SocialisationDetector = field(default_factory=SocialisationDetector)

    def snapshot(self) -> Snapshot:
        """The pipeline's snapshot with the ordering's late count, the per-agent stage's
        population and the socialisation detector's figures: what the live reducer
        publishes."""
        snap = self.pipeline.snapshot()
        snap.samples.append(self.order.sample())
        return Snapshot.merge([snap, self.settle(), self.socialisation.snapshot()])

    def judge(self) -> None:
        """The socialisation detector on the stage's population now (the live reducer judges
        the merged partials every tick; here once an ``expire_step_s`` of event time and at
        the end); its transitions join the pipeline's alert book. Only the engines it reads
        report (feedback, impact): the population of the others is read once, at the end."""
        p = self.pipeline
        if p.latest is None or p.detectors is None:
            return
        pop = AgentStage.population([self.stage.partial(only=("feedback", "impact"))])
        self.socialisation.observe(p.latest, pop)
        p.detectors.book.reconcile(p.latest, self.socialisation.type,
                                   self.socialisation.findings(p.latest))

    def settle(self) -> Snapshot:
        """The stage's population with the society's inputs of now (its event time and
        super-nodes, as the live reducer hands them to the agents partitions)."""
        p = self.pipeline
        return self.stage.settle(p.latest, current_supernodes(p))

    def agent_profiles(self) -> dict[str, dict[str, Any]]:
        """Every agent's profile (both planes), settled as :meth:`snapshot`."""
        self.settle()
        return self.stage.profiles()

    def report(self) -> dict[str, Any]:
        snap = self.snapshot()
        return {
            "generated_at": datetime.now(UTC).isoformat(),
            "input": {"records": self.read, "events": self.pipeline.events,
                      "duplicates": self.duplicates, "embedded": self.embedded,
                      "dead_letters": dict(sorted(self.dead_letters.items()))},
            **snap.as_dict(),
            "alerts": self.pipeline.alerts_report(),
            "agents": {"acts": dict(sorted(self.router.routed.items())),
                       "unrouted": dict(sorted(self.router.unrouted.items())),
                       "profiled": len(self.agent_profiles())},
        }


def replay(items: Iterable[Event | DeadLetter], pipeline: Pipeline | None = None, *,
           embedder: TextEmbedder | None = None, batch: int = 64,
           dedup_capacity: int = DEDUP_CAPACITY,
           allowed_lateness_s: float = ALLOWED_LATENESS_S, close: bool = True,
           progress: Callable[[int], None] | None = None,
           stage: AgentStage | None = None) -> ReplayResult:
    """Feed ``items`` (in event-time order, up to ``allowed_lateness_s``) through
    de-duplication, event-time ordering and the pipeline; ``close``: end with
    :meth:`Pipeline.close` (a final evaluation, open incidents resolved), else leave the
    pipeline as the live reducer holds it once every event is applied.

    Without an ``embedder`` the semantic engines see no vectors (the rest is unchanged).
    ``progress(n)`` hears of every ``n`` records read (every :data:`PROGRESS_EVERY`, and the
    rest at the end), e.g. a progress bar's ``update``. ``stage``: the per-agent stage to
    drive (default: every per-agent engine with its defaults).
    """
    order: EventTimeOrder[Event] = EventTimeOrder(1, allowed_lateness_s=allowed_lateness_s)
    pipeline = pipeline or Pipeline()
    result = ReplayResult(pipeline, order, stage=stage or AgentStage(),
                          socialisation=SocialisationDetector(
                              pipeline.config.detectors.socialisation))
    p, router, agents = result.pipeline, result.router, result.stage
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
            for act in router.route(ev, vec):
                agents.update(act)
            if p.latest is not None and agents.expire(p.latest):  # once an expire_step_s
                result.judge()
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
    result.judge()
    if close:
        p.close()
    if progress is not None and result.read % PROGRESS_EVERY:
        progress(result.read % PROGRESS_EVERY)
    return result

"""The single reducer's bookkeeping, without I/O: which society messages and which events
records it applied, in which order, when it last heard of an event, what its checkpoint holds.

The Faust driver (``streams/app.py``) hands it each society-topic message with its offset and
the wall-clock time, and asks it on its timers for the alert transitions and the snapshot to
publish, the per-agent values, and the state to checkpoint.

The per-agent stage lives with the agents partitions; the reducer keeps each partition's
latest population partial (the one covering the most of its partition), merges them into the
published snapshot (:meth:`streams.agent_stage.AgentStage.population`), and hands back the
society inputs the partitions need (:class:`~streams.agent_stage.Society`: its event time,
super-nodes, the merged centroid and mean drift direction) in each :class:`Tick` that changes
them. The socialisation-onset detector (``detectors/socialisation.py``) observes each merged
population and is judged every tick; its transitions join the pipeline's alert book.

Exactly once: the society topic is re-read from its start after a rebalance (skipped by
offset) and a handover may forward an events record twice (skipped by its events partition
and offset).

Event-time order (:class:`~streams.order.EventTimeOrder`): the events partitions reach the reducer
interleaved in whatever order the workers forward them, so events wait in a buffer until the
watermark passes them (the least event time every active partition has reached, minus the
allowed lateness) and are applied in ``(event time, event id)`` order: the order the offline
replay applies them in, whatever the number of partitions or workers. After each event the
pipeline advances as the replay's does (detectors evaluate once per ``tick`` of event time),
so a backlog consumed at full speed raises the replay's alerts with the replay's start times.
A quiet stream still moves on: once nothing has arrived for ``idle_after_s`` of wall time and
nothing waits, event time advances with the wall clock, so windows close and incidents resolve.

>>> from datetime import datetime, timezone
>>> from streams.events import PostEvent
>>> from streams.messages import Forwarded, encode_society
>>> from streams.pipeline import PipelineConfig
>>> t = datetime(2026, 2, 1, tzinfo=timezone.utc)
>>> post = PostEvent(id="post:1", event_time=t, observed_at=t, post_id="1", author="a")
>>> r = Reducer(Pipeline(PipelineConfig(embed=False, threads_local=False)), partitions=2,
...             idle_after_s=60.0)
>>> msg = encode_society([Forwarded(post, None, partition=0, offset=4)])
>>> r.apply(0, msg, wall=100.0), r.apply(0, msg, wall=101.0)  # a re-read message
(True, False)
>>> r.apply(1, msg, wall=102.0), r.buffered  # the same record forwarded again
(True, 1)
>>> r.pipeline.events, r.tick(wall=103.0).snapshot  # partition 1 may still send older events
(0, None)
>>> tick = r.tick(wall=131.0)  # IDLE_PARTITION_S later  # it stayed quiet: no longer waited for
>>> tick.snapshot.value("posts_total"), r.tick(wall=135.0).snapshot  # published once
(1.0, None)
>>> r.event_time(wall=102.0 + 90) - t.timestamp()  # idle: event time follows the wall clock
90.0
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from detectors.alert import Alert
from detectors.socialisation import SocialisationDetector
from streams.agent_stage import AgentStage, Society, current_supernodes
from streams.messages import AgentsPartial, Forwarded, Handoff, ThreadsPartial, decode_society
from streams.order import ALLOWED_LATENESS_S, IDLE_PARTITION_S, EventTimeOrder
from streams.pipeline import Pipeline
from streams.state.base import Snapshot

#: Seconds of wall time without events after which event time advances with the wall clock.
IDLE_AFTER_S = 10.0

_ROOT = Path(__file__).resolve().parent.parent
#: The code a checkpointed state is made of: the engines, the detectors, the pipeline that
#: composes them, what they hold (events, texts) and the reducer's buffer of forwarded events
#: waiting for the watermark. The drivers (this module included) are not in it.
ENGINE_SOURCES = ("streams/state/*.py", "streams/pipeline.py", "streams/text.py",
                  "streams/events.py", "streams/order.py", "streams/messages.py",
                  "streams/acts.py", "streams/agent_stage.py", "detectors/*.py")


def state_version(config: object) -> str:
    """What a checkpoint must match: a hash of the engines' code and of the pipeline's
    configuration (its repr). A change to a driver, e.g. a log line, keeps checkpoints.

    >>> state_version("a") == state_version("a") != state_version("b")
    True
    """
    h = hashlib.sha256()
    for pattern in ENGINE_SOURCES:
        for path in sorted(_ROOT.glob(pattern)):
            h.update(path.relative_to(_ROOT).as_posix().encode())
            h.update(path.read_bytes())
    h.update(repr(config).encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Tick:
    """What one publishing tick yields: alert transitions, and a snapshot if anything changed."""

    alerts: list[Alert] = field(default_factory=list)
    snapshot: Snapshot | None = None
    society: Society | None = None  # the per-agent stage's inputs, when they changed


@dataclass(frozen=True, slots=True)
class AgentValues:
    """Per-agent values for the API (never Prometheus labels)."""

    window: dict[str, float]
    cumulative: dict[str, float]
    supernodes: dict[str, dict[str, Any]]
    roles: dict[str, int]
    # the action plane's co-action per agent (the lockstep detector's window: it needs every
    # agent's acts on a thread, so the reducer has it, not the agents partitions)
    coaction: dict[str, dict[str, Any]] = field(default_factory=dict)


#: What a checkpoint holds (a plain tuple: nothing of this module is pickled): the pipeline,
#: the next offset taken per events partition, the events waiting for the watermark, the
#: alert transitions not yet published, the agents partitions' latest partials and the
#: socialisation detector.
ReducerState = tuple[Pipeline, dict[int, int], EventTimeOrder[Forwarded], list[Alert],
                     dict[int, tuple[int, dict[str, Any]]], SocialisationDetector]


class Reducer:
    def __init__(self, pipeline: Pipeline, partitions: int = 1, *,
                 allowed_lateness_s: float = ALLOWED_LATENESS_S,
                 idle_partition_s: float = IDLE_PARTITION_S,
                 idle_after_s: float = IDLE_AFTER_S) -> None:
        self.pipeline = pipeline
        self.idle_after_s = idle_after_s
        self.applied: dict[int, int] = {}  # events partition -> next offset taken
        self.order: EventTimeOrder[Forwarded] = EventTimeOrder(
            partitions, allowed_lateness_s=allowed_lateness_s, idle_partition_s=idle_partition_s)
        self.alerts: list[Alert] = []  # transitions not yet published
        self.next_offset = 0  # the society topic's next offset to apply
        self.last_raw = b""  # the raw message before it: the checkpoint's anchor
        self.checkpointed = 0  # society offset the last checkpoint covers
        self.resumed = False  # a checkpoint was looked for since the society partition came
        self.dirty = False  # the snapshot changed since it was last published
        self.agents_dirty = False
        self.last_event_wall: float | None = None
        # agents partition -> (next offset covered, population partial)
        self.agent_partials: dict[int, tuple[int, dict[str, Any]]] = {}
        self.society: Society | None = None  # the inputs last handed to the partitions
        self.socialisation = SocialisationDetector(pipeline.config.detectors.socialisation)
        self.population: Snapshot | None = None  # the partials merged, when they change
        # the events this worker's ingest parsed, taken instead of parsing them again (never
        # checkpointed: what it holds is in the society topic)
        self.handoff = Handoff()

    @property
    def buffered(self) -> int:
        """Events waiting for the watermark."""
        return len(self.order)

    def apply(self, offset: int, raw: bytes, wall: float) -> bool:
        """Take the society message ``raw`` read at ``offset`` (``wall``: unix seconds now) and
        apply the events the watermark has passed; False if the message was taken before (it
        is in the checkpoint, or a rebalance re-read it)."""
        if offset < self.next_offset:
            return False
        self.next_offset, self.last_raw = offset + 1, raw
        msg = decode_society(raw, self.handoff)
        if isinstance(msg, ThreadsPartial):
            self.pipeline.absorb_threads(msg.partition, msg.next_offset, msg.partial)
            self.dirty = True
            return True
        if isinstance(msg, AgentsPartial):
            held = self.agent_partials.get(msg.partition)
            if held is None or msg.next_offset >= held[0]:  # a late report of a former owner
                self.agent_partials[msg.partition] = (msg.next_offset, msg.partial)
                self.population = None
                self.dirty = True
            return True
        for f in msg:
            if f.offset < self.applied.get(f.partition, 0):
                continue
            self.applied[f.partition] = f.offset + 1
            self.order.push(f.event.event_time.timestamp(), f.event.id, f,
                            partition=f.partition, offset=f.offset, wall=wall)
        self.last_event_wall = wall
        self._release(wall)
        return True

    def _release(self, wall: float) -> None:
        """Apply the events the watermark has passed, advancing after each as the replay does
        (the pipeline evaluates the detectors once per tick of event time)."""
        p, applied = self.pipeline, False
        for f in self.order.ready(wall):
            p.update(f.event, f.vector)
            self.alerts += p.advance()
            applied = True
        if applied:
            self.dirty = self.agents_dirty = True

    def release(self) -> None:
        """The society partition went to another worker: when it comes back, a newer
        checkpoint may exist; the events ingest left here go to the reducer elsewhere."""
        self.resumed = False
        self.handoff.clear()

    def checkpoint_state(self) -> ReducerState:
        """What a checkpoint holds, as of society offset :attr:`next_offset`."""
        return (self.pipeline, self.applied, self.order, self.alerts, self.agent_partials,
                self.socialisation)

    def checkpoint_due(self) -> bool:
        return self.next_offset > self.checkpointed

    def resume(self, offset: int, state: ReducerState, wall: float) -> bool:
        """Take a checkpoint (``state`` as of society ``offset``) over if it is ahead of this
        reducer; idle time then counts from ``wall``, and the state is published at once."""
        if offset <= self.next_offset:
            return False
        (self.pipeline, self.applied, self.order, alerts, self.agent_partials,
         self.socialisation) = state
        self.population = None
        self.alerts = list(alerts)
        self.order.resume(wall)
        self.next_offset = self.checkpointed = offset
        self.last_raw = b""  # set again by the next message applied
        self.last_event_wall = wall
        self.dirty = True
        return True

    def event_time(self, wall: float) -> float | None:
        """Event time now: the latest event's applied, moved on by the idle wall time once
        nothing has arrived for ``idle_after_s`` and nothing waits for the watermark."""
        latest = self.pipeline.latest
        if latest is None:
            return None
        idle = 0.0 if self.last_event_wall is None else wall - self.last_event_wall
        return latest + idle if idle > self.idle_after_s and not self.order else latest

    def tick(self, wall: float, publish: bool = True) -> Tick:
        """Apply what the watermark passed since (partitions fell idle); advance the pipeline
        with the wall clock if the stream is quiet; the alert transitions, and the snapshot if
        anything changed since the last published one (``publish=False``: not this time, the
        driver paces the snapshot's cost; the change waits for the next tick that publishes)."""
        self._release(wall)
        now = self.event_time(wall)
        if now is not None and now != self.pipeline.latest:  # idle: windows close on time
            self.alerts += self.pipeline.advance(now, force=True)
            self.dirty = True
        if self.agent_partials and self.population is None:
            self.population = AgentStage.population(
                [p for _, (_, p) in sorted(self.agent_partials.items())])
            if now is not None:
                self.socialisation.observe(now, self.population)
        book = self.pipeline.detectors.book if self.pipeline.detectors is not None else None
        if book is not None and now is not None:
            self.alerts += book.reconcile(now, self.socialisation.type,
                                          self.socialisation.findings(now))
        alerts, self.alerts = self.alerts, []
        if not self.dirty or not publish:
            return Tick(alerts)
        self.dirty = False
        snap = self.pipeline.snapshot()
        snap.samples.append(self.order.sample())
        if self.population is not None:
            pop = [p for _, (_, p) in sorted(self.agent_partials.items())]
            snap = Snapshot.merge([snap, self.population, self.socialisation.snapshot()])
            society = AgentStage.society_of(pop, self.population, now,
                                            current_supernodes(self.pipeline))
        else:
            society = Society(now, frozenset(current_supernodes(self.pipeline)))
        if self.society is not None and society.same(self.society):
            society = None
        else:
            self.society = society
        return Tick(alerts, snap, society)

    def agents(self) -> AgentValues | None:
        """The per-agent values if events were applied since they were last taken."""
        if not self.agents_dirty:
            return None
        self.agents_dirty = False
        influence = self.pipeline.influence
        window = influence.scores("window")
        suite = self.pipeline.detectors
        lockstep = suite.detectors.get("lockstep") if suite is not None else None
        coaction = {} if lockstep is None else {
            a: c for a in window if (c := lockstep.coaction(a)) is not None}  # type: ignore[attr-defined]
        return AgentValues(window, influence.scores("cumulative"),
                           influence.supernode_records(), self.pipeline.roles.roles(), coaction)

"""The per-agent stage (issue 11): the individual layer's engines on acts, composed.

:class:`AgentStage` holds one instance of each per-agent engine (``streams/state``: drift,
feedback, impact, the action plane; which ones is :class:`AgentStageConfig`) and hands every
:class:`~streams.acts.Act` to each. It answers what the API and the report read:
:meth:`AgentStage.profile` (an agent's figures, engine by engine: the two planes side by side),
:meth:`AgentStage.sort_keys` (sort key -> agent -> value), and the population:
:meth:`AgentStage.partial` (JSON-safe, mergeable) and :meth:`AgentStage.population` (the merge
of any number of partials into one Snapshot: histograms and quantile gauges, never per-agent
labels).

Live, each partition of the agents topic (keyed by agent) holds its own stage
(:class:`AgentPartition`: also the exactly-once bookkeeping of the acts it took) and the single
reducer merges their partials; offline the replay drives one stage beside the pipeline. Either
way the stage takes the society's inputs (:class:`Society`): the reducer's event time (what
``expire`` moves to, on a grid of ``expire_step_s``, so that live and the replay expire at the
same times), its current super-nodes (reply targeting), and the centroid and mean drift
direction merged from every partition (movement toward the society centroid, drift
consistency). Per-agent figures then never depend on which agents share a partition.

The society centroid ``c_global`` here is the mean of the unit vectors of every post act (every
post with an author and a vector), a sum each partial carries, so it merges exactly.

>>> from streams.acts import Act
>>> stage = AgentStage(AgentStageConfig(engines=("action",)))
>>> for k in range(8):
...     stage.update(Act("bot", 3600.0 * k, "comment", f"p{k}", f"c{k}", target_author="King"))
>>> stage.set_society(Society(now=8 * 3600.0, supernodes=frozenset({"King"})))
True
>>> stage.profile("bot")["action"]["supernode_reply_share"]
1.0
>>> snap = AgentStage.population([stage.partial()])
>>> snap.value("agent_acts_total", kind="comment"), snap.value("action_agents")
(8.0, 1.0)
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from streams.acts import Act
from streams.state.actions import ActionEngine
from streams.state.base import Sample, Snapshot
from streams.state.drift import DriftEngine
from streams.state.feedback import FeedbackEngine
from streams.state.impact import ImpactEngine

if TYPE_CHECKING:
    from streams.pipeline import Pipeline

#: The per-agent engines by name: each a class following the per-agent interface of the
#: brief (``update(act)``, ``expire(now)``, ``profile(agent)``, ``sort_keys()``,
#: ``partial()``, ``population(partials, **society)``, ``snapshot()``), built from its own
#: config dataclass (None: its defaults).
ENGINES: dict[str, Callable[..., Any]] = {
    "drift": DriftEngine,
    "feedback": FeedbackEngine,
    "impact": ImpactEngine,
    "action": ActionEngine,
}

#: The config fields that bound an engine's memory in event time (an action window, an idle
#: agent's life): ``whole_history`` lifts them.
HORIZONS = ("window_s", "idle_s")

#: The plane of each engine's figures: what an agent says (content) or does (action).
PLANES: dict[str, str] = {"drift": "content", "feedback": "content", "impact": "content",
                          "action": "action"}

#: Event-time seconds between two expiries of the per-agent state (live and replay alike).
EXPIRE_STEP_S = 3600.0


@dataclass(frozen=True, slots=True)
class AgentStageConfig:
    """engines: which per-agent engines run (names of :data:`ENGINES`); configs: an engine's
    config object by name (missing: its defaults); expire_step_s: the grid of event time the
    state expires on; whole_history: lift every engine's time horizons (:data:`HORIZONS`:
    the action window, idle agents' life) so that a finished archive's report covers the whole
    archive, not its last week (memory then grows with the agents; the clocks still move, so
    feedback windows settle and impact events are read)."""

    engines: tuple[str, ...] = tuple(ENGINES)
    configs: tuple[tuple[str, Any], ...] = ()
    expire_step_s: float = EXPIRE_STEP_S
    whole_history: bool = False


@dataclass(frozen=True, slots=True)
class Society:
    """What the per-agent state needs from the whole society: ``now`` (the reducer's event
    time), the current super-nodes, the society centroid and the mean drift direction (both
    merged from every partition's partial; None until known)."""

    now: float | None = None
    supernodes: frozenset[str] = frozenset()
    c_global: np.ndarray | None = None
    mean_d: np.ndarray | None = None

    def to_json(self) -> bytes:
        def vec(v: np.ndarray | None) -> list[float] | None:
            return None if v is None else [float(x) for x in v]

        return json.dumps({"now": self.now, "supernodes": sorted(self.supernodes),
                           "c_global": vec(self.c_global), "mean_d": vec(self.mean_d)},
                          separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes | str) -> Society:
        d = json.loads(raw)

        def vec(v: list[float] | None) -> np.ndarray | None:
            return None if v is None else np.asarray(v, dtype=np.float64)

        return cls(d["now"], frozenset(d["supernodes"]), vec(d["c_global"]), vec(d["mean_d"]))

    def same(self, other: Society) -> bool:
        def eq(a: np.ndarray | None, b: np.ndarray | None) -> bool:
            return (a is None) == (b is None) and (a is None or np.array_equal(a, b))

        return (self.now == other.now and self.supernodes == other.supernodes
                and eq(self.c_global, other.c_global) and eq(self.mean_d, other.mean_d))


def agent_partition(agent: str, partitions: int) -> int:
    """The agents-topic partition of ``agent``: a stable hash (crc32), the same in every
    process, so ingest routes an agent's acts and the API finds its profile without Kafka.

    >>> agent_partition("KingMolt", 4) == agent_partition("KingMolt", 4) < 4
    True
    """
    return zlib.crc32(agent.encode()) % partitions


def planes(profile: dict[str, Any] | None) -> dict[str, dict[str, Any]] | None:
    """A stage profile (engine -> figures) as ``content_plane`` and ``action_plane``.

    >>> planes({"drift": {"drift": 0.2}, "action": {"gap_cv": 1.0}})
    {'content_plane': {'drift': {'drift': 0.2}}, 'action_plane': {'action': {'gap_cv': 1.0}}}
    """
    if profile is None:
        return None
    out: dict[str, dict[str, Any]] = {"content_plane": {}, "action_plane": {}}
    for engine, figures in profile.items():
        out[f"{PLANES.get(engine, 'content')}_plane"][engine] = figures
    return out


def current_supernodes(pipeline: Pipeline) -> list[str]:
    """The society's super-nodes now: the agents of the pipeline's current super-node streak
    (the PageRank largest-gap cut of the latest window)."""
    return sorted(a for a, rec in pipeline.influence.supernode_records().items()
                  if rec["current_streak_since"] is not None)


def _profile_kwargs(engine: Any) -> frozenset[str]:
    """The society inputs an engine's ``profile`` takes (e.g. drift: c_global, mean_d)."""
    params = inspect.signature(engine.profile).parameters
    return frozenset(p for p in ("c_global", "mean_d", "supernodes") if p in params)


class AgentStage:
    def __init__(self, config: AgentStageConfig | None = None) -> None:
        self.config = cfg = config or AgentStageConfig()
        unknown = set(cfg.engines) - set(ENGINES)
        if unknown:
            raise ValueError(f"unknown per-agent engines {sorted(unknown)}: "
                             f"known are {sorted(ENGINES)}")
        configs = dict(cfg.configs)
        self.engines: dict[str, Any] = {n: ENGINES[n](configs.get(n)) for n in cfg.engines}
        if cfg.whole_history:
            for n, e in self.engines.items():
                lifted = {f: math.inf for f in HORIZONS if hasattr(e.cfg, f)}
                self.engines[n] = ENGINES[n](dataclasses.replace(e.cfg, **lifted))
        self._kwargs = {n: _profile_kwargs(e) for n, e in self.engines.items()}
        self.society = Society()
        self.acts: Counter[str] = Counter()
        self.post_vectors = 0
        self.sum_vectors: np.ndarray | None = None  # unit post vectors, float64
        self.expired_at: float | None = None
        self.seen: set[str] = set()  # agents acts came for (pruned by :meth:`profiles`)

    # ------------------------------------------------------------------ feeding

    def update(self, act: Act) -> None:
        self.acts[act.kind] += 1
        self.seen.add(act.agent)
        if act.kind == "post" and act.vector is not None:
            v = np.asarray(act.vector, dtype=np.float64)
            n = float(np.sqrt(v @ v))
            if n > 0:
                self.post_vectors += 1
                self.sum_vectors = v / n if self.sum_vectors is None else self.sum_vectors + v / n
        for e in self.engines.values():
            e.update(act)

    def expire(self, now: float) -> bool:
        """Expire the state at ``now`` floored to the ``expire_step_s`` grid, once a grid
        point: True if it expired."""
        step = self.config.expire_step_s
        at = math.floor(now / step) * step
        if self.expired_at is not None and at <= self.expired_at:
            return False
        self.expired_at = at
        for e in self.engines.values():
            e.expire(at)
        return True

    def set_society(self, society: Society) -> bool:
        """Take the society's inputs (expiring at its ``now``); False if nothing changed."""
        if society.same(self.society):
            return False
        self.society = society
        for e in self.engines.values():
            if hasattr(e, "set_supernodes"):
                e.set_supernodes(society.supernodes)
        if society.now is not None:
            self.expire(society.now)
        return True

    # ------------------------------------------------------------------ reading

    def profile(self, agent: str) -> dict[str, Any] | None:
        """The agent's figures, engine by engine (None: no engine holds it)."""
        s = self.society
        inputs = {"c_global": s.c_global, "mean_d": s.mean_d, "supernodes": s.supernodes}
        out: dict[str, Any] = {}
        for name, e in self.engines.items():
            p = e.profile(agent, **{k: inputs[k] for k in self._kwargs[name]})
            if p is not None:
                out[name] = p
        return out or None

    def profiles(self) -> dict[str, dict[str, Any]]:
        """Every agent's profile, by name; agents no engine holds any more are forgotten."""
        out = {a: p for a in sorted(self.seen) if (p := self.profile(a)) is not None}
        self.seen = set(out)
        return out

    def sort_keys(self) -> dict[str, dict[str, float]]:
        """Sort key -> agent -> value, over every engine (a key is one engine's)."""
        out: dict[str, dict[str, float]] = {}
        for e in self.engines.values():
            for key, values in e.sort_keys().items():
                if key in out:
                    raise ValueError(f"two per-agent engines give the sort key {key!r}")
                out[key] = values
        return out

    def sort_names(self) -> list[str]:
        """The sort keys the configured engines give (from a fresh stage: they are static)."""
        return sorted(AgentStage(self.config).sort_keys())

    def partial(self, only: Iterable[str] | None = None) -> dict[str, Any]:
        """This stage's agents as mergeable, JSON-safe sums (``only``: of these engines)."""
        names = self.engines if only is None else [n for n in only if n in self.engines]
        return {"engines": {n: self.engines[n].partial() for n in names},
                "acts": dict(self.acts), "post_vectors": self.post_vectors,
                "sum_vectors": None if self.sum_vectors is None else self.sum_vectors.tolist()}

    @staticmethod
    def centroid(partials: Iterable[dict[str, Any]]) -> np.ndarray | None:
        """The society centroid direction (a sum of unit post vectors) of the partials."""
        sums = [np.asarray(p["sum_vectors"]) for p in partials if p["sum_vectors"] is not None]
        return np.sum(sums, axis=0) if sums else None

    @staticmethod
    def population(partials: list[dict[str, Any]], **society: Any) -> Snapshot:
        """The merged figures of any number of partials (each engine's ``population``, with
        the society centroid they merge to), and the acts taken by kind; samples without a
        value yet (NaN) are left out."""
        partials = list(partials)
        c_global = society.get("c_global")
        if c_global is None:
            c_global = AgentStage.centroid(partials)
        names = sorted({n for p in partials for n in p["engines"]})
        parts = [ENGINES[n].population([p["engines"][n] for p in partials if n in p["engines"]],
                                       c_global=c_global) for n in names]
        acts: Counter[str] = Counter()
        for p in partials:
            acts.update(p["acts"])
        samples = [Sample("agent_acts_total", float(acts[k]), (("kind", k),), "counter",
                          "Acts taken by the per-agent stage, by kind")
                   for k in ("post", "comment", "replied", "score")]
        samples.append(Sample("agent_post_vectors_total",
                              float(sum(p["post_vectors"] for p in partials)), kind="counter",
                              help="Post vectors in the society centroid of the per-agent stage"))
        out = Snapshot.merge([Snapshot(samples), *parts])
        # a figure no agent has yet (e.g. a mean over none) is absent, not NaN
        out.samples = [x for x in out.samples if not math.isnan(x.value)]
        out.details["agent_stage"] = {"acts": dict(sorted(acts.items())), "engines": names,
                                      "partitions": len(partials)}
        return out

    @staticmethod
    def society_of(partials: list[dict[str, Any]], population: Snapshot, now: float | None,
                   supernodes: Iterable[str]) -> Society:
        """The society inputs: the reducer's ``now`` and super-nodes, the centroid of the
        partials and the mean drift direction of their population."""
        drift = population.details.get("agent_drift") or {}
        mean_d = drift.get("mean_d")
        return Society(now, frozenset(supernodes), AgentStage.centroid(partials),
                       None if mean_d is None else np.asarray(mean_d, dtype=np.float64))

    def settle(self, now: float | None, supernodes: Iterable[str]) -> Snapshot:
        """Single process (the replay): take the society's inputs as the live reducer would
        hand them after the last act (its own centroid and mean drift) and report the
        population."""
        sn = frozenset(supernodes)
        self.set_society(Society(now, sn, self.society.c_global, self.society.mean_d))
        pop = self.population([self.partial()])
        self.set_society(self.society_of([self.partial()], pop, now, sn))
        return self.population([self.partial()])

    def snapshot(self) -> Snapshot:
        return self.population([self.partial()])


@dataclass(slots=True)
class AgentsReport:
    """What one agents partition publishes: its population partial (to the reducer), its
    agents' profiles and sort keys (to the API's store)."""

    partial: dict[str, Any]
    profiles: dict[str, dict[str, Any]]
    sort_keys: dict[str, dict[str, float]]


@dataclass
class AgentPartition:
    """What the per-agent stage keeps for one partition of the agents topic: the stage, the
    next offset of that partition it covers (a handover's restore replays the partition up to
    the first record handed), and, per events partition, the next events offset whose acts it
    took (ingest may forward an event's acts twice after a handover: taken once)."""

    stage: AgentStage = field(default_factory=AgentStage)
    next_offset: int = 0
    applied: dict[int, int] = field(default_factory=dict)
    dirty: bool = False

    def take(self, acts: list[tuple[int, int, Act]], offset: int) -> int:
        """Take one agents-topic message (read at ``offset``): (events partition, events
        offset, act) in order; acts of an events record taken before are skipped. Returns
        the acts taken."""
        self.next_offset = offset + 1
        start = dict(self.applied)  # one record's acts come in one message
        taken = 0
        for partition, off, act in acts:
            if off < start.get(partition, 0):
                continue
            self.applied[partition] = max(self.applied.get(partition, 0), off + 1)
            self.stage.update(act)
            taken += 1
        self.dirty = self.dirty or taken > 0
        return taken

    def report(self, society: Society | None) -> AgentsReport | None:
        """Take the society's latest inputs; the report if anything changed since the last."""
        if society is not None and self.stage.set_society(society):
            self.dirty = True
        if not self.dirty:
            return None
        self.dirty = False
        stage = self.stage
        return AgentsReport(stage.partial(), stage.profiles(), stage.sort_keys())

"""The generic engine check (in the manner of river's ``check_estimator``): every engine and
every detector is run through the same contract on the shared real Moltbook events.

- same input, same output (two fresh instances);
- pickle round-trips at several points change nothing (the reducer checkpoint depends on it);
- every sample name and detail key is documented in docs/metrics.md;
- details are JSON-safe (no NaN, no objects json cannot write);
- state is bounded after ``expire``: three times the volume over the same days leaves state
  of about the same size once the windows have passed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from detectors.burst import BurstDetector
from detectors.engagement import EngagementDetector
from detectors.lockstep import LockstepDetector
from detectors.runner import DetectorSuite
from detectors.shift import ShiftDetector
from detectors.supernode import SupernodeDetector
from detectors.surge import SurgeDetector
from service.sources.archive import open_archive
from streams.events import EVENT_ADAPTER, CommentEvent, Event, PostEvent, VoteEvent
from streams.pipeline import Pipeline, PipelineConfig
from streams.state.activity import ActivityState
from streams.state.base import Item
from streams.state.cascades import CascadeEngine
from streams.state.centroid import CentroidState
from streams.state.cooperation import CooperationEngine
from streams.state.coverage import CoverageState
from streams.state.hazard import HazardConfig, HazardEngine
from streams.state.knn import KnnState
from streams.state.ngrams import NgramTracker
from streams.state.pagerank import InfluenceEngine
from streams.state.roles import RolesEngine
from streams.state.threads import ThreadsEngine
from streams.state.verbatim import VerbatimFilter

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "moltbook"
DOC = (ROOT / "docs" / "metrics.md").read_text()
TICK = 10.0

ENGINES: dict[str, Callable[[], Any]] = {
    "activity": ActivityState,
    "verbatim": lambda: VerbatimFilter(threshold=3),
    "ngrams": NgramTracker,
    "centroid": CentroidState,
    "knn": KnnState,
    "influence": InfluenceEngine,
    "cascades": CascadeEngine,
    "roles": RolesEngine,
    "threads": ThreadsEngine,
    "coverage": CoverageState,
    "cooperation": CooperationEngine,
    # a fit a month of event time: the contract, not the fit's cost, is the subject here
    "hazard": lambda: HazardEngine(HazardConfig(every=timedelta(days=30))),
    "surge": SurgeDetector,
    "burst": BurstDetector,
    "shift": ShiftDetector,
    "supernode": SupernodeDetector,
    "engagement": EngagementDetector,
    "lockstep": LockstepDetector,
    "detectors": DetectorSuite,
}


def _vector(event: Event) -> np.ndarray | None:
    """A fixed unit vector per post (the model is not the subject here)."""
    if not isinstance(event, PostEvent):
        return None
    seed = int.from_bytes(hashlib.blake2b(event.id.encode(), digest_size=8).digest(), "little")
    v = np.random.default_rng(seed).normal(size=384).astype(np.float32)
    return v / np.linalg.norm(v)


@pytest.fixture(scope="module")
def events() -> list[Event]:
    seen: set[str] = set()
    out: list[Event] = []
    for e in open_archive([str(DATA)]):
        if isinstance(e, PostEvent | CommentEvent | VoteEvent) and e.id not in seen:
            seen.add(e.id)
            out.append(e)
    out.sort(key=lambda e: e.event_time)
    assert len(out) > 1000
    return out


def _items(events: list[Event]) -> list[Item]:
    return [Item.of(e, _vector(e)) for e in events]


def _feed(engine: Any, items: list[Item], out: list[Any], last: list[float]) -> None:
    """Drive ``engine`` as the pipeline does: update each item, expire (and, for a detector,
    judge) once per tick of event time."""
    for it in items:
        engine.update(it)
        if not last or it.t - last[0] >= TICK:
            last[:] = [it.t]
            _tick(engine, it.t, out)


def _tick(engine: Any, now: float, out: list[Any]) -> None:
    engine.expire(now)
    if hasattr(engine, "findings"):
        out.append([_plain(f) for f in engine.findings(now)])
    elif hasattr(engine, "evaluate"):
        out.append([_plain(a) for a in engine.evaluate(now)])


def _plain(x: Any) -> Any:
    """A finding (dataclass) or an alert (pydantic model) as plain JSON values."""
    d = dataclasses.asdict(x) if dataclasses.is_dataclass(x) else x.model_dump(mode="json")
    return json.loads(json.dumps(d, default=str, sort_keys=True))


def _result(engine: Any, out: list[Any]) -> dict[str, Any]:
    return {"ticks": out, **engine.snapshot().as_dict()}


def _run(name: str, items: list[Item]) -> tuple[Any, dict[str, Any]]:
    engine = ENGINES[name]()
    out: list[Any] = []
    _feed(engine, items, out, [])
    _tick(engine, items[-1].t, out)
    return engine, _result(engine, out)


@pytest.mark.parametrize("name", list(ENGINES))
def test_same_input_same_output(name: str, events: list[Event]) -> None:
    _, a = _run(name, _items(events))
    _, b = _run(name, _items(events))
    assert a == b


@pytest.mark.parametrize("name", list(ENGINES))
def test_pickle_round_trip_midway(name: str, events: list[Event]) -> None:
    items = _items(events)
    _, whole = _run(name, items)
    # the live reducer checkpoints at arbitrary points: several cuts, each continued from the
    # restored copy, must give what the uncut run gives
    cuts = [len(items) * k // 8 for k in range(1, 8)]
    engine = ENGINES[name]()
    out: list[Any] = []
    last: list[float] = []
    for a, b in zip([0, *cuts], [*cuts, len(items)], strict=True):
        _feed(engine, items[a:b], out, last)
        if b < len(items):
            engine = pickle.loads(pickle.dumps(engine))
    _tick(engine, items[-1].t, out)
    assert _result(engine, out) == whole


@pytest.mark.parametrize("name", list(ENGINES))
def test_names_documented_and_details_json_safe(name: str, events: list[Event]) -> None:
    _, result = _run(name, _items(events))
    documented = set(re.findall(r"`([a-z0-9_]+)`", DOC))
    names = {s["name"] for s in result["samples"]} | set(result["details"])
    assert names - documented == set(), f"{name}: undocumented names"
    json.dumps(result["details"], allow_nan=False)


def _copies(events: list[Event], k: int) -> list[Event]:
    """``k`` copies of the stream over the same days: new posts and comments by the same agents
    with the same texts."""
    out = list(events)
    for c in range(1, k):
        for e in events:
            new = {f: f"{v}#{c}" for f in ("id", "post_id", "comment_id", "parent_id", "target_id")
                   if isinstance(v := getattr(e, f, None), str)}
            out.append(e.model_copy(update={**new,
                                            "event_time": e.event_time + timedelta(seconds=c)}))
    out.sort(key=lambda e: e.event_time)
    return out


@pytest.mark.parametrize("name", list(ENGINES))
def test_state_bounded_after_expire(name: str, events: list[Event]) -> None:
    far = events[-1].event_time.timestamp() + 400 * 86400
    sizes = []
    for k in (1, 3):
        engine, _ = _run(name, _items(_copies(events, k)))
        engine.expire(far)
        sizes.append(len(pickle.dumps(engine)))
    assert sizes[1] <= 1.25 * sizes[0] + 16_384, f"{name}: {sizes}"


DECLARING = [name for name, make in ENGINES.items() if hasattr(make(), "kinds")]


def _profiles(events: list[Event]) -> list[Event]:
    """An agent profile at each author's first item and a submolt profile at each submolt's:
    the kinds the shared events lack."""
    out: list[Event] = []
    seen: set[str] = set()
    for e in events:
        for kind, name in (("agent", getattr(e, "author", None)),
                           ("submolt", getattr(e, "submolt", None))):
            if name and (kind, name) not in seen:
                seen.add((kind, name))
                out.append(EVENT_ADAPTER.validate_python(
                    {"kind": kind, "id": f"{kind}:{name}", "name": name, "event_time":
                     e.event_time, "observed_at": e.observed_at, "created_at": e.event_time}
                    if kind == "agent" else {"kind": kind, "id": f"{kind}:{name}", "name": name,
                                             "event_time": e.event_time,
                                             "observed_at": e.observed_at}))
        out.append(e)
    return out


def test_some_engines_declare_the_kinds_they_read() -> None:
    assert set(DECLARING) >= {"verbatim", "coverage"}


@pytest.mark.parametrize("name", DECLARING)
def test_an_engine_changes_nothing_on_a_kind_it_does_not_declare(
        name: str, events: list[Event]) -> None:
    """The pipeline does not call an engine for an event kind its ``kinds`` leaves out: fed
    every kind (profiles too), it must end exactly as fed only the kinds it declares (same
    ticks, results and pickled state)."""
    items = _items(_profiles(events))
    make = ENGINES[name]
    kinds = make().kinds
    assert any(type(it.event) not in kinds for it in items)
    told, every = make(), make()
    out_told: list[Any] = []
    out_every: list[Any] = []
    last: list[float] = []
    for it in items:
        every.update(it)
        if type(it.event) in kinds:
            told.update(it)
            if not last or it.t - last[0] >= TICK:
                last[:] = [it.t]
                _tick(told, it.t, out_told)
                _tick(every, it.t, out_every)
    assert _result(told, out_told) == _result(every, out_every)
    assert pickle.dumps(told) == pickle.dumps(every)


def test_the_pipeline_calls_an_engine_only_for_the_kinds_it_declares(
        events: list[Event]) -> None:
    """Routes by kind, remade when the engine list is replaced and after a pickle round trip
    (which drops them): each engine's ``update`` is called for exactly its kinds."""
    p = Pipeline(PipelineConfig(embed=False, detectors_enabled=False))
    calls: dict[str, list[str]] = {}

    def spy(name: str, engine: Any) -> None:
        inner = engine.update
        engine.update = lambda item: (calls.setdefault(name, []).append(item.event.kind),
                                      inner(item))

    for name in ("activity", "verbatim", "coverage"):
        spy(name, getattr(p, name))
    p.engines = list(p.engines)  # the routes made at the first event read these
    at = events[199].event_time
    vote = VoteEvent(id="vote:1", event_time=at, observed_at=at, target="post", target_id="1",
                     post_id="1", upvotes=2, downvotes=0, delta_up=1, delta_down=0)
    sample = _profiles([*events[:200], vote])  # (the shared events hold no vote changes)
    for e in sample:
        p.update(e)
    kinds = {e.kind for e in sample}
    assert set(calls["activity"]) == kinds >= {"agent", "submolt", "post", "comment", "vote"}
    assert set(calls["verbatim"]) == {"post"}
    assert set(calls["coverage"]) == {"post", "comment"}
    for name in calls:
        delattr(getattr(p, name), "update")  # (the spies do not pickle)
    back = pickle.loads(pickle.dumps(p))
    assert "_routes" not in back.__getstate__()
    back.update(events[0])
    assert back._routes[PostEvent] == [e.update for e in back.engines
                                       if PostEvent in getattr(e, "kinds", (PostEvent,))]

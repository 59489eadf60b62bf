"""The per-agent stage's plumbing: the act router on the real threads and the simulator (every
post, comment and vote turns into the acts a plain recount expects; nothing is lost for a null
author, it is counted), the stage split over agents partitions against one stage, the acts
codec and exactly-once intake, the reducer's merge of the partitions' partials and the society
inputs it hands back, the replay report's per-agent table, and a generic per-agent contract
over every engine the stage runs (pickle midway, order-insensitivity, bounded after expire,
JSON-safe)."""

from __future__ import annotations

import json
import math
import pickle
import random
from collections import Counter
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from service.sources.normalise import normalise_post_detail
from service.sources.simulate import SimulationConfig, Simulator
from streams.acts import Act, ActRouter
from streams.agent_stage import (
    ENGINES,
    AgentPartition,
    AgentStage,
    AgentStageConfig,
    Society,
    agent_partition,
)
from streams.events import CommentEvent, DeadLetter, Event, PostEvent, VoteEvent
from streams.export_agents import agent_rows
from streams.messages import ActsHandoff, decode_acts, decode_society, encode_acts, encode_agents
from streams.pipeline import Pipeline, PipelineConfig
from streams.reducer import Reducer
from streams.state.base import Snapshot
from tests.unit.agent_acts import hash_vector, realtext_acts, synthetic_acts

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "moltbook"


def real_events() -> list[Event]:
    items: list[Event | DeadLetter] = []
    for f in sorted((DATA / "api" / "posts").glob("*.json")):
        items += normalise_post_detail(f.read_text(), origin=str(f))
    events = [i for i in items if not isinstance(i, DeadLetter)]
    return sorted(events, key=lambda e: (e.event_time, e.id))


def sim_events() -> list[Event]:
    return list(Simulator(SimulationConfig(seed=5, agents=300, duration=timedelta(hours=3),
                                           posts_per_hour=200)))


def expected_acts(events: list[Event]) -> tuple[Counter[tuple[Any, ...]], Counter[str]]:
    """A plain recount: the acts each event should make, and the events that make none."""
    author: dict[str, str | None] = {}  # post or comment id -> author
    acts: Counter[tuple[Any, ...]] = Counter()
    none: Counter[str] = Counter()
    seen: set[str] = set()
    for e in events:
        if e.id in seen:
            continue
        seen.add(e.id)
        t = e.event_time.timestamp()
        if isinstance(e, PostEvent):
            author[e.post_id] = e.author
            if e.author is None:
                none["post_no_author"] += 1
                continue
            acts[(e.author, "post", e.post_id, None)] += 1
            if e.upvotes or e.downvotes:
                acts[(e.author, "score", e.post_id, e.upvotes - e.downvotes)] += 1
        elif isinstance(e, CommentEvent):
            author[e.comment_id] = e.author
            if e.author is None:
                none["comment_no_author"] += 1
                continue
            target = e.reply_to or (author.get(e.parent_id) if e.parent_id else
                                    author.get(e.post_id) or e.post_author)
            acts[(e.author, "comment", e.comment_id, target)] += 1
            if target is not None and target != e.author:
                acts[(target, "replied", e.comment_id, e.author)] += 1
            if e.upvotes or e.downvotes:
                acts[(e.author, "score", e.comment_id, e.upvotes - e.downvotes)] += 1
        elif isinstance(e, VoteEvent):
            if e.target_id not in author:
                none["vote_unknown_item"] += 1
            elif author[e.target_id] is None:
                none["vote_no_author"] += 1
            else:
                acts[(author[e.target_id], "score", e.target_id, e.upvotes - e.downvotes)] += 1
        del t
    return acts, none


def key(a: Act) -> tuple[Any, ...]:
    extra = a.score if a.kind == "score" else None if a.kind == "post" else a.target_author
    return (a.agent, a.kind, a.item_id, extra)


@pytest.mark.parametrize("source", ["real", "simulator"])
def test_router_makes_every_expected_act(source: str) -> None:
    events = real_events() if source == "real" else sim_events()
    want, want_none = expected_acts(events)
    router = ActRouter()
    got: Counter[tuple[Any, ...]] = Counter()
    seen: set[str] = set()
    vectors: dict[str, np.ndarray] = {}
    for e in events:
        if e.id in seen:
            continue
        seen.add(e.id)
        v = hash_vector(e.text) if isinstance(e, PostEvent) else None
        if v is not None:
            vectors[e.post_id] = v
        for a in router.route(e, v):
            got[key(a)] += 1
            if a.kind == "comment" and a.post_id in vectors:  # v*: the post's vector
                assert a.target_vector is vectors[a.post_id]
            if a.kind == "post":
                assert a.vector is vectors[a.post_id]
    assert got == want
    assert router.unrouted == want_none
    assert sum(router.routed.values()) == sum(want.values())
    if source == "real":  # the real threads' mess: null authors, counted, no act
        assert want_none["post_no_author"] > 0 and got
        assert router.routed["replied"] > 100
    else:
        assert router.routed["score"] > 100


def test_router_split_by_post_routes_the_same_acts() -> None:
    """Ingest partitions are keyed by post: any split of the threads routes the same acts."""
    events = sim_events()
    one, parts = ActRouter(), [ActRouter() for _ in range(3)]
    a: Counter[tuple[Any, ...]] = Counter()
    b: Counter[tuple[Any, ...]] = Counter()
    for e in events:
        a.update(key(x) for x in one.route(e))
        b.update(key(x) for x in parts[hash(e.key) % 3].route(e))
    assert a == b and a


def test_router_horizon_depends_only_on_the_two_times() -> None:
    events = [e for e in sim_events() if isinstance(e, PostEvent | VoteEvent)]
    r = ActRouter(horizon_s=600.0, sweep_margin_s=0.0)
    for e in events:
        r.route(e)
    posted = {e.post_id: e.event_time.timestamp() for e in events if isinstance(e, PostEvent)}
    late = sum(1 for e in events if isinstance(e, VoteEvent) and e.target == "post"
               and e.event_time.timestamp() - posted[e.post_id] > 600.0)
    assert late > 0
    assert r.unrouted["vote_expired_item"] + r.unrouted["vote_unknown_item"] >= late
    assert len(r) <= sum(1 for t in posted.values() if t >= r.latest - 600.0) + 1


def test_acts_codec_round_trips() -> None:
    acts = list(realtext_acts(4000))[:2000]
    batch = [(i % 3, i, a) for i, a in enumerate(acts)]
    back = decode_acts(encode_acts(batch))
    assert [(p, o) for p, o, _ in back] == [(p, o) for p, o, _ in batch]
    for (_, _, a), (_, _, b) in zip(batch, back, strict=True):
        assert (a.agent, a.t, a.kind, a.post_id, a.item_id, a.target_author, a.target_kind,
                a.score) == (b.agent, b.t, b.kind, b.post_id, b.item_id, b.target_author,
                             b.target_kind, b.score)
        for x, y in ((a.vector, b.vector), (a.target_vector, b.target_vector)):
            assert (x is None) == (y is None)
            if x is not None:  # float16 on the wire: a cosine within 1e-3
                assert float(x @ y) / float(np.linalg.norm(x) * np.linalg.norm(y)) > 1 - 1e-3


def test_acts_handoff_gives_what_decoding_gives() -> None:
    """Held acts come back as the bytes decode (vectors through float16 included); other
    bytes, a full handoff, a dropped partition: decoded."""
    acts = list(realtext_acts(4000))[:600]
    assert any(a.vector is not None or a.target_vector is not None for a in acts)
    batches = [[(0, i, a) for i, a in enumerate(acts[k:k + 100], k)] for k in range(0, 600, 100)]
    payloads = [encode_acts(b) for b in batches]
    h = ActsHandoff(capacity=300)
    for k, (b, payload) in enumerate(zip(batches, payloads, strict=True)):
        h.put(k % 2, payload, b)
    assert len(h) == 300  # full: the fourth batch on is not held
    h.drop(1)
    assert len(h) == 200
    for payload in payloads:
        held, decoded = h.take(bytes(payload)), decode_acts(payload)
        assert [(p, o) for p, o, _ in held] == [(p, o) for p, o, _ in decoded]
        for (_, _, a), (_, _, b) in zip(held, decoded, strict=True):
            for x, y in ((a.vector, b.vector), (a.target_vector, b.target_vector)):
                assert (x is None) == (y is None) and (x is None or np.array_equal(x, y))
            assert replace(a, vector=None, target_vector=None) == replace(
                b, vector=None, target_vector=None)
    assert len(h) == 0


def test_partition_takes_each_record_once() -> None:
    acts = synthetic_acts(agents=6, posts=12, seed=1)
    part = AgentPartition()
    msg = [(0, i, a) for i, a in enumerate(acts[:30])]
    assert part.take(msg, offset=0) == 30
    assert part.take(msg[10:], offset=1) == 0  # a handover's re-forward
    assert part.take([(1, 0, acts[30])], offset=2) == 1  # another events partition
    assert part.next_offset == 3 and sum(part.stage.acts.values()) == 31


def staged(acts: list[Act], stages: int, society: Society) -> tuple[list[AgentStage], Snapshot]:
    """The acts split over ``stages`` agents partitions, settled with the society's inputs
    as the reducer hands them (two rounds: the merged centroid and mean drift come back)."""
    parts = [AgentStage() for _ in range(stages)]
    for a in acts:
        parts[agent_partition(a.agent, stages)].update(a)
    for s in parts:
        s.set_society(society)
    pop = AgentStage.population([s.partial() for s in parts])
    inputs = AgentStage.society_of([s.partial() for s in parts], pop, society.now,
                                   society.supernodes)
    for s in parts:
        s.set_society(inputs)
    return parts, AgentStage.population([s.partial() for s in parts])


def close(got: Any, want: Any) -> bool:
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(
            close(got[k], want[k]) for k in want)
    if isinstance(want, list | tuple):
        return type(got) is type(want) and len(got) == len(want) and all(
            close(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(want, float) and isinstance(got, int | float):
        return got == pytest.approx(want, rel=1e-9, abs=1e-9) or (
            math.isnan(want) and math.isnan(got))
    return bool(got == want)


def samples(snap: Snapshot) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The figures (not the ``*_state_bytes`` memory gauges: their overheads are per
    partition)."""
    return {(s.name, s.labels): s.value for s in snap.samples
            if not s.name.endswith("_state_bytes")}


@pytest.mark.parametrize("source", ["realtext", "synthetic"])
def test_partitions_give_one_stage_s_figures(source: str) -> None:
    """Per-agent figures and the population do not depend on which agents share a partition."""
    acts = list(realtext_acts(6000)) if source == "realtext" else synthetic_acts(seed=4)
    society = Society(now=max(a.t for a in acts),
                      supernodes=frozenset(sorted({a.agent for a in acts})[:3]))
    [one], want = staged(acts, 1, society)
    parts, got = staged(acts, 4, society)
    assert close(samples(got), samples(want))
    assert want.value("agent_drift_agents") and want.value("action_agents")
    profiles = {a: p for s in parts for a, p in s.profiles().items()}
    want_profiles = one.profiles()
    assert profiles.keys() == want_profiles.keys() and len(profiles) > 20
    assert all(close(profiles[a], want_profiles[a]) for a in want_profiles)
    assert any("centroid_movement" in p.get("drift", {}) for p in profiles.values())


def test_reducer_merges_the_latest_partials_and_hands_back_the_society() -> None:
    acts = synthetic_acts(agents=20, posts=20, seed=3)
    parts = [AgentPartition() for _ in range(2)]
    for i, a in enumerate(acts):
        parts[agent_partition(a.agent, 2)].take([(0, i, a)], offset=i)
    r = Reducer(Pipeline(PipelineConfig(embed=False)), partitions=1)
    reports = [p.report(None) for p in parts]
    stale = encode_agents(0, 1, AgentStage().partial())  # a former owner's shorter report
    for k, rep in enumerate(reports):
        assert rep is not None
        r.apply(k, encode_agents(k, parts[k].next_offset, rep.partial), wall=0.0)
    r.apply(2, stale, wall=0.0)
    assert isinstance(decode_society(stale).partial, dict)
    # no event applied yet: the published snapshot still carries the population
    r.dirty = True
    tick = r.tick(wall=1.0)
    assert tick.snapshot is not None and tick.society is not None
    want = AgentStage.population([rep.partial for rep in reports if rep is not None])
    assert close({k: v for k, v in samples(tick.snapshot).items() if k in samples(want)},
                 samples(want))
    assert tick.society.c_global is not None and tick.society.mean_d is not None
    r.dirty = True
    assert r.tick(wall=2.0).society is None  # handed out once until it changes


# ---------------------------------------------------------------- per-agent engine contract

def contract_acts() -> list[Act]:
    return synthetic_acts(agents=25, posts=30, seed=7)


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_per_agent_engine_contract(name: str) -> None:
    acts = contract_acts()
    t_end = max(a.t for a in acts)
    society = {"supernodes": frozenset({"agent1", "agent4"})}

    def run(order: list[Act], pickle_at: int | None = None) -> Any:
        e = ENGINES[name]()
        for i, a in enumerate(order):
            if i == pickle_at:
                e = pickle.loads(pickle.dumps(e))
            e.update(a)
        if hasattr(e, "set_supernodes"):
            e.set_supernodes(society["supernodes"])
        return e

    def figures(e: Any) -> Any:
        agents = sorted({a.agent for a in acts})
        return ({a: e.profile(a) for a in agents}, e.sort_keys(),
                samples(e.population([e.partial()])))

    base = run(acts)
    want = figures(base)
    shuffled = acts[:]
    random.Random(1).shuffle(shuffled)
    assert close(figures(run(shuffled)), want), "order-insensitive"
    assert close(figures(run(acts, pickle_at=len(acts) // 2)), want), "pickle midway"
    assert any(p is not None for p in want[0].values())
    # JSON-safe: profiles, sort keys, the partial (it travels as JSON), details
    json.dumps([want[0], want[1], base.partial()], allow_nan=False)
    json.dumps(base.snapshot().details)
    assert close(samples(base.snapshot()), want[2])
    # bounded: far past every window, nothing is held
    base.expire(t_end + 400 * 86400.0)
    assert all(base.profile(a) is None for a in {x.agent for x in acts})
    assert not any(base.sort_keys().values())


def test_stage_rejects_unknown_engines_and_clashing_keys() -> None:
    with pytest.raises(ValueError, match="unknown per-agent engines"):
        AgentStage(AgentStageConfig(engines=("charisma",)))
    assert "drift" in AgentStage().sort_names() and "gap_cv" in AgentStage().sort_names()


def test_replay_report_writes_the_per_agent_table(tmp_path: Path) -> None:
    from service.cli import main

    posts = sorted((DATA / "api" / "posts").glob("*.json"))[:60]
    out = tmp_path / "r.json"
    assert main(["replay", *map(str, posts), "--report", str(out), "--no-embed",
                 "--no-tables"]) == 0
    report = json.loads(out.read_text())
    assert report["agents"]["acts"]["comment"] > 0
    assert report["agents"]["profiled"] > 10
    names = {s["name"] for s in report["samples"]}
    assert {"agent_acts_total", "action_agents"} <= names
    table = pq.read_table(tmp_path / "r.agents.parquet").to_pylist()
    assert len(table) == report["agents"]["profiled"]
    assert (tmp_path / "r.agents.csv").read_text().startswith('"agent",')
    assert {c.split("_")[0] for row in table for c in row if c != "agent"} >= {"action"}
    assert agent_rows({}) == []


@pytest.mark.parametrize("embed", [True, False])
def test_a_restored_router_gets_its_posts_vectors_back(embed: bool) -> None:
    """A handed events partition is replayed without vectors; with embedding on, the router
    keeps the restored posts' texts until the ingest agent re-embeds them, so later comments
    carry v* as on the previous owner."""
    from streams.partition import PartitionState

    first_days = real_events()[0].event_time + timedelta(days=5)  # most of the real threads
    events = [e for e in real_events() if isinstance(e, PostEvent | CommentEvent)
              and e.event_time < first_days]
    posts = [e for e in events if isinstance(e, PostEvent) and e.text]
    part = PartitionState(embed=embed)
    for offset, e in enumerate(posts):
        part.restore(e.model_dump_json().encode(), offset)
    texts = part.router.unembedded()
    r = part.router
    held = {p.post_id for p in posts
            if p.event_time.timestamp() >= r.latest - r.horizon_s - r.sweep_margin_s}
    assert set(texts) == (held if embed else set()) and len(held) > 3
    part.router.set_vectors({pid: hash_vector(t) for pid, t in texts.items()})
    assert part.router.unembedded() == {}
    if not embed:
        return
    later = next(e for e in events if isinstance(e, CommentEvent) and e.author
                 and e.post_id in texts)
    [comment, *_] = part.route(later)
    assert comment.target_vector is not None
    assert float(comment.target_vector @ hash_vector(texts[later.post_id])) == pytest.approx(1)

"""Lockstep groups (detectors/lockstep.py): a planted group with varied texts is caught, in its
order; independent agents on popular threads are not; the real background raises nothing; the
co-action counts equal a plain pairwise recount."""

from __future__ import annotations

import itertools
import pickle
import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from bench import realtext
from detectors.lockstep import LockstepConfig, LockstepDetector
from detectors.runner import DetectorConfig, DetectorSuite
from service.sources.simulate import ScenarioSpec, SimulationConfig, Simulator
from streams.events import CommentEvent, Event
from streams.state.base import Item
from tests.unit.collective_data import thread_events

T0 = datetime(2026, 2, 1, tzinfo=UTC)


def run(events: list[Event], detector: LockstepDetector) -> dict[str, tuple[float, object]]:
    """Feed in order, judging at every item; per incident, the first time it was reported and
    its latest finding."""
    seen: dict[str, tuple[float, object]] = {}
    for e in events:
        item = Item.of(e)
        detector.update(item)
        for f in detector.findings(item.t):
            seen[f.key] = (seen.get(f.key, (item.t,))[0], f)
    return seen


@pytest.fixture(scope="module")
def planted() -> tuple[list[Event], object]:
    sim = Simulator(SimulationConfig(seed=4, agents=3000, posts_per_hour=400,
                                     duration=timedelta(hours=9), max_delay=timedelta(hours=3),
                                     scenarios=(ScenarioSpec(name="lockstep"),)))
    events = list(sim)
    return events, sim.labels[0]


def test_planted_group_is_caught_in_its_order(planted: tuple[list[Event], object]) -> None:
    events, label = planted
    found = run(events, LockstepDetector())
    assert len(found) == 1
    (t, f), = found.values()
    order = label.details["order"]
    assert f.evidence["agents"] == order and f.key == f"group:{order[0]}"
    assert {(p["leader"], p["follower"]) for p in f.evidence["pairs"]} <= set(
        itertools.combinations(order, 2))
    assert all(0 < p["median_lag_s"] <= 60 for p in f.evidence["pairs"])
    assert set(f.evidence["target_ids"]) <= set(label.details["targets"])
    for row in f.evidence["threads"]:
        assert [a["agent"] for a in row["acts"]] == order
    # the shared evidence: their texts (the background's, varied on each thread), the first
    # of them leading
    texts = {c.comment_id: c.content for c in events if isinstance(c, CommentEvent)}
    assert [x["text"] for x in f.evidence["exemplars"]] == [
        " ".join(texts[x["id"]].split())[:120] for x in f.evidence["exemplars"]]
    assert len(f.evidence["exemplars"]) == 3
    assert f.evidence["timeline"]["entries"][0]["agent"] == order[0]
    # caught once its seventh shared thread is seen: about 7 x 15 min after its start
    assert t - label.start.timestamp() < 3 * 3600


def test_suite_raises_it_with_the_other_detectors(planted: tuple[list[Event], object]) -> None:
    events, label = planted
    suite = DetectorSuite(DetectorConfig(enabled=("lockstep",)))
    alerts = []
    for e in events:
        item = Item.of(e)
        suite.update(item)
        alerts += suite.evaluate(item.t)
    assert [(a.type, a.state, a.labels) for a in alerts][:1] == [
        ("lockstep", "firing", {"agent": label.details["order"][0]})]
    assert suite.snapshot().value("lockstep_locked_pairs") >= 3


def independent_crowd(seed: int, fixed_times: bool) -> list[Event]:
    """Five prolific agents who comment on every one of 40 popular threads, each on its own:
    within a minute of each other (random order) or at random times in the hour."""
    rng = random.Random(seed)
    out: list[tuple[datetime, CommentEvent]] = []
    agents = [f"fan{k}" for k in range(5)]
    for p in range(40):
        start = T0 + timedelta(minutes=15 * p)
        for k, a in enumerate(agents):
            delay = rng.uniform(0, 50) if fixed_times else rng.uniform(0, 3600)
            t = start + timedelta(seconds=delay)
            out.append((t, CommentEvent(id=f"comment:{p}.{k}", event_time=t, observed_at=t,
                                        comment_id=f"{p}.{k}", post_id=f"hot{p}", author=a,
                                        content="same old")))
    return [e for _, e in sorted(out, key=lambda x: (x[0], x[1].id))]


@pytest.mark.parametrize("close", [True, False])
def test_independent_agents_on_popular_threads_are_no_group(close: bool) -> None:
    d = LockstepDetector()
    assert run(independent_crowd(1, close), d) == {}
    if close:  # they co-act on every thread, but in no fixed order
        assert d.snapshot().value("lockstep_window_pairs") == 20
        assert d.locked_pairs() == []


def test_real_background_raises_nothing() -> None:
    """The real comment trees (their quick repliers co-act a lot) and a real-text day."""
    d = LockstepDetector()
    assert run(list(thread_events()), d) == {}
    whole = LockstepDetector(LockstepConfig(window_s=1e12))
    run(list(thread_events()), whole)
    # a real pair that co-acts on many threads, but either may come first: not locked
    busiest = max(whole._pairs, key=lambda p: len(whole._pairs[p]))
    assert len(whole._pairs[busiest]) >= 10 and busiest not in whole.locked_pairs()
    stream = realtext.RealTextStream(realtext.RealTextConfig(seed=3, scale=0.02,
                                                             flood_accounts=0), max_events=40_000)
    events = list(stream)
    d = LockstepDetector()
    assert run(events, d) == {}
    assert sum(e.kind == "comment" for e in events) > 15_000 and d.coactions_total > 100


def recount(events: list[Event], coact_s: float) -> dict[tuple[str, str], set[str]]:
    """Every ordered pair (earlier author, later author) of comments on one thread at most
    ``coact_s`` apart, with the threads: the plain pairwise definition."""
    by_post: dict[str, list[tuple[float, str, str]]] = defaultdict(list)
    for e in events:
        if isinstance(e, CommentEvent) and e.author:
            by_post[e.post_id].append((e.event_time.timestamp(), e.comment_id, e.author))
    pairs: dict[tuple[str, str], set[str]] = defaultdict(set)
    for post, cs in by_post.items():
        for (t1, _, a1), (t2, _, a2) in itertools.combinations(sorted(cs), 2):
            if a1 != a2 and t2 - t1 <= coact_s:
                pairs[a1, a2].add(post)
    return pairs


def test_coaction_equals_the_pairwise_recount(planted: tuple[list[Event], object]) -> None:
    events, _ = planted
    cfg = LockstepConfig(window_s=1e12, max_coactors=10_000)
    d = LockstepDetector(cfg)
    run(events, d)
    want = recount(events, cfg.coact_s)
    assert {p: set(ts) for p, ts in d._pairs.items()} == dict(want)
    targets: dict[str, set[str]] = defaultdict(set)
    for e in events:
        if isinstance(e, CommentEvent) and e.author:
            targets[e.author].add(e.post_id)
    for agent in targets:
        led = {x for (a, _), ts in want.items() if a == agent for x in ts}
        followed = {x for (_, b), ts in want.items() if b == agent for x in ts}
        got = d.coaction(agent)
        assert got["targets"] == len(targets[agent])
        assert (got["led_targets"], got["followed_targets"]) == (len(led), len(followed))
        assert got["coaction_share"] == pytest.approx(len(led | followed) / len(targets[agent]))
    share = sum(1 for a in targets if d.coaction(a)["coacted_targets"]) / len(targets)
    assert d.snapshot().value("coaction_agents_share") == pytest.approx(share, abs=1e-12)


def test_window_expires_and_a_checkpoint_resumes(planted: tuple[list[Event], object]) -> None:
    events, _ = planted
    half = len(events) // 2
    a, b = LockstepDetector(), LockstepDetector()
    run(events[:half], a)
    run(events[:half], b)
    b = pickle.loads(pickle.dumps(b))
    fa, fb = run(events[half:], a), run(events[half:], b)
    assert {k: v[0] for k, v in fa.items()} == {k: v[0] for k, v in fb.items()}
    end = events[-1].event_time.timestamp() + a.cfg.window_s + 1
    a.expire(end)
    assert not (a._acts or a._by_target or a._pairs or a._targets or a._led or a._followed)
    assert a.coaction("nobody") is None


def test_acts_up_to_coact_s_late_pair_the_same(planted: tuple[list[Event], object]) -> None:
    """Acts delivered up to ``coact_s`` out of event-time order (several ingest partitions)
    make the same co-actions as in order."""
    events, _ = planted
    cfg = LockstepConfig(window_s=1e12, max_coactors=10_000)
    rng = random.Random(3)
    late = sorted(events, key=lambda e: e.event_time.timestamp() + rng.uniform(0, cfg.coact_s))
    d = LockstepDetector(cfg)
    for e in late:
        d.update(Item.of(e))
    assert {p: set(ts) for p, ts in d._pairs.items()} == dict(recount(events, cfg.coact_s))


def test_pair_targets_survive_the_compact_layout() -> None:
    """A pair's targets move from its single-co-action form to counts and out as acts
    expire: at every step they, and the pairs that may lock, equal a plain recount of the
    window's co-actions."""
    d = LockstepDetector(LockstepConfig(min_targets=2))
    made: list[tuple[float, tuple[str, str], str]] = []  # (follower's act time, pair, target)
    plan = [("p1", 0, "a", "b"), ("p3", 500, "c", "a"), ("p1", 1000, "a", "b"),
            ("p2", 2000, "a", "b"), ("p1", 3000, "a", "b")]  # (a, b) on p1 thrice
    for k, (post, at, lead, follow) in enumerate(plan):
        for i, who in enumerate((lead, follow)):
            t = T0 + timedelta(seconds=at + 10 * i)
            d.update(Item.of(CommentEvent(id=f"comment:{k}{i}", event_time=t, observed_at=t,
                                          comment_id=f"{k}{i}", post_id=post, author=who)))
        made.append((T0.timestamp() + at + 10, (lead, follow), post))
    for cut in (-100.0, 0.0, 1000.0, 2000.0, 3000.0, 4000.0):
        d.expire(T0.timestamp() + cut + 5 + d.cfg.window_s)
        want: dict[tuple[str, str], dict[str, int]] = {}
        for t, pair, post in made:
            if t >= T0.timestamp() + cut + 5:  # (the window keeps acts at or after its start)
                want.setdefault(pair, {}).setdefault(post, 0)
                want[pair][post] += 1
        # a pair's single co-action stands alone (count 1); more are counted per target
        assert {p: v if isinstance(v, dict) else dict.fromkeys(v, 1)
                for p, v in d._pairs.items()} == want
        assert d._candidates == {p for p, v in want.items() if len(v) >= 2}
        assert d.snapshot().value("lockstep_window_pairs") == len(want)
    assert not d._pairs

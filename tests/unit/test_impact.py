"""Interaction impact (metrics.md A2) held against a plain batch computation of the definition:
real agents' archived posts and comments, the real-text stream and a synthetic society (hashed
bag-of-words stand-in vectors, see agent_acts); the same-day baseline as the expectation of the
published random pick; any arrival order, split partitions, pickling, bounds."""

from __future__ import annotations

import json
import math
import pickle
import random
import zlib

import numpy as np
import pytest

from streams.acts import Act
from streams.state.agentdist import unit_draw
from streams.state.impact import DAY, ImpactConfig, ImpactEngine
from tests.unit.agent_acts import profile_acts, realtext_acts, synthetic_acts

CFG = ImpactConfig()


def unit(v) -> np.ndarray:
    v = np.asarray(v, np.float64)
    return v / np.linalg.norm(v)


def day_posts(acts) -> dict[int, dict[str, np.ndarray]]:
    out: dict[int, dict[str, np.ndarray]] = {}
    for a in acts:
        if a.kind == "post" and a.vector is not None:
            out.setdefault(int(a.t // DAY), {})[a.item_id] = np.asarray(a.vector, np.float64)
    return out


def centroids(acts) -> dict[int, np.ndarray]:
    return {d: np.mean([unit(v) for v in ps.values()], axis=0)
            for d, ps in day_posts(acts).items()}


def cosines(w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """cos(w_i, v_j) for every row i of w and column j of v (v: d or d x m)."""
    norms = np.linalg.norm(w, axis=1)
    if v.ndim == 1:
        return (w @ v) / (norms * np.linalg.norm(v))
    return (w @ v) / np.outer(norms, np.linalg.norm(v, axis=0))


def batch(acts, now: float, cfg: ImpactConfig = CFG):
    """Per agent (events, mean delta); population (n, mean, baseline mean) over the window."""
    posts: dict[str, dict] = {}
    comments: dict[str, dict] = {}
    for a in acts:
        if a.kind == "post" and a.vector is not None:
            posts.setdefault(a.agent, {})[(a.t, a.item_id)] = np.asarray(a.vector, np.float64)
        elif a.kind == "comment" and a.target_vector is not None and a.target_author != a.agent:
            comments.setdefault(a.agent, {})[(a.t, a.item_id)] = a
    cutoff, first_day = now - cfg.lateness_s, int(now // DAY) - cfg.window_days + 1
    by_day = {d: (list(ps), np.array(list(ps.values())).T) for d, ps in day_posts(acts).items()}
    agents, deltas, base, touched_gap = {}, [], [], []
    for name, cs in comments.items():
        keys = sorted(posts.get(name, {}))
        ts = np.array([k[0] for k in keys])
        vs = np.array([posts[name][k] for k in keys])
        touched: dict[int, set] = {}
        for t, item in keys:  # what the agent touched each day: its posts, the commented posts
            touched.setdefault(int(t // DAY), set()).add(item)
        for (t, _), c in cs.items():
            touched.setdefault(int(t // DAY), set()).add(c.post_id)
        mine = []
        for (t, item), c in sorted(cs.items()):
            pre = np.nonzero((ts >= t - cfg.horizon_s) & (ts < t))[0][-cfg.posts:]
            post = np.nonzero((ts > t) & (ts <= t + cfg.horizon_s))[0][:cfg.posts]
            if not ((len(post) == cfg.posts and ts[post[-1]] <= cutoff)
                    or t + cfg.horizon_s <= cutoff) or not len(pre) or not len(post):
                continue
            v = np.asarray(c.target_vector, np.float64)
            delta = cosines(vs[post], v).mean() - cosines(vs[pre], v).mean()
            mine.append(delta)
            day = int(t // DAY)
            if day < first_day:
                continue
            deltas.append(delta)
            if unit_draw(cfg.seed, name, item) < cfg.baseline_p:
                # the published draw, averaged over every post of the day it may pick
                ids, every = by_day[day]
                each = cosines(vs[post], every).mean(axis=0) - cosines(vs[pre], every).mean(axis=0)
                base.append(each.mean())
                rest = np.array([i not in touched[day] for i in ids])
                k = len(ids) - int(rest.sum())
                if rest.any():
                    gap = abs(each[rest].mean() - base[-1])
                    touched_gap.append((gap, 4 * k / (len(ids) - k)))
        if mine:
            agents[name] = (len(mine), float(np.mean(mine)))
    return agents, deltas, base, touched_gap


def run(acts, now: float, cfg: ImpactConfig = CFG) -> ImpactEngine:
    e = ImpactEngine(cfg)
    for a in acts:
        e.update(a)
    e.expire(now)
    return e


_BATCH: dict[tuple[int, float], tuple] = {}


def check(e: ImpactEngine, acts, now: float, snap=None) -> None:
    if (id(acts), now) not in _BATCH:  # one batch computation per test's acts
        _BATCH.clear()
        _BATCH[id(acts), now] = batch(acts, now)
    agents, deltas, base, gaps = _BATCH[id(acts), now]
    assert agents and deltas and base, "the data must hold complete events"
    keys = e.sort_keys()["impact"]
    assert set(keys) == set(agents)
    for name, (n, mean) in agents.items():
        p = e.profile(name)
        assert p["events"] == n
        assert p["delta_mean"] == pytest.approx(mean, abs=1e-9)
        assert keys[name] == pytest.approx(mean, abs=1e-9)
    snap = snap or e.population([e.partial()], day_centroids=centroids(acts))
    assert snap.value("impact_events") == len(deltas)
    assert snap.value("impact_delta_mean") == pytest.approx(np.mean(deltas), abs=1e-9)
    assert snap.value("impact_baseline_events") == len(base)
    assert snap.value("impact_baseline_delta_mean") == pytest.approx(np.mean(base), abs=1e-9)
    assert snap.value("impact_agents") == len(agents)
    assert all(gap <= bound for gap, bound in gaps)  # the "did not touch" rule's stated bound


def end_of(acts) -> float:
    return max(a.t for a in acts) + CFG.horizon_s + CFG.lateness_s


@pytest.mark.parametrize("source", ["profiles", "realtext", "synthetic"])
def test_impact_equals_the_batch_definition(source: str) -> None:
    acts = {"profiles": profile_acts, "realtext": realtext_acts,
            "synthetic": synthetic_acts}[source]()
    check(run(acts, end_of(acts)), acts, end_of(acts))


def test_live_clock_reads_events_as_they_complete() -> None:
    acts = sorted(synthetic_acts(), key=lambda a: a.t)
    now = acts[2 * len(acts) // 3].t
    seen = [a for a in acts if a.t <= now]
    e = ImpactEngine()
    for a in seen:
        e.update(a)
        e.expire(a.t)
    e.expire(now)
    check(e, seen, now)
    assert sum(a.events == [] for a in e._agents.values()) < len(e._agents)  # some pending


def test_arrival_order_partitions_and_pickle() -> None:
    acts = list(realtext_acts()) + synthetic_acts(dim=64, t0=1772000000.0)
    now = end_of(acts)
    shuffled = acts[:]
    random.Random(5).shuffle(shuffled)
    check(run(shuffled, now), acts, now)
    parts = [ImpactEngine(), ImpactEngine()]
    for a in acts:
        parts[zlib.crc32(a.agent.encode()) % 2].update(a)
    for p in parts:
        p.expire(now)
    merged = ImpactEngine.population(  # their own day centroids; partials as strict JSON
        [json.loads(json.dumps(p.partial(), allow_nan=False)) for p in parts])
    check(run(acts, now), acts, now, snap=merged)
    e = ImpactEngine()
    for a in acts[: len(acts) // 2]:
        e.update(a)
    e = pickle.loads(pickle.dumps(e))
    for a in acts[len(acts) // 2:]:
        e.update(a)
    e.expire(now)
    check(e, acts, now)


def test_skipped_comments_and_late_comments_are_counted() -> None:
    v = np.ones(4, np.float32) / 2
    e = ImpactEngine()
    e.update(Act("a", 10.0, "comment", "p", "c1", target_author="a", target_vector=v))
    e.update(Act("a", 10.0, "comment", "p", "c2", target_author="b"))
    e.expire(10_000.0)
    e.update(Act("a", 100.0, "comment", "p", "c3", target_author="b", target_vector=v))
    skipped = {dict(s.labels)["reason"]: s.value for s in e.snapshot().samples
               if s.name == "impact_comments_skipped_total"}
    assert skipped == {"self": 1, "no_target": 1, "late": 1, "max_pending": 0}


def test_state_is_bounded_after_expire() -> None:
    acts = synthetic_acts(agents=10, posts=120)
    last = max(a.t for a in acts)
    e = run(acts, last + 3600.0)
    for a in e._agents.values():  # the posts future events can use, and the pending ones'
        m = min([last + 3600.0 - CFG.lateness_s] + [t for t, _ in a.events[:1]])
        assert sum(t < m for t in a.ts) <= CFG.posts
    e.expire(last + CFG.idle_s + 1)
    assert e.partial()["agents_tracked"] == 0
    e.expire(last + (CFG.window_days + 1) * DAY + CFG.idle_s)
    assert e.partial()["days"] == {} and e.partial()["state_bytes"] == 0
    assert math.isnan(e.snapshot().value("impact_delta_mean"))

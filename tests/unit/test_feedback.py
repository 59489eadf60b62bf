"""Net Progress (metrics.md A2) held against a plain batch computation of the definition: real
agents' archived posts and scores, the real-text stream and a synthetic society (hashed
bag-of-words stand-in vectors, see agent_acts); the settling rule; the null's calibration;
any arrival order, split partitions, pickling, bounds."""

from __future__ import annotations

import json
import math
import pickle
import random
import zlib

import numpy as np
import pytest

from streams.acts import Act
from streams.state.agentdist import seed_of
from streams.state.feedback import FeedbackConfig, FeedbackEngine
from tests.unit.agent_acts import profile_acts, realtext_acts, synthetic_acts

SETTLE = FeedbackConfig().settle_s


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def np_of(cur: np.ndarray, nxt: np.ndarray, scores: list[float], m: int = 3) -> float:
    """The published NP of one pair; ranks by (score, posting order)."""
    ranked = sorted(range(len(scores)), key=lambda i: (scores[i], i))
    c_top, c_bot = cur[ranked[-m:]].mean(axis=0), cur[ranked[:m]].mean(axis=0)
    c_curr, c_next = cur.mean(axis=0), nxt.mean(axis=0)
    d_top = (1 - cos(c_next, c_top)) - (1 - cos(c_curr, c_top))
    d_bot = (1 - cos(c_next, c_bot)) - (1 - cos(c_curr, c_bot))
    return d_bot - d_top


def batch(acts, now: float, draws: int = 200, w: int = 10) -> dict[str, tuple]:
    """Per agent: (NP, null low, null high, pairs) of the pairs settled by ``now``."""
    posts: dict[str, dict] = {}
    changes: dict[tuple[str, str], list] = {}
    for a in acts:
        if a.kind == "post" and a.vector is not None:
            posts.setdefault(a.agent, {})[(a.t, a.item_id)] = np.asarray(a.vector, np.float64)
        elif a.kind == "score" and a.target_kind == "post":
            changes.setdefault((a.agent, a.item_id), []).append((a.t, a.score))
    out = {}
    for name, ps in posts.items():
        keys = sorted(ps)
        nps, nulls = [], []
        for k in range(len(keys) // w - 1):
            cur_k, nxt_k = keys[k * w:(k + 1) * w], keys[(k + 1) * w:(k + 2) * w]
            settle_at = nxt_k[-1][0] + SETTLE
            if settle_at > now:
                break
            scores = []
            for _, item in cur_k:
                before = [c for c in changes.get((name, item), []) if c[0] <= settle_at]
                scores.append(max(before)[1] if before else 0)
            cur = np.array([ps[x] for x in cur_k])
            nxt = np.array([ps[x] for x in nxt_k])
            nps.append(np_of(cur, nxt, scores))
            rng = np.random.default_rng(seed_of(0, name, k))
            perms = rng.permuted(np.tile(np.array(scores, float), (draws, 1)), axis=1)
            nulls.append([np_of(cur, nxt, list(p)) for p in perms])
        if nps:
            null = np.mean(nulls, axis=0)
            out[name] = (float(np.mean(nps)), float(np.quantile(null, 0.025)),
                         float(np.quantile(null, 0.975)), len(nps))
    return out


def run(acts, now: float, cfg: FeedbackConfig | None = None) -> FeedbackEngine:
    e = FeedbackEngine(cfg)
    for a in acts:
        e.update(a)
    e.expire(now)
    return e


def check(e: FeedbackEngine, ref: dict) -> None:
    assert ref, "the data must hold agents with two windows"
    keys = e.sort_keys()["np"]
    assert set(keys) == set(ref)
    for name, (np_, lo, hi, pairs) in ref.items():
        p = e.profile(name)
        assert p["pairs"] == pairs
        assert p["np"] == pytest.approx(np_, abs=1e-9)
        assert p["np_null_low"] == pytest.approx(lo, abs=1e-9)
        assert p["np_null_high"] == pytest.approx(hi, abs=1e-9)
        assert p["outside_null"] == (np_ < lo or np_ > hi)
    snap = e.snapshot()
    n = len(ref)
    above = sum(r[0] > r[2] for r in ref.values())
    outside = sum(r[0] > r[2] or r[0] < r[1] for r in ref.values())
    assert snap.value("feedback_agents") == n
    assert snap.value("feedback_np_above_null_ratio") == pytest.approx(above / n, abs=1e-12)
    assert snap.value("feedback_np_outside_null_ratio") == pytest.approx(outside / n, abs=1e-12)
    assert snap.value("feedback_np_mean") == pytest.approx(
        np.mean([r[0] for r in ref.values()]), abs=1e-9)


def end_of(acts) -> float:
    return max(a.t for a in acts) + SETTLE


@pytest.mark.parametrize("source", ["profiles", "realtext", "synthetic"])
def test_np_and_its_null_equal_the_batch_definition(source: str) -> None:
    acts = {"profiles": profile_acts, "realtext": realtext_acts,
            "synthetic": synthetic_acts}[source]()
    now = end_of(acts)
    check(run(acts, now), batch(acts, now))


def test_midway_clock_scores_only_the_settled_pairs() -> None:
    acts = sorted(synthetic_acts(), key=lambda a: a.t)
    now = acts[len(acts) // 2].t + SETTLE / 2
    seen = [a for a in acts if a.t <= now]  # what a live worker has seen by now
    e = FeedbackEngine()
    for a in seen:
        e.update(a)
        e.expire(a.t)  # the clock moves as a live worker's would
    e.expire(now)
    ref = batch(seen, now)
    check(e, ref)
    assert sum(r[3] for r in ref.values()) < sum(r[3] for r in batch(acts, end_of(acts)).values())


def twenty_posts(agent: str = "a") -> list[Act]:
    rng = np.random.default_rng(5)
    out = []
    for i in range(20):
        v = rng.normal(size=8).astype(np.float32)
        out.append(Act(agent, 3600.0 * i, "post", f"p{i}", f"p{i}", vector=v / np.linalg.norm(v)))
        out.append(Act(agent, 3600.0 * i + 60, "score", f"p{i}", f"p{i}", target_kind="post",
                       score=int(rng.integers(0, 9))))
    return out


def test_votes_count_until_the_pair_settles_and_never_after() -> None:
    acts = twenty_posts()
    settle_at = 3600.0 * 19 + SETTLE
    base = run(acts, settle_at).profile("a")["np"]
    assert run(acts, settle_at - 1).profile("a")["pairs"] == 0  # not settled yet
    flip = [Act("a", t, "score", "p0", "p0", target_kind="post", score=100)
            for t in (settle_at - 1, settle_at, settle_at + 1)]
    before, at, after = (run(acts + [f], settle_at + 10).profile("a")["np"] for f in flip)
    assert before != pytest.approx(base, abs=1e-6) and at == before  # counted up to settle_at
    assert after == base  # a vote after settling does not change the figure
    # and once scored, a later vote act changes nothing either
    e = run(acts, settle_at + 10)
    e.update(flip[0])
    e.expire(settle_at + 20)
    assert e.profile("a")["np"] == base


def test_late_post_inside_a_scored_window_is_left_out() -> None:
    acts = twenty_posts()
    e = run(acts, 3600.0 * 19 + SETTLE)
    snap = e.snapshot()
    e.update(Act("a", 1.0, "post", "late", "late", vector=np.ones(8, np.float32)))
    assert e.snapshot().value("feedback_late_posts_total") == 1
    assert e.snapshot().value("feedback_np_mean") == snap.value("feedback_np_mean")


def test_null_calibration_and_an_adapting_agent() -> None:
    """Agents that ignore feedback: about 5 % outside their band (2.5 % above); agents that
    move toward their rewarded posts: above."""
    rng = np.random.default_rng(11)
    dim, acts = 16, []
    for a in range(300):
        t = 0.0
        for i in range(40):
            v = rng.normal(size=dim)
            pid = f"{a}.{i}"
            acts.append(Act(f"n{a}", t, "post", pid, pid, vector=(v / np.linalg.norm(v))))
            acts.append(Act(f"n{a}", t + 60, "score", pid, pid, target_kind="post",
                            score=int(rng.integers(-3, 10))))
            t += 3600.0
    e = run(acts, 40 * 3600.0 + SETTLE)
    snap = e.snapshot()
    assert snap.value("feedback_agents") == 300
    outside = snap.value("feedback_np_outside_null_ratio")
    assert 0.01 <= outside <= 0.11  # binomial(300, 0.05): mean 0.05, sd 0.013
    assert snap.value("feedback_np_above_null_ratio") <= 0.07
    # an adapter: each window's posts move to the centroid of the last window's rewarded posts
    t, centre, adapt = 0.0, rng.normal(size=dim), []
    for k in range(6):
        vs = centre + 0.8 * rng.normal(size=(10, dim))
        vs /= np.linalg.norm(vs, axis=1, keepdims=True)
        rewarded = rng.choice(10, 3, replace=False)
        centre = vs[rewarded].mean(axis=0) * 3
        for i, v in enumerate(vs):
            pid = f"x{k}.{i}"
            adapt += [Act("adapter", t, "post", pid, pid, vector=v),
                      Act("adapter", t + 60, "score", pid, pid, target_kind="post",
                          score=50 if i in rewarded else int(rng.integers(0, 3)))]
            t += 3600.0
    p = run(adapt, t + SETTLE).profile("adapter")
    assert p["pairs"] == 5 and p["np"] > p["np_null_high"] and p["outside_null"]


def test_arrival_order_partitions_and_pickle() -> None:
    acts = list(realtext_acts()) + synthetic_acts(dim=64, t0=1773000000.0)  # both active
    now = end_of(acts)
    ref = batch(acts, now)
    shuffled = acts[:]
    random.Random(3).shuffle(shuffled)
    check(run(shuffled, now), ref)
    parts = [FeedbackEngine(), FeedbackEngine()]
    for a in acts:
        parts[zlib.crc32(a.agent.encode()) % 2].update(a)
    for p in parts:
        p.expire(now)
    merged = FeedbackEngine.population(  # partials travel as strict JSON to the reducer
        [json.loads(json.dumps(p.partial(), allow_nan=False)) for p in parts])
    one = run(acts, now).snapshot()
    for s in one.samples:
        if s.name != "feedback_state_bytes":
            assert merged.value(s.name, **dict(s.labels)) == pytest.approx(
                s.value, abs=1e-12, nan_ok=True), s.name
    assert merged.details["feedback"]["top_above"] == one.details["feedback"]["top_above"]
    e = FeedbackEngine()
    for a in acts[: len(acts) // 2]:
        e.update(a)
    e = pickle.loads(pickle.dumps(e))
    for a in acts[len(acts) // 2:]:
        e.update(a)
    e.expire(now)
    check(e, ref)


def test_state_is_bounded_after_expire() -> None:
    acts = synthetic_acts(agents=10, posts=80)
    e = run(acts, end_of(acts))
    for name in e._agents:
        a = e._agents[name]
        assert len(a.keys) < 20  # only the unscored tail: the last window and the leftover
        assert set(a.scores) <= {item for _, item in a.keys}
    assert e.snapshot().value("feedback_state_bytes") > 0
    e.expire(end_of(acts) + FeedbackConfig().idle_s)
    assert e.partial()["agents_tracked"] == 0
    assert math.isnan(e.snapshot().value("feedback_np_mean"))

"""Agent drift (metrics.md A2) held against a plain batch computation of the definition: real
agents' archived posts, the real-text stream's acts and a synthetic society (hashed bag-of-words
stand-in vectors, see agent_acts); any arrival order, split partitions, pickling, bounds."""

from __future__ import annotations

import json
import math
import pickle
import random
import zlib

import numpy as np
import pytest

from streams.state.agentdist import Dist
from streams.state.drift import DriftConfig, DriftEngine
from tests.unit.agent_acts import profile_acts, realtext_acts, synthetic_acts


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def batch(acts, min_posts: int = 10, last: int | None = None):
    """Per agent: D, d_a, c_early, c_late from the sorted, de-duplicated posts."""
    by: dict[str, dict] = {}
    for a in acts:
        if a.kind == "post" and a.vector is not None:
            by.setdefault(a.agent, {})[(a.t, a.item_id)] = np.asarray(a.vector, np.float64)
    out = {}
    for name, posts in by.items():
        vs = np.array([posts[k] for k in sorted(posts)])
        if last is not None:
            vs = vs[-last:]
        n = len(vs)
        if n < min_posts:
            continue
        h = n // 2
        ce, cl = vs[:h].mean(axis=0), vs[n - h:].mean(axis=0)
        out[name] = (1 - cos(ce, cl), cl - ce, ce, cl)
    return out


def all_posts_centroid(acts) -> np.ndarray:
    return np.mean([a.vector for a in acts if a.kind == "post"], axis=0, dtype=np.float64)


def run(acts, cfg: DriftConfig | None = None) -> DriftEngine:
    e = DriftEngine(cfg)
    for a in acts:
        e.update(a)
    return e


def check(e: DriftEngine, acts, g: np.ndarray) -> None:
    ref = batch(acts)
    assert ref, "the data must hold agents with 10 posts"
    keys = e.sort_keys()["drift"]
    assert set(keys) == set(ref)
    mean_d = np.mean([r[1] for r in ref.values()], axis=0)
    for name, (d, da, ce, cl) in ref.items():
        p = e.profile(name, c_global=g, mean_d=mean_d)
        assert p["drift"] == pytest.approx(d, abs=1e-9)
        assert keys[name] == pytest.approx(d, abs=1e-9)
        assert p["centroid_movement"] == pytest.approx(cos(cl, g) - cos(ce, g), abs=1e-9)
        assert p["drift_consistency"] == pytest.approx(cos(da, mean_d), abs=1e-9)
    snap = e.population([e.partial()], c_global=g)
    ds = np.array([r[0] for r in ref.values()])
    assert snap.value("agent_drift_agents") == len(ref)
    assert snap.value("agent_drift_mean") == pytest.approx(ds.mean(), abs=1e-9)
    assert snap.value("agent_drift_consistency_mean") == pytest.approx(
        np.mean([cos(r[1], mean_d) for r in ref.values()]), abs=1e-9)
    assert snap.value("agent_centroid_movement_mean") == pytest.approx(
        np.mean([cos(r[3], g) - cos(r[2], g) for r in ref.values()]), abs=1e-9)
    np.testing.assert_allclose(snap.details["agent_drift"]["mean_d"], mean_d, atol=1e-9)
    for q in (0.05, 0.5, 0.95):  # the histogram's quantile: within one bin (0.001)
        exact = np.sort(ds)[max(1, math.ceil(q * len(ds))) - 1]
        assert abs(snap.value("agent_drift", quantile=str(q)) - exact) <= 0.001


@pytest.mark.parametrize("source", ["profiles", "realtext", "synthetic"])
def test_drift_equals_the_batch_definition(source: str) -> None:
    acts = {"profiles": profile_acts, "realtext": realtext_acts,
            "synthetic": synthetic_acts}[source]()
    check(run(acts), acts, all_posts_centroid(acts))


def test_arrival_order_does_not_change_any_figure() -> None:
    acts = list(realtext_acts())
    g = all_posts_centroid(acts)
    for seed in (1, 2):
        shuffled = acts[:]
        random.Random(seed).shuffle(shuffled)
        check(run(shuffled), acts, g)
    # a repeated act (the same key again) changes nothing
    e = run(acts + acts[:500])
    check(e, acts, g)
    assert e.repeats_total == sum(1 for a in acts[:500] if a.kind == "post")


def test_two_partitions_merge_to_one() -> None:
    acts = list(realtext_acts()) + synthetic_acts(dim=64)
    g = all_posts_centroid(acts)
    parts = [DriftEngine(), DriftEngine()]
    for a in acts:
        parts[zlib.crc32(a.agent.encode()) % 2].update(a)
    one = run(acts)
    # partials travel as JSON (strict: no NaN) to the reducer
    merged = DriftEngine.population(
        [json.loads(json.dumps(p.partial(), allow_nan=False)) for p in parts], c_global=g)
    single = one.population([one.partial()], c_global=g)
    assert all(p.partial()["agents"] for p in parts)
    for s in single.samples:
        if s.name != "agent_drift_state_bytes":
            assert merged.value(s.name, **dict(s.labels)) == pytest.approx(
                s.value, abs=1e-9, nan_ok=True), s.name


def test_pickle_midway_continues_exactly() -> None:
    acts = synthetic_acts()
    e = run(acts[: len(acts) // 2])
    e = pickle.loads(pickle.dumps(e))
    for a in acts[len(acts) // 2:]:
        e.update(a)
    check(e, acts, all_posts_centroid(acts))


def test_state_is_bounded_by_max_posts_and_idle_expiry() -> None:
    acts = synthetic_acts(agents=10, posts=80)
    e = run(acts, DriftConfig(max_posts=25))
    ref = batch(acts, last=25)
    for name, r in ref.items():
        assert e.profile(name)["posts"] == 25
        assert e.profile(name)["drift"] == pytest.approx(r[0], abs=1e-9)
    before = e.partial()["state_bytes"]
    assert before > 0
    last = max(a.t for a in acts if a.kind == "post")
    e.expire(last + DriftConfig().idle_s - 1)
    assert e.partial()["agents_tracked"] > 0  # recently active agents stay
    e.expire(last + DriftConfig().idle_s + 1)
    assert e.partial()["agents_tracked"] == 0 and e.partial()["state_bytes"] == 0
    assert math.isnan(e.snapshot().value("agent_drift_mean"))


def test_dist_quantile_bound_and_merge() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 2, 1001)
    d = Dist.merge([Dist.of(x[:400], 0.0, 2.0, 2000), Dist.of(x[400:], 0.0, 2.0, 2000)])
    assert d.n == 1001 and d.mean == pytest.approx(x.mean(), abs=1e-12)
    for q in np.linspace(0.01, 0.99, 25):
        exact = np.sort(x)[math.ceil(q * len(x)) - 1]
        assert abs(d.quantile(q) - exact) <= d.width

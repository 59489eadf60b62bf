"""Socialisation onset: quiet on the real-text background and on societies that ignore feedback
and peers; fires for planted adapters and convergers, with them as the top agents; the
binomial band's false-alarm rate is its stated alpha."""

from __future__ import annotations

import numpy as np
from scipy.stats import binom

from detectors.socialisation import SocialisationConfig, SocialisationDetector
from streams.acts import Act
from streams.state.base import Snapshot
from streams.state.feedback import FeedbackConfig, FeedbackEngine
from streams.state.impact import DAY, ImpactConfig, ImpactEngine
from tests.unit.agent_acts import profile_acts, realtext_acts

SETTLE = FeedbackConfig().settle_s
END = ImpactConfig().horizon_s + 3600.0


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def population(acts: list[Act]) -> tuple[float, Snapshot]:
    """The merged population snapshot of the feedback and impact engines once all settled."""
    now = max(a.t for a in acts) + max(SETTLE, END)
    fb, im = FeedbackEngine(), ImpactEngine()
    for a in acts:
        fb.update(a)
        im.update(a)
    fb.expire(now)
    im.expire(now)
    days: dict[int, list] = {}
    for a in acts:
        if a.kind == "post":
            days.setdefault(int(a.t // DAY), []).append(unit(np.asarray(a.vector, np.float64)))
    snap = Snapshot.merge([fb.snapshot(), ImpactEngine.population(
        [im.partial()], day_centroids={d: np.mean(v, axis=0) for d, v in days.items()})])
    return now, snap


def judge(acts: list[Act], cfg: SocialisationConfig | None = None):
    now, snap = population(acts)
    d = SocialisationDetector(cfg)
    d.observe(now, snap)
    return d.findings(now), snap, d


def feedback_society(indifferent: int, adapters: int, seed: int = 0, dim: int = 16) -> list[Act]:
    """Indifferent agents post at random; adapters move each window toward the centroid of
    their last window's rewarded posts."""
    rng = np.random.default_rng(seed)
    acts: list[Act] = []
    for a in range(indifferent + adapters):
        name = f"n{a}" if a < indifferent else f"adapter{a}"
        centre, t = rng.normal(size=dim), 0.0
        for k in range(5):
            if a < indifferent:
                vs = unit(rng.normal(size=(10, dim)))
            else:
                vs = unit(centre + 0.8 * rng.normal(size=(10, dim)))
            rewarded = set(rng.choice(10, 3, replace=False).tolist())
            centre = vs[sorted(rewarded)].mean(axis=0) * 3
            for i, v in enumerate(vs):
                pid = f"{name}.{k}.{i}"
                score = 50 if i in rewarded else int(rng.integers(0, 3))
                acts += [Act(name, t, "post", pid, pid, vector=v.astype(np.float32)),
                         Act(name, t + 60, "score", pid, pid, target_kind="post", score=score)]
                t += 3600.0
    return acts


def impact_society(agents: int, converge: bool, seed: int = 0, dim: int = 16) -> list[Act]:
    """Each agent posts hourly around its own topic and comments on others' posts every ten
    hours; a converging agent's next posts lean toward what it commented on."""
    rng = np.random.default_rng(seed)
    topics = unit(rng.normal(size=(agents, dim)))
    acts: list[Act] = []
    for a in range(agents):
        lean, t = None, 0.0
        for i in range(200):
            base = topics[a] + (lean if lean is not None else 0)
            v = unit(base + 0.7 * rng.normal(size=dim)).astype(np.float32)
            acts.append(Act(f"a{a}", t, "post", f"a{a}.{i}", f"a{a}.{i}", vector=v))
            if i % 10 == 5:
                other = int(rng.integers(agents))
                if other != a:
                    vstar = unit(topics[other] + 0.3 * rng.normal(size=dim))
                    acts.append(Act(f"a{a}", t + 60, "comment", f"q{a}.{i}", f"c{a}.{i}",
                                    target_author=f"a{other}", target_vector=vstar))
                    lean = vstar if converge else None
            t += 3600.0
    return acts


def test_quiet_on_the_real_text_background() -> None:
    for acts in (list(realtext_acts()), list(profile_acts())):
        found, snap, d = judge(acts)
        assert found == []
    assert snap.details["feedback"]["agents"] > 0
    assert "socialisation_adapting_agents" in {s.name for s in judge(list(realtext_acts()))[2]
                                               .snapshot().samples}


def test_agents_ignoring_feedback_and_peers_raise_nothing() -> None:
    for seed in (1, 2):
        found, snap, _ = judge(feedback_society(400, 0, seed) + impact_society(60, False, seed))
        assert found == [], [f.summary for f in found]
        assert snap.details["impact"]["events"] >= 100


def test_planted_adapters_fire_and_lead_the_evidence() -> None:
    found, snap, _ = judge(feedback_society(400, 30, seed=4))
    (f,) = found
    assert f.key == "adapting" and f.evidence["above"] > f.evidence["band_high"]
    assert f.evidence["band_high"] == binom.isf(1e-3, f.evidence["agents"], 0.025)
    top = [r["agent"] for r in f.evidence["top_agents"]]
    assert len(top) == 10 and sum(a.startswith("adapter") for a in top) >= 8


def test_planted_convergers_fire() -> None:
    found, snap, _ = judge(impact_society(60, True, seed=5))
    (f,) = found
    assert f.key == "converging" and f.evidence["z"] >= 3.09
    assert f.evidence["delta_mean"] > f.evidence["baseline_delta_mean"] + 0.01
    assert f.evidence["top_agents"]


def test_binomial_band_false_alarm_rate_is_alpha() -> None:
    rng = np.random.default_rng(0)
    d = SocialisationDetector()
    for n in (50, 400, 3000):
        fired = 0
        for k in rng.binomial(n, 0.025, size=4000):
            d.observe(0.0, Snapshot(details={"feedback": {"agents": n, "above": int(k)}}))
            fired += bool(d.findings(0.0))
        assert fired / 4000 <= 0.003  # alpha = 0.001: binomial noise of 4000 draws
        fired = 0
        for k in rng.binomial(n, 0.1, size=200):  # 10 % adapting: caught once N is large
            d.observe(0.0, Snapshot(details={"feedback": {"agents": n, "above": int(k)}}))
            fired += bool(d.findings(0.0))
        assert n < 400 or fired == 200


def test_stale_or_small_populations_are_not_judged() -> None:
    d = SocialisationDetector(SocialisationConfig(min_agents=30))
    d.observe(0.0, Snapshot(details={"feedback": {"agents": 20, "above": 20}}))
    assert d.findings(0.0) == []
    d.observe(0.0, Snapshot(details={"feedback": {"agents": 400, "above": 100}}))
    assert d.findings(10.0)
    assert d.findings(3601.0) == []

"""The action plane (streams/state/actions.py) against a plain recount of the same acts.

The acts are the per-agent stage's (:class:`streams.acts.ActRouter`) from the shared real
comment trees (their posts' and comments' vote counts become score acts) and from the
simulator; the reference recomputes every figure from the acts with NumPy.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from datetime import timedelta
from typing import Any

import networkx as nx
import numpy as np
import pytest

from service.sources.simulate import ScenarioSpec, SimulationConfig, Simulator
from streams.acts import Act, ActRouter
from streams.events import Event
from streams.state.actions import EDGES, ActionConfig, ActionEngine
from streams.state.pagerank import largest_gap_cut
from tests.unit.collective_data import thread_events


def acts_of(events: list[Event]) -> list[Act]:
    """The acts the per-agent stage routes from these events (:class:`ActRouter`)."""
    router = ActRouter()
    return [a for e in events for a in router.route(e)]


def supernodes_of(acts: list[Act]) -> set[str]:
    """The published cut (metrics A3) on the acts' interaction graph: networkx PageRank."""
    g = nx.DiGraph()
    for a in acts:
        if a.kind == "comment" and a.target_author and a.target_author != a.agent:
            w = g.get_edge_data(a.agent, a.target_author, {"weight": 0})["weight"]
            g.add_edge(a.agent, a.target_author, weight=w + 1)
    pr = nx.pagerank(g, alpha=0.85, tol=1e-12)
    ranked = sorted(pr.items(), key=lambda kv: -kv[1])
    return {a for a, _ in ranked[: largest_gap_cut([v for _, v in ranked])]}


def reference(acts: list[Act], cfg: ActionConfig, supernodes: set[str],
              cutoff: float = -math.inf) -> dict[str, dict[str, Any]]:
    """Every agent's figures recomputed from the acts: the newest N of each kind by
    (t, item_id), repeats once, nothing before ``cutoff``."""
    own: dict[str, dict[tuple[float, str], str]] = defaultdict(dict)
    rep: dict[str, dict[tuple[float, str], str]] = defaultdict(dict)
    scores: dict[str, dict[str, tuple[float, int]]] = defaultdict(dict)
    for a in acts:
        if a.t < cutoff:
            continue
        if a.kind in ("post", "comment"):
            target = (a.target_author or "") if a.kind == "comment" else None
            own[a.agent][(a.t, a.item_id)] = target
        elif a.kind == "replied":
            rep[a.agent][(a.t, a.item_id)] = a.target_author or ""
        elif a.kind == "score":
            scores[a.agent][a.item_id] = max(scores[a.agent].get(a.item_id, (-math.inf, 0)),
                                             (a.t, a.score))
    out = {}
    for name in set(own) | set(rep) | set(scores):
        kept = sorted(own[name].items())[-cfg.max_acts:]
        got = sorted(rep[name].items())[-cfg.max_replied:]
        items = sorted(scores[name].items(), key=lambda kv: (kv[1][0], kv[0]))[-cfg.max_items:]
        comments = [x for _, x in kept if x is not None]
        targets = [x for x in comments if x and x != name]
        f: dict[str, Any] = {"posts": len(kept) - len(comments), "comments": len(comments),
                             "targeted_comments": len(targets),
                             "replies_received": len(got), "scored_items": len(items),
                             "net_votes_received": sum(s for _, (_, s) in items) if items else None}
        partners = set(targets)
        back = partners & {x for _, x in got if x and x != name}
        f["supernode_comments"] = sum(x in supernodes for x in targets)
        f["partners"], f["reciprocated_partners"] = len(partners), len(back)
        ok = len(targets) >= cfg.min_comments
        f["supernode_reply_share"] = f["supernode_comments"] / len(targets) if ok else None
        f["reciprocity"] = len(back) / len(partners) if ok else None
        times = np.array([t for (t, _), _ in kept])
        if len(times) - 1 >= cfg.min_gaps:
            gaps = np.diff(times)
            med = np.median(gaps)
            f["gap_median_s"], f["periodicity"] = med, np.mean(np.abs(gaps - med) <= 0.1 * med)
            f["gap_cv"] = gaps.std() / gaps.mean() if gaps.mean() > 0 else None
        else:
            f["gap_median_s"] = f["gap_cv"] = f["periodicity"] = None
        out[name] = f
    return out


def assert_matches(engine: ActionEngine, ref: dict[str, dict[str, Any]]) -> None:
    shown = {n for n in ref if engine.profile(n) is not None}
    assert shown == {n for n, f in ref.items()
                     if f["posts"] + f["comments"] + f["replies_received"] + f["scored_items"]}
    for name in shown:
        got = engine.profile(name)
        for k, v in ref[name].items():
            if v is None:
                assert got[k] is None, (name, k)
            else:
                assert got[k] == pytest.approx(v, abs=1e-9), (name, k)
    # the population: histogram counts per figure as a plain count of values <= each edge
    snap = engine.snapshot()
    for k, edges in EDGES.items():
        values = np.array([f[k] for n, f in ref.items() if n in shown and f[k] is not None])
        metric = f"action_agent_{'gap_median_seconds' if k == 'gap_median_s' else k}"
        for e in edges:
            assert snap.value(f"{metric}_bucket", le=f"{e:g}") == np.sum(values <= e), (k, e)
        assert snap.value(f"{metric}_bucket", le="+Inf") == len(values)
        assert snap.value(f"{metric}_sum") == pytest.approx(values.sum(), abs=1e-9)
    targeted = sum(ref[n]["targeted_comments"] for n in shown)
    hits = sum(ref[n]["supernode_comments"] for n in shown)
    assert snap.value("action_reply_supernode_share") == pytest.approx(hits / targeted, abs=1e-9)
    partners = sum(ref[n]["partners"] for n in shown)
    back = sum(ref[n]["reciprocated_partners"] for n in shown)
    assert snap.value("action_reciprocity") == pytest.approx(back / partners, abs=1e-9)
    assert snap.value("action_agents") == len(shown)


def feed(acts: list[Act], cfg: ActionConfig | None = None,
         supernodes: set[str] | None = None) -> ActionEngine:
    e = ActionEngine(cfg)
    e.set_supernodes(supernodes or set())
    for a in acts:
        e.update(a)
    return e


@pytest.fixture(scope="module")
def real_acts() -> list[Act]:
    return acts_of(list(thread_events()))


@pytest.fixture(scope="module")
def sim_acts() -> list[Act]:
    sim = Simulator(SimulationConfig(seed=3, agents=600, duration=timedelta(hours=10),
                                     posts_per_hour=300, max_delay=timedelta(hours=3),
                                     scenarios=(ScenarioSpec(name="lockstep"),
                                                ScenarioSpec(name="adapt"))))
    return acts_of(list(sim))


def test_real_threads_every_figure_equals_the_recount(real_acts: list[Act]) -> None:
    cfg = ActionConfig(min_gaps=2, min_comments=2)
    sn = supernodes_of(real_acts)
    shuffled = random.Random(1).sample(real_acts, len(real_acts))
    engine = feed(shuffled, cfg)
    engine.snapshot()  # read without super-nodes: the new set must refresh every share
    engine.set_supernodes(sn)
    ref = reference(real_acts, cfg, sn)
    assert sum(f["gap_cv"] is not None for f in ref.values()) >= 5
    assert sum(f["reciprocity"] is not None for f in ref.values()) >= 5
    assert sum(f["net_votes_received"] is not None for f in ref.values()) >= 20
    assert_matches(engine, ref)


def test_simulator_with_tight_caps_equals_the_recount(sim_acts: list[Act]) -> None:
    """Caps far below the busiest agents' activity: the newest N by (t, item_id) are kept."""
    cfg = ActionConfig(max_acts=12, max_replied=9, max_items=5)
    sn = supernodes_of(sim_acts)
    assert sn
    ref = reference(sim_acts, cfg, sn)
    assert max(f["posts"] + f["comments"] for f in ref.values()) == 12
    assert sum(f["net_votes_received"] is not None for f in ref.values()) > 50
    shuffled = random.Random(2).sample(sim_acts, len(sim_acts))
    engine = feed(shuffled[: len(shuffled) // 2], cfg, sn)
    engine.snapshot()  # figures cached on the agents: the later acts must refresh them
    for a in shuffled[len(shuffled) // 2:]:
        engine.update(a)
    assert_matches(engine, ref)


def test_order_repeats_and_partitions_do_not_change_the_figures(sim_acts: list[Act]) -> None:
    cfg = ActionConfig(max_acts=20)
    sn = supernodes_of(sim_acts)
    one = feed(sim_acts, cfg, sn)
    again = feed([*random.Random(5).sample(sim_acts, len(sim_acts)), *sim_acts[:500]], cfg, sn)
    parts = [ActionEngine(cfg), ActionEngine(cfg)]
    for p in parts:
        p.set_supernodes(sn)
    for a in random.Random(6).sample(sim_acts, len(sim_acts)):
        parts[sum(map(ord, a.agent)) % 2].update(a)  # keyed by agent, like the agents topic
    merged = ActionEngine.population([p.partial() for p in parts])
    for other in (again.snapshot(), merged):
        got = {(s.name, s.labels): s.value for s in other.samples if "acts_total" not in s.name}
        want = {(s.name, s.labels): s.value for s in one.snapshot().samples
                if "acts_total" not in s.name}
        assert got.keys() == want.keys()
        for k, v in want.items():
            assert got[k] == pytest.approx(v, abs=1e-9), k
    for name in list(one.sort_keys()["acts"])[:200]:
        assert again.profile(name) == one.profile(name)
    keys = one.sort_keys()
    assert keys["gap_cv"] and keys["reciprocity"] and keys["supernode_reply_share"]


def test_expire_drops_old_acts_and_ignores_late_ones(sim_acts: list[Act]) -> None:
    cfg = ActionConfig(window_s=4 * 3600.0)
    end = max(a.t for a in sim_acts)
    engine = feed(sim_acts, cfg)
    engine.snapshot()  # cached figures: the moving cutoff must refresh them
    before = engine.nbytes()
    engine.expire(end)
    cutoff = end - cfg.window_s
    late = [a for a in sim_acts if a.t < cutoff][:100]
    for a in late:
        engine.update(a)
    assert engine.late_total == len(late)
    assert_matches(engine, reference(sim_acts, cfg, set(), cutoff))
    assert engine.nbytes() < before
    engine.expire(end + cfg.window_s + 1)  # everything old: every agent leaves
    assert engine.nbytes() < 1000 and engine.snapshot().value("action_agents") == 0


def test_a_clock_and_a_poisson_poster_are_told_apart() -> None:
    rng = random.Random(0)
    e = ActionEngine()
    t = 0.0
    for k in range(200):
        e.update(Act("clock", 600.0 * k + rng.uniform(-5, 5), "post", f"c{k}", f"c{k}"))
        t += rng.expovariate(1 / 600)
        e.update(Act("poisson", t, "post", f"p{k}", f"p{k}"))
    clock, poisson = e.profile("clock"), e.profile("poisson")
    assert clock["periodicity"] == 1.0 and clock["gap_cv"] < 0.02
    assert poisson["periodicity"] < 0.2 and 0.8 < poisson["gap_cv"] < 1.2

"""Emerging super-node: the largest-gap cut against a brute-force one, PageRank against
networkx on the same window, an emerging hub caught with its trajectory, a steady society not."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import networkx as nx
import numpy as np

from detectors.supernode import SupernodeConfig, SupernodeDetector, largest_gap_set
from streams.events import CommentEvent

T0 = datetime(2026, 2, 1, tzinfo=UTC)


def comment(i: int, t: float, author: str, to: str, thread: str) -> CommentEvent:
    when = T0 + timedelta(seconds=t)
    return CommentEvent(id=f"comment:{i}", event_time=when, observed_at=when, comment_id=str(i),
                        post_id=thread, author=author, reply_to=to, post_author=to)


def society(hours: float, seed: int, hub_from: float | None = None) -> list[CommentEvent]:
    """Comments among 300 agents with steady popular ones; optionally a quiet agent (q0)
    that, from ``hub_from``, draws replies from many agents across many threads."""
    rng = random.Random(seed)
    weights = [1 / (k + 1) ** 0.8 for k in range(300)]
    out, i, t = [], 0, 0.0
    while t < hours * 3600:
        t += rng.expovariate(1 / 6)
        target = rng.choices(range(300), weights)[0]
        author = rng.randrange(300)
        if author != target:
            out.append(comment(i, t, f"a{author}", f"a{target}", f"p{target}-{int(t // 1800)}"))
        if hub_from is not None and t >= hub_from * 3600 and rng.random() < 0.25:
            out.append(comment(i + 1, t, f"r{rng.randrange(400)}", "q0",
                               f"q0-{int(t // 900)}"))
        i += 2
    return out


def run(events: list[CommentEvent], cfg: SupernodeConfig | None = None) -> list:
    d = SupernodeDetector(cfg or SupernodeConfig())
    found, last = [], -1.0
    for e in events:
        d.observe_event(e)
        t = e.event_time.timestamp()
        if t - last >= 60:
            found += d.findings(t)
            last = t
    return found


def test_largest_gap_set_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        v = rng.pareto(1.5, rng.integers(2, 40))
        ranks = {f"a{i}": float(x) for i, x in enumerate(v)}
        s = np.sort(v)[::-1]
        k = int(np.argmax(s[:-1] - s[1:])) + 1
        assert sorted(largest_gap_set(ranks)) == sorted(
            a for a, x in ranks.items() if x >= s[k - 1])


def test_pagerank_shares_match_networkx_on_the_window() -> None:
    events = society(3, seed=1)
    cfg = SupernodeConfig(sample_interval_s=600, graph_window_s=3600)
    d = SupernodeDetector(cfg)
    for e in events:
        d.observe_event(e)
    now = events[-1].event_time.timestamp()
    d.findings(now)
    g = nx.DiGraph()
    for e in events:
        if e.event_time.timestamp() >= now - cfg.graph_window_s:
            w = g.get_edge_data(e.author, e.reply_to, {"weight": 0})["weight"]
            g.add_edge(e.author, e.reply_to, weight=w + 1)
    pr = nx.pagerank(g, alpha=0.85, weight="weight")
    snap = d._snaps[-1]
    for agent, share in snap.shares.items():
        assert abs(share - pr[agent]) < 1e-9
    assert snap.supernodes == frozenset(largest_gap_set(pr))


def test_emerging_hub_is_reported_with_its_trajectory() -> None:
    found = run(society(9, seed=2, hub_from=5))
    keys = {f.key for f in found}
    assert keys == {"agent:q0"}
    first = found[0]
    assert first.evidence["repliers_in_window"] >= 50 and first.evidence["threads_in_window"] >= 4
    traj = first.evidence["trajectory"]
    assert traj[0]["share"] < 0.01 and traj[-1]["share"] == first.evidence["share"]
    assert first.evidence["jump_ratio"] >= 5
    assert 5 * 3600 < first.evidence["trajectory"][-1]["t"] - events_start() < 7 * 3600


def events_start() -> float:
    return T0.timestamp()


def test_steady_society_raises_nothing() -> None:
    for seed in (3, 4):
        assert run(society(12, seed=seed)) == []

"""Emerging super-node detector: an agent whose share of influence jumps above the largest-gap cut.

Input is a PageRank vector over agents, one snapshot at a time: either given by the PageRank
engine (:meth:`SupernodeDetector.observe_pagerank`) or computed here from the interaction
edges of the last ``graph_window_s`` (commenter -> the agent replied to, self-loops dropped,
weight = count; networkx PageRank, damping 0.85) when ``source="events"``.

Super-nodes follow the published definition (metrics A3): sort PageRank descending, gaps
g_i = PR_i - PR_(i+1), k* = argmax g_i, the top k* agents. One snapshot is kept every
``sample_interval_s``; ``history`` of them are the baseline. An agent is reported when, for the
last ``persist`` snapshots, its share is at least ``min_share`` and at least ``jump_ratio`` x its
baseline share, and either it entered the super-node set without being in it during the
baseline, or its share jumped by ``strong_jump_ratio`` without entering it (critical from
``critical_ratio``). The baseline is the median share over ``history`` snapshots taken more
than one graph window ago (disjoint graphs; an agent absent from a snapshot counts at 1/N).
Influence means reach across conversations: the agent must have at least ``min_repliers``
distinct repliers and ``min_threads`` threads with at least ``min_thread_replies`` replies each
in the window; one viral post is a hot thread, not a super-node. The evidence is its
trajectory (time, share, rank, in the set or not).

Memory: ``history + persist`` snapshots of at most ``max_agents_tracked`` shares each, and the
interaction edges of one ``graph_window_s`` when computing PageRank here.

>>> d = SupernodeDetector(SupernodeConfig(source="external", sample_interval_s=1,
...     graph_window_s=1, history=3, min_history=3, persist=1, min_repliers=0, min_threads=0))
>>> flat = {f"a{i}": 1 / 50 for i in range(50)}
>>> for t in range(4):
...     d.observe_pagerank(float(t), flat)
>>> d.observe_pagerank(4.0, {**{f"a{i}": 0.6 / 49 for i in range(50) if i != 7}, "a7": 0.4})
>>> [(f.key, f.evidence["share"], f.evidence["entered_supernodes"]) for f in d.findings(4.0)]
[('agent:a7', 0.4, True)]
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass
from typing import Literal

import networkx as nx

from detectors.alert import Finding, Severity
from streams.events import CommentEvent, Event


def largest_gap_set(ranks: dict[str, float]) -> list[str]:
    """The top k* agents, k* = argmax of the gaps between consecutive sorted PageRanks.

    >>> largest_gap_set({"a": 0.5, "b": 0.4, "c": 0.05, "d": 0.05})
    ['a', 'b']
    """
    order = sorted(ranks, key=lambda a: (-ranks[a], a))
    if len(order) < 2:
        return order
    gaps = [ranks[order[i]] - ranks[order[i + 1]] for i in range(len(order) - 1)]
    k = max(range(len(gaps)), key=lambda i: (gaps[i], -i)) + 1
    return order[:k]


@dataclass(frozen=True, slots=True)
class SupernodeConfig:
    source: Literal["events", "external"] = "events"
    graph_window_s: float = 2 * 3600.0
    sample_interval_s: float = 300.0
    history: int = 12
    min_history: int = 6
    persist: int = 2
    min_share: float = 0.03
    jump_ratio: float = 5.0
    strong_jump_ratio: float = 30.0
    critical_ratio: float = 10.0
    min_repliers: int = 50
    min_threads: int = 4
    min_thread_replies: int = 3
    min_agents: int = 20
    max_agents_tracked: int = 200


@dataclass(slots=True)
class _Snap:
    t: float
    n_agents: int
    shares: dict[str, float]
    ranks: dict[str, int]
    supernodes: frozenset[str]


class SupernodeDetector:
    type = "supernode"

    def __init__(self, config: SupernodeConfig | None = None) -> None:
        self.cfg = config or SupernodeConfig()
        # The baseline snapshots are older than one graph window: their graphs share no edge
        # with the current one, so a jump is measured against a disjoint past.
        self._gap = max(1, int(self.cfg.graph_window_s // self.cfg.sample_interval_s))
        self._snaps: deque[_Snap] = deque(
            maxlen=self.cfg.history + self._gap + self.cfg.persist)
        self._edges: deque[tuple[float, str, str, str]] = deque()
        self._last_sample: float | None = None
        self._onset: dict[str, float] = {}
        self._judged_at: float | None = None
        self._last: list[Finding] = []

    def observe_event(self, event: Event) -> None:
        if self.cfg.source != "events" or not isinstance(event, CommentEvent):
            return
        target = event.reply_to or event.post_author
        if target and target != event.author:
            self.observe_interaction(event.event_time.timestamp(), event.author, target,
                                     event.post_id)

    def observe_interaction(self, t: float, source: str, target: str, thread: str = "") -> None:
        """``source`` commented on or replied to ``target`` in ``thread`` at ``t`` (epoch s)."""
        self._edges.append((t, source, target, thread))

    def observe_pagerank(self, now: float, ranks: dict[str, float]) -> None:
        """One PageRank vector (any scale: it is normalised to shares)."""
        if self._last_sample is not None and now - self._last_sample < self.cfg.sample_interval_s:
            return
        total = sum(ranks.values())
        if total <= 0 or len(ranks) < 2:
            return
        self._last_sample = now
        shares = {a: v / total for a, v in ranks.items()}
        top = sorted(shares, key=lambda a: (-shares[a], a))[: self.cfg.max_agents_tracked]
        self._snaps.append(_Snap(now, len(shares), {a: shares[a] for a in top},
                                 {a: i + 1 for i, a in enumerate(top)},
                                 frozenset(largest_gap_set(shares))))

    def findings(self, now: float) -> list[Finding]:
        cfg = self.cfg
        while self._edges and self._edges[0][0] < now - cfg.graph_window_s:
            self._edges.popleft()
        if cfg.source == "events":
            self._sample_from_edges(now)
        if self._snaps and self._snaps[-1].t == self._judged_at:
            return self._last  # nothing new since the last snapshot
        self._judged_at = self._snaps[-1].t if self._snaps else None
        self._last = self._judge_all()
        return self._last

    def _judge_all(self) -> list[Finding]:
        cfg = self.cfg
        snaps = list(self._snaps)
        if (len(snaps) < cfg.min_history + self._gap + cfg.persist
                or snaps[-1].n_agents < cfg.min_agents):
            return []
        base = snaps[: -(self._gap + cfg.persist)]
        recent = snaps[-cfg.persist:]
        reach = self._reach({*recent[-1].supernodes, *list(recent[-1].shares)[:5]})
        out: list[Finding] = []
        for agent, (repliers, threads) in reach.items():
            if repliers < cfg.min_repliers or threads < cfg.min_threads:
                continue
            f = self._judge(agent, base, recent, repliers, threads)
            if f is not None:
                out.append(f)
        self._onset = {a: t for a, t in self._onset.items()
                       if any(f.key == f"agent:{a}" for f in out)}
        return out

    def _reach(self, agents: set[str]) -> dict[str, tuple[int, int]]:
        """Distinct repliers, and threads with ``min_thread_replies`` replies, in the window."""
        repliers: dict[str, set[str]] = {a: set() for a in agents}
        threads: dict[str, dict[str, int]] = {a: {} for a in agents}
        for _, s, t, thread in self._edges:
            if t in repliers:
                repliers[t].add(s)
                threads[t][thread] = threads[t].get(thread, 0) + 1
        k = self.cfg.min_thread_replies
        return {a: (len(repliers[a]), sum(n >= k for n in threads[a].values())) for a in agents}

    def _judge(self, agent: str, base: list[_Snap], recent: list[_Snap], repliers: int,
               threads: int) -> Finding | None:
        cfg = self.cfg
        baseline = statistics.median(s.shares.get(agent, 1.0 / s.n_agents) for s in base)
        shares = [s.shares.get(agent, 0.0) for s in recent]
        ongoing = agent in self._onset
        bar = 0.5 if ongoing else 1.0  # hysteresis: an open incident holds at half the jump
        if min(shares) < cfg.min_share * bar or min(shares) < cfg.jump_ratio * bar * baseline:
            return None
        entered = (all(agent in s.supernodes for s in recent)
                   and not any(agent in s.supernodes for s in base))
        ratio = min(shares) / baseline
        if not (ongoing or entered or ratio >= cfg.strong_jump_ratio):
            return None
        self._onset.setdefault(agent, recent[0].t)
        last = recent[-1]
        trajectory = [{"t": s.t, "share": round(s.shares.get(agent, 0.0), 5),
                       "rank": s.ranks.get(agent), "supernode": agent in s.supernodes}
                      for s in [*base, *recent]]
        severity: Severity = "critical" if ratio >= cfg.critical_ratio else "warning"
        evidence = {"agent": agent, "share": round(last.shares[agent], 5),
                    "rank": last.ranks.get(agent), "baseline_share": round(baseline, 5),
                    "jump_ratio": round(ratio, 2), "entered_supernodes": entered,
                    "supernodes": sorted(last.supernodes), "agents_in_graph": last.n_agents,
                    "repliers_in_window": repliers, "threads_in_window": threads,
                    "trajectory": trajectory}
        summary = (f"Emerging super-node {agent}: PageRank share {last.shares[agent]:.1%} "
                   f"vs baseline {baseline:.2%} ({ratio:.1f}x), rank {last.ranks.get(agent)}")
        return Finding(self.type, f"agent:{agent}", severity, summary, evidence,
                       score=last.shares[agent], labels={"agent": agent})

    def _sample_from_edges(self, now: float) -> None:
        if self._last_sample is not None and now - self._last_sample < self.cfg.sample_interval_s:
            return
        g = nx.DiGraph()
        for _, s, t, _thread in self._edges:
            w = g.get_edge_data(s, t, {"weight": 0})["weight"]
            g.add_edge(s, t, weight=w + 1)
        if g.number_of_nodes() >= 2:
            self.observe_pagerank(now, nx.pagerank(g, alpha=0.85, weight="weight"))

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
Influence means reach across conversations: the agent must have ``min_threads`` threads with
at least ``min_thread_replies`` replies each in the window (one viral post, or one big thread
and a trail of small ones, is a hot thread, not a super-node), and at least the reach bar of
distinct repliers: ``min_repliers``, raised to ``reach_margin`` x the ``reach_quantile`` of the
background's natural reach (per snapshot, the most repliers drawn by a top agent that was not
reported, over the last ``reach_history`` snapshots once ``reach_min_history`` are known). In a
growing society, newly registered prolific agents climb from nothing to the top every day; an
emerging super-node must out-reach them, not only meet the definition. An open incident holds
at ``min_repliers``. Only snapshots whose graph covered a whole ``graph_window_s`` form the
baseline or the natural reach: a warming-up graph has no history to jump from.
The evidence is its trajectory (time, share, rank, in the set or not) and the reach bar.

Defaults (one snapshot per 5 min): 2 h graph, 1 h baseline, 2 snapshots of persistence, share
>= 3 % and >= 5x the baseline, 50 repliers, 4 threads of 10 replies, the natural reach's 90th
percentile over the last 24 h. On the simulator's small day (bench/bench_detectors.py) these
give no false alert on 20 clean days and catch 20/20 planted hubs 49-73 min after their start.

Memory: ``history + graph_window_s / sample_interval_s + persist`` snapshots of at most
``max_agents_tracked`` shares each, ``reach_history`` integers, and the interaction edges of one
``graph_window_s`` when computing PageRank here.

>>> d = SupernodeDetector(SupernodeConfig(source="external", sample_interval_s=1,
...     graph_window_s=1, history=3, min_history=3, persist=1, min_repliers=0, min_threads=0))
>>> flat = {f"a{i}": 1 / 50 for i in range(50)}
>>> for t in range(5):
...     d.observe_pagerank(float(t), flat)
>>> d.observe_pagerank(5.0, {**{f"a{i}": 0.6 / 49 for i in range(50) if i != 7}, "a7": 0.4})
>>> [(f.key, f.evidence["share"], f.evidence["entered_supernodes"]) for f in d.findings(5.0)]
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
    min_thread_replies: int = 10
    min_agents: int = 20
    max_agents_tracked: int = 200
    reach_history: int = 288
    reach_quantile: float = 0.9
    reach_margin: float = 1.0
    reach_min_history: int = 12


@dataclass(slots=True)
class _Snap:
    t: float
    n_agents: int
    shares: dict[str, float]
    ranks: dict[str, int]
    supernodes: frozenset[str]
    full: bool  # its graph covered a whole window (a warming-up graph is no baseline)


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
        self._first_t: float | None = None
        # The background's natural reach: per snapshot, the most distinct repliers drawn by
        # an agent of the top ``candidates`` that was not reported.
        self._natural: deque[int] = deque(maxlen=self.cfg.reach_history)
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
        if self._first_t is None:
            self._first_t = t
        self._edges.append((t, source, target, thread))

    def observe_pagerank(self, now: float, ranks: dict[str, float]) -> None:
        """One PageRank vector (any scale: it is normalised to shares)."""
        if self._last_sample is not None and now - self._last_sample < self.cfg.sample_interval_s:
            return
        total = sum(ranks.values())
        if total <= 0 or len(ranks) < 2:
            return
        self._last_sample = now
        if self._first_t is None:
            self._first_t = now
        shares = {a: v / total for a, v in ranks.items()}
        top = sorted(shares, key=lambda a: (-shares[a], a))[: self.cfg.max_agents_tracked]
        self._snaps.append(_Snap(now, len(shares), {a: shares[a] for a in top},
                                 {a: i + 1 for i, a in enumerate(top)},
                                 frozenset(largest_gap_set(shares)),
                                 now - self._first_t >= self.cfg.graph_window_s))

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
        if not snaps or snaps[-1].n_agents < cfg.min_agents:
            return []
        last = snaps[-1]
        reach = self._reach({*last.supernodes, *list(last.shares)[:5]})
        bar = self.reach_bar()
        base = [s for s in snaps[: -(self._gap + cfg.persist)] if s.full]
        out: list[Finding] = []
        if len(snaps) >= self._gap + cfg.persist + 1 and len(base) >= cfg.min_history:
            recent = snaps[-cfg.persist:]
            for agent, (repliers, threads) in reach.items():
                # an open incident holds at the fixed floor; a new one must out-reach the
                # background's natural top agents
                need = cfg.min_repliers if agent in self._onset else bar
                if repliers < need or threads < cfg.min_threads:
                    continue
                f = self._judge(agent, base, recent, repliers, threads)
                if f is not None:
                    out.append(f)
        reported = {f.labels["agent"] for f in out}
        if last.full:
            self._natural.append(max((r for a, (r, _) in reach.items() if a not in reported),
                                     default=0))
        self._onset = {a: t for a, t in self._onset.items() if a in reported}
        return out

    def reach_bar(self) -> float:
        """Distinct repliers a new super-node needs: ``min_repliers``, raised to
        ``reach_margin`` x the ``reach_quantile`` (nearest rank) of the natural reach once
        ``reach_min_history`` snapshots of it are known."""
        cfg = self.cfg
        if len(self._natural) < cfg.reach_min_history:
            return float(cfg.min_repliers)
        ordered = sorted(self._natural)
        q = ordered[round(cfg.reach_quantile * (len(ordered) - 1))]
        return max(float(cfg.min_repliers), cfg.reach_margin * q)

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
                    "reach_bar": round(self.reach_bar(), 1),
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

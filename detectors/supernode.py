"""Emerging super-node detector: an agent whose share of influence jumps above the largest-gap cut.

Input is the interaction edges of the comments (commenter -> the agent replied to, else the
post's author; self-loops and unknown authors dropped, weight = count) of the detector's own
short window, ``graph_window_s`` (2 h: an emerging hub must stand out of the last hours, not of
the influence engine's whole window); one PageRank snapshot of that window every
``sample_interval_s``, computed by the one exact PageRank of the project
(:func:`streams.state.pagerank.pagerank_arrays`, the iteration of ``pagerank_exact``:
networkx's semantics, damping 0.85, to an L1 change below 1e-12), warm-started from the
previous snapshot.

Super-nodes follow the published definition (metrics A3) through the one largest-gap cut
(:func:`streams.state.pagerank.largest_gap_cut`): sort PageRank descending, gaps
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
The evidence is its trajectory (time, share, rank, in the set or not), the reach bar, and who
interacts with it: the ``timeline`` (:mod:`detectors.evidence`) of its repliers' first replies
in the window, with their numbers of replies (no texts are kept: it is about who, not what).

Defaults (one snapshot per 5 min): 2 h graph, 1 h baseline, 2 snapshots of persistence, share
>= 3 % and >= 5x the baseline, 50 repliers, 4 threads of 10 replies, the natural reach's 90th
percentile over the last 24 h. On the simulator's small day (bench/bench_detectors.py) these
give no false alert on 20 clean days and catch 20/20 planted hubs 49-73 min after their start.

Cost: per comment, two dict updates (the window's edge weight by (source, target) pair, and
the comments of its (target, thread)), kept incrementally as edges enter and leave the window;
an agent's distinct repliers are the live pairs into it (a count per node, moved only when a
pair appears or vanishes) and its threads of ``min_thread_replies`` a count moved only when a
thread crosses that bar. Per snapshot, one exact PageRank of the window's graph (O(edges) a
power iteration), one NumPy sort of its agents, the names of the super-nodes and of the top
five; the ranking of the top ``max_agents_tracked`` (a sort of them, the names alone for those
tied at the cut) is made only when a judgement reads the snapshot's shares or ranks (an agent
that meets the reach bars), from the PageRank and names kept for it.

Memory: ``history + graph_window_s / sample_interval_s + persist`` snapshots of at most
``max_agents_tracked`` shares each, ``reach_history`` integers, and the interaction edges of one
``graph_window_s`` (each once in the window's queue, counted in two dicts).

>>> from datetime import datetime, timedelta, timezone
>>> from streams.events import CommentEvent
>>> d = SupernodeDetector(SupernodeConfig(sample_interval_s=600, graph_window_s=600,
...     history=3, min_history=3, persist=1, min_repliers=0, min_threads=0, min_agents=10))
>>> t0 = datetime(2026, 2, 1, tzinfo=timezone.utc)
>>> def reply(i, src, dst):  # comment i, a second apart
...     t = t0 + timedelta(seconds=i)
...     d.update(Item.of(CommentEvent(id=f"comment:{i}", event_time=t, observed_at=t,
...         comment_id=str(i), post_id=f"p{dst}", author=src, reply_to=dst)))
...     return d.findings(t.timestamp())
>>> for i in range(3601):  # an hour of 20 agents replying to their neighbours, then a7 draws all
...     found = reply(i, f"a{i % 20}", "a7" if i >= 3000 else f"a{(i + 1) % 20}")
>>> [(f.key, f.evidence["entered_supernodes"]) for f in found]
[('agent:a7', True)]
"""

from __future__ import annotations

import statistics
from array import array
from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from detectors.alert import Finding, Severity
from detectors.evidence import DEFAULT, EvidenceConfig, timeline
from detectors.supernode_kernels import window_graph
from streams.events import CommentEvent
from streams.state.base import ArrayBuffer, Item, Sample, Snapshot
from streams.state.pagerank import largest_gap_cut, pagerank_arrays


@dataclass(frozen=True, slots=True)
class SupernodeConfig:
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
    evidence: EvidenceConfig = DEFAULT  # exemplars, clusters, timeline (detectors.evidence)


@dataclass(slots=True)
class _Snap:
    t: float
    n_agents: int
    total: float  # the PageRank's sum (shares are PageRank / total)
    supernodes: frozenset[str]
    full: bool  # its graph covered a whole window (a warming-up graph is no baseline)
    leaders: list[str]  # the first five of ``top`` (all a judgement reads of most snapshots)
    # what ``top`` is made of: the PageRank and name of every agent at or above the value of
    # the ``m``-th (the cut), and how many are tracked
    _values: np.ndarray
    _held: list[str]
    _cut: float
    _m: int
    _tracked: int
    _top: list[tuple[float, str]] | None = None
    _shares: dict[str, float] | None = None
    _ranks: dict[str, int] | None = None

    @property
    def top(self) -> list[tuple[float, str]]:
        """The tracked agents by rank: (-PageRank, name); made on the first read (only an agent
        that meets the reach bars is judged, and only then are a snapshot's shares read).

        The top m ordered by rank then name (names are distinct: the node index never
        decides): a sort of (-PageRank, name) over the agents above the cut, then the first of
        those tied with it by name alone (often hundreds tie at a window's floor: their names
        sort without tuples, and only the ones needed are kept; the cut never splits a tie,
        so the top k* is whole)."""
        if self._top is None:
            values, held, cut = self._values, self._held, self._cut
            order = sorted(zip((-values[values > cut]).tolist(),
                               [held[i] for i in np.flatnonzero(values > cut).tolist()],
                               strict=True))
            tied = sorted([held[i] for i in np.flatnonzero(values == cut).tolist()])
            value = -float(cut)
            order += [(value, a) for a in tied[: self._m - len(order)]]
            self._top = order[: self._tracked]
        return self._top

    @property
    def shares(self) -> dict[str, float]:
        """The tracked agents' shares by rank (made on the first read: most snapshots are
        only ever read for their top few)."""
        if self._shares is None:
            total = self.total
            self._shares = {a: -v / total for v, a in self.top}
        return self._shares

    @property
    def ranks(self) -> dict[str, int]:
        if self._ranks is None:
            self._ranks = {a: i + 1 for i, (_, a) in enumerate(self.top)}
        return self._ranks


class SupernodeDetector:
    type = "supernode"
    kinds: ClassVar[tuple[type, ...]] = (CommentEvent,)  # what ``update`` reads

    def __init__(self, config: SupernodeConfig | None = None) -> None:
        self.cfg = config or SupernodeConfig()
        # The baseline snapshots are older than one graph window: their graphs share no edge
        # with the current one, so a jump is measured against a disjoint past.
        self._gap = max(1, int(self.cfg.graph_window_s // self.cfg.sample_interval_s))
        self._snaps: deque[_Snap] = deque(
            maxlen=self.cfg.history + self._gap + self.cfg.persist)
        # the window's comments in arrival order: (time, pair slot, (target, thread), source)
        self._edges: deque[tuple[float, int, tuple[str, str], str]] = deque()
        # the window's graph, kept as edges enter and leave it: a slot per (source, target)
        # pair in flat int32 arrays (weights 0 = free slot; NumPy reads them without a copy),
        # a node index per agent with live edges
        self._slot: dict[tuple[str, str], int] = {}
        self._src = array("i")
        self._dst = array("i")
        self._w = array("i")
        self._free_slots: list[int] = []
        self._node: dict[str, int] = {}
        self._names: list[str] = []
        self._degree = array("i")  # live pairs touching each node
        self._repliers = array("i")  # live pairs into each node: its distinct repliers
        self._free_nodes: list[int] = []
        self._p = np.zeros(0)  # the last snapshot's PageRank by node (a warm start)
        self._thread_n: dict[tuple[str, str], int] = {}  # (target, thread) -> comments
        # target -> its threads with at least min_thread_replies comments (at least one)
        self._bar = max(1, self.cfg.min_thread_replies)
        self._hot: dict[str, int] = {}
        self._anonymous = 0
        self._first_t: float | None = None
        # The background's natural reach: per snapshot, the most distinct repliers drawn by
        # an agent of the top ``candidates`` that was not reported.
        self._natural: deque[int] = deque(maxlen=self.cfg.reach_history)
        self._last_sample: float | None = None
        self._onset: dict[str, float] = {}
        self._judged_at: float | None = None
        self._last: list[Finding] = []

    def __getstate__(self) -> dict[str, Any]:
        # the arrays pickled from their own buffers (base.ArrayBuffer: no copy held by the
        # pickler's memo until the dump ends)
        state = dict(self.__dict__)
        for name in ("_src", "_dst", "_w", "_degree", "_repliers"):
            state[name] = ArrayBuffer(state[name])
        return state

    def update(self, item: Item) -> None:
        event = item.event
        if not isinstance(event, CommentEvent):
            return
        source, target = item.author, event.reply_to or event.post_author
        if source is None:
            self._anonymous += 1
            return  # no interaction edge without its author
        if target is None or target == source:
            return
        t = item.t
        if self._first_t is None:
            self._first_t = t
        slot = self._slot.get((source, target))
        if slot is None:  # a new pair in the window: a slot (the last freed, else a new one)
            u, v = self._node_of(source), self._node_of(target)
            if self._free_slots:
                slot = self._free_slots.pop()
                self._src[slot], self._dst[slot] = u, v
                self._w[slot] = 1
            else:
                slot = len(self._w)
                self._src.append(u)
                self._dst.append(v)
                self._w.append(1)
            self._slot[source, target] = slot
            self._repliers[v] += 1
        else:
            self._w[slot] += 1
        thread = (target, event.post_id)
        n = self._thread_n.get(thread, 0) + 1
        self._thread_n[thread] = n
        if n == self._bar:
            self._hot[target] = self._hot.get(target, 0) + 1
        self._edges.append((t, slot, thread, source))

    def expire(self, now: float) -> None:
        """Edges leave the window in arrival order: each is undone once, O(1)."""
        cutoff = now - self.cfg.graph_window_s
        edges = self._edges
        w, counts, bar = self._w, self._thread_n, self._bar
        degree, node, free_nodes = self._degree, self._node, self._free_nodes
        while edges and edges[0][0] < cutoff:
            _, slot, thread, source = edges.popleft()
            w[slot] -= 1
            if not w[slot]:  # the pair left the window: its slot, then unused nodes, freed
                target = thread[0]
                del self._slot[source, target]
                self._free_slots.append(slot)
                u, v = self._src[slot], self._dst[slot]
                self._repliers[v] -= 1
                degree[u] -= 1
                if not degree[u]:
                    del node[source]
                    free_nodes.append(u)
                degree[v] -= 1
                if not degree[v]:
                    del node[target]
                    free_nodes.append(v)
            n = counts[thread] - 1
            if n:
                counts[thread] = n
            else:
                del counts[thread]
            if n == bar - 1:  # the thread falls below the bar
                target = thread[0]
                left = self._hot[target] - 1
                if left:
                    self._hot[target] = left
                else:
                    del self._hot[target]

    def _node_of(self, name: str) -> int:
        i = self._node.get(name)
        if i is None:
            if self._free_nodes:
                i = self._free_nodes.pop()
                self._names[i] = name
            else:
                i = len(self._names)
                self._names.append(name)
                self._degree.append(0)
                self._repliers.append(0)
            self._node[name] = i
        self._degree[i] += 1
        return i

    def _observe_pagerank(self, now: float, nodes: np.ndarray, p: np.ndarray) -> None:
        """One PageRank vector, ``p[i]`` that of node ``nodes[i]`` (any scale: it is
        normalised to shares)."""
        total = float(p.sum())
        if total <= 0 or len(p) < 2:
            return
        self._last_sample = now
        if self._first_t is None:
            self._first_t = now
        desc = np.sort(p)[::-1]
        k = largest_gap_cut(desc)
        tracked = self.cfg.max_agents_tracked
        m = min(len(p), max(tracked, k))
        names = self._names
        # the super-nodes: the top k* (the cut never splits a tie: exactly those at or above
        # the k*-th value); the leaders: the first five by (-PageRank, name), from those at or
        # above the fifth value; the tracked ranking itself is made when first read (_Snap.top)
        supernodes = (frozenset(names[i] for i in nodes[p >= desc[k - 1]].tolist()) if k
                      else frozenset())
        n = min(5, tracked, m)
        at = np.flatnonzero(p >= desc[n - 1]) if n else np.zeros(0, np.int64)
        leaders = [a for _, a in sorted(zip((-p[at]).tolist(),
                                            [names[i] for i in nodes[at].tolist()],
                                            strict=True))[:n]]
        cut = desc[m - 1]
        held = np.flatnonzero(p >= cut)
        self._snaps.append(_Snap(now, len(p), total, supernodes,
                                 now - self._first_t >= self.cfg.graph_window_s, leaders,
                                 p[held], [names[i] for i in nodes[held].tolist()], cut, m,
                                 tracked))

    def findings(self, now: float) -> list[Finding]:
        self.expire(now)
        self._sample(now)
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
        # in name order: the findings' order must not hang on a set's, which the string hash
        # seed sets per process (live workers and the replay run in different processes)
        reach = self._reach(sorted({*last.supernodes, *last.leaders}))
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

    def _reach(self, agents: list[str]) -> dict[str, tuple[int, int]]:
        """Distinct repliers, and threads with ``min_thread_replies`` replies, in the window."""
        out = {}
        for a in agents:
            i = self._node.get(a)
            out[a] = (0 if i is None else self._repliers[i], self._hot.get(a, 0))
        return out

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
                    "trajectory": trajectory, "timeline": self._repliers_timeline(agent)}
        summary = (f"Emerging super-node {agent}: PageRank share {last.shares[agent]:.1%} "
                   f"vs baseline {baseline:.2%} ({ratio:.1f}x), rank {last.ranks.get(agent)}")
        return Finding(self.type, f"agent:{agent}", severity, summary, evidence,
                       score=last.shares[agent], labels={"agent": agent})

    def _repliers_timeline(self, agent: str) -> dict:
        """Who interacts with ``agent``: each replier's first reply in the window, in order,
        with its number of replies (:func:`detectors.evidence.timeline`); one pass over the
        window's edges, once a snapshot."""
        first: dict[str, float] = {}
        acts: dict[str, int] = {}
        for t, _, thread, source in self._edges:
            if thread[0] == agent:
                if source not in first:
                    first[source] = t
                acts[source] = acts.get(source, 0) + 1
        return timeline(first_acts=first, acts=acts, cfg=self.cfg.evidence)

    def _sample(self, now: float) -> None:
        if self._last_sample is not None and now - self._last_sample < self.cfg.sample_interval_s:
            return
        # pagerank_exact's iteration on the window's edge arrays, over the agents with live
        # edges (those with a live pair: degree > 0), numbered in index order, warm-started
        # from the last snapshot (the window moved by one sample interval: a few iterations to
        # the same fixed point)
        src, dst, w, nodes, start = window_graph(
            np.frombuffer(self._src, np.int32), np.frombuffer(self._dst, np.int32),
            np.frombuffer(self._w, np.int32), np.frombuffer(self._degree, np.int32), self._p)
        if not len(w):
            return
        p = pagerank_arrays(src, dst, w, len(nodes), alpha=0.85, start=start)
        self._p = np.zeros(len(self._names))
        self._p[nodes] = p
        self._observe_pagerank(now, nodes, p)

    def snapshot(self) -> Snapshot:
        return Snapshot(samples=[
            Sample("supernode_window_interactions", float(len(self._edges)),
                   help="Interactions in the super-node detector's short window"),
            Sample("supernode_comments_unknown_author_total", float(self._anonymous),
                   kind="counter", help="Comments without an author (no interaction edge) seen "
                                        "by the super-node detector"),
        ])

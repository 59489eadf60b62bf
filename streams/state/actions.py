"""The action plane per agent (metrics.md D): what an agent does, apart from what it says.

Computed from :class:`~streams.acts.Act` records only (never a vector), separately from the
semantic engines of the individual layer. Per agent, over the acts kept (below):

- **reply targeting**: ``supernode_reply_share`` = share of its comments with a known target
  (not itself) whose target (the parent comment's author, else the post's) is a super-node;
  the rest is the periphery. Super-nodes are society-wide (the reducer's PageRank largest-gap
  cut, metrics A3), which no partition sees: the engine takes the current set as a society
  input, :meth:`ActionEngine.set_supernodes` (live, the per-agent stage hands each partition's
  engine the reducer's latest cut; the replay its own). The share is computed when read, from
  the kept comments' targets, so it never depends on when the set changed relative to the acts;
- **reciprocity**: of the distinct agents it replied to, the share who replied to it
  (``replied`` acts carry, for the agent answered, the commenter as ``target_author``);
- **votes received**: Moltbook's API does not say who votes, so the action plane counts votes
  *received*: ``net_votes_received`` = sum over its kept items of the latest upvotes - downvotes
  (``score`` acts) and ``scored_items``;
- **cadence**: the gaps between its consecutive own acts (posts and comments, by time):
  ``gap_median_s``, ``gap_cv`` = population standard deviation / mean (about 1 for a Poisson
  poster, near 0 on a clock) and ``periodicity`` = share of gaps within ``periodic_tolerance``
  (10 %) of the median gap (about 0.07 for a Poisson poster, 1 on a clock); from ``min_gaps``.

Co-action (acting on the same target as another agent within seconds, leading or following)
needs every agent's acts on a target, which no agent-keyed partition sees: the reducer's
:class:`detectors.lockstep.LockstepDetector` keeps it (its ``coaction(agent)``).

Order-insensitive and bounded: per agent the newest ``max_acts`` own acts and ``max_replied``
replies received, each list sorted by ``(t, item_id)`` (the newest N of a set do not depend on
the order it arrived in; a repeated act is ignored), and the latest score of the ``max_items``
most recently scored items. ``expire(now)`` moves a cutoff to ``now - window_s`` (7 days): acts
before it are ignored when read and when they arrive, swept from memory, and an agent with
nothing left is dropped. Memory per agent is at most ``max_acts + max_replied`` small tuples,
``max_items`` dict entries and ``4 max_items`` heap entries (the least recently scored item
is found in O(log n)), each ~200 bytes with its id strings, plus a cached tuple of figures
and its population contribution (:meth:`nbytes`; bench/bench_planted_agents.py measures it
on the real-text stream).

Reading: the figures that need no super-node set are cached per agent (a small tuple) until an
act changes the agent or the cutoff passes the oldest entry they counted; the targeting share
is recounted from the kept comments when read. ``partial()`` keeps the population as the
agents change: each agent's last contribution to the buckets and totals is retracted and
re-added only when its figures may have changed (an act, the cutoff passing its oldest
counted entry, a new super-node set: then every agent), and the sums are ``math.fsum`` over
the contributions (exactly rounded: the same in any order).

Population (``partial`` / ``population``): Prometheus histograms (cumulative ``le`` buckets,
``_count``, ``_sum``) of each per-agent figure over the agents that have it, and society sums
(comments to super-nodes over targeted comments, reciprocated partners over partners): sums of
integers and floats, so any split of agents into partitions merges to the same figures.

>>> from streams.acts import Act
>>> e = ActionEngine()
>>> for k in range(8):  # a clock: a comment to KingMolt every hour
...     e.update(Act("bot", 3600.0 * k, "comment", f"p{k}", f"c{k}", target_author="KingMolt"))
>>> e.update(Act("bot", 9000.0, "replied", "p2", "c9", target_author="KingMolt"))
>>> e.set_supernodes({"KingMolt"})
>>> p = e.profile("bot")
>>> p["gap_cv"], p["periodicity"], p["supernode_reply_share"], p["reciprocity"]
(0.0, 1.0, 1.0, 1.0)
>>> e.snapshot().value("action_agent_periodicity_bucket", le="1")
1.0
"""

from __future__ import annotations

import heapq
import math
import sys
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from streams.acts import Act
from streams.state.base import Sample, Snapshot

SHARE_EDGES: tuple[float, ...] = tuple(round(0.05 * k, 2) for k in range(1, 21))
# Per-agent figure -> its histogram's upper bucket edges (``le``; +Inf implied).
EDGES: dict[str, tuple[float, ...]] = {
    "supernode_reply_share": SHARE_EDGES,
    "reciprocity": SHARE_EDGES,
    "periodicity": SHARE_EDGES,
    "gap_cv": (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0),
    "gap_median_s": (1.0, 10.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 10800.0, 21600.0, 86400.0),
    "net_votes_received": (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 500.0, 1000.0),
}
HELP: dict[str, str] = {
    "supernode_reply_share": "Per agent: share of its comments aimed at a current super-node",
    "reciprocity": "Per agent: share of the agents it replied to who replied to it",
    "periodicity": "Per agent: share of its inter-act gaps within 10 % of its median gap",
    "gap_cv": "Per agent: coefficient of variation of its inter-act gaps",
    "gap_median_s": "Per agent: median gap between its consecutive acts, seconds",
    "net_votes_received": "Per agent: upvotes - downvotes on its kept items (latest counts)",
}
UNIT: dict[str, str] = {"gap_median_s": "gap_median_seconds"}  # base-unit metric names
TOTALS: tuple[str, ...] = ("posts", "comments", "targeted_comments", "supernode_comments",
                           "partners", "reciprocated_partners", "replies_received")


@dataclass(frozen=True, slots=True)
class ActionConfig:
    """``max_acts`` / ``max_replied`` / ``max_items``: what is kept per agent (module doc);
    ``window_s``: the age at which acts leave; ``min_gaps``: gaps needed for the cadence
    figures; ``min_comments``: targeted comments needed for targeting and reciprocity;
    ``periodic_tolerance``: how close to the median gap a periodic gap is."""

    max_acts: int = 256
    max_replied: int = 256
    max_items: int = 256
    window_s: float = 7 * 86400.0
    min_gaps: int = 5
    min_comments: int = 3
    periodic_tolerance: float = 0.1


class _Agent:
    __slots__ = ("acts", "cache", "heap", "items", "replied")

    def __init__(self) -> None:
        # own posts and comments: (t, item_id, kind, target_author or "")
        self.acts: list[tuple[float, str, str, str]] = []
        # replies received: (t, reply's item_id, commenter or "")
        self.replied: list[tuple[float, str, str]] = []
        self.items: dict[str, tuple[float, int]] = {}  # item -> latest (t, score)
        # (t, item) of every score taken, stale ones included: the least recently scored
        # item is found in O(log n) (rebuilt from ``items`` when stale entries pile up)
        self.heap: list[tuple[float, str]] = []
        # the figures that need no society input, valid while the cutoff stays at or below
        # its first element (the oldest entry they counted) and no act changes them
        self.cache: tuple[Any, ...] | None = None


def _keep(rows: list[Any], row: tuple[Any, ...], cap: int) -> bool:
    """Insert ``row`` in (t, item_id) order unless already there; keep the newest ``cap``.
    True if the rows changed."""
    i = bisect_left(rows, row[:2])
    if i < len(rows) and rows[i][:2] == row[:2]:
        return False  # the same act again (at-least-once delivery)
    insort(rows, row, lo=i)
    if len(rows) > cap:
        del rows[0]
    return True


def cadence(times: np.ndarray, tolerance: float) -> tuple[float, float | None, float]:
    """(median gap, coefficient of variation or None for a zero mean, periodicity) of the
    gaps between consecutive ``times`` (sorted)."""
    gaps = np.diff(times)
    med, mean = float(np.median(gaps)), float(gaps.mean())
    cv = float(gaps.std()) / mean if mean > 0 else None
    periodic = float(np.mean(np.abs(gaps - med) <= tolerance * med))
    return med, cv, periodic


class ActionEngine:
    def __init__(self, config: ActionConfig | None = None) -> None:
        self.cfg = config or ActionConfig()
        self._agents: dict[str, _Agent] = {}
        self._cutoff = -math.inf
        self._swept = -math.inf
        self.supernodes: frozenset[str] = frozenset()
        # the population, kept as agents change: per agent its last contribution (the cache
        # tuple it was read from, its figures' values, its totals), the bucket counts and
        # totals summed over those contributions
        self._contrib: dict[str, tuple[Any, tuple[float | None, ...], tuple[int, ...]]] = {}
        self._hist = {k: [0] * (len(e) + 1) for k, e in EDGES.items()}
        self._totals = [0] * len(TOTALS)
        self._present = 0  # agents with acts in the window
        self._stale_all = False
        self.acts_total = 0
        self.late_total = 0

    # ------------------------------------------------------------------ feeding

    def set_supernodes(self, names: Iterable[str]) -> None:
        """The society's current super-nodes (the reducer's largest-gap cut)."""
        new = frozenset(names)
        if new != self.supernodes:
            self.supernodes = new
            self._stale_all = True  # every agent's targeting share may have changed

    def update(self, act: Act) -> None:
        if act.t < self._cutoff:
            self.late_total += 1
            return
        self.acts_total += 1
        a = self._agents.get(act.agent)
        if a is None:
            a = self._agents[act.agent] = _Agent()
        cfg = self.cfg
        if act.kind == "post" or act.kind == "comment":
            target = act.target_author if act.kind == "comment" else None
            if _keep(a.acts, (act.t, act.item_id, act.kind, target or ""), cfg.max_acts):
                a.cache = None
        elif act.kind == "replied":
            if _keep(a.replied, (act.t, act.item_id, act.target_author or ""), cfg.max_replied):
                a.cache = None
        elif act.kind == "score" and act.score is not None:
            new = (act.t, act.score)
            old = a.items.get(act.item_id)
            if old is None or new > old:
                a.items[act.item_id] = new
                a.cache = None
                heapq.heappush(a.heap, (act.t, act.item_id))
                if len(a.items) > cfg.max_items:  # the least recently scored item leaves
                    while True:
                        t, k = heapq.heappop(a.heap)
                        if k in a.items and a.items[k][0] == t:
                            del a.items[k]
                            break
                if len(a.heap) > 4 * cfg.max_items:
                    a.heap = [(v[0], k) for k, v in a.items.items()]
                    heapq.heapify(a.heap)

    def expire(self, now: float) -> None:
        """Acts older than ``now - window_s`` leave (ignored at once, swept from memory once
        the cutoff moved by a tenth of the window: bounded work per call on average)."""
        self._cutoff = max(self._cutoff, now - self.cfg.window_s)
        if self._cutoff - self._swept < self.cfg.window_s / 10:
            return
        self._swept = cut = self._cutoff
        for a in self._agents.values():
            del a.acts[: bisect_left(a.acts, (cut,))]
            del a.replied[: bisect_left(a.replied, (cut,))]
            if a.items and min(t for t, _ in a.items.values()) < cut:
                a.items = {k: v for k, v in a.items.items() if v[0] >= cut}
                a.heap = [(v[0], k) for k, v in a.items.items()]
                heapq.heapify(a.heap)
        # a new dict: a dict does not shrink as keys leave
        kept = {n: a for n, a in self._agents.items() if a.acts or a.replied or a.items}
        for name in self._agents.keys() - kept.keys():
            self._retract(name)
        self._agents = kept

    # ------------------------------------------------------------------ reading

    def _base(self, name: str, a: _Agent) -> tuple[Any, ...]:
        """The figures that need no super-node set (cached on the agent, module doc)."""
        cfg, cut = self.cfg, self._cutoff
        acts = a.acts[bisect_left(a.acts, (cut,)):]
        replied = a.replied[bisect_left(a.replied, (cut,)):]
        items = [(t, s) for t, s in a.items.values() if t >= cut]
        comments = sum(r[2] == "comment" for r in acts)
        partners = {r[3] for r in acts if r[2] == "comment" and r[3] and r[3] != name}
        back = len(partners & {r[2] for r in replied if r[2] and r[2] != name})
        med = cv = per = None
        if len(acts) > cfg.min_gaps:
            med, cv, per = cadence(np.array([r[0] for r in acts]), cfg.periodic_tolerance)
        oldest = min((acts[0][0] if acts else math.inf, replied[0][0] if replied else math.inf,
                      min((t for t, _ in items), default=math.inf)))
        return (oldest, len(acts) - comments, comments, len(replied), len(items),
                sum(s for _, s in items) if items else None, len(partners), back, med, cv, per)

    def _figures(self, name: str, a: _Agent) -> dict[str, Any]:
        cut = self._cutoff
        c = a.cache
        if c is None or cut > c[0]:
            c = a.cache = self._base(name, a)
        _, posts, comments, replies, scored, net, partners, back, med, cv, per = c
        start = bisect_left(a.acts, (cut,))
        targets = [r[3] for r in a.acts[start:] if r[2] == "comment" and r[3] and r[3] != name]
        hits = sum(x in self.supernodes for x in targets)
        ok = len(targets) >= self.cfg.min_comments
        return {"posts": posts, "comments": comments, "targeted_comments": len(targets),
                "replies_received": replies, "scored_items": scored, "supernode_comments": hits,
                "net_votes_received": net,
                "supernode_reply_share": hits / len(targets) if ok else None,
                "reciprocity": back / partners if ok else None, "partners": partners,
                "reciprocated_partners": back, "gap_median_s": med, "gap_cv": cv,
                "periodicity": per}

    def profile(self, agent: str) -> dict[str, Any] | None:
        """The agent's action-plane figures (None for an agent without kept acts)."""
        a = self._agents.get(agent)
        if a is None:
            return None
        out = self._figures(agent, a)
        if not (out["posts"] or out["comments"] or out["replies_received"]
                or out["scored_items"]):
            return None
        cut = self._cutoff
        counts = Counter(r[3] for r in a.acts if r[0] >= cut and r[2] == "comment"
                         and r[3] and r[3] != agent)
        out["top_targets"] = [[k, n] for k, n in sorted(counts.items(),
                                                         key=lambda kv: (-kv[1], kv[0]))[:5]]
        return out

    def sort_keys(self) -> dict[str, dict[str, float]]:
        keys = ("gap_cv", "periodicity", "reciprocity", "supernode_reply_share",
                "net_votes_received")
        out: dict[str, dict[str, float]] = {k: {} for k in (*keys, "acts")}
        for name, a in self._agents.items():
            f = self._figures(name, a)
            for k in keys:
                if f[k] is not None:
                    out[k][name] = float(f[k])
            if f["posts"] + f["comments"]:
                out["acts"][name] = float(f["posts"] + f["comments"])
        return out

    def _retract(self, name: str) -> None:
        old = self._contrib.pop(name, None)
        if old is None or not old[1]:
            return  # nothing, or an agent without acts in the window: it counted for nothing
        self._present -= 1
        _, values, totals = old
        for (k, edges), v in zip(EDGES.items(), values, strict=True):
            if v is not None:
                self._hist[k][bisect_left(edges, v)] -= 1
        self._totals = [x - y for x, y in zip(self._totals, totals, strict=True)]

    def _contribute(self, name: str, a: _Agent) -> None:
        self._retract(name)
        f = self._figures(name, a)
        if not (f["posts"] or f["comments"] or f["replies_received"] or f["scored_items"]):
            self._contrib[name] = (a.cache, (), ())
            return
        self._present += 1
        values = tuple(None if f[k] is None else float(f[k]) for k in EDGES)
        totals = tuple(f[k] for k in TOTALS)
        for (k, edges), v in zip(EDGES.items(), values, strict=True):
            if v is not None:
                self._hist[k][bisect_left(edges, v)] += 1
        self._totals = [x + y for x, y in zip(self._totals, totals, strict=True)]
        self._contrib[name] = (a.cache, values, totals)

    def partial(self) -> dict[str, Any]:
        """This engine's agents as mergeable sums: per figure, bucket counts (non-cumulative,
        the last one +Inf), count and exactly rounded sum (``math.fsum``: the same in any
        order); and the society's sums. Only agents whose figures may have changed since the
        last call are read again (an act, the cutoff passing their oldest counted entry, a new
        super-node set)."""
        cut, stale_all = self._cutoff, self._stale_all
        for name, a in self._agents.items():
            c = self._contrib.get(name)
            if stale_all or c is None or c[0] is not a.cache or a.cache is None or cut > a.cache[0]:
                self._contribute(name, a)
        self._stale_all = False
        values = [v for _, v, _ in self._contrib.values() if v]
        sums = {k: math.fsum(v[i] for v in values if v[i] is not None)
                for i, k in enumerate(EDGES)}
        totals = {"agents": self._present, **dict(zip(TOTALS, self._totals, strict=True))}
        return {"hist": {k: list(h) for k, h in self._hist.items()}, "sums": sums,
                "totals": totals, "acts_total": self.acts_total, "late_total": self.late_total}

    @staticmethod
    def population(partials: list[dict[str, Any]], **society: Any) -> Snapshot:
        """Merged figures of the partials (no society input needed: the super-node set was
        applied where the comments are, :meth:`set_supernodes`)."""
        hist = {k: [0] * (len(e) + 1) for k, e in EDGES.items()}
        sums = dict.fromkeys(EDGES, 0.0)
        totals: Counter[str] = Counter()
        acts = late = 0
        for p in partials:
            for k in EDGES:
                hist[k] = [x + y for x, y in zip(hist[k], p["hist"][k], strict=True)]
                sums[k] += p["sums"][k]
            totals.update(p["totals"])
            acts += p["acts_total"]
            late += p["late_total"]
        samples = [
            Sample("action_agents", float(totals["agents"]),
                   help="Agents with acts in the action engine's window"),
            Sample("action_acts_total", float(acts), kind="counter",
                   help="Acts taken by the action engine"),
            Sample("action_late_acts_total", float(late), kind="counter",
                   help="Acts older than the action window when they arrived (ignored)"),
        ]
        shares: dict[str, float | None] = {
            "reply_supernode_share": (totals["supernode_comments"] / totals["targeted_comments"]
                                      if totals["targeted_comments"] else None),
            "reciprocity": (totals["reciprocated_partners"] / totals["partners"]
                            if totals["partners"] else None),
        }
        helps = {"reply_supernode_share": "Share of the kept targeted comments aimed at a "
                                          "current super-node (society)",
                 "reciprocity": "Reciprocated partners / partners, over agents (society)"}
        for k, v in shares.items():
            if v is not None:
                samples.append(Sample(f"action_{k}", v, help=helps[k]))
        details: dict[str, Any] = {"action_totals": dict(totals), "action_histograms": {}}
        for k, edges in EDGES.items():
            name = f"action_agent_{UNIT.get(k, k)}"
            cum = np.cumsum(hist[k]).tolist()
            for e, c in zip((*edges, math.inf), cum, strict=True):
                le = "+Inf" if e == math.inf else f"{e:g}"
                samples.append(Sample(f"{name}_bucket", float(c), (("le", le),),
                                      help=HELP[k]))
            samples.append(Sample(f"{name}_count", float(cum[-1]), help=HELP[k]))
            samples.append(Sample(f"{name}_sum", sums[k], help=HELP[k]))
            details["action_histograms"][k] = {"le": [*edges, "+Inf"], "cumulative": cum,
                                               "sum": sums[k]}
        details["action_shares"] = shares
        return Snapshot(samples=samples, details=details)

    def snapshot(self) -> Snapshot:
        return self.population([self.partial()])

    def nbytes(self) -> int:
        """Memory of the per-agent state in bytes (``sys.getsizeof``), the values the acts
        bring (ids, names, times, scores) counted as the engine's own, as when acts arrive
        deserialised from a topic; agent names once each. bench/bench_planted_agents.py shows
        it beside tracemalloc's count (which sees those values as the caller's)."""
        size = sys.getsizeof
        n = size(self._agents)
        for name, a in self._agents.items():
            n += size(name) + size(a) + size(a.acts) + size(a.replied) + size(a.items)
            if a.cache is not None:  # its new floats: the cadence figures
                n += size(a.cache) + sum(size(x) for x in a.cache[-3:] if x is not None)
            n += sum(size(r) + size(r[0]) + size(r[1]) + size(r[3]) for r in a.acts)
            n += sum(size(r) + size(r[0]) + size(r[1]) + size(r[2]) for r in a.replied)
            n += sum(size(k) + size(v) + size(v[0]) + size(v[1]) for k, v in a.items.items())
            n += size(a.heap) + sum(size(e) for e in a.heap)
        for _, values, totals in self._contrib.values():  # the population's per-agent share
            n += 88 + size(values) + size(totals)  # entry, outer tuple; values' floats shared
        return n

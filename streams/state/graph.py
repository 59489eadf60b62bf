"""The interaction graph of the society: per day, cumulative, and a sliding event-time window.

Edge ``i -> j`` when agent ``i`` comments on ``j``: ``j`` is the author of the parent comment
for a reply, else the post's author (Molt Dynamics; Li et al. A3). The normaliser already puts
that agent in :attr:`CommentEvent.reply_to`. Self-interactions and comments whose target is
unknown (``reply_to`` None, e.g. deleted authors) are dropped; weight = number of interactions.

In a multi-worker deployment the per-partition stage forwards one compact
:class:`Interaction` (src, dst, event time) per kept comment to the single society-wide
reducer, which calls :meth:`InteractionGraph.add`.

The window holds the interactions with ``now - window < time``, where ``now`` is the latest
event time passed to :meth:`expire` (the replayed archives are months old, so wall-clock time
means nothing). Interactions older than the window when they arrive still count in their day
and in the cumulative graph, but not in the window (``graph_late_interactions_total``).

Memory: the window costs one heap entry per interaction in it (~100 B) plus one dict entry
per distinct pair in it; each retained day one dict entry per distinct pair of that day; the
cumulative graph one entry per distinct pair ever seen (it is the paper's cumulative graph and
grows with the society, O(agents x mean partners)).

>>> from datetime import datetime, timedelta, timezone
>>> from streams.events import CommentEvent
>>> t0 = datetime(2026, 2, 1, tzinfo=timezone.utc)
>>> def c(i, a, b, h):
...     t = t0 + timedelta(hours=h)
...     return CommentEvent(id=f"comment:{i}", event_time=t, observed_at=t, comment_id=str(i),
...                         post_id="p", author=a, reply_to=b)
>>> g = InteractionGraph(window=timedelta(hours=24))
>>> for i, (a, b, h) in enumerate([("x", "y", 0), ("x", "y", 1), ("y", "x", 2), ("z", "z", 3)]):
...     _ = g.update(c(i, a, b, h))
>>> dict(g.window), g.drain_delta()
({('x', 'y'): 2, ('y', 'x'): 1}, {('x', 'y'): 2, ('y', 'x'): 1})
>>> _ = g.expire(t0 + timedelta(hours=24, minutes=30))
>>> dict(g.window), g.drain_delta(), g.cumulative_weight("x", "y")
({('x', 'y'): 1, ('y', 'x'): 1}, {('x', 'y'): -1}, 2)
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import numpy as np

from streams.events import CommentEvent, PostEvent, VoteEvent
from streams.state.base import Sample, Snapshot

Pair = tuple[str, str]
Weights = dict[Pair, int]


@dataclass(frozen=True, slots=True)
class Interaction:
    """One directed interaction: the fact the per-partition stage forwards to the reducer."""

    src: str
    dst: str
    time: datetime


def interaction_of(event: CommentEvent | PostEvent | VoteEvent) -> Interaction | None:
    """The interaction a comment makes, or None (not a comment, self-reply, unknown target)."""
    if not isinstance(event, CommentEvent) or event.reply_to is None:
        return None
    if event.reply_to == event.author:
        return None
    return Interaction(event.author, event.reply_to, event.event_time)


def day_of(t: datetime) -> date:
    return t.astimezone(UTC).date()


class InteractionGraph:
    """Per-day, cumulative and sliding-window weighted interaction graphs.

    ``window``: width of the sliding window (event time). ``retain_days``: how many UTC days
    of raw per-day graphs to keep; older days are handed back by :meth:`expire` so the caller
    can summarise them before they are dropped.
    """

    def __init__(self, window: timedelta = timedelta(hours=24), retain_days: int = 3) -> None:
        if window <= timedelta(0) or retain_days < 1:
            raise ValueError("window must be positive and retain_days >= 1")
        self.window_width = window
        self.retain_days = retain_days
        self.window: Weights = {}
        self.days: dict[date, Weights] = {}
        self._out: dict[str, dict[str, int]] = defaultdict(dict)  # cumulative adjacency
        self._in: dict[str, set[str]] = defaultdict(set)
        self._heap: list[tuple[float, int, str, str]] = []
        self._seq = 0
        self._delta: Weights = {}
        self._now: float | None = None
        self.interactions_total = 0
        self.dropped_total = 0
        self.late_total = 0

    # -- ingestion ---------------------------------------------------------------------------
    def update(self, event: CommentEvent | PostEvent | VoteEvent) -> Interaction | None:
        """Take one canonical event; returns the interaction it made (the reducer's fact)."""
        if not isinstance(event, CommentEvent):
            return None
        edge = interaction_of(event)
        if edge is None:
            self.dropped_total += 1
            return None
        self.add(edge)
        return edge

    def add(self, edge: Interaction) -> None:
        """Add one interaction to its day, the cumulative graph and (if recent) the window."""
        pair = (edge.src, edge.dst)
        self.interactions_total += 1
        day = self.days.setdefault(day_of(edge.time), {})
        day[pair] = day.get(pair, 0) + 1
        out = self._out[edge.src]
        out[edge.dst] = out.get(edge.dst, 0) + 1
        self._in[edge.dst].add(edge.src)
        ts = edge.time.timestamp()
        if self._now is not None and ts <= self._now - self.window_width.total_seconds():
            self.late_total += 1
            return
        self.window[pair] = self.window.get(pair, 0) + 1
        self._delta[pair] = self._delta.get(pair, 0) + 1
        self._seq += 1
        heapq.heappush(self._heap, (ts, self._seq, edge.src, edge.dst))

    def expire(self, now: datetime) -> dict[date, Weights]:
        """Advance event time to ``now``: drop expired window edges; return evicted days."""
        ts = now.timestamp()
        if self._now is not None and ts < self._now:
            return {}  # event time does not go back
        self._now = ts
        cutoff = ts - self.window_width.total_seconds()
        heap = self._heap
        while heap and heap[0][0] <= cutoff:
            _, _, src, dst = heapq.heappop(heap)
            pair = (src, dst)
            left = self.window[pair] - 1
            if left:
                self.window[pair] = left
            else:
                del self.window[pair]
            self._delta[pair] = self._delta.get(pair, 0) - 1
        oldest = day_of(now) - timedelta(days=self.retain_days - 1)
        gone = sorted(d for d in self.days if d < oldest)
        return {d: self.days.pop(d) for d in gone}

    def drain_delta(self) -> Weights:
        """Net window-weight changes since the last call (the incremental PageRank's batch)."""
        out = {p: w for p, w in self._delta.items() if w}
        self._delta = {}
        return out

    # -- queries -----------------------------------------------------------------------------
    @property
    def now(self) -> datetime | None:
        return None if self._now is None else datetime.fromtimestamp(self._now, UTC)

    def cumulative(self) -> Weights:
        """The cumulative graph as {(src, dst): weight} (a copy)."""
        return {(u, v): w for u, out in self._out.items() for v, w in out.items()}

    def cumulative_weight(self, src: str, dst: str) -> int:
        return self._out.get(src, {}).get(dst, 0)

    def in_neighbours(self, agent: str) -> set[str]:
        """Agents who interacted with ``agent`` so far (cumulative predecessors)."""
        return self._in.get(agent, set())

    def out_neighbours(self, agent: str) -> dict[str, int]:
        """Agents ``agent`` interacted with so far, with weights (cumulative successors)."""
        return self._out.get(agent, {})

    def cumulative_size(self) -> tuple[int, int]:
        """(nodes, edges) of the cumulative graph."""
        nodes = set(self._out) | {v for v, preds in self._in.items() if preds}
        return len(nodes), sum(len(o) for o in self._out.values())

    def snapshot(self) -> Snapshot:
        samples: list[Sample] = []
        graphs: dict[str, Weights] = {"window": self.window}
        if self.days:
            graphs["day"] = self.days[max(self.days)]
        for name, weights in graphs.items():
            samples.append(Sample("graph_edges", float(len(weights)), (("graph", name),),
                                  help="Distinct directed agent pairs in the graph"))
            samples.append(Sample("graph_nodes", float(len(nodes_of(weights))),
                                  (("graph", name),), help="Agents in the graph"))
        n_cum, e_cum = self.cumulative_size()
        samples += [
            Sample("graph_edges", float(e_cum), (("graph", "cumulative"),)),
            Sample("graph_nodes", float(n_cum), (("graph", "cumulative"),)),
            Sample("graph_interactions_total", float(self.interactions_total), kind="counter",
                   help="Interactions (comments on another agent) taken"),
            Sample("graph_dropped_comments_total", float(self.dropped_total), kind="counter",
                   help="Comments without an edge: self-interaction or unknown target"),
            Sample("graph_late_interactions_total", float(self.late_total), kind="counter",
                   help="Interactions older than the window when they arrived"),
        ]
        details = {"graph_days": {d.isoformat(): {"edges": len(w), "nodes": len(nodes_of(w)),
                                                  "interactions": sum(w.values())}
                                  for d, w in sorted(self.days.items())}}
        return Snapshot(samples=samples, details=details)


def nodes_of(weights: Weights) -> set[str]:
    return {u for u, _ in weights} | {v for _, v in weights}


def synthetic_interactions(n: int, agents: int, span: timedelta, seed: int = 0,
                           start: datetime = datetime(2026, 2, 1, tzinfo=UTC),
                           ) -> list[Interaction]:
    """A reproducible heavy-tailed workload for tests and benchmarks: ``n`` interactions in
    time order over ``span``; commenters drawn by Pareto(1.5) activity, targets by Pareto(1.2)
    popularity (a few agents draw most replies), self-interactions redrawn."""


    rng = np.random.default_rng(seed)
    act = rng.pareto(1.5, agents) + 1
    pop = rng.pareto(1.2, agents) + 1
    src = rng.choice(agents, n, p=act / act.sum())
    dst = rng.choice(agents, n, p=pop / pop.sum())
    clash = src == dst
    dst[clash] = (dst[clash] + 1 + rng.integers(0, agents - 1, int(clash.sum()))) % agents
    secs = np.sort(rng.uniform(0, span.total_seconds(), n))
    return [Interaction(f"agent{s}", f"agent{d}", start + timedelta(seconds=float(t)))
            for s, d, t in zip(src.tolist(), dst.tolist(), secs.tolist(), strict=True)]

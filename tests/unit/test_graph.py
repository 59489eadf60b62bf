"""Interaction graph vs plain recomputation from the raw JSON comment trees."""

from __future__ import annotations

import heapq
import pickle
import random
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from service.sources.normalise import parse_time
from streams.events import CommentEvent
from streams.state.base import Item
from streams.state.graph import Interaction, InteractionGraph, day_of, interaction_of
from tests.unit.collective_data import raw_threads, thread_events


def _name(node: dict) -> str | None:
    a = node.get("author")
    return a.get("name") if isinstance(a, dict) else None


def batch_edges() -> list[tuple[str, str, datetime]]:
    """Molt Dynamics' edges straight from the trees: commenter -> parent comment's author,
    else post author; self-interactions and unknown ends dropped."""
    out: list[tuple[str, str, datetime]] = []
    seen: set[str] = set()

    def walk(nodes: list, parent: str | None) -> None:
        for c in nodes or []:
            me = _name(c)
            if c.get("id") not in seen and me and parent and me != parent:
                out.append((me, parent, parse_time(c["created_at"])))  # type: ignore[arg-type]
            seen.add(c.get("id"))
            walk(c.get("replies") or [], me)

    for answer in raw_threads():
        walk(answer.get("comments") or [], _name(answer["post"]))
    return out


def test_days_and_cumulative_match_the_trees() -> None:
    g = InteractionGraph(retain_days=10_000)
    for e in thread_events():
        g.update(Item.of(e))
    ref = batch_edges()
    assert len(ref) > 200
    assert g.interactions_total == len(ref)
    by_day: dict[int, Counter] = {}
    for s, d, t in ref:
        by_day.setdefault(day_of(t.timestamp()), Counter())[(s, d)] += 1
    assert {d: dict(c) for d, c in by_day.items()} == g.days
    assert g.cumulative() == dict(sum(by_day.values(), Counter()))


def test_window_matches_a_plain_filter_at_every_step() -> None:
    width = timedelta(hours=24)
    g = InteractionGraph(window=width)
    ref = batch_edges()
    events = [e for e in thread_events() if isinstance(e, CommentEvent)]
    for e in events:
        g.expire(e.event_time.timestamp())
        g.update(Item.of(e))
        now = e.event_time
        want = Counter((s, d) for s, d, t in ref if now - width < t <= now)
        assert g.window == dict(want)


def test_self_loops_and_unknown_targets_are_dropped() -> None:
    t = datetime(2026, 2, 1, tzinfo=UTC)
    c = CommentEvent(id="comment:1", event_time=t, observed_at=t, comment_id="1", post_id="p",
                     author="a", reply_to="a")
    assert interaction_of(Item.of(c)) is None
    assert interaction_of(Item.of(c.model_copy(update={"reply_to": None}))) is None
    to_b = Item.of(c.model_copy(update={"reply_to": "b"}))
    assert interaction_of(to_b) == Interaction("a", "b", t.timestamp())
    to_b.author = None  # the platform no longer names the commenter: no edge
    assert interaction_of(to_b) is None
    g = InteractionGraph()
    assert g.update(to_b) is None and g.dropped_total == 1 and g.cumulative() == {}


def test_expiry_deltas_late_edges_and_day_eviction() -> None:
    t0 = datetime(2026, 2, 1, tzinfo=UTC).timestamp()
    g = InteractionGraph(window=timedelta(hours=1), retain_days=1)
    g.add(Interaction("a", "b", t0))
    g.add(Interaction("a", "b", t0 + 1800))
    assert g.drain_delta() == {("a", "b"): 2}
    g.expire(t0 + 70 * 60)
    assert g.drain_delta() == {("a", "b"): -1}
    g.add(Interaction("c", "d", t0))  # arrives late: counts in its day, not in the window
    assert g.late_total == 1 and ("c", "d") not in g.window
    evicted = g.expire(t0 + 26 * 3600)
    assert evicted == {day_of(t0): {("a", "b"): 2, ("c", "d"): 1}}
    assert g.snapshot().details["graph_days"] == {}
    assert g.window == {} and g.drain_delta() == {("a", "b"): -1}
    assert g.cumulative_weight("a", "b") == 2 and g.in_neighbours("b") == {"a"}
    names, src, dst, w = g.arrays()
    assert {(names[s], names[d]): x for s, d, x in zip(src, dst, w, strict=True)} == {
        ("a", "b"): 2.0, ("c", "d"): 1.0}
    for start in range(3):  # the pairs as they came, from any of them on
        s, d = g.pairs_from(start)
        assert s.tolist() == src.tolist()[start:] and d.tolist() == dst.tolist()[start:]
    snap = g.snapshot()
    assert snap.value("graph_edges", graph="cumulative") == 2.0
    assert snap.value("graph_late_interactions_total") == 1.0


def test_window_must_be_positive() -> None:
    with pytest.raises(ValueError):
        InteractionGraph(window=timedelta(0))


def test_out_of_order_arrivals_leave_as_a_time_heap_would_pop_them() -> None:
    """The window's queue (arrival order) and its heap of out-of-order arrivals give, at every
    step, the window of a plain filter and the net changes, in the order the pairs first
    changed, of one heap of every interaction popped in (time, arrival) order."""
    rng = random.Random(7)
    width = 3600.0
    g = InteractionGraph(window=width)
    heap: list[tuple[float, int, tuple[str, str]]] = []
    delta: dict[tuple[str, str], int] = {}
    live: list[tuple[float, tuple[str, str]]] = []
    now: float | None = None
    seq = queued_late = 0
    t = 0.0
    for step in range(4000):
        t += rng.expovariate(1 / 20)
        ts = t - (rng.uniform(0, 900) if rng.random() < 0.2 else 0.0)  # a fifth arrive late
        pair = (f"a{rng.randrange(12)}", f"a{rng.randrange(12, 20)}")
        g.add(Interaction(*pair, ts))
        queued_late += bool(g._late)
        if now is None or ts > now - width:
            seq += 1
            heapq.heappush(heap, (ts, seq, pair))
            delta[pair] = delta.get(pair, 0) + 1
            live.append((ts, pair))
        if step % 7 == 0:
            now = t
            g.expire(now)
            while heap and heap[0][0] <= now - width:
                gone = heapq.heappop(heap)[2]
                delta[gone] = delta.get(gone, 0) - 1
            live = [(x, p) for x, p in live if x > now - width]
            assert g.window == dict(Counter(p for _, p in live))
            assert g.window_edges == len(g.window)
            assert list(g.drain_delta().items()) == [(p, w) for p, w in delta.items() if w]
            delta = {}
        if step == 2000:
            g = pickle.loads(pickle.dumps(g))
    assert queued_late > 100  # the heap of out-of-order arrivals was in use

"""PageRank engines vs networkx on the same graphs; concentration vs the published rules."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta

import networkx as nx
import numpy as np
import pytest

from streams.events import CommentEvent
from streams.state.base import Item
from streams.state.graph import Interaction, InteractionGraph, day_label, synthetic_interactions
from streams.state.pagerank import (
    InfluenceConfig,
    InfluenceEngine,
    WindowPageRank,
    jaccard,
    largest_gap_cut,
    pagerank_arrays,
    pagerank_exact,
    summarise_vector,
    top_mass,
)
from streams.state.pagerank_kernels import pairwise_sum, transitions
from tests.unit.collective_data import thread_events
from tests.unit.hashseeds import under_hash_seeds

L1_BOUND = 0.02
TOP10_BOUND = 0.9


def nx_pagerank(weights: dict[tuple[str, str], int], **kw: float) -> dict[str, float]:
    g = nx.DiGraph()
    g.add_weighted_edges_from((u, v, w) for (u, v), w in weights.items())
    return nx.pagerank(g, alpha=0.85, **kw)


def l1(a: dict[str, float], b: dict[str, float]) -> float:
    return sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in a.keys() | b.keys())


def top10_overlap(est: dict[str, float], ref: dict[str, float]) -> float:
    """Share of the estimated top 10 that belongs to the reference top 10; agents tied (to
    1e-12) with the reference's 10th value count as top 10, since networkx's order among
    exact ties is arbitrary."""
    k = min(10, len(ref))
    cut = sorted(ref.values(), reverse=True)[k - 1] - 1e-12
    mine = sorted(est, key=lambda a: (-est[a], a))[:k]
    return sum(ref.get(a, 0.0) >= cut for a in mine) / k


def test_exact_power_iteration_matches_networkx() -> None:
    edges = Counter((e.src, e.dst) for e in synthetic_interactions(5000, 800, timedelta(days=1)))
    ref = nx_pagerank(dict(edges), tol=1e-12, max_iter=1000)
    assert l1(pagerank_exact(edges), ref) < 1e-8
    assert pagerank_exact({}) == {}


def test_concentration_rules() -> None:
    values = sorted(nx_pagerank({("a", "b"): 3, ("c", "b"): 1, ("b", "d"): 1}).values(),
                    reverse=True)
    gaps = [values[i] - values[i + 1] for i in range(len(values) - 1)]
    assert largest_gap_cut(values) == gaps.index(max(gaps)) + 1
    assert top_mass(values) == pytest.approx({1: values[0], 3: sum(values[:3]), 5: 1.0, 10: 1.0})
    assert largest_gap_cut([1.0]) == 1 and largest_gap_cut([]) == 0
    assert largest_gap_cut([0.25] * 4) == 0  # all tied: no super-node
    assert largest_gap_cut([0.3, 0.3, 0.2, 0.2]) == 2  # the cut never splits a tie
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3) and jaccard(set(), set()) == 1


def test_summary_from_the_sorted_head_is_the_full_sorts() -> None:
    """summarise_vector sorts only the head of a long vector when the gap rule allows: the
    same summary as the gap rule and top-k mass over the whole vector sorted, on heavy tails
    (the head path), flat vectors and ties at the head's edge (the full sort)."""
    rng = np.random.default_rng(7)
    vectors = []
    for n in (1000, 1025, 5000, 20000):
        vectors.append(rng.pareto(1.2, n) + 1.0)  # heavy tail: the big gap in the head
        vectors.append(rng.random(n))  # flat: small gaps everywhere
        tied = rng.pareto(3.0, n)
        tied[np.argsort(-tied)[:300]] = tied.max()  # the cut runs past the head
        vectors.append(tied)
        step = np.repeat([3.0, 1.0, 0.5], [250, 6, n - 256])  # the tie ends at the head's edge
        vectors.append(rng.permutation(step))
    for v in vectors:
        p = v / v.sum()
        names = [f"a{i}" for i in range(len(p))]
        got = summarise_vector(names, p, 7)
        values = -np.sort(-p)
        k = largest_gap_cut(values)
        ranked_all = sorted(zip(names, p.tolist(), strict=True), key=lambda x: (-x[1], x[0]))
        assert got.top_mass == top_mass(values)
        assert got.supernodes == [a for a, _ in ranked_all[:k]]
        assert got.top == ranked_all[:20]


def test_window_pagerank_stays_within_its_bound_under_churn() -> None:
    """After each of 60 random batches of insertions and deletions, with nodes going dangling,
    leaving and coming back (recycled ids), the warm-started vector is within
    alpha / (1 - alpha) * tol of the exact PageRank of the live graph."""
    rng = random.Random(7)
    names = [f"n{i}" for i in range(25)]
    live: Counter = Counter()
    pr = WindowPageRank(tol=1e-6)
    bound = 0.85 / 0.15 * 1e-6
    for _ in range(60):
        delta: Counter = Counter()
        for _ in range(rng.randint(1, 12)):
            pair = tuple(rng.sample(names, 2))
            if live[pair] + delta[pair] > 0 and rng.random() < 0.45:
                delta[pair] -= 1
            else:
                delta[pair] += rng.randint(1, 3)
        live.update(delta)
        live = Counter({p: w for p, w in live.items() if w > 0})
        pr.apply(delta)
        assert pr.n_edges == len(live)
        assert l1(pr.scores(), pagerank_exact(live)) <= bound
    assert pr.iterations < 60  # warm-started: far fewer than a cold start's ~100


def test_removing_everything_empties_the_state() -> None:
    pr = WindowPageRank()
    pr.apply({("a", "b"): 2, ("b", "c"): 1})
    pr.apply({("a", "b"): -2, ("b", "c"): -1})
    assert pr.n_nodes == 0 and pr.n_edges == 0 and pr.scores() == {}
    with pytest.raises(ValueError):
        pr.apply({("a", "b"): -1})


def _window_ref(edges: list[Interaction], now: float, width: timedelta) -> dict:
    w = width.total_seconds()
    return dict(Counter((e.src, e.dst) for e in edges if now - w < e.time <= now))


def test_window_pagerank_on_real_threads() -> None:
    cfg = InfluenceConfig(step=timedelta(minutes=5), cumulative_every=timedelta(0))
    eng = InfluenceEngine(cfg)
    edges: list[Interaction] = []
    checked = 0
    for e in thread_events():
        eng.expire(e.event_time.timestamp())
        if eng.refreshes_total > checked:  # a refresh happened: hold it against networkx
            checked = eng.refreshes_total
            ref_w = _window_ref(edges, eng.graph.now, cfg.window)  # type: ignore[arg-type]
            if ref_w:
                ref = nx_pagerank(ref_w)
                est = eng.scores()
                assert est == eng.pagerank.scores()
                assert l1(est, ref) <= L1_BOUND
                assert top10_overlap(est, ref) >= TOP10_BOUND
                values = sorted(ref.values(), reverse=True)
                mass = eng.snapshot().value("pagerank_top_mass", graph="window", k="3")
                assert mass == pytest.approx(sum(values[:3]), abs=L1_BOUND)
        edge = eng.update(Item.of(e))
        if edge:
            edges.append(edge)
    assert checked > 20


def test_daily_and_cumulative_summaries_match_networkx() -> None:
    eng = InfluenceEngine(InfluenceConfig(retain_days=2, cumulative_every=timedelta(0)))
    g = InteractionGraph(retain_days=10_000)
    for e in thread_events():
        eng.expire(e.event_time.timestamp())
        eng.update(Item.of(e))
        g.update(Item.of(e))
    eng.refresh(full=True)
    daily = eng.daily()
    assert len(daily) == len(g.days) > 5
    for d, weights in g.days.items():
        ref = nx_pagerank(weights, tol=1e-12, max_iter=1000)
        values = sorted(ref.values(), reverse=True)
        row = daily[day_label(d)]
        assert row["top_mass"]["1"] == pytest.approx(values[0], abs=1e-8)
        assert row["top_mass"]["10"] == pytest.approx(sum(values[:10]), abs=1e-8)
        gaps = [values[i] - values[i + 1] for i in range(len(values) - 1)]
        want = ([] if max(gaps) <= 1e-9 else
                [a for a in ref if ref[a] >= values[
                    next(i for i, g in enumerate(gaps) if g >= max(gaps) - 1e-9)] - 1e-9])
        assert sorted(row["supernodes"]) == sorted(want)
    cum = nx_pagerank(g.cumulative(), tol=1e-12, max_iter=1000)
    snap = eng.snapshot()
    top = sorted(cum.values(), reverse=True)
    assert snap.value("pagerank_top_mass", graph="cumulative", k="5") == pytest.approx(
        sum(top[:5]), abs=1e-8)
    best = max(cum, key=cum.get)  # type: ignore[arg-type]
    assert eng.agent(best)["cumulative"]["rank"] == 1  # type: ignore[index]
    assert eng.agent("nobody-at-all") is None


def test_supernode_turnover_and_persistence() -> None:
    t0 = datetime(2026, 2, 1, tzinfo=UTC)
    step = timedelta(minutes=5)
    eng = InfluenceEngine(InfluenceConfig(window=timedelta(minutes=30), step=step))

    def comment(i: int, a: str, b: str, t: datetime) -> Item:
        return Item.of(CommentEvent(id=f"comment:{i}", event_time=t, observed_at=t,
                                    comment_id=str(i), post_id="p", author=a, reply_to=b))

    i = 0
    for k in range(12):  # "hub" gets every reply for 30 min, then "star" does
        t = t0 + k * step
        target = "hub" if k < 6 else "star"
        for j in range(5):
            i += 1
            eng.update(comment(i, f"fan{j}", target, t))
        eng.expire((t + timedelta(minutes=1)).timestamp())
    eng.expire((t0 + 13 * step).timestamp())
    snap = eng.snapshot()
    hist = snap.details["supernode_history"]
    assert hist["hub"]["windows"] >= 5 and hist["hub"]["current_streak_since"] is None
    assert hist["star"]["current_streak_since"] is not None
    assert snap.value("supernode_streaks_total") >= 1
    assert snap.value("supernode_turnover_jaccard", graph="window") is not None
    assert eng.agent("star")["supernode"] is True  # type: ignore[index]


@pytest.mark.slow
def test_window_pagerank_on_100k_synthetic_edges() -> None:
    """A sliding 24 h window holding ~100k interactions (~97k distinct pairs, ~20k agents)."""
    width = timedelta(hours=24)
    edges = synthetic_interactions(130_000, 20_000, timedelta(hours=31), seed=3)
    g = InteractionGraph(window=width)
    mc = WindowPageRank()  # the defaults: tol 1e-3
    step, due = 1800.0, edges[0].time
    checked = 0
    for e in edges:
        if e.time >= due:
            g.expire(e.time)
            mc.apply(g.drain_delta())
            due = e.time + step
            if e.time >= edges[0].time + 3600 * (27 + 3 * checked):  # hold it up
                assert sum(g.window.values()) > 90_000
                ref = nx_pagerank(g.window)
                est = mc.scores()
                assert l1(est, ref) <= L1_BOUND
                assert l1(est, pagerank_exact(g.window)) <= 0.85 / 0.15 * 1e-3
                assert top10_overlap(est, ref) >= TOP10_BOUND
                assert np.isclose(sum(est.values()), 1.0)
                checked += 1
        g.add(e)
    assert checked == 2


def test_window_pagerank_compacts_its_slots_when_the_window_shrinks() -> None:
    import random

    from streams.state.pagerank import WindowPageRank, pagerank_exact

    rng = random.Random(5)
    edges = {(f"a{rng.randrange(400)}", f"a{rng.randrange(400)}"): rng.randrange(1, 4)
             for _ in range(6000)}
    edges = {k: v for k, v in edges.items() if k[0] != k[1]}
    pr = WindowPageRank()
    pr.apply(edges)
    pr.vector()
    hi = pr._hi
    gone = dict(list(edges.items())[: len(edges) * 3 // 4])
    pr.apply({k: -v for k, v in gone.items()})
    left = {k: v for k, v in edges.items() if k not in gone}
    est = pr.scores()
    assert pr._hi == len(left) < hi / 2  # compacted
    exact = pagerank_exact(left)
    assert sum(abs(est[k] - exact[k]) for k in exact) < 5.7e-3
    pr.apply({("x", "y"): 1, next(iter(left)): 2})  # slots reused after compaction
    left[("x", "y")] = 1
    left[next(iter(left))] += 2
    est = pr.scores()
    exact = pagerank_exact(left)
    assert set(est) == set(exact) and sum(abs(est[k] - exact[k]) for k in exact) < 5.7e-3


def numpy_pagerank(src: np.ndarray, dst: np.ndarray, w: np.ndarray, n: int,
                   start: np.ndarray | None, alpha: float = 0.85, tol: float = 1e-12,
                   max_iter: int = 1000) -> np.ndarray:
    """The NumPy iteration the compiled kernel replaces, line for line (the COO product is
    ``np.bincount`` over the edges in order, the sums NumPy's own)."""
    outw = np.bincount(src, weights=w, minlength=n)
    coef = w / outw[src]
    dangling = outw == 0
    p = np.full(n, 1.0 / n) if start is None else start / start.sum()
    for _ in range(max_iter):
        new = alpha * np.bincount(dst, weights=coef * p[src], minlength=n) + (
            alpha * p[dangling].sum() + 1.0 - alpha) / n
        done = np.abs(new - p).sum() < tol
        p = new
        if done:
            break
    return p


@pytest.mark.parametrize("seed", range(4))
def test_compiled_iteration_is_the_numpy_iteration_bit_for_bit(seed: int) -> None:
    """pagerank_arrays (the kernel) equals the NumPy iteration float for float, cold and
    warm-started, from 1 node to graphs whose sums take NumPy's pairwise splits (> 128)."""
    rng = np.random.default_rng(seed)
    for n in (1, 2, 7, 9, 130, 1000, 5000):
        m = int(rng.integers(1, 4 * n + 2))
        src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
        w = rng.integers(1, 5, m).astype(np.float64)
        for start in (None, rng.random(n)):
            expected = numpy_pagerank(src, dst, w, n, start)
            got = pagerank_arrays(src.astype(np.int32), dst.astype(np.int32), w, n,
                                  start=start)
            assert np.array_equal(got, expected)


def test_pairwise_sum_is_numpys_sum() -> None:
    rng = np.random.default_rng(0)
    for n in [*range(0, 300), 1024, 4097, 65536, 100_001]:
        a = rng.random(n) * 10.0 ** rng.integers(-6, 6, n)
        assert pairwise_sum(a, 0, n) == a.sum()
        if n > 3:
            assert pairwise_sum(a, 3, n - 3) == a[3:].sum()


def test_transitions_are_numpys_out_weights_and_division() -> None:
    """The fused kernel's out-weights and coefficients, float for float: np.bincount's sums
    and the plain division, or the division masked to the positive weights (emptied slots)."""
    rng = np.random.default_rng(5)
    for n, m in ((1, 3), (50, 400), (3000, 20_000)):
        src = rng.integers(0, n, m)
        w = rng.integers(0, 4, m).astype(np.float64) * rng.choice([1.0, 0.3], m)
        outw = np.bincount(src, weights=w, minlength=n)
        got_w, got_plain = transitions(src, w, n, False)
        assert np.array_equal(got_w, outw)
        with np.errstate(invalid="ignore"):
            assert np.array_equal(got_plain, w / outw[src], equal_nan=True)
        masked = np.divide(w, outw[src], out=np.zeros_like(w), where=w > 0)
        assert np.array_equal(transitions(src, w, n, True)[1], masked)


def test_window_pagerank_by_graph_keys_is_the_one_by_names() -> None:
    """Fed the graph's pair slots (the engine's way) or the same changes by names, through
    expiries, vanishing nodes and pickle round trips, the vectors are equal float for float."""
    import pickle

    edges = synthetic_interactions(20_000, 600, timedelta(hours=10), seed=2)
    g = InteractionGraph(window=timedelta(hours=1))
    by_keys, by_names = WindowPageRank(), WindowPageRank()
    due = edges[0].time
    for i, e in enumerate(edges):
        if e.time >= due:
            g.expire(e.time)
            slots, units = g.drain_changes()
            pairs = g._pairs
            by_names.apply({pairs[s]: u for s, u in zip(slots.tolist(), units.tolist(),
                                                        strict=True)})
            by_keys.apply_keys(slots, units, *g.ends(slots), g.agent_names())
            if i % 3:
                by_keys = pickle.loads(pickle.dumps(by_keys))
            (na, pa), (nb, pb) = by_keys.vector(), by_names.vector()
            assert list(na) == list(nb) and np.array_equal(pa, pb)
            due = e.time + 600
        g.add(e)
    slots, units = g.drain_changes()
    by_keys.apply_keys(slots, units, *g.ends(slots), g.agent_names())
    assert by_keys.n_edges == g.window_edges and by_keys.n_nodes > 100


def simultaneous_supernode_history() -> list[str]:
    """The super-node history's agents, in its order, after eight hubs rise in one window."""
    t0 = datetime(2026, 2, 1, tzinfo=UTC)
    eng = InfluenceEngine(InfluenceConfig(window=timedelta(minutes=30),
                                          step=timedelta(minutes=5)))
    i = 0
    for k in range(3):
        t = t0 + k * timedelta(minutes=5)
        for h in range(8):
            for j in range(6):
                i += 1
                eng.update(Item.of(CommentEvent(id=f"comment:{i}", event_time=t, observed_at=t,
                                                comment_id=str(i), post_id=f"p{h}",
                                                author=f"fan{h}-{j}", reply_to=f"hub{h}")))
        eng.expire((t + timedelta(minutes=1)).timestamp())
    return list(eng.snapshot().details["supernode_history"])


def test_supernode_history_order_does_not_hang_on_the_hash_seed() -> None:
    # live workers and the replay run in different processes, each with its string hash seed
    runs = under_hash_seeds("tests.unit.test_pagerank", "simultaneous_supernode_history", 6)
    assert len(runs) == 1 and len(runs[0]) > 1

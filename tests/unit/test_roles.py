"""Roles vs the batch pipeline on networkx features and scikit-learn's silhouette loop."""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator
from datetime import timedelta

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score
from sklearn.preprocessing import StandardScaler

from streams.state.base import Item
from streams.state.graph import InteractionGraph, synthetic_interactions
from streams.state.roles import RolesConfig, RolesEngine, _brandes, role_features, silhouette
from tests.unit.collective_data import thread_events


def batch_roles(weights: dict, seed: int = 0, n_init: int = 4) -> tuple[int, float, float]:
    g = nx.DiGraph()
    g.add_weighted_edges_from((u, v, w) for (u, v), w in weights.items())
    names = sorted(g)
    pr = nx.pagerank(g, alpha=0.85, tol=1e-12, max_iter=1000)
    btw = nx.betweenness_centrality(g)
    clus = nx.clustering(g.to_undirected())
    x = np.array([[g.in_degree(a), g.out_degree(a), btw[a], clus[a], pr[a]] for a in names])
    z = StandardScaler().fit_transform(x)
    scores = {}
    sizes = {}
    for k in range(3, 9):
        lab = KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit_predict(z)
        scores[k] = silhouette_score(z, lab)
        sizes[k] = np.bincount(lab).max() / len(lab)
    best = max(scores, key=scores.get)  # type: ignore[arg-type]
    return best, scores[best], sizes[best]


def test_roles_on_real_threads_match_the_batch_pipeline() -> None:
    eng = RolesEngine(RolesConfig(every=timedelta(days=30)))
    for e in thread_events():
        eng.expire(e.event_time.timestamp())
        eng.update(Item.of(e))
    while eng.running:  # a periodic run spreads over the ticks: let the last one finish
        eng.expire(e.event_time.timestamp())
    assert eng.runs_total >= 1  # the periodic run happened on event time
    eng.refresh()
    k, sil, periphery = batch_roles(eng.graph.cumulative())
    snap = eng.snapshot()
    assert snap.value("roles_k") == k
    assert snap.value("roles_silhouette") == pytest.approx(sil)
    assert snap.value("roles_periphery_ratio") == pytest.approx(periphery)
    roles = snap.details["roles"]["roles"]
    assert roles[0]["agents"] == max(r["agents"] for r in roles)
    member = next(a for a, r in Counter(eng._role).items() if r == 0)
    assert eng.agent(member)["periphery"] is True  # type: ignore[index]


def test_features_match_networkx() -> None:
    g = InteractionGraph()
    for e in synthetic_interactions(3000, 600, timedelta(hours=5), seed=2):
        g.add(e)
    weights = g.cumulative()
    names, x = role_features(weights)
    ng = nx.DiGraph()
    ng.add_weighted_edges_from((u, v, w) for (u, v), w in weights.items())
    pr = nx.pagerank(ng, tol=1e-12, max_iter=1000)
    clus = nx.clustering(ng.to_undirected())
    i = names.index(max(pr, key=pr.get))  # type: ignore[arg-type]
    a = names[i]
    assert x[i, 0] == ng.in_degree(a) and x[i, 1] == ng.out_degree(a)
    assert x[i, 3] == pytest.approx(clus[a])
    assert np.allclose(x[:, 3], [clus[n] for n in names], rtol=0, atol=1e-12)  # every agent
    assert np.allclose(x[:, 4], [pr[n] for n in names], atol=1e-10)
    sampled, xs = role_features(weights, RolesConfig(betweenness_exact_max=100,
                                                     betweenness_samples=200))
    assert sampled == names and np.allclose(xs[:, [0, 1, 3, 4]], x[:, [0, 1, 3, 4]])
    assert np.corrcoef(xs[:, 2], x[:, 2])[0, 1] > 0.9  # sampled betweenness tracks exact


def test_too_small_graph_reports_no_roles() -> None:
    eng = RolesEngine()
    assert eng.compute({("a", "b"): 1}) == {"agents": 2}
    assert eng.snapshot().value("roles_k") is None and eng.agent("a") is None


def test_betweenness_exact_and_sampled_within_the_stated_bound() -> None:
    g = InteractionGraph()
    for e in synthetic_interactions(4000, 700, timedelta(hours=5), seed=4):
        g.add(e)
    weights = g.cumulative()
    ng = nx.DiGraph()
    ng.add_weighted_edges_from((u, v, w) for (u, v), w in weights.items())
    ref = nx.betweenness_centrality(ng)
    names, x = role_features(weights, RolesConfig(betweenness_exact_max=10_000))
    assert np.allclose(x[:, 2], [ref[a] for a in names], atol=1e-12)
    k = 64
    _, xs = role_features(weights, RolesConfig(betweenness_exact_max=100, betweenness_samples=k))
    bound = np.sqrt(np.log(2 / 0.05) / (2 * k))  # Hoeffding, 95 % per agent (module docstring)
    assert np.abs(xs[:, 2] - x[:, 2]).max() <= bound


def test_sampled_agents_and_growth_cadence() -> None:
    eng = RolesEngine(RolesConfig(sample=300, every=timedelta(hours=1), k_range=(3, 4)))
    edges = synthetic_interactions(3000, 600, timedelta(hours=5), seed=2)
    for e in edges:
        eng.expire(e.time)
        eng.graph.add(e)
    while eng.running:
        eng.expire(edges[-1].time)
    runs = eng.runs_total
    assert runs >= 2 and eng.snapshot().value("roles_agents") == 300
    assert len(eng.roles()) == 300
    for h in range(1, 4):  # time passes, the graph does not grow: no new run
        eng.expire(edges[-1].time + 3600 * h)
    assert eng.runs_total == runs


def test_a_run_spread_over_ticks_equals_one_run_and_survives_pickle() -> None:
    """A run reads the graph as of its start, whatever arrives while it runs; a checkpoint
    taken at any step (pickled, restored) goes on to the same result at the same tick."""
    import pickle

    edges = synthetic_interactions(7000, 1500, timedelta(hours=5), seed=3)
    more = edges[6000:]  # arrive while the run is in progress
    cfg = RolesConfig(every=timedelta(hours=1), betweenness_exact_max=100, sample=1200,
                      k_range=(3, 5))
    eng = RolesEngine(cfg)
    for e in edges[:6000]:
        eng.graph.add(e)
    ref = RolesEngine(cfg)
    ref.compute(eng.graph)  # the graph as of the run's start
    t = edges[-1].time
    eng.expire(t)  # arms the cadence
    eng.expire(t + 3600)  # due and grown: a run starts, one step this tick
    assert eng.running and eng.runs_total == 0
    copies: list[tuple[int, RolesEngine]] = []
    steps = 0
    while eng.running:
        copies.append((steps, pickle.loads(pickle.dumps(eng))))
        if more:
            eng.graph.add(more.pop())
        eng.expire(t + 3600)
        steps += 1
    assert steps > 3 and eng.runs_total == 1
    assert eng.snapshot().details["roles"]["roles"] == ref.snapshot().details["roles"]["roles"]
    for taken, back in copies[::3]:
        assert back.running
        for _ in range(steps - taken):
            back.expire(t + 3600)
        assert not back.running and back.runs_total == 1  # finished at the same tick
        assert back.roles() == eng.roles()
        assert back.snapshot().details == eng.snapshot().details


def test_silhouette_equals_scikit_learn() -> None:
    """One distance matrix for every k: the same mean silhouette as scikit-learn's, singleton
    clusters and label values with gaps included; -1 for a single cluster."""
    from sklearn.metrics import pairwise_distances

    rng = np.random.default_rng(3)
    z = rng.normal(size=(300, 5))
    d = pairwise_distances(z)
    for k in (2, 3, 7):
        lab = rng.integers(0, k, 300) * 3  # gaps between the label values
        lab[:2] = [100, 101]  # two singleton clusters
        assert silhouette(d, lab) == pytest.approx(silhouette_score(z, lab), abs=1e-12)
    assert silhouette(d, np.zeros(300, int)) == -1.0


def _synthetic_graph(items: int, agents: int, seed: int,
                     ) -> tuple[list[str], np.ndarray, np.ndarray, sp.csr_matrix]:
    """Names, edge arrays and directed adjacency of a synthetic interaction graph."""
    g = InteractionGraph()
    for e in synthetic_interactions(items, agents, timedelta(hours=5), seed=seed):
        g.add(e)
    names, src, dst, _ = g.arrays()
    n = len(names)
    return names, src, dst, sp.csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n))


def _drain_counting(steps: Generator[None, None, np.ndarray]) -> tuple[int, np.ndarray]:
    """The steps a generator takes and the value it returns."""
    taken = 0
    while True:
        try:
            next(steps)
            taken += 1
        except StopIteration as stop:
            return taken, stop.value


def test_clustering_in_small_steps_equals_networkx(monkeypatch) -> None:
    """The triangle count spread over many steps (tiny blocks): networkx's clustering."""
    from streams.state import roles

    monkeypatch.setattr(roles, "STEP_PAIRS", 50)
    names, src, dst, out = _synthetic_graph(3000, 400, seed=4)
    taken, got = _drain_counting(roles._clustering_steps(out))
    assert taken > 10
    ng = nx.DiGraph()
    ng.add_edges_from((names[u], names[v]) for u, v in zip(src.tolist(), dst.tolist(),
                                                            strict=True))
    want = nx.clustering(ng.to_undirected())
    assert np.allclose(got, [want[a] for a in names], rtol=0, atol=1e-12)


def test_clustering_of_sampled_rows_equals_every_agents_in_the_same_steps(monkeypatch) -> None:
    """The sampled agents' coefficients alone (their rows of the products): the same floats
    as every agent's taken at those rows, in as many steps (a run keeps its tick count)."""
    from streams.state import roles

    monkeypatch.setattr(roles, "STEP_PAIRS", 200)
    names, _, _, out = _synthetic_graph(6000, 700, seed=5)
    rows = np.random.default_rng(1).choice(len(names), 150, replace=False)
    every = _drain_counting(roles._clustering_steps(out))
    some = _drain_counting(roles._clustering_steps(out, rows))
    assert every[0] == some[0] > 10
    assert np.array_equal(some[1], every[1][rows])
    assert some[1].max() > 0


def _brandes_numpy(indptr: np.ndarray, indices: np.ndarray, n: int,
                   sources: np.ndarray) -> np.ndarray:
    """Brandes level-synchronous in NumPy (each level's path counts and dependencies added by
    ``np.add.at`` over its edges): the additions the compiled kernel must repeat exactly."""
    bc = np.zeros(n)
    for s in sources.tolist():
        dist = np.full(n, -1, np.int64)
        sigma = np.zeros(n)
        dist[s], sigma[s] = 0, 1.0
        frontier = np.array([s])
        levels = []
        d = 0
        while len(frontier):
            cnt = indptr[frontier + 1] - indptr[frontier]
            src = np.repeat(frontier, cnt)
            dst = np.concatenate([indices[indptr[u]:indptr[u + 1]] for u in frontier.tolist()])
            dist[dst[dist[dst] < 0]] = d + 1
            keep = dist[dst] == d + 1
            src, dst = src[keep], dst[keep]
            np.add.at(sigma, dst, sigma[src])
            levels.append((src, dst))
            frontier = np.flatnonzero(dist == d + 1)
            d += 1
        delta = np.zeros(n)
        for src, dst in reversed(levels):
            np.add.at(delta, src, sigma[src] / sigma[dst] * (1.0 + delta[dst]))
        delta[s] = 0.0
        bc += delta
    return bc


def test_compiled_brandes_repeats_the_numpy_levels_bit_for_bit() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(2, 300))
        m = int(rng.integers(1, 6 * n))
        out = sp.csr_matrix((np.ones(m), (rng.integers(0, n, m), rng.integers(0, n, m))),
                            shape=(n, n))
        out.sum_duplicates()
        sources = np.sort(rng.choice(n, min(n, 16), replace=False))
        got = _brandes(out.indptr, out.indices, n, sources)
        assert np.array_equal(got, _brandes_numpy(out.indptr, out.indices, n, sources))

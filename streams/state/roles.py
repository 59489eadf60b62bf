"""Emergent roles (Molt Dynamics): cluster agents of the cumulative interaction graph on their
network features and report the share held by the largest cluster (the paper's homogeneous
periphery: 93.5% of agents, six roles, silhouette 0.91).

Features per agent: in-degree and out-degree (distinct partners), betweenness centrality
(directed, unweighted shortest paths, normalised by (n-1)(n-2) as networkx does), clustering
coefficient of the undirected graph, PageRank (0.85, weighted; :func:`pagerank_arrays`).
Standardised (zero mean, unit variance); k-means for each k in ``k_range`` (3..8), k chosen by
the highest silhouette. A batch computation on the cumulative graph, run periodically and
bounded:

- cadence: at most every ``every`` (24 h) of event time, and only once the graph's
  interactions grew by ``min_growth`` (25 %) since the last run, so the total work is a
  geometric sum: amortised O(1) per interaction however long the stream;
- agents: all of them up to ``sample`` (10,000), else a uniform sample of that many (seeded);
  the periphery ratio is then a sample share, within 1.96 sqrt(p(1-p)/m) <= 0.0098 of the
  whole graph's at 95 % (m = 10,000), and per-agent roles exist for the sampled agents;
- betweenness: exact (Brandes, level by level over the CSR arrays, compiled) up to
  ``betweenness_exact_max`` agents (1,000), else estimated from ``betweenness_samples``
  (64) uniform pivots with networkx's scaling: each pivot adds one term in [0, 1] per agent,
  so by Hoeffding an agent's estimate is within sqrt(ln(2/0.05) / (2k)) = 0.17 of the exact
  normalised value with 95 % probability (k = 64; typically far closer: tests);
- clustering: exact, the (sampled) agents' triangles by the forward algorithm as sparse
  products (:func:`clustering`), ``STEP_PAIRS`` oriented pairs a step, O(m^1.5) at worst for
  m pairs, the sampled rows' share of that when sampled;
- k-means on the (sampled) agents, silhouette on at most ``silhouette_sample`` of them, both
  on one thread (``threadpool_limits(1)``): the reducer owns one core, and scikit-learn's
  OpenMP Lloyd loop on a shared 2-core machine spent most of a run waiting on its threads
  (a real-text graph's 24 k-means fits on 10,000 agents: ~5 s threaded, ~0.3 s on one); the
  silhouette's distance matrix is computed once a run and shared by every k
  (:func:`silhouette`, scikit-learn's figure from one product by the labels' indicator).

Run cost: about 0.27 s on the real-text benchmark stream's cumulative graph (7,200 agents,
45k pairs; it was 0.58 s), 0.50 s on its graph at a million events (72k agents, 448k pairs:
0.74 s when every agent's triangles were counted, not only the sample's), spread by
:meth:`RolesEngine.expire` over ~25 ticks of at most ~0.05 s each (one step a tick: set-up
and PageRank, ``STEP_PIVOTS`` betweenness pivots, a block of the clustering coefficients, or
one k of k-means); with the growth cadence well under 1 us an
event amortised at a million events a day. State kept between runs: the last result and one
role label per clustered agent; during a run, a copy of the graph's arrays as of its start
(20 bytes a pair): a run in progress is a generator, which a pickle cannot hold, so a
checkpoint keeps that copy and the steps taken, and the restored engine replays them at its
next tick and goes on exactly as the original would.

>>> eng = RolesEngine(RolesConfig(k_range=(3, 3)))
>>> w = {(f"a{i}", "hub"): 1 for i in range(20)} | {("hub", "b"): 1, ("b", "c"): 1}
>>> r = eng.compute(w)
>>> r["k"], r["agents"], round(r["periphery_ratio"], 2)
(3, 23, 0.91)
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import KMeans
from sklearn.metrics import pairwise_distances
from sklearn.preprocessing import StandardScaler
from threadpoolctl import ThreadpoolController

from streams.events import CommentEvent
from streams.state.base import Item, Sample, Snapshot
from streams.state.graph import InteractionGraph, Pair
from streams.state.pagerank import pagerank_arrays
from streams.state.pagerank_kernels import brandes

STEP_PIVOTS = 4  # betweenness pivots a step of a spread run
STEP_PAIRS = 100_000  # oriented edges whose triangles a step counts
FEATURES = ("in_degree", "out_degree", "betweenness", "clustering", "pagerank")


@dataclass(frozen=True, slots=True)
class RolesConfig:
    """every [24 h]; min_growth [0.25]; k_range [(3, 8)]; n_init [4] k-means restarts;
    seed [0]; sample [10,000] agents; betweenness_exact_max [1,000] agents;
    betweenness_samples [64] pivots above that; silhouette_sample [2,000] agents."""

    every: timedelta = timedelta(hours=24)
    min_growth: float = 0.25
    k_range: tuple[int, int] = (3, 8)
    n_init: int = 4
    seed: int = 0
    sample: int = 10_000
    betweenness_exact_max: int = 1000
    betweenness_samples: int = 64
    silhouette_sample: int = 2000


def betweenness(indptr: np.ndarray, indices: np.ndarray, n: int,
                pivots: np.ndarray | None = None) -> np.ndarray:
    """Brandes' betweenness of a directed unweighted graph (CSR of out-edges, no duplicate
    pairs), summed over ``pivots`` (all nodes when None) and scaled as networkx scales it
    (normalised, endpoints excluded; sampled pivots as ``betweenness_centrality(k=...)``).
    Each pivot is one BFS done a level at a time (a compiled kernel), O(edges + nodes)."""
    sources = np.arange(n) if pivots is None else pivots
    return _betweenness_scale(_brandes(indptr, indices, n, sources), n, pivots)


def _brandes(indptr: np.ndarray, indices: np.ndarray, n: int,
             sources: np.ndarray) -> np.ndarray:
    """Unscaled Brandes dependencies summed over ``sources``: one BFS a source, level by
    level (:func:`streams.state.pagerank_kernels.brandes`, compiled)."""
    return brandes(indptr.astype(np.int32, copy=False), indices.astype(np.int32, copy=False),
                   n, np.asarray(sources, np.int64))


def _betweenness_scale(bc: np.ndarray, n: int, pivots: np.ndarray | None) -> np.ndarray:
    if n <= 2:
        return bc
    if pivots is None or len(pivots) == n:
        return bc / ((n - 1) * (n - 2))
    k = len(pivots)
    scale = np.full(n, 1.0 / (k * (n - 2)))
    scale[pivots] = 1.0 / ((k - 1) * (n - 2)) if k > 1 else np.nan
    return bc * scale


def clustering(out: sp.csr_matrix, rows: np.ndarray | None = None) -> np.ndarray:
    """Clustering coefficient of every agent (or of the agents ``rows``, in that order) in the
    undirected simple graph of ``out`` (the directed adjacency), networkx's ``clustering``:
    2 T / (deg (deg - 1)), T the triangles through the agent (:func:`_clustering_steps` in
    one go)."""
    return _drain(_clustering_steps(out, rows))


def _clustering_steps(out: sp.csr_matrix, rows: np.ndarray | None = None) -> Steps:
    """:func:`clustering` as bounded steps. Triangles are counted once each by the forward
    algorithm in sparse products: edges oriented from lower to higher (degree, index) rank, B;
    a triangle u < v < w is the one entry (u, w) of (B B) o B with v in the middle, so u's and
    w's counts are that matrix's row and column sums and v's the row sums of (B^T B) o B.
    Rows go in blocks of about ``STEP_PAIRS`` oriented edges, a step each; a block's work is
    at most its edges x sqrt(2m) (each out-degree of B is at most sqrt(2m)): O(m^1.5) in all
    at worst. Exact integers whatever the blocks.

    Given ``rows`` (a sample of the agents), only their triangles are counted, each row's
    three terms from its own rows of the products: as u, (B B) o B; as v, (B^T B) o B; as w,
    (B^T B) o B^T (the pairs u -> w, u -> v with v -> w). The work is the sampled rows' share
    of the products, and the steps are the same blocks (a block does its sampled rows)."""
    n = out.shape[0]
    und = (out + out.T).tocoo()
    simple = und.row != und.col
    row, col = und.row[simple], und.col[simple]
    deg = np.bincount(row, minlength=n)
    rank = np.empty(n, np.int64)
    rank[np.lexsort((np.arange(n), deg))] = np.arange(n)
    up = rank[row] < rank[col]
    b = sp.csr_matrix((np.ones(int(up.sum())), (row[up], col[up])), shape=(n, n))
    bt = b.T.tocsr()
    tri = np.zeros(n)
    cuts = np.searchsorted(b.indptr, np.arange(STEP_PAIRS, b.nnz, STEP_PAIRS))
    ordered = None if rows is None else np.sort(rows)
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, n], strict=True):
        if hi <= lo:
            continue
        if ordered is None:
            block = b[lo:hi]
            ends = (block @ b).multiply(block)  # rows lo..hi of (B B) o B
            middle = (bt[lo:hi] @ b).multiply(block)  # rows lo..hi of (B^T B) o B
            tri[lo:hi] += (np.asarray(ends.sum(axis=1)).ravel()
                           + np.asarray(middle.sum(axis=1)).ravel())
            tri += np.asarray(ends.sum(axis=0)).ravel()
        else:
            these = ordered[np.searchsorted(ordered, lo):np.searchsorted(ordered, hi)]
            if len(these):
                down, back = b[these], bt[these]
                shared = back @ b  # rows of B^T B
                tri[these] += (np.asarray((down @ b).multiply(down).sum(axis=1)).ravel()
                               + np.asarray(shared.multiply(down).sum(axis=1)).ravel()
                               + np.asarray(shared.multiply(back).sum(axis=1)).ravel())
        yield
    coef = np.zeros(n)
    two = deg > 1
    coef[two] = 2 * tri[two] / (deg[two] * (deg[two] - 1))
    return coef if rows is None else coef[rows]


Arrays = tuple[list[str], np.ndarray, np.ndarray, np.ndarray]


def _graph_arrays(source: InteractionGraph | Mapping[Pair, int] | Arrays) -> Arrays:
    if isinstance(source, InteractionGraph):
        return source.arrays()
    if isinstance(source, tuple):  # (names, src, dst, weights) already
        return source
    idx: dict[str, int] = {}
    names: list[str] = []
    for u, v in source:
        for a in (u, v):
            if a not in idx:
                idx[a] = len(names)
                names.append(a)
    src = np.fromiter((idx[u] for u, _ in source), np.int64, len(source))
    dst = np.fromiter((idx[v] for _, v in source), np.int64, len(source))
    w = np.fromiter(source.values(), np.float64, len(source))
    return names, src, dst, w


def role_features(source: InteractionGraph | Mapping[Pair, int],
                  config: RolesConfig | None = None) -> tuple[list[str], np.ndarray]:
    """(agents sorted by name, feature matrix with columns :data:`FEATURES`) of the
    cumulative graph or of a weighted digraph; at most ``config.sample`` agents (uniform)."""
    return _drain(_feature_steps(source, config or RolesConfig()))


Steps = Generator[None, None, Any]


def _drain(steps: Steps) -> Any:
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value


def _feature_steps(source: InteractionGraph | Mapping[Pair, int] | Arrays,
                   cfg: RolesConfig) -> Steps:
    """:func:`role_features` as bounded steps (a yield between them): set-up and PageRank,
    then ``STEP_PIVOTS`` sampled betweenness pivots a step (exact betweenness of a small
    graph in one), then the clustering coefficients, ``STEP_PAIRS`` oriented pairs a step.
    Reads a copy of the graph's arrays taken at the start."""
    names, src, dst, w = _graph_arrays(source)
    names = list(names)  # a copy: the graph's list grows while the steps run
    n = len(names)
    if n == 0:
        return [], np.zeros((0, len(FEATURES)))
    src, dst = src.astype(np.int64), dst.astype(np.int64)
    out = sp.csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n))
    out.sum_duplicates()
    rng = np.random.default_rng(cfg.seed)
    pivots = (None if n <= cfg.betweenness_exact_max else
              np.sort(rng.choice(n, min(cfg.betweenness_samples, n), replace=False)))
    pr = pagerank_arrays(src, dst, w, n)
    yield
    # exact betweenness (small graphs, <= betweenness_exact_max agents) is one step
    sources = np.arange(n) if pivots is None else pivots
    per_step = len(sources) if pivots is None else STEP_PIVOTS
    bc = np.zeros(n)
    for i in range(0, len(sources), per_step):
        bc += _brandes(out.indptr, out.indices, n, sources[i:i + per_step])
        yield
    btw = _betweenness_scale(bc, n, pivots)
    in_deg = np.diff(out.tocsc().indptr)
    out_deg = np.diff(out.indptr)
    chosen = (np.arange(n) if n <= cfg.sample else rng.choice(n, cfg.sample, replace=False))
    chosen = sorted(chosen.tolist(), key=names.__getitem__)
    idx = np.array(chosen, dtype=np.int64)
    # the sampled agents' coefficients only (the others' are never read)
    clus = yield from _clustering_steps(out, idx if n > cfg.sample else None)
    if n <= cfg.sample:
        clus = clus[idx]
    x = np.column_stack([in_deg[idx], out_deg[idx], btw[idx], clus, pr[idx]]).astype(np.float64)
    return [names[i] for i in chosen], x


def silhouette(dist: np.ndarray, labels: np.ndarray) -> float:
    """Mean silhouette (scikit-learn's ``silhouette_score``) from a square distance matrix:
    a = mean distance to the other members of one's cluster, b = the least mean distance to
    another cluster's members, s = (b - a) / max(a, b), 0 in a singleton cluster; -1 when the
    labels form a single cluster (no silhouette). One matrix product by the labels' indicator
    instead of a pass a point, so the matrix is computed once for every k."""
    _, lab = np.unique(labels, return_inverse=True)
    k = int(lab.max()) + 1 if len(lab) else 0
    if k < 2:
        return -1.0
    m = len(lab)
    sums = dist @ np.eye(k)[lab]  # (points, clusters): summed distances to each cluster
    freq = np.bincount(lab, minlength=k)
    rows = np.arange(m)
    own = freq[lab]
    a = sums[rows, lab] / np.maximum(own - 1, 1)
    means = sums / freq
    means[rows, lab] = np.inf
    b = means.min(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = (b - a) / np.maximum(a, b)
    s[own == 1] = 0.0
    return float(np.nan_to_num(s).mean())


def cluster_roles(x: np.ndarray, config: RolesConfig | None = None) -> dict[str, Any] | None:
    """Standardise, k-means for each k, pick by silhouette. None if too few distinct agents.
    Runs on one thread (see the module's docstring)."""
    return _drain(_cluster_steps(x, config or RolesConfig()))


_controller: list[ThreadpoolController] = []  # made once: a controller scans the libraries


def _one_thread() -> Any:
    if not _controller:
        _controller.append(ThreadpoolController())
    return _controller[0].limit(limits=1)


def _cluster_steps(x: np.ndarray, cfg: RolesConfig) -> Steps:
    """:func:`cluster_roles` as steps: one k (its k-means restarts and silhouette) a step,
    each on one thread (the limit is lifted between steps, so it never leaks to others)."""
    z = StandardScaler().fit_transform(x)
    distinct = len(np.unique(z, axis=0))
    ks = [k for k in range(cfg.k_range[0], cfg.k_range[1] + 1) if k < distinct]
    if not ks:
        return None
    rng = np.random.RandomState(cfg.seed)
    sample = (rng.choice(len(z), cfg.silhouette_sample, replace=False)
              if len(z) > cfg.silhouette_sample else np.arange(len(z)))
    scores: dict[int, float] = {}
    labels: dict[int, np.ndarray] = {}
    with _one_thread():
        dist = pairwise_distances(z[sample])  # the silhouette's distances, shared by every k
    for k in ks:
        with _one_thread():
            lab = KMeans(n_clusters=k, n_init=cfg.n_init, random_state=cfg.seed).fit_predict(z)
            labels[k] = lab
            scores[k] = silhouette(dist, lab[sample])
        yield
    best = max(scores, key=lambda k: (scores[k], -k))
    lab = labels[best]
    sizes = np.bincount(lab, minlength=best)
    return {"k": best, "silhouette": scores[best], "silhouette_by_k": scores, "labels": lab,
            "sizes": sizes, "periphery_ratio": float(sizes.max() / len(lab))}


class RolesEngine:
    """Periodic role clustering of the cumulative graph. ``graph``: the reducer's shared
    interaction graph (fed by its owner); without one the engine feeds its own."""

    def __init__(self, config: RolesConfig | None = None,
                 graph: InteractionGraph | None = None) -> None:
        self.config = config or RolesConfig()
        self._own_graph = graph is None
        self.graph = graph or InteractionGraph()
        self._due: float | None = None
        self._ran_at_interactions = 0
        self._result: dict[str, Any] | None = None
        self._role: dict[str, int] = {}
        self._at: float | None = None
        self._job: Steps | None = None  # the run in progress, one step a tick
        self._job_input: Arrays | None = None  # the graph it reads, as of its start
        self._job_done = 0  # its steps taken
        self._job_at = 0.0
        self._job_n = 0
        self.runs_total = 0
        self.steps_total = 0

    def __getstate__(self) -> dict[str, Any]:
        # a run in progress is a generator (not picklable): dropped, and due again at once
        # a run in progress is a generator (not picklable): its input and the steps taken are
        # kept instead, and the restored engine replays those steps at its next tick, so it
        # goes on exactly as the original (same graph, same seeds, same step a tick)
        state = {k: v for k, v in self.__dict__.items() if k != "_job"}
        state["_job"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def kinds(self) -> tuple[type, ...]:
        """The event kinds ``update`` reads: none when the graph is another engine's."""
        return (CommentEvent,) if self._own_graph else ()

    @property
    def running(self) -> bool:
        """Whether a run is in progress (spread over the coming ticks)."""
        return self._job_input is not None

    def update(self, item: Item) -> None:
        if self._own_graph and isinstance(item.event, CommentEvent):
            self.graph.update(item)

    def expire(self, now: float) -> None:
        """One tick: a step of the run in progress, or start one when due and grown."""
        if self._job_input is not None:
            self._step()
            return
        if self._due is None:
            self._due = now + self.config.every.total_seconds()
        elif now >= self._due:
            grown = self.graph.interactions_total
            if grown > self._ran_at_interactions * (1 + self.config.min_growth):
                names, src, dst, w = self.graph.arrays()
                self._job_input = (list(names), src, dst, w)
                self._job, self._job_done = self._steps(self._job_input), 0
                self._job_at, self._job_n = now, grown
                self._step()
            self._due = now + self.config.every.total_seconds()

    def _step(self) -> None:
        assert self._job_input is not None
        if self._job is None:  # restored from a checkpoint: catch up with the steps taken
            self._job = self._steps(self._job_input)
            for _ in range(self._job_done):
                next(self._job)
        self.steps_total += 1
        self._job_done += 1
        try:
            next(self._job)
        except StopIteration as stop:
            self._job, self._job_input = None, None
            self._ran_at_interactions = self._job_n
            self._finish(*stop.value)
            self._at = self._job_at

    def refresh(self, now: float | None = None) -> None:
        """Cluster the cumulative graph now, in one go (whatever its growth; a run in
        progress is dropped)."""
        self._job, self._job_input = None, None
        self._ran_at_interactions = self.graph.interactions_total
        self.compute(self.graph)
        self._at = now if now is not None else self.graph.now

    def compute(self, source: InteractionGraph | Mapping[Pair, int]) -> dict[str, Any]:
        """Cluster the given graph now; returns (and keeps) the summary."""
        return self._finish(*_drain(self._steps(source)))

    def _steps(self, source: InteractionGraph | Mapping[Pair, int] | Arrays) -> Steps:
        """A whole run as bounded steps; returns (agents, features, clustering)."""
        names, x = yield from _feature_steps(source, self.config)
        res = (yield from _cluster_steps(x, self.config)) if len(names) else None
        return names, x, res

    def _finish(self, names: list[str], x: np.ndarray,
                res: dict[str, Any] | None) -> dict[str, Any]:
        self.runs_total += 1
        if res is None:
            self._result, self._role = {"agents": len(names)}, {}
            return self._result
        lab = res["labels"]
        # clusters ordered by size, so role 0 is always the periphery
        order = np.argsort(-res["sizes"], kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        self._role = dict(zip(names, rank[lab].tolist(), strict=True))
        profiles = [{"role": int(r), "agents": int(res["sizes"][c]),
                     **{f: float(v) for f, v in zip(FEATURES, x[lab == c].mean(axis=0),
                                                    strict=True)}}
                    for r, c in enumerate(order)]
        self._result = {"agents": len(names), "k": res["k"], "silhouette": res["silhouette"],
                        "silhouette_by_k": {str(k): v for k, v in res["silhouette_by_k"].items()},
                        "periphery_ratio": res["periphery_ratio"], "roles": profiles}
        return self._result

    def roles(self) -> dict[str, int]:
        """Every clustered agent's role at the last run (0 = the periphery)."""
        return dict(self._role)

    def agent(self, name: str) -> dict[str, Any] | None:
        """An agent's role (0 = the largest cluster, the periphery) at the last run."""
        role = self._role.get(name)
        return None if role is None else {"agent": name, "role": role, "periphery": role == 0}

    def snapshot(self) -> Snapshot:
        r = self._result or {}
        samples = [Sample("roles_runs_total", float(self.runs_total), kind="counter")]
        if "k" in r:
            samples += [
                Sample("roles_periphery_ratio", r["periphery_ratio"],
                       help="Share of agents in the largest role cluster"),
                Sample("roles_k", float(r["k"]), help="Role clusters chosen by silhouette"),
                Sample("roles_silhouette", r["silhouette"]),
                Sample("roles_agents", float(r["agents"]), help="Agents clustered"),
            ]
        at = datetime.fromtimestamp(self._at, UTC).isoformat() if self._at is not None else None
        details = {"roles": {**r, "time": at}}
        return Snapshot(samples=samples, details=details)

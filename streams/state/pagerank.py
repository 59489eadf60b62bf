"""Influence in the interaction graph: incremental PageRank on the sliding window, exact
PageRank per day and cumulatively, and the concentration measures of Li et al. (A3).

**The window's PageRank** (:class:`WindowPageRank`): the window's edges live in slot arrays
updated in place from the window's net weight changes (O(changed edges) a batch); at each
refresh (every ``step``, 5 min) the PageRank operator is iterated, warm-started from the last
vector, until the L1 change is below ``tol`` (1e-3): the operator is an alpha-contraction in
L1, so the result is within ``alpha / (1 - alpha) * tol`` = 5.7e-3 of the exact PageRank
(networkx's semantics: uniform teleport and dangling redistribution). Tests hold it to
networkx (L1 <= 0.02 and top-10 overlap >= 0.9, the earlier Monte-Carlo bounds) and to
that 5.7 tol bound against the exact power iteration. It replaces the incremental Monte-Carlo walks
(Bahmani et al.), whose pure-Python walk upkeep cost ~50 us an event on real streams for a
noisier estimate (L1 ~0.007).

Cost: a refresh applies the window's net changes, keyed by the interaction graph's pair slots
and agent indices (one compiled pass over the changes,
:func:`streams.state.pagerank_kernels.window_apply`: no name is hashed), and iterates a
product over the window's edge slots (one compiled pass over the slots an iteration,
:func:`streams.state.pagerank_kernels.power_iterate`, whose floats are the NumPy iteration's;
no sparse matrix is built); the summaries sort the window's agents once in NumPy. Memory:
48 B a window edge slot (x2 slack: ends, weight, key, arrival, free stack), 8 B a pair of
the cumulative graph (its slot by key, x2 slack), ~33 B a node id and 8 B an agent (its node
by key); the names are the graph's list. A checkpoint keeps the slots below the high-water
mark and the node ids in use (the key look-ups are remade).

Exact PageRank (:func:`pagerank_exact`, :func:`pagerank_arrays`) is THE power iteration of the
project (day and cumulative graphs, roles, the super-node detector); :func:`largest_gap_cut`
THE super-node rule.

>>> pr = WindowPageRank()
>>> pr.apply({("a", "b"): 2, ("b", "c"): 1, ("c", "a"): 1, ("d", "c"): 1})
>>> exact = pagerank_exact({("a", "b"): 2, ("b", "c"): 1, ("c", "a"): 1, ("d", "c"): 1})
>>> est = pr.scores()
>>> sum(abs(est[k] - exact[k]) for k in exact) < 5.7e-3
True
>>> largest_gap_cut([0.4, 0.35, 0.1, 0.08, 0.07])
2
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Literal

import numpy as np

from streams.events import CommentEvent
from streams.state.base import Item, Sample, Snapshot
from streams.state.graph import Interaction, InteractionGraph, Pair, day_label
from streams.state.pagerank_kernels import power_iterate, transitions, window_apply

TOP_KS = (1, 3, 5, 10)


# ----------------------------------------------------------------------------------------------
# exact reference and concentration measures
# ----------------------------------------------------------------------------------------------
def pagerank_exact(weights: Mapping[Pair, float], alpha: float = 0.85,
                   tol: float = 1e-12, max_iter: int = 1000) -> dict[str, float]:
    """Power-iteration PageRank with networkx's semantics (uniform teleport and dangling
    redistribution, weighted out-edges), iterated to an L1 change below ``tol``: THE exact
    PageRank of the project (the super-node detector and the roles use it too)."""
    names = sorted({u for u, _ in weights} | {v for _, v in weights})
    if not names:
        return {}
    idx = {a: i for i, a in enumerate(names)}
    src = np.fromiter((idx[u] for u, _ in weights), np.int64, len(weights))
    dst = np.fromiter((idx[v] for _, v in weights), np.int64, len(weights))
    w = np.fromiter(weights.values(), np.float64, len(weights))
    p = pagerank_arrays(src, dst, w, len(names), alpha, tol, max_iter)
    return dict(zip(names, p.tolist(), strict=True))


def pagerank_arrays(src: np.ndarray, dst: np.ndarray, w: np.ndarray, n: int,
                    alpha: float = 0.85, tol: float = 1e-12, max_iter: int = 1000,
                    start: np.ndarray | None = None) -> np.ndarray:
    """:func:`pagerank_exact` on edge arrays over nodes 0..n-1 (duplicate pairs add up),
    optionally warm-started from ``start`` (a previous vector: a graph that changed a little
    converges in a few iterations instead of ~log(tol)/log(alpha))."""
    if n == 0:
        return np.zeros(0)
    src, dst = src.astype(np.int64, copy=False), dst.astype(np.int64, copy=False)
    outw, coef = transitions(src, w.astype(np.float64, copy=False), n, False)
    dangling = np.flatnonzero(outw == 0)
    if start is None or len(start) != n or not start.sum() > 0:
        p = np.full(n, 1.0 / n)
    else:
        p = start / start.sum()
    # the product of P^T (entries w / outw[src] at (dst, src)) summed in edge order, as the
    # COO product did: the kernel's floats are the NumPy iteration's
    return power_iterate(src, dst, coef, p, dangling, np.ones(n), alpha, n, tol, max_iter)[0]


def top_mass(values_desc: Sequence[float], ks: Sequence[int] = TOP_KS) -> dict[int, float]:
    """PageRank mass held by the top k agents (values sorted descending)."""
    csum = np.cumsum(np.asarray(values_desc, dtype=float))
    return {k: float(csum[min(k, len(csum)) - 1]) if len(csum) else 0.0 for k in ks}


def largest_gap_cut(values_desc: Sequence[float], tie: float = 1e-9) -> int:
    """Li et al.'s super-node rule: k* = argmax_i (PR_i - PR_(i+1)) over the sorted values;
    the top k* agents are super-nodes. Choices the paper leaves open: equal gaps (within
    ``tie``) cut at the first; the cut never splits agents tied with the k*-th; when every
    agent is tied there is no super-node (k* = 0); a single agent is its own super-node."""
    v = np.asarray(values_desc, dtype=float)
    if len(v) < 2:
        return len(v)
    gaps = v[:-1] - v[1:]
    if gaps.max() <= tie:
        return 0
    k = int(np.flatnonzero(gaps >= gaps.max() - tie)[0]) + 1  # first of (near-)equal gaps
    while k < len(v) and v[k - 1] - v[k] <= tie:
        k += 1
    return k


def jaccard(a: set[str], b: set[str]) -> float:
    return 1.0 if not a and not b else len(a & b) / len(a | b)


def ranked(scores: Mapping[str, float]) -> list[tuple[str, float]]:
    """Agents by descending score (ties by name, so the order is deterministic)."""
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


class Names(Sequence[str]):
    """Agent names by position, read through an index array from a name list (no per-agent
    Python work until a name is asked for)."""

    __slots__ = ("ids", "names")

    def __init__(self, ids: np.ndarray, names: Sequence[str | None]) -> None:
        self.ids, self.names = ids, names

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> str:  # type: ignore[override]
        return self.names[self.ids[i]]  # type: ignore[return-value]

    def __iter__(self):  # type: ignore[no-untyped-def]
        names = self.names
        return (names[i] for i in self.ids.tolist())


def _grown(a: np.ndarray, size: int, fill: float) -> np.ndarray:
    """``a`` with room for ``size`` entries (at least doubled when it grows), the new ones
    ``fill``."""
    if len(a) >= size:
        return a
    return np.concatenate([a, np.full(max(size, 2 * len(a)) - len(a), fill, a.dtype)])


# ----------------------------------------------------------------------------------------------
# the window's PageRank, kept current
# ----------------------------------------------------------------------------------------------
class WindowPageRank:
    """PageRank of a changing weighted digraph (the sliding window), kept current from batches
    of net weight changes.

    Edges come keyed by stable integers: an edge key and its two agents' keys (the
    interaction graph's pair slots and agent indices: :meth:`apply_keys`), or by their names
    (:meth:`apply`, which keys them here). Nodes get recycled integer ids and each distinct
    edge a slot in three arrays (source, target, weight) updated in place: a batch is one
    compiled pass over its changes (:func:`streams.state.pagerank_kernels.window_apply`).
    :meth:`vector` then runs the PageRank operator ``p -> alpha (P^T p + dangling(p)/n) +
    (1 - alpha)/n`` (one pass over the live slots an iteration), warm-started from the
    previous vector, until the L1 change is below ``tol``: as the operator is an
    alpha-contraction in L1, the result is within ``alpha / (1 - alpha) * tol`` (5.7 tol,
    5.7e-3 by default) of the exact PageRank, networkx's semantics. A window that moved a
    little since the last refresh converges in a few iterations.
    """

    # counts (one array, the kernel's in/out): node ids ever, free ids, free slots, high-water
    # mark of the slots, creation sequence, live edges, live nodes
    _IDS, _FREE_IDS, _FREE_SLOTS, _HI, _SEQ, _EDGES, _NODES = range(7)

    def __init__(self, alpha: float = 0.85, tol: float = 1e-3, max_iter: int = 1000) -> None:
        if not 0.0 < alpha < 1.0 or tol <= 0:
            raise ValueError("need 0 < alpha < 1 and tol > 0")
        self.alpha, self.tol, self.max_iter = alpha, tol, max_iter
        self._names: Sequence[str] = []  # agent names by key (the caller's list: it only grows)
        # the keys of apply()'s named edges (apply_keys's callers key edges themselves)
        self._key: dict[Pair, int] = {}
        self._key_ends: dict[str, int] = {}
        self._slot_of = np.zeros(0, np.int64)  # edge key: its slot, -1 none
        self._node_of = np.zeros(0, np.int64)  # agent key: its node id, -1 none
        self._agent = np.zeros(0, np.int64)  # node id: its agent key, -1 free
        self._deg = np.zeros(0, np.int64)  # distinct incident edges; a node lives while > 0
        self._free_nodes = np.zeros(0, np.int64)  # a stack: the last freed id is reused first
        self._free_slots = np.zeros(0, np.int64)  # a stack, lowest slot on top
        self._slot_key = np.zeros(0, np.int64)  # slot: its edge key, -1 free
        self._slot_seq = np.zeros(0, np.int64)  # slot: when its edge came (compaction order)
        self._es = np.zeros(0, np.int64)
        self._ed = np.zeros(0, np.int64)
        self._ew = np.zeros(0, np.float64)
        self._p = np.zeros(0)
        self._alive = np.zeros(0, bool)
        self._counts = np.zeros(7, np.int64)
        self._dirty = False
        self.iterations = 0  # of the last computation

    _SLOT_ARRAYS = ("_es", "_ed", "_ew", "_slot_key", "_slot_seq")
    _NODE_ARRAYS = ("_agent", "_deg", "_p", "_alive")

    def __getstate__(self) -> dict[str, Any]:
        # the slots below the high-water mark and the node ids in use (the rest is free and
        # zero), the stacks' live parts; the key look-ups are remade from the slots and nodes
        state = dict(self.__dict__)
        hi, ids = self._hi, int(self._counts[self._IDS])
        state["_sizes"] = (len(self._es), len(self._agent), len(self._slot_of),
                           len(self._node_of))
        for name in self._SLOT_ARRAYS:
            state[name] = state[name][:hi]
        for name in self._NODE_ARRAYS:
            state[name] = state[name][:ids]
        state["_free_slots"] = self._free_slots[: self._counts[self._FREE_SLOTS]]
        state["_free_nodes"] = self._free_nodes[: self._counts[self._FREE_IDS]]
        del state["_slot_of"], state["_node_of"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        slots, nodes, keys, agents = state.pop("_sizes")
        self.__dict__.update(state)
        fills = {"_agent": -1, "_slot_key": -1}
        for name, size in [(a, slots) for a in self._SLOT_ARRAYS] + [
                (a, nodes) for a in (*self._NODE_ARRAYS, "_free_nodes")] + [
                ("_free_slots", slots)]:
            a = getattr(self, name)
            grown = np.full(size, fills.get(name, 0), a.dtype)
            grown[: len(a)] = a
            setattr(self, name, grown)
        self._slot_of = np.full(keys, -1, np.int64)
        live = np.flatnonzero(self._slot_key >= 0)
        self._slot_of[self._slot_key[live]] = live
        self._node_of = np.full(agents, -1, np.int64)
        used = np.flatnonzero(self._agent >= 0)
        self._node_of[self._agent[used]] = used

    @property
    def n_nodes(self) -> int:
        return int(self._counts[self._NODES])

    @property
    def n_edges(self) -> int:
        return int(self._counts[self._EDGES])

    @property
    def _hi(self) -> int:
        """Slots in use lie below: free slots are reused lowest first."""
        return int(self._counts[self._HI])

    def apply(self, delta: Mapping[Pair, int]) -> None:
        """Apply one batch of net edge-weight changes ``{(src, dst): +/-units}`` by names:
        the pairs and names get keys here (do not mix with :meth:`apply_keys`)."""
        names: list[str] = self._names  # type: ignore[assignment]
        ends = self._key_ends
        keys: list[int] = []
        src: list[int] = []
        dst: list[int] = []
        key_of = self._key
        for pair in delta:
            for name in pair:
                if name not in ends:
                    ends[name] = len(names)
                    names.append(name)
            keys.append(key_of.setdefault(pair, len(key_of)))
            src.append(ends[pair[0]])
            dst.append(ends[pair[1]])
        self.apply_keys(np.array(keys, np.int64), np.fromiter(delta.values(), np.int64,
                                                                len(delta)),
                        np.array(src, np.int64), np.array(dst, np.int64), names)

    def apply_keys(self, keys: np.ndarray, units: np.ndarray, src: np.ndarray,
                   dst: np.ndarray, names: Sequence[str]) -> None:
        """Apply one batch of net weight changes: edge key ``keys[i]`` (distinct; an edge
        keeps its key), from agent ``src[i]`` to ``dst[i]`` (keys into ``names``, a list
        that only grows), changes by ``units[i]``. New edges take slots in the batch's
        order; only new and vanishing edges touch the node index."""
        self._names = names
        if not len(keys):
            return
        keys, units = keys.astype(np.int64, copy=False), units.astype(np.int64, copy=False)
        src, dst = src.astype(np.int64, copy=False), dst.astype(np.int64, copy=False)
        self._slot_of = _grown(self._slot_of, int(keys.max()) + 1, -1)
        self._node_of = _grown(self._node_of, int(max(src.max(), dst.max())) + 1, -1)
        slots = self._slot_of[keys]
        fresh = (slots < 0) & (units != 0) & (src != dst)
        old = slots >= 0
        if (units[fresh] < 0).any() or (self._ew[slots[old]] + units[old] < 0).any():
            raise ValueError("edge weight would go negative: expiry of an edge never added")
        new = int(fresh.sum())
        while self._counts[self._FREE_SLOTS] < new:
            self._grow_slots()
        ids = int(self._counts[self._IDS]) + 2 * new  # node ids the batch may reach
        if ids > len(self._agent):
            size = max(64, 2 * ids)
            self._agent = _grown(self._agent, size, -1)
            self._deg = _grown(self._deg, size, 0)
            self._free_nodes = _grown(self._free_nodes, size, 0)
            self._p = _grown(self._p, size, 0.0)
            self._alive = _grown(self._alive, size, False)
        if window_apply(keys, units, src, dst, self._slot_of, self._node_of, self._agent,
                        self._deg, self._free_nodes, self._free_slots, self._slot_key,
                        self._slot_seq, self._es, self._ed, self._ew, self._p, self._alive,
                        self._counts):
            self._dirty = True

    def _grow_slots(self) -> None:
        """Twice the slots (64 at least); the new ones go under the free stack, lowest on top:
        taken in slot order once the free slots before them are."""
        n = len(self._es)
        size = max(64, 2 * n)
        self._es, self._ed = _grown(self._es, size, 0), _grown(self._ed, size, 0)
        self._ew = _grown(self._ew, size, 0.0)
        self._slot_key = _grown(self._slot_key, size, -1)
        self._slot_seq = _grown(self._slot_seq, size, 0)
        free = int(self._counts[self._FREE_SLOTS])
        stack = np.empty(size, np.int64)
        stack[: size - n] = np.arange(size - 1, n - 1, -1)
        stack[size - n: size - n + free] = self._free_slots[:free]
        self._free_slots = stack
        self._counts[self._FREE_SLOTS] = free + size - n

    def _compact(self) -> None:
        """Move the live edges to the first slots, in the order they came, once fewer than
        half the slots below the high-water mark are live (after a window shrank): O(live
        edges), at most once per halving, so the iteration's pass stays within 2x the live
        edges."""
        hi = self._hi
        live = np.flatnonzero(self._slot_key[:hi] >= 0)
        old = live[np.argsort(self._slot_seq[live], kind="stable")]
        m = len(old)
        for a in (self._es, self._ed, self._ew, self._slot_key, self._slot_seq):
            a[:m] = a[old]
            a[m:] = 0
        self._slot_key[m:] = -1
        self._slot_of[self._slot_key[:m]] = np.arange(m)
        size = len(self._es)
        self._free_slots[: size - m] = np.arange(size - 1, m - 1, -1)  # lowest first
        self._counts[self._FREE_SLOTS] = size - m
        self._counts[self._HI] = m

    def vector(self) -> tuple[Names, np.ndarray]:
        """(agent names, PageRank) over the live nodes, brought up to date."""
        size = int(self._counts[self._IDS])
        alive = self._alive[:size]
        ids = np.flatnonzero(alive)
        n = len(ids)
        if not n:
            return Names(ids, self._names), np.zeros(0)
        if self._dirty:
            if self._hi > 1024 and 2 * self.n_edges < self._hi:
                self._compact()
            # every slot below the high-water mark, free ones included (weight 0: they add
            # nothing); COO: the product runs straight over the slots, no sort into CSR
            hi = self._hi
            es, ed, ew = self._es[:hi], self._ed[:hi], self._ew[:hi]
            outw, coef = transitions(es, ew, size, True)
            dangling_at = np.flatnonzero(alive & (outw == 0))
            p = self._p[:size].copy()
            p[alive & (p == 0)] = 1.0 / n  # fresh nodes
            p /= p.sum()
            # a dead node's teleport is 0.0 (it adds 0.0: the same sums); P^T p summed over
            # the slots in slot order, as np.bincount did
            p, it = power_iterate(es, ed, coef, p,
                                  dangling_at, alive.astype(np.float64), self.alpha, n,
                                  self.tol, self.max_iter)
            self.iterations = it
            self._p[:size] = p
            self._dirty = False
        return Names(self._agent[ids], self._names), self._p[ids]

    def scores(self) -> dict[str, float]:
        names, p = self.vector()
        return dict(zip(names, p.tolist(), strict=True))


# ----------------------------------------------------------------------------------------------
# the engine
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class InfluenceConfig:
    """Settings of :class:`InfluenceEngine` (defaults in brackets).

    window [24 h] and step [5 min]: the sliding window and how often it advances (PageRank
    refresh, super-nodes, turnover). The step is THE default (settings read it from here):
    each refresh costs a pass over the window's edges and a sort of its agents, so 5 min keeps
    it near 12 us an event at a Moltbook peak day (1 M events) where 60 s would cost ~5x that,
    and the super-node detector's latency stays well under its hour-scale signal.
    alpha [0.85]; tol [1e-3]: the window PageRank's L1 stopping change (its L1 error is at
    most 5.7 tol, see :class:`WindowPageRank`); retain_days [3]: raw per-day graphs kept (older days
    keep only their summary); cumulative_every [1 h] and cumulative_growth [0.05]: the exact
    cumulative PageRank is recomputed (warm-started) at most once an hour and only once the
    interactions grew by 5 % since the last time, so its total cost stays proportional to
    the final graph (amortised O(1) an interaction); day_growth [0.25]: likewise for an open
    day's exact PageRank (a closed day's is always exact); top_n [20]: length of the top-k
    lists; history [500]: agents kept in the super-node history; days_kept [400]: per-day
    summaries kept.
    """

    window: timedelta = timedelta(hours=24)
    step: timedelta = timedelta(minutes=5)
    alpha: float = 0.85
    tol: float = 1e-3
    retain_days: int = 3
    cumulative_every: timedelta = timedelta(hours=1)
    cumulative_growth: float = 0.05
    day_growth: float = 0.25
    top_n: int = 20
    history: int = 500
    days_kept: int = 400


@dataclass(slots=True)
class _Summary:
    """Concentration summary of one graph's PageRank."""

    nodes: int
    edges: int
    top_mass: dict[int, float]
    supernodes: list[str]
    top: list[tuple[str, float]]

    def as_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "edges": self.edges,
                "top_mass": {str(k): v for k, v in self.top_mass.items()},
                "supernodes": self.supernodes,
                "top": [{"agent": a, "pagerank": p} for a, p in self.top]}


def summarise(scores: Mapping[str, float], edges: int, top_n: int = 20) -> _Summary:
    names = list(scores)
    return summarise_vector(names, np.fromiter(scores.values(), np.float64, len(names)), edges,
                            top_n)


def summarise_vector(names: Sequence[str], p: np.ndarray, edges: int,
                     top_n: int = 20) -> _Summary:
    """Top-k mass, super-nodes (:func:`largest_gap_cut`) and the top list of a PageRank
    vector: a NumPy sort of its head (:func:`_head_cut`; of every value when the gap rule
    needs them), no per-agent Python work beyond the super-nodes and the top
    list. Ties are ordered by name (deterministic)."""
    if not len(p):
        return _Summary(0, edges, top_mass([]), [], [])
    values, k = _head_cut(p, top_n)
    head = max(k, top_n)
    # names break ties within the head (the cut never splits a tie, so this is the order)
    cut = values[min(head, len(values)) - 1]
    tied = np.flatnonzero(p >= cut)
    ordered = sorted((-float(p[i]), names[i]) for i in tied.tolist())
    top = [(a, -v) for v, a in ordered]
    return _Summary(len(p), edges, top_mass(values), [a for a, _ in top[:k]], top[:top_n])


HEAD = 256  # the largest values :func:`_head_cut` sorts first


def _head_cut(p: np.ndarray, top_n: int = 20) -> tuple[np.ndarray, int]:
    """(values, :func:`largest_gap_cut` of ``p`` sorted descending), ``values`` the sorted head
    of ``p`` the cut and the top ``top_n`` read, else all of it sorted. The head, the
    ``HEAD + 1`` largest values, is sorted out of the values above a threshold taken from a
    strided sample (~1,000 of them, not every agent's; no ``np.partition``, which crawls on a
    vector three quarters of whose values tie at the minimum, as a window's do). No gap below
    the head exceeds the spread of the rest (its largest value minus ``p.min()``; float
    subtraction is monotone), so when the head's largest gap beats that spread by more than
    the tie and the cut stops inside the head, the full sort's gaps give the same cut."""
    n, tie = len(p), 1e-9
    if n > 4 * HEAD and top_n < HEAD:
        sample = np.sort(p[::16])
        above = p[p >= sample[-(HEAD // 4)]]  # all values at or above it: the head among them
        if len(above) > HEAD:
            head = -np.sort(-above)[: HEAD + 1]
            top = (head[:-1] - head[1:]).max()
            if top > tie and top - tie > head[-1] - p.min():
                k = largest_gap_cut(head, tie)  # the head's gaps decide, as the rest's can't
                if k < HEAD:
                    return head, k
    values = -np.sort(-p)  # descending: the gap rule reads every gap
    return values, largest_gap_cut(values)


def _rank(names: Sequence[str], p: np.ndarray, i: int) -> int:
    """1-based rank of agent ``i`` (ties by name), O(agents) on demand."""
    tied = np.flatnonzero(p == p[i])
    return 1 + int(np.sum(p > p[i])) + sum(names[j] < names[i] for j in tied.tolist())


@dataclass(slots=True)
class _Persistence:
    first_seen: float
    last_seen: float
    windows: int = 0
    streak_start: float | None = None
    longest_seconds: float = 0.0


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


class InfluenceEngine:
    """PageRank, top-k mass and super-nodes of the window, of each day and of the cumulative
    graph; super-node turnover (Jaccard between consecutive windows and consecutive days) and
    persistence. Feed items with :meth:`update` (or reducer facts with :meth:`add`) and drive
    time (unix seconds) with :meth:`expire`; the window advances (and PageRank refreshes)
    every ``step``.

    Cost: an event is a graph update (a few us). A refresh applies the window's net changes to
    the walks (work proportional to the changed nodes' stored visits), smooths over the
    window's edge arrays and sorts the window's agents once (NumPy); the exact day and
    cumulative PageRanks run only after their graph grew by ``day_growth`` /
    ``cumulative_growth``, warm-started, so their total cost is proportional to the final
    graph, not to (graph x refreshes).
    """

    def __init__(self, config: InfluenceConfig | None = None,
                 graph: InteractionGraph | None = None) -> None:
        self.config = cfg = config or InfluenceConfig()
        self.graph = graph or InteractionGraph(cfg.window, cfg.retain_days)
        self.pagerank = WindowPageRank(cfg.alpha, cfg.tol)
        self._step = cfg.step.total_seconds()
        self._next_step: float | None = None
        self._window: _Summary | None = None
        self._win: tuple[list[str], np.ndarray] = ([], np.zeros(0))
        self._win_index: dict[str, int] | None = None
        self._window_time: float | None = None
        self._turnover: float | None = None
        self._cum: _Summary | None = None
        self._cum_p = np.zeros(0)
        self._cum_n = 0  # interactions behind the cumulative vector
        self._cum_due: float = -math.inf
        self._days: dict[int, dict[str, Any]] = {}  # closed days' summaries
        # open days: (interactions, summary, agent ids, PageRank) of the last computation
        self._open_cache: dict[int, tuple[int, _Summary, np.ndarray, np.ndarray]] = {}
        self._persist: dict[str, _Persistence] = {}
        self._streaks_total = 0
        self._streak_seconds_sum = 0.0
        self.refreshes_total = 0

    kinds: ClassVar[tuple[type, ...]] = (CommentEvent,)  # the event kinds ``update`` reads

    # -- ingestion ---------------------------------------------------------------------------
    def update(self, item: Item) -> Interaction | None:
        return self.graph.update(item)

    def add(self, edge: Interaction) -> None:
        self.graph.add(edge)

    def expire(self, now: float) -> None:
        """Advance event time; refresh the window at each ``step`` boundary passed."""
        for d, weights in self.graph.expire(now).items():
            self._close_day(d, weights)
        step = self._step
        if self._next_step is None:
            self._next_step = (now // step + 1) * step
        elif now >= self._next_step:
            self.refresh(now)
            self._next_step = (now // step + 1) * step

    def refresh(self, now: float | None = None, *, full: bool = False) -> None:
        """Bring the window PageRank up to date and evaluate the window; ``full`` also brings
        every open day's and the cumulative exact PageRank up to date (end of a replay)."""
        now = now if now is not None else self.graph.now or 0.0
        slots, units = self.graph.drain_changes()
        self.pagerank.apply_keys(slots, units, *self.graph.ends(slots),
                                 self.graph.agent_names())
        names, p = self.pagerank.vector()
        summary = summarise_vector(names, p, self.graph.window_edges, self.config.top_n)
        if self._window is not None:
            self._turnover = jaccard(set(self._window.supernodes), set(summary.supernodes))
        self._track(summary.supernodes, now)
        self._window, self._window_time = summary, now
        self._win, self._win_index = (names, p), None
        for d in self.graph.days:  # open days, when grown enough
            self._day_summary(d, 0.0 if full else self.config.day_growth)
        total = self.graph.interactions_total
        if full or (now >= self._cum_due and total > self._cum_n * (
                1 + self.config.cumulative_growth)):
            names_c, src, dst, w = self.graph.arrays()
            start = np.concatenate([self._cum_p, np.full(len(names_c) - len(self._cum_p),
                                                         1.0 / max(len(names_c), 1))])
            self._cum_p = pagerank_arrays(src, dst, w, len(names_c), self.config.alpha,
                                          start=start)
            self._cum = summarise_vector(names_c, self._cum_p, len(src), self.config.top_n)
            self._cum_n = total
            self._cum_due = now + self.config.cumulative_every.total_seconds()
        self.refreshes_total += 1

    # -- days --------------------------------------------------------------------------------
    def _day_summary(self, d: int, growth: float) -> _Summary:
        """An open day's exact PageRank summary, recomputed (warm-started from the day's last
        vector) once the day's interactions grew by ``growth``; 0 = whenever it changed."""
        n = self.graph.day_interactions.get(d, 0)
        hit = self._open_cache.get(d)
        if hit is not None and (n == hit[0] or (growth and n <= hit[0] * (1 + growth))):
            return hit[1]
        src, dst, w = self.graph.day_arrays(d)
        m = len(src)
        ids, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
        start = None
        if hit is not None and len(hit[2]):
            prev_ids, prev_p = hit[2], hit[3]
            pos = np.minimum(np.searchsorted(prev_ids, ids), len(prev_ids) - 1)
            start = np.where(prev_ids[pos] == ids, prev_p[pos], 1.0 / len(ids))
        p = pagerank_arrays(inv[:m], inv[m:], w, len(ids), self.config.alpha, start=start)
        summary = summarise_vector(Names(ids, self.graph.agent_names()), p, m,
                                   self.config.top_n)
        self._open_cache[d] = (n, summary, ids, p)
        return summary

    def _close_day(self, d: int, weights: Mapping[Pair, int]) -> None:
        """A day left the graph's retention: its summary, exact, is kept."""
        hit = self._open_cache.pop(d, None)
        if hit is not None and hit[0] == sum(weights.values()):
            summary = hit[1]
        else:  # changed since its last computation (or never computed): once, from the dict
            summary = summarise(pagerank_exact(weights, self.config.alpha), len(weights),
                                self.config.top_n)
        self._days[d] = summary.as_dict()
        while len(self._days) > self.config.days_kept:
            del self._days[min(self._days)]

    def daily(self) -> dict[str, dict[str, Any]]:
        """Per-day summaries (closed and open days) with super-node turnover vs the day before;
        an open day's figures are as of its last exact computation (see ``day_growth``)."""
        days = dict(self._days)
        for d in self.graph.days:
            hit = self._open_cache.get(d)
            days[d] = (hit[1] if hit else self._day_summary(d, 0.0)).as_dict()
        out: dict[str, dict[str, Any]] = {}
        prev: set[str] | None = None
        prev_day: int | None = None
        for d in sorted(days):
            row = dict(days[d])
            cur = set(row["supernodes"])
            consecutive = prev_day is not None and d - prev_day == 1
            row["supernode_turnover_jaccard"] = (jaccard(prev, cur)
                                                 if consecutive and prev is not None else None)
            out[day_label(d)] = row
            prev, prev_day = cur, d
        return out

    # -- super-node persistence --------------------------------------------------------------
    def _track(self, supernodes: list[str], now: float) -> None:
        current = set(supernodes)
        for agent, rec in self._persist.items():
            if rec.streak_start is not None and agent not in current:
                self._end_streak(rec)
        # in the ranked list's order, not the set's: the history's order (a detail) must not
        # hang on the process's string hash seed (live workers and the replay differ)
        for agent in dict.fromkeys(supernodes):
            rec = self._persist.get(agent)
            if rec is None:
                rec = self._persist[agent] = _Persistence(now, now)
            if rec.streak_start is None:
                rec.streak_start = now
            rec.last_seen = now
            rec.windows += 1
        if len(self._persist) > self.config.history:  # forget the longest-gone agents
            idle = [(r.last_seen, a) for a, r in self._persist.items() if r.streak_start is None]
            for _, agent in heapq.nsmallest(len(self._persist) - self.config.history, idle):
                del self._persist[agent]

    def _end_streak(self, rec: _Persistence) -> None:
        assert rec.streak_start is not None
        seconds = rec.last_seen - rec.streak_start + self._step
        rec.longest_seconds = max(rec.longest_seconds, seconds)
        self._streaks_total += 1
        self._streak_seconds_sum += seconds
        rec.streak_start = None

    # -- output ------------------------------------------------------------------------------
    def agent(self, name: str) -> dict[str, Any] | None:
        """An agent's window and cumulative rank and PageRank, and its super-node record."""
        names, p = self._win
        if self._win_index is None:
            self._win_index = {a: i for i, a in enumerate(names)}
        wi = self._win_index.get(name)
        ci = self.graph._index.get(name)
        if ci is not None and ci >= len(self._cum_p):
            ci = None
        if wi is None and ci is None:
            return None
        names_c = self.graph._names
        rec = self._persist.get(name)
        return {
            "agent": name,
            "window": None if wi is None else {"rank": _rank(names, p, wi),
                                               "pagerank": float(p[wi]), "of": len(p)},
            "cumulative": None if ci is None else {
                "rank": _rank(names_c, self._cum_p, ci), "pagerank": float(self._cum_p[ci]),
                "of": len(self._cum_p)},
            "supernode": self._window is not None and name in self._window.supernodes,
            "supernode_history": None if rec is None else self._persist_dict(rec),
        }

    def scores(self, graph: Literal["window", "cumulative"] = "window") -> dict[str, float]:
        """The latest PageRank vector of the window or of the cumulative graph (O(agents))."""
        if graph == "window":
            names, p = self._win
        else:
            names, p = self.graph._names[:len(self._cum_p)], self._cum_p
        return dict(zip(names, p.tolist(), strict=True))

    def supernode_records(self) -> dict[str, dict[str, Any]]:
        """Every agent with a super-node record (bounded by ``config.history``)."""
        return {name: self._persist_dict(rec) for name, rec in self._persist.items()}

    def _persist_dict(self, rec: _Persistence) -> dict[str, Any]:
        return {"first_seen": _iso(rec.first_seen), "last_seen": _iso(rec.last_seen),
                "windows": rec.windows, "current_streak_since":
                    _iso(rec.streak_start) if rec.streak_start is not None else None,
                "longest_streak_seconds": rec.longest_seconds}

    def snapshot(self) -> Snapshot:
        samples: list[Sample] = []
        days = self.daily()
        graphs: dict[str, dict[str, Any]] = {}
        if self._window is not None:
            graphs["window"] = self._window.as_dict()
        if days:
            graphs["day"] = days[max(days)]
        if self._cum is not None:
            graphs["cumulative"] = self._cum.as_dict()
        for g, s in graphs.items():
            for k, v in s["top_mass"].items():
                samples.append(Sample("pagerank_top_mass", v, (("graph", g), ("k", k)),
                                      help="PageRank mass held by the top k agents"))
            samples.append(Sample("supernodes", float(len(s["supernodes"])), (("graph", g),),
                                  help="Agents above the largest PageRank gap"))
        if self._turnover is not None:
            samples.append(Sample("supernode_turnover_jaccard", self._turnover,
                                  (("graph", "window"),),
                                  help="Jaccard of super-nodes, consecutive windows"))
        if days and days[max(days)]["supernode_turnover_jaccard"] is not None:
            samples.append(Sample("supernode_turnover_jaccard",
                                  days[max(days)]["supernode_turnover_jaccard"],
                                  (("graph", "day"),)))
        samples += [
            Sample("supernode_streaks_total", float(self._streaks_total), kind="counter",
                   help="Completed super-node streaks (consecutive windows)"),
            Sample("supernode_streak_seconds_mean", self._streak_seconds_sum / self._streaks_total
                   if self._streaks_total else 0.0, help="Mean completed super-node streak"),
            Sample("pagerank_refreshes_total", float(self.refreshes_total), kind="counter"),
            Sample("pagerank_window_iterations", float(self.pagerank.iterations),
                   help="Power iterations of the last window refresh (warm-started)"),
        ]
        details = {
            "pagerank_window": None if self._window is None else
            {**self._window.as_dict(), "time": _iso(self._window_time)
             if self._window_time is not None else None,
             "supernode_turnover_jaccard": self._turnover},
            "pagerank_cumulative": None if self._cum is None else self._cum.as_dict(),
            "pagerank_daily": days,
            "supernode_history": {a: self._persist_dict(r) for a, r in self._persist.items()},
        }
        out = self.graph.snapshot()
        return Snapshot.merge([out, Snapshot(samples, details)])

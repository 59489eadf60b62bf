"""Cluster tightening: mean cosine to the 10 nearest same-day posts, exact and incremental.

metrics.md A1: for each post p, S_10(p) = mean cosine to its 10 nearest neighbours among the
posts of the same day (self excluded; a day with n <= 10 posts uses its n - 1 others; a day of
one post gives no value). Per day: count, mean, quantiles and a histogram of S_10, and the
Jensen-Shannon divergence between consecutive days' histograms.

Exact, incrementally. Each open window keeps its unit vectors (float32) and, per post, the k
largest similarities to the other posts seen so far. A batch of B new posts costs one
(B x n) matrix product against the window's n posts: the new rows take their top k from it,
and every old row merges the new column values into its own top k. The result equals a batch
exact kNN on the same posts (float32 dot products: about 1e-7 from a float64 reference). A
window's distribution is provisional while it is open (later posts can only raise S_10).

Binning (not published): ``bins`` (default 50) equal-width bins on [``lo``, ``hi``] =
[0, 1]; values outside are clipped into the end bins. JSD is in bits (log base 2, in [0, 1]):
JSD(P, Q) = H(M) - (H(P) + H(Q)) / 2 with M = (P + Q) / 2 (= scipy's ``jensenshannon(p, q,
base=2) ** 2``), between each window and the previous non-empty window.

Memory: an open window holds (dim + k + 1) float32 per post: 1,580 bytes for 384 dims and
k = 10, so 50,000 posts (a Moltbook peak day) take 79 MB (up to 1.5x that: capacity grows by 1.5x).
``open_windows`` (default 2: today and yesterday, for late posts) are kept; when a newer
window opens, or ``expire(now)`` says so, the oldest is closed to its summary (a few hundred
bytes) and its vectors freed; posts for a closed window are counted in ``knn_late_total`` and
skipped. ``max_per_window`` (default 100,000, 158 MB) caps a window:
posts beyond it are counted in ``knn_skipped_total`` and skipped (no approximation is made;
the cap is a guard, well above Moltbook's volume). A post costs one (1 x n) product against
its window, O(n dim), plus a top-k merge only for the old posts it enters (each post keeps
its current k-th best as a threshold), so a day costs O(n^2 dim): about 1e12 flops for 50,000
posts, a few minutes of one core a day. Posts are buffered up to ``batch`` (64) rows and go in
as one matrix product (reads flush first, so every value is as exact as unbuffered).

Input: :meth:`KnnState.update` reads the vector of an admitted post (``item.admitted``, a
:class:`PostEvent` with ``item.vector``); times are unix seconds, windows UTC days (or hours),
shown as ISO dates in the details.

Names: samples ``knn{k}_similarity`` (mean S_k of the current window) and
``knn{k}_js_divergence`` (current vs previous), details under ``knn{k}``: with the default k = 10,
``knn10_similarity`` as in the paper.

Multi-worker: the neighbours of a post are anywhere in its day, so kNN is not mergeable from
partials: the per-partition agents forward (window, vector) to a single-partition topic whose
one consumer holds this state (bounded as above).

>>> import numpy as np
>>> st = KnnState(k=2, dim=2)
>>> day = 20483 * 86400.0  # 2026-01-30
>>> for x in ([1.0, 0.0], [1.0, 0.0], [0.0, 1.0]):
...     st.add(day, np.array(x))
>>> snap = st.snapshot()
>>> snap.value("knn2_similarity")  # S_2 = (1 + 0) / 2 for each of the two (1, 0) posts, 0 else
0.3333333333333333
>>> snap.details["knn2"]["windows"]["2026-01-30"]["count"]
3
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from streams.events import PostEvent
from streams.state.base import Item, Sample, Snapshot
from streams.state.centroid import Window, window_label, window_of

BLOCK = 256  # rows a matrix product: bounds the transient (BLOCK x n) similarity block


@dataclass(slots=True)
class _Open:
    vecs: np.ndarray
    top: np.ndarray  # per post, its k best similarities so far (unordered, -inf padded)
    kth: np.ndarray  # per post, the smallest of them: a new post below it changes nothing
    n: int = 0


@dataclass(frozen=True, slots=True)
class KnnSummary:
    """The distribution of S_k over one window's posts."""

    count: int
    mean: float | None
    quantiles: dict[str, float]
    histogram: list[int]
    closed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "mean": self.mean, "quantiles": self.quantiles,
                "histogram": self.histogram, "closed": self.closed}


def js_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon divergence in bits of two histograms (normalised here).

    >>> js_divergence(np.array([1, 0]), np.array([0, 1]))
    1.0
    """
    p = np.asarray(p, dtype=np.float64) / np.sum(p)
    q = np.asarray(q, dtype=np.float64) / np.sum(q)
    m = (p + q) / 2

    def kl(a: np.ndarray) -> float:
        nz = a > 0
        return float(np.sum(a[nz] * np.log2(a[nz] / m[nz])))

    return (kl(p) + kl(q)) / 2


@dataclass
class KnnState:
    """Exact per-window k-NN mean similarity, its distribution and day-to-day JSD."""

    kinds: ClassVar[tuple[type, ...]] = (PostEvent,)  # the event kinds ``update`` reads

    k: int = 10
    dim: int = 384
    window: Window = "day"
    open_windows: int = 2
    max_per_window: int = 100_000
    bins: int = 50
    lo: float = 0.0
    hi: float = 1.0
    quantiles: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)
    keep_closed: int = 400
    batch: int = 64
    late_total: int = field(default=0, init=False)
    skipped_total: int = field(default=0, init=False)
    _open: dict[int, _Open] = field(default_factory=dict, init=False, repr=False)
    _closed: dict[int, KnnSummary] = field(default_factory=dict, init=False, repr=False)
    _pending: dict[int, list[np.ndarray]] = field(default_factory=dict, init=False, repr=False)
    _pending_rows: int = field(default=0, init=False, repr=False)

    def update(self, item: Item) -> None:
        """Add an admitted post's vector to its window."""
        if item.vector is None or not item.admitted or not isinstance(item.event, PostEvent):
            return
        self.add(item.t, item.vector)

    def add(self, t: float, vector: np.ndarray) -> None:
        """Add one post vector at unix time ``t``."""
        self.add_many(t, np.asarray(vector)[None, :])

    def add_many(self, t: float, vectors: np.ndarray) -> None:
        """Add posts (rows; re-normalised, zero rows ignored) that share the window of ``t``."""
        key = window_of(t, self.window)
        if key in self._closed or (self._closed and key < max(self._closed)) or (
                len(self._open) >= self.open_windows and key < min(self._open)):
            self.late_total += len(vectors)
            return
        v = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(v, axis=1)
        v = v[norms > 0] / norms[norms > 0, None]
        if key not in self._open:
            self._open[key] = _Open(np.empty((0, self.dim), np.float32),
                                    np.empty((0, self.k), np.float32), np.empty(0, np.float32))
            self.expire()
        # Posts wait for `batch` rows (or any read) and then go in as one matrix product:
        # the same result, many times cheaper than one product a post.
        self._pending.setdefault(key, []).append(v)
        self._pending_rows += len(v)
        if self._pending_rows >= self.batch:
            self._flush()

    def _flush(self) -> None:
        for key, parts in self._pending.items():
            day = self._open[key]
            v = np.concatenate(parts)
            room = self.max_per_window - day.n
            if len(v) > room:
                self.skipped_total += len(v) - room
                v = v[:room]
            for i in range(0, len(v), BLOCK):
                self._insert(day, v[i:i + BLOCK])
        self._pending.clear()
        self._pending_rows = 0

    def _insert(self, day: _Open, v: np.ndarray) -> None:
        n, b, k = day.n, len(v), self.k
        if n + b > len(day.vecs):
            cap = min(self.max_per_window, max(len(day.vecs) * 3 // 2, n + b, 64))
            vecs = np.zeros((cap, self.dim), np.float32)  # (its unused rows are pickled too)
            top = np.full((cap, k), -np.inf, np.float32)
            kth = np.full(cap, -np.inf, np.float32)
            vecs[:n], top[:n], kth[:n] = day.vecs[:n], day.top[:n], day.kth[:n]
            day.vecs, day.top, day.kth = vecs, top, kth
        old = day.vecs[:n]
        s_new_old = v @ old.T  # (b, n)
        s_new_new = v @ v.T
        np.fill_diagonal(s_new_new, -np.inf)
        cand = np.concatenate([s_new_old, s_new_new], axis=1)
        day.top[n:n + b] = _top(cand, k, axis=1)
        day.kth[n:n + b] = day.top[n:n + b].min(axis=1)
        if n:
            # only old posts for which some new post beats their current k-th best change
            rows = np.flatnonzero(s_new_old.max(axis=0) > day.kth[:n])
            if len(rows):
                col = _top(s_new_old[:, rows], min(k, b), axis=0).T  # best new values a row
                merged = _top(np.concatenate([day.top[rows], col], axis=1), k, axis=1)
                day.top[rows] = merged
                day.kth[rows] = merged.min(axis=1)
        day.vecs[n:n + b] = v
        day.n = n + b

    def expire(self, now: float | None = None) -> None:
        """Close the oldest open windows beyond ``open_windows`` (counted back from ``now``'s
        window when given, so a quiet stream still closes yesterday); drop old summaries."""
        if self._open:  # (posts wait only in open windows: none open, nothing to flush)
            self._flush()
            cutoff = None
            if now is not None:
                cutoff = window_of(now, self.window) - (self.open_windows - 1)
            while self._open and (len(self._open) > self.open_windows
                                  or (cutoff is not None and min(self._open) < cutoff)):
                oldest = min(self._open)
                s = self._summary(self._open.pop(oldest))
                self._closed[oldest] = KnnSummary(s.count, s.mean, s.quantiles, s.histogram,
                                                  closed=True)
        while len(self._closed) > self.keep_closed:
            del self._closed[min(self._closed)]

    def values(self, label: str) -> np.ndarray:
        """S_k of every post of an open window that has at least one neighbour, arrival order."""
        self._flush()
        return _values(next(d for k, d in self._open.items()
                            if window_label(k, self.window) == label))

    def edges(self) -> np.ndarray:
        return np.linspace(self.lo, self.hi, self.bins + 1)

    def _summary(self, day: _Open) -> KnnSummary:
        vals = _values(day)
        if len(vals) == 0:
            return KnnSummary(0, None, {}, [0] * self.bins)
        hist, _ = np.histogram(np.clip(vals, self.lo, self.hi), bins=self.edges())
        qs = np.quantile(vals, self.quantiles)
        return KnnSummary(len(vals), float(vals.mean()),
                          {f"{q:g}": float(x) for q, x in zip(self.quantiles, qs, strict=True)},
                          [int(h) for h in hist])

    def summaries(self) -> dict[str, KnnSummary]:
        """Every window's summary (closed and open), by ISO label in time order."""
        self._flush()
        out = dict(self._closed)
        out.update({key: self._summary(day) for key, day in self._open.items()})
        return {window_label(k, self.window): s for k, s in sorted(out.items())}

    def nbytes(self) -> int:
        """Bytes held by the open windows' arrays (the bulk of the state)."""
        self._flush()
        return sum(d.vecs.nbytes + d.top.nbytes + d.kth.nbytes for d in self._open.values())

    def snapshot(self) -> Snapshot:
        sums = self.summaries()
        nbytes = self.nbytes()
        keys = [k for k, s in sums.items() if s.count > 0]
        jsd: dict[str, float] = {}
        for prev, cur in zip(keys, keys[1:], strict=False):
            jsd[cur] = js_divergence(np.array(sums[prev].histogram), np.array(sums[cur].histogram))
        name = f"knn{self.k}"
        samples: list[Sample] = []
        if keys:
            samples.append(Sample(f"{name}_similarity", float(sums[keys[-1]].mean or 0.0),
                                  help=f"Mean cosine to the {self.k} nearest same-day posts, "
                                       "current window"))
        if len(keys) > 1:
            samples.append(Sample(f"{name}_js_divergence", jsd[keys[-1]],
                                  help="Jensen-Shannon divergence (bits) of the S_k distribution, "
                                       "current vs previous window"))
        samples += [
            Sample("knn_late_total", float(self.late_total), kind="counter",
                   help="Posts for an already closed window, skipped"),
            Sample("knn_skipped_total", float(self.skipped_total), kind="counter",
                   help="Posts beyond max_per_window, skipped"),
            Sample("knn_state_bytes", float(nbytes), help="Bytes of open-window arrays"),
        ]
        details = {name: {
            "k": self.k, "window": self.window,
            "bins": {"edges": self.edges().tolist(), "clipped": True},
            "windows": {k: s.as_dict() for k, s in sums.items()},
            "js_divergence": jsd,
            "series": [{"window": k, "mean": sums[k].mean, "count": sums[k].count,
                        "js_divergence": jsd.get(k)} for k in sums],
        }}
        return Snapshot(samples=samples, details=details)


def _values(day: _Open) -> np.ndarray:
    top = day.top[:day.n].astype(np.float64)
    finite = np.isfinite(top)
    cnt = finite.sum(axis=1)
    total = np.where(finite, top, 0.0).sum(axis=1)
    return total[cnt > 0] / cnt[cnt > 0]


def _top(m: np.ndarray, k: int, axis: int) -> np.ndarray:
    """The k largest values along axis (unordered), padded with -inf when fewer exist."""
    size = m.shape[axis]
    if size <= k:
        if size == k:
            return m
        pad = [(0, 0), (0, 0)]
        pad[axis] = (0, k - size)
        return np.pad(m, pad, constant_values=-np.inf)
    part = np.partition(m, size - k, axis=axis)
    return part[size - k:] if axis == 0 else part[:, size - k:]

"""Centroid and pairwise similarity per window, exact from running sums (metrics.md A1).

Reads the vectors of admitted posts (``item.admitted``, a :class:`PostEvent` with
``item.vector``); everything else passes by. Per window (UTC day by default, or hour) the state
keeps s = sum of the unit post vectors and n. Everything is exact from these, in float64:

- centroid similarity S(ti, tj) = cos(c_ti, c_tj) = s_i . s_j / (|s_i| |s_j|) (c = s / n);
- pairwise similarity within a window = mean over distinct pairs p != q of cos(v_p, v_q)
  = (|s|^2 - n) / (n (n - 1)); across windows = s_i . s_j / (n_i n_j);
- current (the latest window seen) vs the previous non-empty window and vs the all-time centroid
  (the sum over every window, expired ones included).

Input vectors are re-normalised in float64, so any float16 / int8 decoding is fine. Late events
simply add to their own window: the sums do not care about arrival order.

Details carry the full window x window matrices (centroid and pairwise similarity) of every
retained window (``matrix_windows`` = None, the default) or of the last ``matrix_windows``:
for a finished archive, the paper's whole day-by-day matrices.

Memory: (dim + 1) float64 a window, 3 KB for 384 dims: a year of days is 1.1 MB, a year of
hours 27 MB. ``max_windows`` (default 4,000) drops the oldest windows beyond it (never from the
all-time sum). The per-post cost is one normalisation and one add of ``dim`` floats.

:func:`cosine` and :func:`cosine_matrix` are the project's one cosine (detectors import them).

>>> import numpy as np
>>> from datetime import datetime, timezone
>>> from streams.events import PostEvent
>>> def post(i, day, v):
...     t = datetime(2026, 1, day, 5, tzinfo=timezone.utc)
...     e = PostEvent(id=f"post:{i}", event_time=t, observed_at=t, post_id=str(i), author="a")
...     return Item.of(e, np.array(v))
>>> st = CentroidState(dim=2)
>>> for i, (day, v) in enumerate([(30, [1.0, 0.0]), (30, [0.0, 2.0]), (31, [1.0, 1.0])]):
...     st.update(post(i, day, v))
>>> snap = st.snapshot()
>>> round(snap.value("centroid_similarity", vs="previous"), 6)  # cos((1,1), (1,1))
1.0
>>> snap.value("pairwise_similarity", scope="within")  # one post only: undefined
>>> round(snap.details["pairwise_similarity"]["matrix"][0][0], 6)  # cos((1,0), (0,1))
0.0
>>> snap.details["centroid"]["windows"]
['2026-01-30', '2026-01-31']
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

import numpy as np

from streams.events import PostEvent
from streams.state.base import Item, Sample, Snapshot

Window = Literal["day", "hour"]
WINDOW_SECONDS: dict[str, int] = {"day": 86400, "hour": 3600}


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of two vectors, in float64; nan when either is zero (undefined).

    >>> round(cosine(np.array([1.0, 0.0]), np.array([3.0, 3.0])), 12)
    0.707106781187
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    na, nb = float(np.sqrt(a @ a)), float(np.sqrt(b @ b))
    return float(a @ b) / (na * nb) if na > 0 and nb > 0 else float("nan")


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosines of every row of ``a`` with every row of ``b`` (float64; nan for zero rows).

    >>> cosine_matrix(np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([[1.0, 1.0]])).round(4)
    array([[0.7071],
           [0.7071]])
    """
    a = np.atleast_2d(np.asarray(a, dtype=np.float64))
    b = np.atleast_2d(np.asarray(b, dtype=np.float64))
    na = np.sqrt(np.einsum("ij,ij->i", a, a))
    nb = np.sqrt(np.einsum("ij,ij->i", b, b))
    with np.errstate(divide="ignore", invalid="ignore"):
        return (a @ b.T) / np.outer(na, nb)


def window_of(t: float, window: Window = "day") -> int:
    """The window index of a unix time: whole days (or hours) since the epoch, UTC."""
    return int(t // WINDOW_SECONDS[window])


def window_label(index: int, window: Window = "day") -> str:
    """'YYYY-MM-DD' (day) or 'YYYY-MM-DDTHH' (hour) of a window index.

    >>> window_label(window_of(datetime(2026, 1, 30, 23, 5, tzinfo=UTC).timestamp(), "hour"),
    ...              "hour")
    '2026-01-30T23'
    """
    t = datetime.fromtimestamp(index * WINDOW_SECONDS[window], UTC)
    return t.strftime("%Y-%m-%d") if window == "day" else t.strftime("%Y-%m-%dT%H")


class CentroidState:
    """Running (sum, count) of unit vectors per window; centroid and pairwise similarities."""

    kinds: ClassVar[tuple[type, ...]] = (PostEvent,)  # the event kinds ``update`` reads

    def __init__(self, window: Window = "day", dim: int = 384, max_windows: int = 4000,
                 matrix_windows: int | None = None) -> None:
        self.window: Window = window
        self.dim = dim
        self.max_windows = max_windows
        self.matrix_windows = matrix_windows
        self._sums: dict[int, np.ndarray] = {}
        self._counts: dict[int, int] = {}
        self._all_sum = np.zeros(dim)
        self._all_n = 0
        self.expired_windows = 0

    def update(self, item: Item) -> None:
        """Add an admitted post's vector (any norm > 0; zero vectors are ignored)."""
        v = item.vector
        if v is None or not item.admitted or not isinstance(item.event, PostEvent):
            return
        self.add(item.t, v)

    def add(self, t: float, vector: np.ndarray) -> None:
        """Add one post vector at unix time ``t`` to its window."""
        v = np.asarray(vector, dtype=np.float64)
        norm = float(np.sqrt(v @ v))
        if norm == 0:
            return
        v = v / norm
        key = window_of(t, self.window)
        s = self._sums.get(key)
        if s is None:
            self._sums[key] = v
            self._counts[key] = 1
            self._trim()
        else:
            s += v
            self._counts[key] += 1
        self._all_sum += v
        self._all_n += 1

    def expire(self, now: float) -> None:
        """Windows are bounded by count (``max_windows``): nothing time-based to drop."""

    def _trim(self) -> None:
        while len(self._sums) > self.max_windows:
            oldest = min(self._sums)
            del self._sums[oldest], self._counts[oldest]
            self.expired_windows += 1

    def windows(self) -> list[str]:
        return [window_label(k, self.window) for k in sorted(self._sums)]

    def _key(self, label: str) -> int:
        for k in self._sums:
            if window_label(k, self.window) == label:
                return k
        raise KeyError(label)

    def count(self, label: str) -> int:
        return self._counts[self._key(label)]

    def centroid(self, label: str) -> np.ndarray:
        k = self._key(label)
        return self._sums[k] / self._counts[k]

    def centroid_similarity(self, a: str, b: str) -> float | None:
        return _num(cosine(self._sums[self._key(a)], self._sums[self._key(b)]))

    def pairwise_similarity(self, a: str, b: str) -> float | None:
        """Mean cosine over post pairs of windows a and b (distinct posts when a == b)."""
        ka, kb = self._key(a), self._key(b)
        sa, na = self._sums[ka], self._counts[ka]
        if ka == kb:
            return None if na < 2 else (float(sa @ sa) - na) / (na * (na - 1))
        return float(sa @ self._sums[kb]) / (na * self._counts[kb])

    def snapshot(self) -> Snapshot:
        keys = sorted(self._sums)
        shown = keys if self.matrix_windows is None else keys[-self.matrix_windows:]
        labels = [window_label(k, self.window) for k in shown]
        stack = np.stack([self._sums[k] for k in shown]) if shown else np.zeros((0, self.dim))
        n = np.array([self._counts[k] for k in shown], dtype=np.float64)
        gram = stack @ stack.T
        cent = cosine_matrix(stack, stack)
        with np.errstate(divide="ignore", invalid="ignore"):
            pair = gram / np.outer(n, n)
            diag = np.where(n > 1, (np.diag(gram) - n) / (n * (n - 1)), np.nan)
        if len(shown):
            np.fill_diagonal(pair, diag)
        cur = keys[-1] if keys else None
        prev = keys[-2] if len(keys) > 1 else None
        vs_prev = within = across = vs_all = None
        if cur is not None:
            s_cur, n_cur = self._sums[cur], self._counts[cur]
            vs_all = _num(cosine(s_cur, self._all_sum))
            within = None if n_cur < 2 else (float(s_cur @ s_cur) - n_cur) / (n_cur * (n_cur - 1))
            if prev is not None:
                vs_prev = _num(cosine(s_cur, self._sums[prev]))
                across = float(s_cur @ self._sums[prev]) / (n_cur * self._counts[prev])
        samples: list[Sample] = []
        for name, lab, value, help_ in (
            ("centroid_similarity", (("vs", "previous"),), vs_prev,
             "Cosine of the current window's centroid with the previous window's"),
            ("centroid_similarity", (("vs", "all_time"),), vs_all,
             "Cosine of the current window's centroid with the all-time centroid"),
            ("pairwise_similarity", (("scope", "within"),), within,
             "Mean cosine over distinct post pairs of the current window"),
            ("pairwise_similarity", (("scope", "previous"),), across,
             "Mean cosine over post pairs of the current and previous windows"),
        ):
            if value is not None:
                samples.append(Sample(name, value, lab, help=help_))
        samples.append(Sample("embedded_posts_total", float(self._all_n), kind="counter",
                              help="Post vectors added to the centroid state"))
        cur_l = window_label(cur, self.window) if cur is not None else None
        prev_l = window_label(prev, self.window) if prev is not None else None
        details: dict[str, Any] = {
            "centroid": {"window": self.window, "windows": labels,
                         "counts": [int(c) for c in n], "all_time_posts": self._all_n,
                         "expired_windows": self.expired_windows},
            "centroid_similarity": {
                "windows": labels, "matrix": _rows(cent),
                "current": cur_l, "previous": prev_l,
                "vs_previous": vs_prev, "vs_all_time": vs_all,
            },
            "pairwise_similarity": {
                "windows": labels, "matrix": _rows(pair),
                "within": {k: _num(pair[i, i]) for i, k in enumerate(labels)},
                "current_within": within, "current_vs_previous": across,
            },
        }
        return Snapshot(samples=samples, details=details)


def _num(x: float) -> float | None:
    return None if x != x else float(x)  # nan -> None (JSON has no nan)


def _rows(m: np.ndarray) -> list[list[float | None]]:
    return [[None if x != x else x for x in row] for row in m.tolist()]

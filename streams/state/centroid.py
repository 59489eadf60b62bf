"""Centroid and pairwise similarity per window, exact from running sums (metrics.md A1).

Per window (UTC day by default, or hour) the state keeps s = sum of the unit post vectors and n.
Everything is exact from these, in float64:

- centroid similarity S(ti, tj) = cos(c_ti, c_tj) = s_i . s_j / (|s_i| |s_j|) (c = s / n);
- pairwise similarity within a window = mean over distinct pairs p != q of cos(v_p, v_q)
  = (|s|^2 - n) / (n (n - 1)); across windows = s_i . s_j / (n_i n_j);
- current (the latest window seen) vs the previous non-empty window and vs the all-time centroid
  (the sum over every window, expired ones included).

Input vectors are re-normalised in float64, so any float16 / int8 decoding is fine. Late events
simply add to their own window: the sums do not care about arrival order.

Memory: (dim + 1) float64 a window, 3 KB for 384 dims: a year of days is 1.1 MB, a year of
hours 27 MB. ``max_windows`` (default 4,000) drops the oldest windows beyond it from the matrix
(never from the all-time sum); the snapshot's matrices cover the last ``matrix_windows`` (90).

Multi-worker: per-partition states emit ``partial(reset=True)`` (the sums since the last emit);
a single reducer ``merge``s them. Sums add, so the reduced state equals a single-process one up
to float64 rounding (~1e-15).

>>> import numpy as np
>>> from datetime import datetime, timezone
>>> st = CentroidState(dim=2)
>>> st.update(datetime(2026, 1, 30, 5, tzinfo=timezone.utc), np.array([1.0, 0.0]))
>>> st.update("2026-01-30", np.array([0.0, 2.0]))
>>> st.update("2026-01-31", np.array([1.0, 1.0]))
>>> snap = st.snapshot()
>>> round(snap.value("centroid_similarity", vs="previous"), 6)  # cos((1,1), (1,1))
1.0
>>> snap.value("pairwise_similarity", scope="within")  # one post only: undefined
>>> round(snap.details["pairwise_similarity"]["matrix"][0][0], 6)  # cos((1,0), (0,1))
0.0
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np

from streams.state.base import Sample, Snapshot

Window = Literal["day", "hour"]


def window_key(when: datetime | str, window: Window = "day") -> str:
    """'YYYY-MM-DD' (day) or 'YYYY-MM-DDTHH' (hour) of a UTC time; a string passes through.

    >>> window_key(datetime(2026, 1, 30, 23, 5, tzinfo=UTC), "hour")
    '2026-01-30T23'
    """
    if isinstance(when, str):
        return when
    t = when.astimezone(UTC)
    return t.strftime("%Y-%m-%d") if window == "day" else t.strftime("%Y-%m-%dT%H")


@dataclass(frozen=True, slots=True)
class CentroidPartial:
    """Sums and counts per window, JSON-able through ``as_dict`` / ``from_dict``."""

    window: Window
    dim: int
    sums: dict[str, list[float]]
    counts: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {"window": self.window, "dim": self.dim, "sums": self.sums, "counts": self.counts}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> CentroidPartial:
        return CentroidPartial(d["window"], int(d["dim"]), d["sums"], d["counts"])


def _cos(a: np.ndarray, b: np.ndarray) -> float | None:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return None if na == 0 or nb == 0 else float(a @ b) / (na * nb)


class CentroidState:
    """Running (sum, count) of unit vectors per window; centroid and pairwise similarities."""

    def __init__(self, window: Window = "day", dim: int = 384, max_windows: int = 4000,
                 matrix_windows: int = 90) -> None:
        self.window: Window = window
        self.dim = dim
        self.max_windows = max_windows
        self.matrix_windows = matrix_windows
        self._sums: dict[str, np.ndarray] = {}
        self._counts: dict[str, int] = {}
        self._all_sum = np.zeros(dim)
        self._all_n = 0
        self.expired_windows = 0

    def update(self, when: datetime | str, vector: np.ndarray) -> None:
        """Add one post vector (any norm > 0; zero vectors are ignored) to its window."""
        self.update_many(when, np.asarray(vector)[None, :])

    def update_many(self, when: datetime | str, vectors: np.ndarray) -> None:
        """Add a batch of post vectors (rows) that share one window."""
        v = np.asarray(vectors, dtype=np.float64)
        norms = np.linalg.norm(v, axis=1)
        v = v[norms > 0] / norms[norms > 0, None]
        if len(v) == 0:
            return
        key = window_key(when, self.window)
        self._add(key, v.sum(axis=0), len(v))
        self.expire()

    def _add(self, key: str, s: np.ndarray, n: int) -> None:
        if key in self._sums:
            self._sums[key] += s
            self._counts[key] += n
        else:
            self._sums[key] = np.array(s, dtype=np.float64)
            self._counts[key] = n
        self._all_sum += s
        self._all_n += n

    def expire(self) -> None:
        """Drop the oldest windows beyond ``max_windows`` (the all-time sum keeps them)."""
        while len(self._sums) > self.max_windows:
            oldest = min(self._sums)
            del self._sums[oldest], self._counts[oldest]
            self.expired_windows += 1

    def partial(self, reset: bool = False) -> CentroidPartial:
        """The per-window sums held here; ``reset`` clears them (emit-deltas mode)."""
        p = CentroidPartial(self.window, self.dim,
                            {k: v.tolist() for k, v in self._sums.items()}, dict(self._counts))
        if reset:
            self._sums.clear()
            self._counts.clear()
            self._all_sum = np.zeros(self.dim)
            self._all_n = 0
        return p

    def merge(self, other: CentroidPartial | CentroidState) -> None:
        """Add another state's or partial's sums (per-partition partials add up exactly)."""
        p = other.partial() if isinstance(other, CentroidState) else other
        if p.window != self.window or p.dim != self.dim:
            raise ValueError("cannot merge centroid states of different window or dim")
        for k, s in p.sums.items():
            self._add(k, np.asarray(s, dtype=np.float64), int(p.counts[k]))
        self.expire()

    def windows(self) -> list[str]:
        return sorted(self._sums)

    def count(self, key: str) -> int:
        return self._counts.get(key, 0)

    def centroid(self, key: str) -> np.ndarray:
        return self._sums[key] / self._counts[key]

    def centroid_similarity(self, a: str, b: str) -> float | None:
        return _cos(self._sums[a], self._sums[b])

    def pairwise_similarity(self, a: str, b: str) -> float | None:
        """Mean cosine over post pairs of windows a and b (distinct posts when a == b)."""
        sa, na = self._sums[a], self._counts[a]
        if a == b:
            return None if na < 2 else (float(sa @ sa) - na) / (na * (na - 1))
        return float(sa @ self._sums[b]) / (na * self._counts[b])

    def snapshot(self) -> Snapshot:
        keys = self.windows()
        samples: list[Sample] = []
        cur = keys[-1] if keys else None
        prev = keys[-2] if len(keys) > 1 else None
        vs_prev = self.centroid_similarity(cur, prev) if cur and prev else None
        vs_all = _cos(self._sums[cur], self._all_sum) if cur else None
        within = self.pairwise_similarity(cur, cur) if cur else None
        across = self.pairwise_similarity(cur, prev) if cur and prev else None
        for name, labels, value, help_ in (
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
                samples.append(Sample(name, value, labels, help=help_))
        samples.append(Sample("embedded_posts_total", float(self._all_n), kind="counter",
                              help="Post vectors added to the centroid state"))
        shown = keys[-self.matrix_windows:]
        stack = np.stack([self._sums[k] for k in shown]) if shown else np.zeros((0, self.dim))
        n = np.array([self._counts[k] for k in shown], dtype=np.float64)
        gram = stack @ stack.T
        norms = np.sqrt(np.diag(gram))
        cent = gram / np.outer(norms, norms) if shown else gram
        pair = gram / np.outer(n, n)
        for i in range(len(shown)):
            pair[i, i] = (gram[i, i] - n[i]) / (n[i] * (n[i] - 1)) if n[i] > 1 else np.nan
        details: dict[str, Any] = {
            "centroid": {"window": self.window, "windows": shown,
                         "counts": [int(c) for c in n], "all_time_posts": self._all_n},
            "centroid_similarity": {
                "windows": shown, "matrix": _rows(cent),
                "current": cur, "previous": prev,
                "vs_previous": vs_prev, "vs_all_time": vs_all,
            },
            "pairwise_similarity": {
                "windows": shown, "matrix": _rows(pair),
                "within": {k: _num(pair[i, i]) for i, k in enumerate(shown)},
                "current_within": within, "current_vs_previous": across,
            },
        }
        return Snapshot(samples=samples, details=details)


def _num(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def _rows(m: np.ndarray) -> list[list[float | None]]:
    return [[_num(x) for x in row] for row in m]

"""What the per-agent engines share: mergeable distributions and a partition-free random draw.

Per-agent figures (drift, Net Progress, impact) are reported as population distributions, never
per-agent labels. Each partition's engine holds its own agents, so a distribution must merge
from partials: :class:`Dist` is a fixed-bin histogram (``bins`` equal bins on ``[lo, hi]``,
values outside clamped into the end bins) with the exact count, sum, minimum and maximum.
Its quantile is the midpoint of the bin holding the order statistic ``ceil(q n)``, clipped to
the exact [min, max]: within one bin width, ``(hi - lo) / bins``, of that order statistic
for values inside [lo, hi].

:func:`unit_draw` is a uniform number in [0, 1) from a stable hash (blake2b) of its keys: a
"random" choice per agent and item that no process, partition or replay can change.

>>> d = Dist.of([0.1, 0.2, 0.3, 0.9], lo=0.0, hi=1.0, bins=100)
>>> merged = Dist.merge([Dist.from_partial(d.partial()), Dist.of([0.5], 0.0, 1.0, 100)])
>>> merged.n, round(merged.mean, 6), round(merged.quantile(0.5), 3)
(5, 0.4, 0.305)
>>> 0.0 <= unit_draw("KingMolt", "c1") < 1.0 and unit_draw("a", 1) == unit_draw("a", 1)
True
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


@dataclass(slots=True)
class Dist:
    lo: float
    hi: float
    counts: np.ndarray
    n: int = 0
    total: float = 0.0
    min: float = math.inf
    max: float = -math.inf

    @classmethod
    def of(cls, values: Iterable[float], lo: float, hi: float, bins: int) -> Dist:
        x = np.fromiter(values, dtype=np.float64)
        idx = np.clip(((x - lo) / (hi - lo) * bins).astype(np.int64), 0, bins - 1)
        counts = np.bincount(idx, minlength=bins).astype(np.int64)
        if not len(x):
            return cls(lo, hi, counts)
        return cls(lo, hi, counts, len(x), float(x.sum()), float(x.min()), float(x.max()))

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else math.nan

    @property
    def width(self) -> float:
        return (self.hi - self.lo) / len(self.counts)

    def quantile(self, q: float) -> float:
        if not self.n:
            return math.nan
        rank = max(1, math.ceil(q * self.n))
        b = int(np.searchsorted(np.cumsum(self.counts), rank))
        return min(max(self.lo + (b + 0.5) * self.width, self.min), self.max)

    def partial(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi, "counts": self.counts.tolist(), "n": self.n,
                "sum": self.total, "min": self.min if self.n else None,
                "max": self.max if self.n else None}

    @classmethod
    def from_partial(cls, p: dict[str, Any]) -> Dist:
        return cls(p["lo"], p["hi"], np.asarray(p["counts"], dtype=np.int64), p["n"], p["sum"],
                   math.inf if p["min"] is None else p["min"],
                   -math.inf if p["max"] is None else p["max"])

    @staticmethod
    def merge(parts: list[Dist]) -> Dist:
        first = parts[0]
        out = Dist(first.lo, first.hi, np.zeros_like(first.counts))
        for p in parts:
            out.counts += p.counts
            out.n += p.n
            out.total += p.total
            out.min, out.max = min(out.min, p.min), max(out.max, p.max)
        return out

    def summary(self) -> dict[str, Any]:
        """JSON-safe: count, mean, min, max, quantiles and the histogram."""
        return {"n": self.n, "mean": self.mean if self.n else None,
                "min": self.min if self.n else None, "max": self.max if self.n else None,
                "quantiles": {str(q): self.quantile(q) if self.n else None for q in QUANTILES},
                "lo": self.lo, "hi": self.hi, "counts": self.counts.tolist()}


def finite(x: float) -> float | None:
    """JSON-safe figure for details: None where there is none (NaN)."""
    return None if math.isnan(x) else x


def unit_draw(*keys: object) -> float:
    """Uniform in [0, 1) from a stable hash of ``keys`` (the same in every process)."""
    h = hashlib.blake2b("\x00".join(map(str, keys)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2.0**64


def seed_of(*keys: object) -> int:
    """A 64-bit seed for ``numpy.random.default_rng`` from a stable hash of ``keys``."""
    h = hashlib.blake2b("\x00".join(map(str, keys)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "big")

"""Semantic drift per agent (metrics.md A2, individual layer), exact for the current post count.

For an agent with ``n >= min_posts`` (10) posts carrying a non-zero vector, in ``(t, item_id)``
order: ``h = n // 2``; the early half is the first ``h`` posts, the late half the last ``h``;
with an odd count the middle post belongs to neither (the published "two equal halves", taken
literally). ``c_early`` / ``c_late`` are the means of the vectors as given;

- drift ``D = 1 - cos(c_early, c_late)``;
- ``d_a = c_late - c_early``; drift consistency ``cos(d_a, mean over agents of d)``;
- movement toward the society centroid ``cos(c_late, c_global) - cos(c_early, c_global)``.

Why exact and O(1) amortised: each agent keeps its vectors (float32, in order) with the
running sums of the early half and of all posts (float64). A post appended in order moves at
most one vector (the one at index ``h``) into the early sum; an out-of-order post inserted
inside the history (acts come from several ingest partitions) re-sums the early half once
(O(n d), rare). Repeats of an ``(t, item_id)`` key are ignored.

Population figures merge from partials: the mean of ``d`` is a sum of vectors; the mean
consistency is ``(sum of d_a / |d_a|) . mean_d / |mean_d|`` over agents; the mean movement is
``(sum of c_late/|c_late| - c_early/|c_early|) . c_global / |c_global|``. So each partial
carries three d-vectors and a histogram of D; ``population(..., c_global=...)`` takes the
society centroid (the reducer's all-time centroid) as an input. Per-agent consistency and
movement need those society values too: ``profile(agent, c_global=..., mean_d=...)``.

Memory: ``4 d`` bytes per post (the float32 vector: 1,536 at d = 384) plus its key, and
``16 d`` bytes per agent (the two float64 sums); measured by ``bench/bench_individual.py``.
Bounded by dropping agents without a post for ``idle_s`` (30 days) and by ``max_posts`` per
agent (10,000: beyond it the oldest posts leave, and D is over the latest ``max_posts``).

>>> import numpy as np
>>> e = DriftEngine(DriftConfig(min_posts=4))
>>> for i, v in enumerate([[1, 0], [1, 0], [0, 1], [0, 1]]):
...     e.update(Act("a", float(i), "post", f"p{i}", f"p{i}", vector=np.array(v, np.float32)))
>>> e.profile("a")["drift"]
1.0
>>> e.snapshot().value("agent_drift_agents")
1.0
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

import numpy as np

from streams.acts import Act
from streams.state.agentdist import QUANTILES, Dist, finite
from streams.state.base import Sample, Snapshot

KEY_BYTES = 120  # one (t, item_id) key in the sorted list: tuple, float, 36-char id, slot
CHUNK = 4096  # agents a vectorised step of partial(): 3 x 12 MB temporaries at d = 384


@dataclass(frozen=True, slots=True)
class DriftConfig:
    min_posts: int = 10
    idle_s: float = 30 * 86400.0
    max_posts: int = 10_000
    bins: int = 2000  # D in [0, 2]: quantiles within 0.001


class _Agent:
    __slots__ = ("keys", "vecs", "off", "n", "early", "total", "last_t")

    def __init__(self, dim: int) -> None:
        self.keys: list[tuple[float, str]] = []
        self.vecs = np.zeros((2, dim), dtype=np.float32)  # doubled as it fills
        self.off = 0  # rows before off were dropped (max_posts); compacted lazily
        self.n = 0
        self.early = np.zeros(dim)
        self.total = np.zeros(dim)
        self.last_t = -math.inf

    def rows(self) -> np.ndarray:
        return self.vecs[self.off:self.off + self.n]

    def insert(self, key: tuple[float, str], v: np.ndarray) -> bool:
        i = bisect_left(self.keys, key)
        if i < self.n and self.keys[i] == key:
            return False
        end = self.off + self.n
        if end == len(self.vecs):
            self._grow()
            end = self.off + self.n
        h = self.n // 2
        self.total += v
        if i == self.n:  # in order: at most the vector at index h joins the early half
            self.keys.append(key)
            self.vecs[end] = v
            self.n += 1
            if self.n // 2 > h:
                self.early += self.vecs[self.off + h]
        else:
            self.keys.insert(i, key)
            rows = self.vecs[self.off:end + 1]
            rows[i + 1:] = rows[i:-1].copy()
            rows[i] = v
            self.n += 1
            self.early = rows[:self.n // 2].sum(axis=0, dtype=np.float64)
        return True

    def drop_oldest(self) -> None:
        h = self.n // 2
        v = self.vecs[self.off]
        self.total -= v
        self.early -= v
        self.keys.pop(0)
        self.off += 1
        self.n -= 1
        if self.n // 2 == h:  # the early half keeps its size: the next vector joins it
            self.early += self.vecs[self.off + h - 1]

    def _grow(self) -> None:
        rows = self.rows()
        cap = max(2, 2 * self.n)
        vecs = np.zeros((cap, rows.shape[1]), dtype=np.float32)
        vecs[:self.n] = rows
        self.vecs, self.off = vecs, 0

    def halves(self) -> tuple[np.ndarray, np.ndarray, int]:
        """Sums of the early and late halves, and the half size."""
        h = self.n // 2
        late = self.total - self.early
        if self.n % 2:
            late = late - self.vecs[self.off + h]
        return self.early, late, h

    def nbytes(self) -> int:
        return self.vecs.nbytes + self.early.nbytes + self.total.nbytes + KEY_BYTES * self.n


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


class DriftEngine:
    def __init__(self, config: DriftConfig | None = None) -> None:
        self.cfg = config or DriftConfig()
        self._agents: dict[str, _Agent] = {}
        self.posts_total = 0
        self.repeats_total = 0

    def update(self, act: Act) -> None:
        if act.kind != "post" or act.vector is None or not np.any(act.vector):
            return  # a zero vector (a text without words) has no direction
        a = self._agents.get(act.agent)
        if a is None:
            a = self._agents[act.agent] = _Agent(len(act.vector))
        if not a.insert((act.t, act.item_id), np.asarray(act.vector)):
            self.repeats_total += 1
            return
        self.posts_total += 1
        a.last_t = max(a.last_t, act.t)
        while a.n > self.cfg.max_posts:
            a.drop_oldest()

    def expire(self, now: float) -> None:
        cut = now - self.cfg.idle_s
        for name in [n for n, a in self._agents.items() if a.last_t < cut]:
            del self._agents[name]

    def _figures(self, a: _Agent) -> tuple[float, np.ndarray, np.ndarray] | None:
        """D, d_a and the unit-centroid difference c_late/|c_late| - c_early/|c_early|."""
        if a.n < self.cfg.min_posts:
            return None
        early, late, h = a.halves()
        ne, nl = np.linalg.norm(early), np.linalg.norm(late)
        if ne == 0.0 or nl == 0.0:
            return None
        return 1.0 - float(early @ late / (ne * nl)), (late - early) / h, late / nl - early / ne

    def profile(self, agent: str, *, c_global: np.ndarray | None = None,
                mean_d: np.ndarray | None = None) -> dict[str, Any] | None:
        """The agent's drift; with the society's ``c_global`` / ``mean_d`` (the population's
        ``details['agent_drift']['mean_d']``) also its movement and consistency."""
        a = self._agents.get(agent)
        if a is None:
            return None
        out: dict[str, Any] = {"posts": a.n, "half_posts": a.n // 2, "drift": None}
        f = self._figures(a)
        if f is None:
            return out
        out["drift"] = f[0]
        early, late, _ = a.halves()
        if c_global is not None:
            out["centroid_movement"] = _cos(late, c_global) - _cos(early, c_global)
        if mean_d is not None and np.linalg.norm(f[1]) > 0:
            out["drift_consistency"] = _cos(f[1], np.asarray(mean_d, dtype=np.float64))
        return out

    def sort_keys(self) -> dict[str, dict[str, float]]:
        drift = {}
        for name, a in self._agents.items():
            f = self._figures(a)
            if f is not None:
                drift[name] = f[0]
        return {"drift": drift}

    def partial(self) -> dict[str, Any]:
        ds: list[np.ndarray] = []
        sums: np.ndarray | None = None  # rows: sum of d_a, of d_a / |d_a|, of the u vectors
        eligible = [a for a in self._agents.values() if a.n >= self.cfg.min_posts]
        for c in range(0, len(eligible), CHUNK):  # vectorised over agents, in bounded chunks
            part = eligible[c:c + CHUNK]
            e = np.array([a.early for a in part])
            late = np.array([a.halves()[1] for a in part])
            h = np.array([a.n // 2 for a in part], dtype=np.float64)
            ne, nl = np.linalg.norm(e, axis=1), np.linalg.norm(late, axis=1)
            ok = (ne > 0) & (nl > 0)
            e, late, h, ne, nl = e[ok], late[ok], h[ok], ne[ok], nl[ok]
            ds.append(1.0 - (e * late).sum(axis=1) / (ne * nl))
            d = (late - e) / h[:, None]
            nd = np.linalg.norm(d, axis=1)
            rows = np.stack([d.sum(axis=0), (d[nd > 0] / nd[nd > 0, None]).sum(axis=0),
                             (late / nl[:, None] - e / ne[:, None]).sum(axis=0)])
            sums = rows if sums is None else sums + rows
        values = np.concatenate(ds) if ds else np.zeros(0)
        return {"agents": len(values), "agents_tracked": len(self._agents),
                "drift": Dist.of(values, 0.0, 2.0, self.cfg.bins).partial(),
                "sum_d": None if sums is None else sums[0].tolist(),
                "sum_d_unit": None if sums is None else sums[1].tolist(),
                "sum_u": None if sums is None else sums[2].tolist(),
                "posts_total": self.posts_total, "repeats_total": self.repeats_total,
                "state_bytes": sum(a.nbytes() for a in self._agents.values())}

    @staticmethod
    def population(partials: list[dict[str, Any]], **society: Any) -> Snapshot:
        """Merged figures; ``c_global`` (society centroid) enables the mean movement."""
        dist = Dist.merge([Dist.from_partial(p["drift"]) for p in partials])

        def total(key: str) -> np.ndarray | None:
            vs = [np.asarray(p[key]) for p in partials if p[key] is not None]
            return np.sum(vs, axis=0) if vs else None

        n = dist.n
        sum_d, sum_dhat, sum_u = total("sum_d"), total("sum_d_unit"), total("sum_u")
        consistency = movement = math.nan
        if sum_d is not None and sum_dhat is not None and np.linalg.norm(sum_d) > 0:
            consistency = float(sum_dhat @ sum_d / np.linalg.norm(sum_d)) / n
        c_global = society.get("c_global")
        if sum_u is not None and c_global is not None:
            g = np.asarray(c_global, dtype=np.float64)
            movement = float(sum_u @ g / np.linalg.norm(g)) / n
        counts = {k: sum(p[k] for p in partials)
                  for k in ("agents_tracked", "posts_total", "repeats_total", "state_bytes")}
        samples = [
            Sample("agent_drift_agents", float(n),
                   help="Agents with at least min_posts posts (drift measured)"),
            Sample("agent_drift_mean", dist.mean if n else math.nan,
                   help="Mean drift D = 1 - cos(c_early, c_late) over agents"),
            *[Sample("agent_drift", dist.quantile(q) if n else math.nan,
                     (("quantile", str(q)),), help="Quantiles of D over agents (within 0.001)")
              for q in QUANTILES],
            Sample("agent_drift_consistency_mean", consistency,
                   help="Mean cos(d_a, mean d): do agents drift the same way"),
            Sample("agent_centroid_movement_mean", movement,
                   help="Mean cos(c_late, c_global) - cos(c_early, c_global)"),
            Sample("agent_drift_posts_total", float(counts["posts_total"]), kind="counter",
                   help="Post vectors taken by the drift state"),
            Sample("agent_drift_state_bytes", float(counts["state_bytes"]),
                   help="Drift state: vectors, sums and keys"),
        ]
        details = {"agent_drift": {
            "distribution": dist.summary(), "consistency_mean": finite(consistency),
            "movement_mean": finite(movement), "agents_tracked": counts["agents_tracked"],
            "posts_total": counts["posts_total"], "repeats_total": counts["repeats_total"],
            "mean_d": None if sum_d is None else (sum_d / n).tolist(),
            "state_bytes": counts["state_bytes"]}}
        return Snapshot(samples, details)

    def snapshot(self) -> Snapshot:
        return self.population([self.partial()])

"""Feedback adaptation per agent: Net Progress with its shuffle null (metrics.md A2).

An agent's posts with a non-zero vector, in ``(t, item_id)`` order, fall into adjacent
non-overlapping windows of ``window`` (10) posts, W_0, W_1, ... Each consecutive pair (W_k,
W_k+1) is scored once: feedback = upvotes - downvotes of each post of W_k (its latest ``score``
act, 0 without one); P_top / P_bot = the ``round(share * window)`` (3) highest / lowest of W_k
by score (ties broken by posting order: the earlier post ranks lower); ``dist = 1 - cos``;
``dTop = dist(c_next, c_top) - dist(c_curr, c_top)``, ``dBot`` likewise, ``NP = dBot - dTop``
(> 0: the agent moved toward what was rewarded). An agent's NP is the mean over its pairs.

Votes arrive later than posts, so a pair is read once it has **settled**: when every post of
both windows is older than ``settle_s`` (48 h, about when Moltbook votes stop moving), i.e. at
``settle_at = newest post of W_k+1 + settle_s``, each post's score is its latest score act at
or before ``settle_at``; later votes never change the figure. The engine's clock is
``expire(now)`` (acts do not move it), and it scores the pairs with ``settle_at <= now``, so
the figure is a function of the acts alone: any arrival order, any partitioning, the replay.
Exactness needs acts to arrive before the engine's clock passes ``settle_at`` (a post that
arrives inside an already scored window is counted in ``feedback_late_posts_total`` and left
out).

The null: for each pair, ``draws`` (200) permutations of W_k's scores over its posts, drawn
from a generator seeded by a stable hash of (``seed``, agent, k): the same in every process.
Each draw's NP is computed like the observed one; the agent's null is the ``draws`` means over
its pairs, its band the ``(1 - band) / 2`` and ``(1 + band) / 2`` (2.5 %, 97.5 %) quantiles
(NumPy's linear rule). An agent is *outside* when its NP lies strictly outside the band
(*above*: adapting to feedback). If agents ignore feedback, about 5 % are outside (2.5 %
above). A window whose scores all tie has a degenerate null equal to its NP: never outside.

Memory per agent: the vectors and scores of the unscored posts (at most two windows plus
the posts newer than the last settled window), the score changes of those posts (pruned at
each ``expire`` to the latest one at or before ``now`` and the later ones: a pair still
unscored settles after ``now``), and ``8 * draws`` bytes of null sums. Agents silent for
``idle_s`` (30 days) are dropped with their figures.

>>> import numpy as np
>>> e = FeedbackEngine(FeedbackConfig(window=4, share=0.25, draws=50))
>>> vec = lambda i: np.array([np.cos(i / 3), np.sin(i / 3)], np.float32)
>>> for i in range(8):
...     e.update(Act("a", 60.0 * i, "post", f"p{i}", f"p{i}", vector=vec(i)))
...     e.update(Act("a", 60.0 * i + 30, "score", f"p{i}", f"p{i}", target_kind="post", score=i))
>>> e.expire(60.0 * 7 + 47 * 3600)   # not yet settled
>>> e.profile("a")["pairs"]
0
>>> e.expire(60.0 * 7 + 48 * 3600)
>>> p = e.profile("a"); p["pairs"], p["np"] > 0, p["np_null_low"] <= p["np_null_high"]
(1, True, True)
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass
from typing import Any

import numpy as np

from streams.acts import Act
from streams.state.agentdist import QUANTILES, Dist, seed_of
from streams.state.base import Sample, Snapshot

TOP_AGENTS = 10
DAY = 86400.0


@dataclass(frozen=True, slots=True)
class FeedbackConfig:
    window: int = 10
    share: float = 0.3
    settle_s: float = 48 * 3600.0
    draws: int = 200
    band: float = 0.95
    seed: int = 0
    idle_s: float = 30 * 86400.0
    bins: int = 2000  # NP in [-1, 1]: quantiles within 0.001 (clamped beyond, |NP| <= 4)


class _Agent:
    __slots__ = ("keys", "vecs", "scores", "scored", "np_sum", "null_sum", "last_t", "base",
                 "fig")

    def __init__(self) -> None:
        self.keys: list[tuple[float, str]] = []    # unscored posts, in order
        self.vecs: list[np.ndarray] = []
        self.scores: dict[str, list[tuple[float, int]]] = {}  # item -> sorted score changes
        self.scored = 0          # pairs scored
        self.base = 0            # posts before keys[0] (windows left behind)
        self.np_sum = 0.0
        self.null_sum: np.ndarray | None = None
        self.fig: tuple[float, float, float] | None = None  # NP and band, set when scored
        self.last_t = -math.inf

    def nbytes(self) -> int:
        vec = sum(v.nbytes for v in self.vecs)
        changes = sum(len(c) for c in self.scores.values())
        null = 0 if self.null_sum is None else self.null_sum.nbytes
        return vec + 120 * len(self.keys) + 100 * len(self.scores) + 72 * changes + null + 200


def _dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """1 - cos along the last axis."""
    return 1.0 - (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def net_progress(cur: np.ndarray, nxt: np.ndarray, scores: np.ndarray, m: int) -> np.ndarray:
    """NP of one window pair for each row of ``scores`` (draws x window), as defined above."""
    order = np.argsort(scores, axis=-1, kind="stable")  # ties: the earlier post ranks lower
    c_curr, c_next = cur.mean(axis=0), nxt.mean(axis=0)
    c_top = cur[order[:, -m:]].mean(axis=1)
    c_bot = cur[order[:, :m]].mean(axis=1)
    d_top = _dist(c_next, c_top) - _dist(c_curr, c_top)
    d_bot = _dist(c_next, c_bot) - _dist(c_curr, c_bot)
    return d_bot - d_top


class FeedbackEngine:
    def __init__(self, config: FeedbackConfig | None = None) -> None:
        self.cfg = config or FeedbackConfig()
        self._agents: dict[str, _Agent] = {}
        self.now = -math.inf
        self.late_posts_total = 0
        self.pairs_total = 0
        self._touched: set[str] = set()  # agents with acts since the last expire
        self._due: list[tuple[float, str]] = []  # (clock at which an agent has work, agent)
        self._swept = -math.inf  # the last idle sweep (daily: it visits every agent)

    def update(self, act: Act) -> None:
        if act.kind == "post" and act.vector is not None and np.any(act.vector):
            a = self._agent(act.agent)
            key = (act.t, act.item_id)
            i = bisect_left(a.keys, key)
            if i < len(a.keys) and a.keys[i] == key:
                return
            if a.base and i < self.cfg.window:  # inside a window already scored
                self.late_posts_total += 1
                return
            a.keys.insert(i, key)
            a.vecs.insert(i, np.asarray(act.vector))  # as given (float32): shared, not copied
            a.last_t = max(a.last_t, act.t)
        elif act.kind == "score" and act.target_kind == "post" and act.score is not None:
            a = self._agent(act.agent)
            changes = a.scores.setdefault(act.item_id, [])
            if (act.t, act.score) not in changes:
                insort(changes, (act.t, act.score))
            a.last_t = max(a.last_t, act.t)

    def _agent(self, name: str) -> _Agent:
        a = self._agents.get(name)
        if a is None:
            a = self._agents[name] = _Agent()
        self._touched.add(name)
        return a

    def expire(self, now: float) -> None:
        """Move the clock: score the settled pairs, prune score changes, drop idle agents.
        Visits only the agents with acts since the last call or work now due."""
        self.now = max(self.now, now)
        w, settle = self.cfg.window, self.cfg.settle_s
        work, self._touched = self._touched, set()
        while self._due and self._due[0][0] <= self.now:
            work.add(heapq.heappop(self._due)[1])
        for name in work:
            a = self._agents.get(name)
            if a is None:
                continue
            while len(a.keys) >= 2 * w and a.keys[2 * w - 1][0] + settle <= self.now:
                self._score(name, a, a.keys[2 * w - 1][0] + settle)
            due = self._prune(a)
            if len(a.keys) >= 2 * w:
                due = min(due, a.keys[2 * w - 1][0] + settle)
            if due < math.inf:
                heapq.heappush(self._due, (due, name))
        if self.now >= self._swept + DAY:
            self._swept = self.now
            for name in [n for n, a in self._agents.items()
                         if a.last_t < self.now - self.cfg.idle_s]:
                del self._agents[name]

    def _score(self, name: str, a: _Agent, settle_at: float) -> None:
        cfg, w = self.cfg, self.cfg.window
        k = a.base // w
        cur = np.array(a.vecs[:w], dtype=np.float64)
        nxt = np.array(a.vecs[w:2 * w], dtype=np.float64)
        scores = np.array([self._score_at(a.scores.get(item, []), settle_at)
                           for _, item in a.keys[:w]], dtype=np.float64)
        m = max(1, round(cfg.share * w))
        a.np_sum += float(net_progress(cur, nxt, scores[None, :], m)[0])
        rng = np.random.default_rng(seed_of(cfg.seed, name, k))
        shuffled = rng.permuted(np.broadcast_to(scores, (cfg.draws, w)), axis=1)
        null = net_progress(cur, nxt, shuffled, m)
        a.null_sum = null if a.null_sum is None else a.null_sum + null
        a.scored += 1
        lo, hi = np.quantile(a.null_sum / a.scored, [(1 - cfg.band) / 2, (1 + cfg.band) / 2])
        a.fig = (a.np_sum / a.scored, float(lo), float(hi))
        self.pairs_total += 1
        for _, item in a.keys[:w]:
            a.scores.pop(item, None)
        del a.keys[:w], a.vecs[:w]
        a.base += w

    @staticmethod
    def _score_at(changes: list[tuple[float, int]], t: float) -> int:
        i = bisect_right(changes, (t, math.inf))
        return changes[i - 1][1] if i else 0

    def _prune(self, a: _Agent) -> float:
        """Drop what no pair can read; returns when an orphan score is next due to go."""
        pending = {item for _, item in a.keys}
        due = math.inf
        for item, changes in list(a.scores.items()):
            i = bisect_right(changes, (self.now, math.inf))
            if i > 1:  # one settled value at or before now is enough: pairs settle after now
                del changes[:i - 1]
            if item in pending:
                continue
            # a score for a post never seen (or already scored): its post would be late by now
            gone = changes[-1][0] + self.cfg.settle_s
            if gone <= self.now:
                del a.scores[item]
            else:
                due = min(due, gone)
        return due

    @staticmethod
    def _figures(a: _Agent) -> tuple[float, float, float] | None:
        return a.fig

    def profile(self, agent: str) -> dict[str, Any] | None:
        a = self._agents.get(agent)
        if a is None:
            return None
        out: dict[str, Any] = {"pairs": a.scored, "np": None, "np_null_low": None,
                               "np_null_high": None, "outside_null": None,
                               "unscored_posts": len(a.keys)}
        f = self._figures(a)
        if f is not None:
            out |= {"np": f[0], "np_null_low": f[1], "np_null_high": f[2],
                    "outside_null": f[0] < f[1] or f[0] > f[2]}
        return out

    def sort_keys(self) -> dict[str, dict[str, float]]:
        out = {}
        for name, a in self._agents.items():
            f = self._figures(a)
            if f is not None:
                out[name] = f[0]
        return {"np": out}

    def partial(self) -> dict[str, Any]:
        nps, above, below, top = [], 0, 0, []
        for name, a in self._agents.items():
            f = self._figures(a)
            if f is None:
                continue
            nps.append(f[0])
            if f[0] > f[2]:
                above += 1
                top.append([f[0] - f[2], name, f[0], f[1], f[2], a.scored])
            elif f[0] < f[1]:
                below += 1
        top.sort(key=lambda r: (-r[0], r[1]))
        return {"agents": len(nps), "above": above, "below": below,
                "np": Dist.of(nps, -1.0, 1.0, self.cfg.bins).partial(),
                "top_above": top[:TOP_AGENTS], "agents_tracked": len(self._agents),
                "pairs_total": self.pairs_total, "late_posts_total": self.late_posts_total,
                "state_bytes": sum(a.nbytes() for a in self._agents.values())}

    @staticmethod
    def population(partials: list[dict[str, Any]], **society: Any) -> Snapshot:
        dist = Dist.merge([Dist.from_partial(p["np"]) for p in partials])
        n = dist.n
        c = {k: sum(p[k] for p in partials) for k in ("above", "below", "agents_tracked",
                                                      "pairs_total", "late_posts_total",
                                                      "state_bytes")}
        top = sorted((r for p in partials for r in p["top_above"]),
                     key=lambda r: (-r[0], r[1]))[:TOP_AGENTS]

        def share(k: int) -> float:
            return k / n if n else math.nan

        samples = [
            Sample("feedback_agents", float(n), help="Agents with a scored window pair"),
            Sample("feedback_np_outside_null_ratio", share(c["above"] + c["below"]),
                   help="Share of agents whose NP lies outside their shuffle null's band"),
            Sample("feedback_np_above_null_ratio", share(c["above"]),
                   help="Share of agents whose NP lies above their null band (adapting)"),
            Sample("feedback_np_mean", dist.mean if n else math.nan,
                   help="Mean Net Progress over agents"),
            *[Sample("feedback_np", dist.quantile(q) if n else math.nan, (("quantile", str(q)),),
                     help="Quantiles of NP over agents (within 0.001)") for q in QUANTILES],
            Sample("feedback_window_pairs_total", float(c["pairs_total"]), kind="counter",
                   help="Settled window pairs scored"),
            Sample("feedback_late_posts_total", float(c["late_posts_total"]), kind="counter",
                   help="Posts that arrived inside an already scored window (left out)"),
            Sample("feedback_state_bytes", float(c["state_bytes"]),
                   help="Feedback state: unscored posts, score changes, null sums"),
        ]
        details = {"feedback": {"agents": n, "above": c["above"], "below": c["below"],
                                "distribution": dist.summary(), "top_above": [
                                    {"agent": r[1], "np": r[2], "null_low": r[3],
                                     "null_high": r[4], "pairs": r[5]} for r in top],
                                "agents_tracked": c["agents_tracked"],
                                "pairs_total": c["pairs_total"],
                                "state_bytes": c["state_bytes"]}}
        return Snapshot(samples, details)

    def snapshot(self) -> Snapshot:
        return self.population([self.partial()])

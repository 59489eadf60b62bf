"""Interaction impact per agent: do an agent's posts move toward what it commented on (A2)?

An *event*: agent a comments on post p* at time t (a ``comment`` act whose ``target_vector`` is
``v*``; comments on its own posts and comments without ``v*`` are skipped, counted). Its
windows are a's posts (``post`` acts with a non-zero vector, in ``(t, item_id)`` order): *pre*
the last ``posts`` (20) with time < t, *post* the first 20 with time > t, each within
``horizon_s`` (7 days) of t; ``S(W, v*) = mean over W of cos(v_p, v*)``; ``delta = S(post) -
S(pre)``. An event is read once its 20 later posts exist and the 20th is ``lateness_s`` (10
min) behind the engine's clock, or once ``t + horizon_s`` is; with fewer than ``min_side`` (1)
posts on a side it is dropped (counted). The clock is ``expire(now)``: acts do not move it, so
figures do not depend on arrival order or partitioning as long as acts arrive within
``lateness_s`` (a comment older than that is counted late and skipped: its event may have been
read).

Baseline (published: "with probability 0.3 a same-day post a did not touch, treated the same
way"): an event is drawn with probability ``baseline_p`` by a stable hash of (``seed``, agent,
comment id), the same in every process. Its baseline delta against a post ``b`` is
``S(post, v_b) - S(pre, v_b) = (m_post - m_pre) . u_b`` with ``m`` the mean of the window's
unit vectors and ``u_b`` b's unit vector: linear in ``u_b``. So instead of one random post we
take the expectation over a uniformly random post of the society's same UTC day, ``(m_post -
m_pre) . c_day``, with ``c_day`` the day's mean unit post vector: no partition sees every
post of a day, but together they do: each partial carries, per day, the sums of
``m_post - m_pre`` over its drawn events and of its agents' unit post vectors (every post act
with a vector), and ``population`` finishes it (``day_centroids={day: c_day}`` may override
the day centroids, e.g. with the reducer's, which also count posts without an author).
Live and replay agree, and the variance of the random pick is gone. The difference from
excluding the k posts a touched that day (its own and the commented ones) among the day's
n is ``(m_post - m_pre) . (k c_day - sum of touched) / (n - k)``, at most ``4 k / (n - k)``
in absolute value (tested).

Population figures are over the events of the last ``window_days`` (30) UTC days (per-day
sums: mergeable, bounded); the per-agent figure (mean delta, events) is cumulative.
Memory per agent: the posts that a pending or future event can still use (the 20 before the
clock minus ``lateness_s`` and the newer ones), their vectors kept as the acts carry them
(float32, not copied: the router's post vector is shared by its comments' ``v*``) with their
norms, and ``v*`` of each pending event (at most ``max_pending``: beyond, the oldest is
dropped, counted); cosines are computed in float64. Agents silent for ``idle_s`` (30 days)
are dropped with their figures. Per day of the window: two float64 d-vectors.

>>> import numpy as np
>>> e = ImpactEngine(ImpactConfig(posts=2))
>>> x, y = np.array([1.0, 0.0], np.float32), np.array([0.0, 1.0], np.float32)
>>> for i, v in enumerate([x, x, None, y, y]):   # two posts, a comment on a y post, two posts
...     e.update(Act("a", float(i), "post", f"p{i}", f"p{i}", vector=v) if v is not None else
...              Act("a", float(i), "comment", "q", "c1", target_author="b", target_vector=y))
>>> e.expire(4.0 + 600)
>>> e.profile("a")["delta_mean"], e.profile("a")["events"]
(1.0, 1)
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Any

import numpy as np

from streams.acts import Act
from streams.state.agentdist import QUANTILES, Dist, finite, unit_draw
from streams.state.base import Sample, Snapshot

DAY = 86400.0
TOP_AGENTS = 10


@dataclass(frozen=True, slots=True)
class ImpactConfig:
    posts: int = 20
    horizon_s: float = 7 * DAY
    lateness_s: float = 600.0
    min_side: int = 1
    baseline_p: float = 0.3
    seed: int = 0
    window_days: int = 30
    max_pending: int = 1000
    idle_s: float = 30 * DAY
    top_min_events: int = 5
    bins: int = 2000  # per-agent mean delta in [-1, 1]: quantiles within 0.001


class _Agent:
    __slots__ = ("keys", "ts", "vecs", "norms", "events", "vstar", "n", "sum", "last_t")

    def __init__(self) -> None:
        self.keys: list[tuple[float, str]] = []  # posts, in order
        self.ts: list[float] = []
        self.vecs: list[np.ndarray] = []  # as given (float32), shared with the act, not copied
        self.norms: list[float] = []
        self.events: list[tuple[float, str]] = []  # pending comments, in order
        self.vstar: dict[str, np.ndarray] = {}  # as given: the router shares one per post
        self.n = 0
        self.sum = 0.0
        self.last_t = -math.inf

    def nbytes(self) -> int:
        vecs = sum(v.nbytes for v in self.vecs) + sum(v.nbytes for v in self.vstar.values())
        return vecs + 180 * len(self.keys) + 200 * len(self.events) + 200


class _Day:
    __slots__ = ("n", "sum", "sq", "base_n", "base", "posts", "post_sum")

    def __init__(self, dim: int) -> None:
        self.n, self.sum, self.sq, self.base_n, self.posts = 0, 0.0, 0.0, 0, 0
        self.base = np.zeros(dim)
        self.post_sum = np.zeros(dim)  # the day's unit post vectors: its centroid, merged


class ImpactEngine:
    def __init__(self, config: ImpactConfig | None = None) -> None:
        self.cfg = config or ImpactConfig()
        self._agents: dict[str, _Agent] = {}
        self._days: dict[int, _Day] = {}
        self.clock = -math.inf
        self._touched: set[str] = set()  # agents with acts since the last expire
        self._due: list[tuple[float, str]] = []  # (clock at which its first event may be read)
        self._swept = -math.inf  # the last idle sweep (daily: it visits every agent)
        self.counts = {"events": 0, "incomplete": 0, "self": 0, "no_target": 0, "late": 0,
                       "dropped": 0}

    def _agent(self, name: str) -> _Agent:
        a = self._agents.get(name)
        if a is None:
            a = self._agents[name] = _Agent()
        self._touched.add(name)
        return a

    def update(self, act: Act) -> None:
        if act.kind == "post" and act.vector is not None:
            v = np.asarray(act.vector)
            n = math.sqrt(float(np.dot(v, v.astype(np.float64))))
            if n == 0.0:
                return
            a = self._agent(act.agent)
            key = (act.t, act.item_id)
            i = bisect_left(a.keys, key)
            if i < len(a.keys) and a.keys[i] == key:
                return
            a.keys.insert(i, key)
            a.ts.insert(i, act.t)
            a.vecs.insert(i, v)
            a.norms.insert(i, n)
            a.last_t = max(a.last_t, act.t)
            day = self._day(act.t, len(v))
            day.posts += 1
            day.post_sum += v / n
        elif act.kind == "comment":
            if act.target_vector is None or not np.any(act.target_vector):
                self.counts["no_target"] += 1
            elif act.target_author == act.agent:
                self.counts["self"] += 1
            elif act.t < self.clock - self.cfg.lateness_s:
                self.counts["late"] += 1
            else:
                a = self._agent(act.agent)
                key = (act.t, act.item_id)
                i = bisect_left(a.events, key)
                if i < len(a.events) and a.events[i] == key:
                    return
                a.events.insert(i, key)
                a.vstar[act.item_id] = np.asarray(act.target_vector)
                a.last_t = max(a.last_t, act.t)
                if len(a.events) > self.cfg.max_pending:
                    _, item = a.events.pop(0)
                    del a.vstar[item]
                    self.counts["dropped"] += 1

    def expire(self, now: float) -> None:
        """Move the clock: read the complete events, trim posts, drop idle agents and days."""
        cfg = self.cfg
        self.clock = max(self.clock, now)
        cutoff = self.clock - cfg.lateness_s
        work, self._touched = self._touched, set()
        while self._due and self._due[0][0] <= self.clock:
            work.add(heapq.heappop(self._due)[1])
        for name in work:  # an agent without new acts or a due event has nothing to do
            a = self._agents.get(name)
            if a is None:
                continue
            done = 0
            for key in a.events:  # readiness is monotone in event order: stop at the first
                if not self._read(name, a, key, cutoff):
                    break
                done += 1
            del a.events[:done]
            if a.events:
                heapq.heappush(self._due, (self._due_at(a), name))
            # posts a pending or future event (time >= m) can still use
            m = min([cutoff] + [t for t, _ in a.events[:1]])
            start = max(bisect_left(a.ts, m) - cfg.posts, bisect_left(a.ts, m - cfg.horizon_s))
            if start > 0:
                del a.keys[:start], a.ts[:start], a.vecs[:start], a.norms[:start]
        if self.clock >= self._swept + DAY:
            self._swept = self.clock
            for name in [n for n, a in self._agents.items()
                         if a.last_t < self.clock - cfg.idle_s]:
                del self._agents[name]
                self._touched.discard(name)
        first = int(self.clock // DAY) - cfg.window_days + 1
        for d in [d for d in self._days if d < first]:
            del self._days[d]

    def _due_at(self, a: _Agent) -> float:
        """The clock at which the first pending event becomes readable without new acts."""
        cfg, t = self.cfg, a.events[0][0]
        j = bisect_right(a.ts, t)
        hi = min(j + cfg.posts, bisect_right(a.ts, t + cfg.horizon_s))
        ready = t + cfg.horizon_s if hi - j < cfg.posts else min(t + cfg.horizon_s, a.ts[hi - 1])
        return ready + cfg.lateness_s

    def _read(self, name: str, a: _Agent, key: tuple[float, str], cutoff: float) -> bool:
        """Read one pending event if complete; True when it is done with."""
        cfg = self.cfg
        t, item = key
        i, j = bisect_left(a.ts, t), bisect_right(a.ts, t)
        hi = min(j + cfg.posts, bisect_right(a.ts, t + cfg.horizon_s))
        if not ((hi - j == cfg.posts and a.ts[hi - 1] <= cutoff) or t + cfg.horizon_s <= cutoff):
            return False
        lo = max(i - cfg.posts, bisect_left(a.ts, t - cfg.horizon_s))
        v = a.vstar.pop(item).astype(np.float64)
        if i - lo < cfg.min_side or hi - j < cfg.min_side:
            self.counts["incomplete"] += 1
            return True
        v /= np.linalg.norm(v)
        # unit rows (float64): S(W, v*) is the mean of their dot products with v*
        pre = np.array(a.vecs[lo:i], dtype=np.float64) / np.array(a.norms[lo:i])[:, None]
        post = np.array(a.vecs[j:hi], dtype=np.float64) / np.array(a.norms[j:hi])[:, None]
        delta = float((post @ v).mean() - (pre @ v).mean())
        a.n += 1
        a.sum += delta
        self.counts["events"] += 1
        day = self._day(t, len(v))
        day.n += 1
        day.sum += delta
        day.sq += delta * delta
        if unit_draw(cfg.seed, name, item) < cfg.baseline_p:
            day.base_n += 1
            day.base += post.mean(axis=0) - pre.mean(axis=0)
        return True

    def _day(self, t: float, dim: int) -> _Day:
        day = self._days.get(int(t // DAY))
        if day is None:
            day = self._days[int(t // DAY)] = _Day(dim)
        return day

    def profile(self, agent: str) -> dict[str, Any] | None:
        a = self._agents.get(agent)
        if a is None:
            return None
        return {"events": a.n, "delta_mean": a.sum / a.n if a.n else None,
                "pending_events": len(a.events)}

    def sort_keys(self) -> dict[str, dict[str, float]]:
        return {"impact": {n: a.sum / a.n for n, a in self._agents.items() if a.n}}

    def partial(self) -> dict[str, Any]:
        means = {n: a.sum / a.n for n, a in self._agents.items() if a.n}
        top = sorted(([m, n, self._agents[n].n] for n, m in means.items()
                      if self._agents[n].n >= self.cfg.top_min_events),
                     key=lambda r: (-r[0], r[1]))[:TOP_AGENTS]
        return {"agents": len(means), "delta": Dist.of(means.values(), -1.0, 1.0,
                                                       self.cfg.bins).partial(),
                "days": {str(d): {"n": x.n, "sum": x.sum, "sq": x.sq, "base_n": x.base_n,
                                  "base": x.base.tolist(), "posts": x.posts,
                                  "post_sum": x.post_sum.tolist()}
                         for d, x in self._days.items()},
                "top": top, "counts": dict(self.counts), "agents_tracked": len(self._agents),
                "state_bytes": sum(a.nbytes() for a in self._agents.values())
                + sum(2 * x.base.nbytes + 100 for x in self._days.values())}

    @staticmethod
    def population(partials: list[dict[str, Any]], **society: Any) -> Snapshot:
        """``day_centroids`` ({UTC day index int(t // 86400): mean unit post vector}, optional)
        overrides the day centroids the partials carry (their post acts' unit vectors)."""
        posts: dict[int, tuple[int, np.ndarray]] = {}
        for p in partials:
            for d, x in p["days"].items():
                if x["posts"]:
                    n0, s0 = posts.get(int(d), (0, 0.0))
                    posts[int(d)] = (n0 + x["posts"], s0 + np.asarray(x["post_sum"]))
        centroids = {d: s / n for d, (n, s) in posts.items()}
        centroids |= {int(d): np.asarray(c, dtype=np.float64)
                      for d, c in (society.get("day_centroids") or {}).items()}
        dist = Dist.merge([Dist.from_partial(p["delta"]) for p in partials])
        n = s = sq = 0.0
        base_n, base_sum, days_without = 0, 0.0, set()
        for p in partials:
            for d, x in p["days"].items():
                n, s, sq = n + x["n"], s + x["sum"], sq + x["sq"]
                if not x["base_n"]:
                    continue
                c = centroids.get(int(d))
                if c is None:
                    days_without.add(int(d))
                    continue
                base_n += x["base_n"]
                base_sum += float(np.asarray(x["base"]) @ c)
        counts = {k: sum(p["counts"][k] for p in partials) for k in partials[0]["counts"]}
        tracked = sum(p["agents_tracked"] for p in partials)
        state = sum(p["state_bytes"] for p in partials)
        mean = s / n if n else math.nan
        base = base_sum / base_n if base_n else math.nan
        sd = math.sqrt(max(sq / n - mean * mean, 0.0) * n / (n - 1)) if n > 1 else math.nan
        top = sorted((r for p in partials for r in p["top"]), key=lambda r: (-r[0], r[1]))
        samples = [
            Sample("impact_events", n, help="Interaction events read (last window_days days)"),
            Sample("impact_delta_mean", mean,
                   help="Mean delta S = S(post) - S(pre) of the events (last window_days days)"),
            Sample("impact_baseline_events", float(base_n),
                   help="Baseline draws (probability 0.3) with a known day centroid"),
            Sample("impact_baseline_delta_mean", base,
                   help="Mean delta against a random same-day post (expectation)"),
            Sample("impact_agents", float(dist.n), help="Agents with at least one event"),
            *[Sample("impact_agent_delta", dist.quantile(q) if dist.n else math.nan,
                     (("quantile", str(q)),), help="Quantiles of agents' mean delta (within 0.001)")
              for q in QUANTILES],
            Sample("impact_events_total", float(counts["events"]), kind="counter",
                   help="Interaction events read"),
            Sample("impact_events_incomplete_total", float(counts["incomplete"]),
                   kind="counter", help="Events without posts on a side within the horizon"),
            Sample("impact_comments_skipped_total", float(counts["self"]), (("reason", "self"),),
                   "counter", "Comments not taken as events"),
            Sample("impact_comments_skipped_total", float(counts["no_target"]),
                   (("reason", "no_target"),), "counter", "Comments not taken as events"),
            Sample("impact_comments_skipped_total", float(counts["late"]), (("reason", "late"),),
                   "counter", "Comments not taken as events"),
            Sample("impact_comments_skipped_total", float(counts["dropped"]),
                   (("reason", "max_pending"),), "counter", "Comments not taken as events"),
            Sample("impact_state_bytes", float(state), help="Impact state"),
        ]
        details = {"impact": {"events": n, "delta_mean": finite(mean), "delta_sd": finite(sd),
                              "baseline_events": base_n, "baseline_delta_mean": finite(base),
                              "days_without_centroid": sorted(days_without),
                              "agent_delta": dist.summary(), "counts": counts,
                              "top": [{"agent": r[1], "delta_mean": r[0], "events": r[2]}
                                      for r in top[:TOP_AGENTS]],
                              "agents_tracked": tracked, "state_bytes": state}}
        return Snapshot(samples, details)

    def snapshot(self) -> Snapshot:
        return self.population([self.partial()])

"""Semantic shift detector: a centroid moving away from its recent self beyond normal variation.

Input is the embedding of each post (``item.vector``: the embedding stage's output,
Sentence-BERT all-MiniLM-L6-v2 in the service; normalised here), for the posts the verbatim
filter admitted (``item.admitted``: a flood of verbatim copies is the surge detector's business,
not a topic shift). Posts without an author count in the society's centroid only. Two scopes,
both judged against their own normal variation, never against a fixed constant alone:

- **society**: the centroid of the last ``window_s`` against the centroid of the
  ``reference_s`` before it; the distance d = 1 - cos is sampled once per ``bucket_s`` and
  judged as a multiple of its own sampling noise (:func:`sampling_noise`: what two samples of
  that many posts from one unchanged distribution differ by; it falls as the volume grows, so
  a raw distance swings with the day's activity): d is a shift when that ratio exceeds the
  median of its last ``history`` samples by ``k_mad`` robust standard deviations (1.4826 x
  MAD) and ``min_noise_ratio``, and d exceeds ``min_distance``, with ``min_posts`` in the
  window. On the real-text background (bench/bench_detectors.py ``--background real``) the
  ratio stays near 0.9 at any hour (at most 1.6 over a clean week) while the raw distance
  moves from 0.005 on a busy day to 0.03 on a quiet night: judged raw, a week gave 3 false
  shifts a seed.
- **agent** (topic drift of one agent): the mean of the agent's first ``agent_reference``
  posts against an exponential moving average (``agent_alpha``) of its later ones; an agent with
  at least ``agent_min_posts`` posts drifts when that cosine falls ``agent_k_mad`` robust
  standard deviations below the median over all such agents and under ``agent_max_ratio`` x
  that median (a relative bar, so that it holds for any embedding model), and stays under it
  for ``agent_persist_posts`` consecutive posts (one off-topic post is not a drift). The
  population needs ``min_agents`` such agents: at 10 rather than 20 a drift of a quiet agent is
  judged from the hours when it happens, not once the population has grown (on the simulator's
  small day with the hashed bag-of-words embedder: 20/20 planted drifts caught, 2 false alerts
  on 20 clean days, against 12/20 and 8 for a population of 20 and no persistence).

Evidence (:mod:`detectors.evidence`): for the society, exemplars, near-duplicate clusters and
timeline of the window's posts that point most along the centroid's move (the best
``evidence_candidates`` by dot product with current mean minus reference mean, among the last
``evidence_posts`` admitted posts); for an agent, its kept posts, furthest from its first ones
first.

Memory: ``(window_s + reference_s) / bucket_s`` vector sums and ``history`` distances for the
society; two vectors (float32) per agent for at most ``max_agents`` agents (least recently
posting evicted): 3 kB per agent at 384 dimensions; the last ``evidence_posts`` admitted posts
(a vector and 400 characters each: 400 kB at 384 dimensions).

>>> from streams.events import PostEvent
>>> d = ShiftDetector(ShiftConfig(min_posts=5, history=4, min_history=4, bucket_s=600))
>>> rng = np.random.default_rng(0)
>>> base, other = np.eye(16)[0], np.eye(16)[1]
>>> for k in range(60):   # ten hours on one topic, then one hour on another
...     v = (base if k < 54 else other) + 0.3 * rng.standard_normal(16)
...     d.update(Item(PostEvent.model_construct(post_id=str(k)), k * 600.0, f"a{k}", vector=v))
...     fs = d.findings(k * 600.0)
>>> [(f.key, f.severity) for f in fs]
[('society', 'critical')]
"""

from __future__ import annotations

import math
import statistics
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from detectors.alert import Finding, Severity
from detectors.evidence import DEFAULT, EvidenceConfig, Sighting, build_evidence, snippet
from streams.events import PostEvent
from streams.state.base import Item, Sample, Snapshot
from streams.state.centroid import cosine


@dataclass(frozen=True, slots=True)
class ShiftConfig:
    bucket_s: float = 600.0
    window_s: float = 3600.0
    reference_s: float = 6 * 3600.0
    history: int = 144
    min_history: int = 12
    k_mad: float = 6.0
    min_noise_ratio: float = 2.0
    min_distance: float = 0.02
    min_posts: int = 30
    agent_reference: int = 8
    agent_alpha: float = 0.2
    agent_min_posts: int = 12
    agent_k_mad: float = 4.0
    agent_max_ratio: float = 0.6
    min_agents: int = 10
    agent_persist_posts: int = 2
    max_agents: int = 50_000
    evidence_posts: int = 200
    evidence_candidates: int = 40
    evidence: EvidenceConfig = DEFAULT  # exemplars, clusters, timeline (detectors.evidence)


@dataclass(slots=True)
class _AgentVec:
    reference: np.ndarray
    recent: np.ndarray
    n: int = 0
    first_t: float = 0.0


def sampling_noise(cur_sum: np.ndarray, n_cur: float, ref_sum: np.ndarray, n_ref: float
                   ) -> float:
    """Expected 1 - cos between the means of two samples of ``n_cur`` and ``n_ref`` unit
    vectors drawn from one distribution: (1 - |mu|^2) (1/n_cur + 1/n_ref) / (2 |mu|^2), with
    mu the pooled mean (to first order: the means' error orthogonal to mu over twice its squared
    length; the whole variance is taken, a slight over-estimate).

    >>> rng = np.random.default_rng(0)
    >>> def sample(n):  # the sum of n unit vectors around one topic
    ...     x = np.eye(64)[0] + 0.6 * rng.standard_normal((n, 64))
    ...     return (x / np.linalg.norm(x, axis=1, keepdims=True)).sum(0)
    >>> pairs = [(sample(60), sample(360)) for _ in range(200)]
    >>> seen = np.mean([1 - a @ b / np.linalg.norm(a) / np.linalg.norm(b) for a, b in pairs])
    >>> expected = np.mean([sampling_noise(a, 60, b, 360) for a, b in pairs])
    >>> round(float(seen / expected), 2)
    0.83
    """
    mu = (cur_sum + ref_sum) / (n_cur + n_ref)
    m2 = float(mu @ mu)
    if m2 <= 0:
        return math.inf
    return (1.0 - m2) * (1.0 / n_cur + 1.0 / n_ref) / (2.0 * m2)


def _robust(values: list[float]) -> tuple[float, float]:
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    return med, 1.4826 * mad


class ShiftDetector:
    type = "shift"
    kinds: ClassVar[tuple[type, ...]] = (PostEvent,)  # what ``update`` reads

    def __init__(self, config: ShiftConfig | None = None) -> None:
        self.cfg = config or ShiftConfig()
        self._buckets: deque[list] = deque()  # [bucket index, vector sum, count]
        self._distances: deque[float] = deque(maxlen=self.cfg.history)
        self._last_bucket: int | None = None
        self._society: dict | None = None
        self._agents: OrderedDict[str, _AgentVec] = OrderedDict()
        self._drifting: set[str] = set()
        self._low_since: dict[str, int] = {}  # agent -> its post count when it first fell low
        self._agent_findings: list[Finding] = []
        # the last evidence_posts admitted posts with their unit vectors, for the exemplars
        self._recent: deque[tuple[Sighting, np.ndarray]] = deque(maxlen=self.cfg.evidence_posts)

    def update(self, item: Item) -> None:
        if item.vector is None or not item.admitted or not isinstance(item.event, PostEvent):
            return
        t, author = item.t, item.author
        v = np.asarray(item.vector, dtype=np.float32)
        norm = float(np.linalg.norm(v))
        if norm == 0:
            return
        v = v / norm
        idx = int(t // self.cfg.bucket_s)
        if self._buckets and self._buckets[-1][0] == idx:
            self._buckets[-1][1] += v
            self._buckets[-1][2] += 1
        else:
            self._buckets.append([idx, v.astype(np.float64), 1])
        if author is not None:
            self._observe_agent(t, author, v)
        self._recent.append((Sighting(t, author, item.event.post_id,
                                      snippet(item.event.text, self.cfg.evidence.stored_chars)),
                             v))

    def _observe_agent(self, t: float, author: str, v: np.ndarray) -> None:
        cfg = self.cfg
        a = self._agents.get(author)
        if a is None:
            a = self._agents[author] = _AgentVec(np.zeros_like(v), np.zeros_like(v), 0, t)
            if len(self._agents) > cfg.max_agents:
                self._agents.popitem(last=False)
        else:
            self._agents.move_to_end(author)
        a.n += 1
        if a.n <= cfg.agent_reference:
            a.reference += v
            a.recent = a.reference / a.n
        else:
            a.recent = (1 - cfg.agent_alpha) * a.recent + cfg.agent_alpha * v

    def expire(self, now: float) -> None:
        """Society buckets older than the window and its reference go (agents are bounded by
        ``max_agents``, least recently posting evicted)."""
        if not self._buckets:  # (no vector seen in the window: the model is off)
            return
        cfg = self.cfg
        oldest = int(now // cfg.bucket_s) - int(cfg.window_s // cfg.bucket_s) - int(
            cfg.reference_s // cfg.bucket_s)
        while self._buckets and self._buckets[0][0] < oldest:
            self._buckets.popleft()

    def snapshot(self) -> Snapshot:
        return Snapshot(samples=[Sample(
            "shift_agents_tracked", float(len(self._agents)),
            help="Agents whose topic drift the semantic shift detector follows")])

    def findings(self, now: float) -> list[Finding]:
        out = []
        idx = int(now // self.cfg.bucket_s)
        if self._last_bucket != idx:  # judged once per bucket: d is a per-bucket sample
            self._last_bucket = idx
            self._society = self._judge_society(idx)
            self._agent_findings = self._judge_agents()
        if self._society is not None:
            out.append(self._society_finding(self._society))
        return out + self._agent_findings

    def _judge_society(self, idx: int) -> dict | None:
        cfg = self.cfg
        nw, nr = int(cfg.window_s // cfg.bucket_s), int(cfg.reference_s // cfg.bucket_s)
        while self._buckets and self._buckets[0][0] < idx - nw - nr:
            self._buckets.popleft()
        cur = [b for b in self._buckets if idx - nw < b[0] <= idx]
        ref = [b for b in self._buckets if b[0] <= idx - nw]
        n_cur, n_ref = sum(b[2] for b in cur), sum(b[2] for b in ref)
        if n_cur < cfg.min_posts or n_ref < cfg.min_posts:
            return None
        cur_sum, ref_sum = sum(b[1] for b in cur), sum(b[1] for b in ref)
        c = cosine(cur_sum, ref_sum)
        if math.isnan(c):
            return None
        d = 1.0 - c
        noise = sampling_noise(cur_sum, n_cur, ref_sum, n_ref)
        ratio = d / noise if noise > 0 else math.inf
        hist = list(self._distances)
        verdict = None
        if len(hist) >= cfg.min_history:
            med, sd = _robust(hist)
            bar = max(med + cfg.k_mad * sd, cfg.min_noise_ratio)
            if ratio > bar and d > cfg.min_distance:
                verdict = {"distance": round(d, 5), "expected_noise": round(noise, 5),
                           "noise_ratio": round(ratio, 3), "normal_median": round(med, 3),
                           "normal_sd": round(sd, 3), "threshold": round(bar, 3),
                           "window_posts": int(n_cur), "reference_posts": int(n_ref),
                           "z": round((ratio - med) / sd, 2) if sd > 0 else None,
                           **self._towards(cur_sum / n_cur - ref_sum / n_ref,
                                           (idx - nw + 1) * cfg.bucket_s)}
        if verdict is None and math.isfinite(ratio):  # normal variation, from normal times
            self._distances.append(ratio)
        return verdict

    def _towards(self, direction: np.ndarray, since: float) -> dict:
        """Evidence of the new direction: the window's kept posts (since ``since``) that point
        most along the move of the centroid, the best ``evidence_candidates`` of them ranked
        (:func:`detectors.evidence.build_evidence`)."""
        posts = [(float(v @ direction), s) for s, v in self._recent if s.t >= since]
        posts.sort(key=lambda ps: (-ps[0], ps[1].t, ps[1].item_id))
        return build_evidence((s for _, s in posts[: self.cfg.evidence_candidates]),
                              cfg=self.cfg.evidence)

    def _society_finding(self, v: dict) -> Finding:
        cfg = self.cfg
        severity: Severity = ("critical" if v["noise_ratio"] > 2 * v["threshold"] else "warning")
        summary = (f"Semantic shift: the last {cfg.window_s / 3600:g} h centroid is "
                   f"{v['distance']:.3f} from the previous {cfg.reference_s / 3600:g} h, "
                   f"{v['noise_ratio']:.1f}x its sampling noise (normally "
                   f"{v['normal_median']:.1f}x +/- {v['normal_sd']:.1f})")
        return Finding(self.type, "society", severity, summary,
                       {**v, "scope": "society", "window_s": cfg.window_s,
                        "reference_s": cfg.reference_s}, score=v["distance"],
                       labels={"scope": "society"})

    def _judge_agents(self) -> list[Finding]:
        cfg = self.cfg
        sims = {name: c for name, a in self._agents.items() if a.n >= cfg.agent_min_posts
                and not math.isnan(c := cosine(a.reference, a.recent))}
        if len(sims) < cfg.min_agents:
            return []
        med, sd = _robust(list(sims.values()))
        out = []
        drifting = set()
        low_since: dict[str, int] = {}
        for name, s in sims.items():
            k = cfg.agent_k_mad * (0.5 if name in self._drifting else 1.0)
            bar = min(med - k * sd, cfg.agent_max_ratio * med)
            if s >= bar:
                continue
            a = self._agents[name]
            low_since[name] = self._low_since.get(name, a.n)
            if name not in self._drifting and a.n - low_since[name] + 1 < cfg.agent_persist_posts:
                continue  # one off-topic post is not a drift: the next must stay away too
            drifting.add(name)
            summary = (f"Topic drift of agent {name}: its recent posts are at cosine {s:.2f} "
                       f"from its first {cfg.agent_reference} (agents' median {med:.2f})")
            # its kept posts, furthest from its first ones first
            own = sorted(((float(v @ a.reference), p) for p, v in self._recent
                          if p.agent == name), key=lambda vp: (vp[0], -vp[1].t))
            out.append(Finding(self.type, f"agent:{name}", "warning", summary,
                               {"scope": "agent", "agent": name, "similarity": round(s, 4),
                                "agents_median": round(med, 4), "agents_sd": round(sd, 4),
                                "posts": a.n, "first_post_t": a.first_t,
                                **build_evidence((p for _, p in own), cfg=cfg.evidence)},
                               score=1.0 - s, labels={"scope": "agent", "agent": name}))
        self._drifting = drifting
        self._low_since = low_since
        return out

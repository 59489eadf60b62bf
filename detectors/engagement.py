"""Engagement collapse or spike: rates of engagement against their own baseline.

Per ``bucket_s`` of event time the detector measures four rates:

- ``comment_rate``: comments per post in the bucket;
- ``vote_rate``: vote changes (|delta up| + |delta down|) per post in the bucket;
- ``reply_share``: share of the bucket's posts that got at least one comment within
  ``reply_horizon_s`` (known only that long after the bucket ends);
- ``new_agent_rate``: agents seen for the first time (after ``warmup_s``) per post.

Rates are heavy-tailed upwards (one viral thread), so each completed bucket's value is judged
as log(value + ``log_offset``), standardised against the median and robust standard deviation
(1.4826 x MAD, at least ``min_sd``) of the previous ``baseline_buckets``, and fed to two
Page-Hinkley tests (``river.drift.PageHinkley``, modes up and down). A change is reported when
a test has fired and ``confirm`` consecutive buckets have a robust z-score of at least ``z_min``
in the same direction; it stays reported while later buckets stay beyond ``z_hold``. Buckets
with fewer than ``min_posts`` posts are skipped, and a rise resting on fewer than
``min_rise_count`` events in the bucket is not judged a rise (on the real-text background a clean
week gave two "spikes" of one new agent against a baseline of none: Poisson noise, not a
change). All rates moving down make one "collapse" incident, all moving up one "spike" (a rise
of comments or votes per post is not judged).

Posts and comments without an author count in every rate; they are simply not agents (no
first appearance). When the new-agent rate moves, the evidence (:mod:`detectors.evidence`) is
the newcomers of the last bucket judged: their first posts or comments as exemplars, the
near-duplicate clusters among them (a farm of new accounts posting one text), and the
timeline of their first acts; the other rates are counts, with no texts to show.

Memory: ``baseline_buckets`` values per rate, the open buckets (each with the first acts of at
most ``evidence_agents`` new agents, 400 characters each), and the ids of the posts of the
last ``reply_horizon_s + bucket_s`` (for the reply share); first-seen agents, at most
``max_agents`` (least recently seen evicted).

>>> from datetime import datetime, timedelta, timezone
>>> from streams.events import CommentEvent, PostEvent
>>> t0, d = datetime(2026, 2, 1, tzinfo=timezone.utc), EngagementDetector(
...     EngagementConfig(bucket_s=600, baseline_buckets=12, min_posts=4))
>>> found = []
>>> for m in range(0, 24 * 60, 2):            # a post every 2 min, 3 comments each; then none
...     t = t0 + timedelta(minutes=m)
...     d.update(Item.of(PostEvent(id=f"post:{m}", event_time=t, observed_at=t,
...                                post_id=str(m), author=f"a{m % 50}")))
...     for c in range(3 if m < 20 * 60 else 0):
...         d.update(Item.of(CommentEvent(id=f"comment:{m}.{c}", event_time=t, observed_at=t,
...             comment_id=f"{m}.{c}", post_id=str(m), author=f"b{(m + c) % 40}")))
...     found += [f.key for f in d.findings(t.timestamp())]
>>> sorted(set(found))
['collapse']
"""

from __future__ import annotations

import math
import statistics
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from river.drift import PageHinkley

from detectors.alert import Finding, Severity
from detectors.evidence import DEFAULT, EvidenceConfig, Sighting, build_evidence, snippet
from streams.events import CommentEvent, PostEvent, VoteEvent
from streams.state.base import Item, Sample, Snapshot

RATES = ("comment_rate", "vote_rate", "reply_share", "new_agent_rate")
# Comments and votes per post are means of heavy-tailed counts: one viral thread lifts them,
# which is a hot thread, not an engagement change; their rise is not judged, their fall is.
DIRECTIONS = {"comment_rate": ("down",), "vote_rate": ("down",),
              "reply_share": ("up", "down"), "new_agent_rate": ("up", "down")}


@dataclass(frozen=True, slots=True)
class EngagementConfig:
    bucket_s: float = 600.0
    baseline_buckets: int = 36
    min_baseline: int = 6
    min_posts: int = 20
    reply_horizon_s: float = 1800.0
    z_min: float = 4.0
    z_hold: float = 2.0
    confirm: int = 2
    log_offset: float = 0.05
    min_sd: float = 0.05
    min_rise_count: int = 5
    ph_delta: float = 0.5
    ph_threshold: float = 8.0
    warmup_s: float = 3 * 3600.0
    max_agents: int = 1_000_000
    evidence_agents: int = 50
    evidence: EvidenceConfig = DEFAULT  # exemplars, clusters, timeline (detectors.evidence)


@dataclass(slots=True)
class _Bucket:
    posts: int = 0
    comments: int = 0
    votes: int = 0
    new_agents: int = 0
    replied: set[str] = field(default_factory=set)
    post_ids: set[str] = field(default_factory=set)
    newcomers: list[Sighting] = field(default_factory=list)  # first acts of its new agents


@dataclass(slots=True)
class _Rate:
    history: deque[float]
    up: PageHinkley
    down: PageHinkley
    active: str | None = None
    evidence: dict | None = None
    streak: int = 0
    streak_dir: str = ""
    fired_ph: bool = False


class EngagementDetector:
    type = "engagement"

    def __init__(self, config: EngagementConfig | None = None) -> None:
        self.cfg = config or EngagementConfig()
        c = self.cfg
        self._rates = {r: _Rate(deque(maxlen=c.baseline_buckets),
                                PageHinkley(min_instances=1, delta=c.ph_delta,
                                            threshold=c.ph_threshold, mode="up"),
                                PageHinkley(min_instances=1, delta=c.ph_delta,
                                            threshold=c.ph_threshold, mode="down"))
                       for r in RATES}
        self._buckets: dict[int, _Bucket] = {}
        self._post_bucket: dict[str, int] = {}
        self._agents: OrderedDict[str, None] = OrderedDict()
        self._start: float | None = None
        self._closed_upto: int | None = None   # last bucket whose counts were judged
        self._replies_upto: int | None = None  # last bucket whose reply share was judged
        # evidence of the last bucket whose new-agent rate was judged changed: its newcomers
        self._newcomers: dict | None = None
        # the (current, reply horizon) buckets of the last findings, whether a bucket opened
        # since, and whether those findings were none: the same bounds and no new bucket
        # leave nothing to judge, and the same findings
        self._scanned: tuple[int, int] | None = None
        self._opened = False
        self._quiet = False

    def update(self, item: Item) -> None:
        event, t = item.event, item.t
        if self._start is None:
            self._start = t
        idx = int(t // self.cfg.bucket_s)
        if self._closed_upto is not None and idx <= self._closed_upto:
            return  # late for a judged bucket: dropped rather than rewriting history
        b = self._buckets.get(idx)
        if b is None:
            b = self._buckets[idx] = _Bucket()
            self._opened = True
        kind = type(event)
        if kind is PostEvent:
            b.posts += 1
            b.post_ids.add(event.post_id)
            self._post_bucket[event.post_id] = idx
            self._seen(item, b)
        elif kind is CommentEvent:
            b.comments += 1
            pb = self._post_bucket.get(event.post_id)
            if pb is not None:
                replied = self._buckets.get(pb)
                if replied is not None:
                    replied.replied.add(event.post_id)
            self._seen(item, b)
        elif kind is VoteEvent:
            b.votes += abs(event.delta_up) + abs(event.delta_down)

    def _seen(self, item: Item, b: _Bucket) -> None:
        author, t = item.author, item.t
        if author is None:
            return
        try:
            self._agents.move_to_end(author)  # seen before: now the most recent
            return
        except KeyError:
            pass
        self._agents[author] = None
        if len(self._agents) > self.cfg.max_agents:
            self._agents.popitem(last=False)
        if self._start is not None and t - self._start >= self.cfg.warmup_s:
            b.new_agents += 1
            if len(b.newcomers) < self.cfg.evidence_agents:
                event = item.event
                item_id = (event.post_id if isinstance(event, PostEvent)
                           else f"{event.post_id}/{event.comment_id}")  # type: ignore[union-attr]
                b.newcomers.append(Sighting(t, author, item_id,
                                            snippet(event.text, self.cfg.evidence.stored_chars)))

    def expire(self, now: float) -> None:
        """Nothing to drop here: :meth:`findings` closes each bucket once judged, and the post
        ids of a bucket go with it after ``reply_horizon_s``."""

    def snapshot(self) -> Snapshot:
        moving = sum(r.active is not None for r in self._rates.values())
        return Snapshot(samples=[Sample(
            "engagement_rates_moving", float(moving),
            help="Engagement rates currently judged changed (collapse or spike)")])

    def findings(self, now: float) -> list[Finding]:
        cfg = self.cfg
        current = int(now // cfg.bucket_s)
        horizon = int((now - cfg.reply_horizon_s) // cfg.bucket_s)
        if self._quiet and not self._opened and self._scanned == (current, horizon):
            return []  # (every bucket below both bounds was judged by the last call)
        self._scanned, self._opened = (current, horizon), False
        for idx in sorted(i for i in self._buckets if i < current
                          and (self._closed_upto is None or i > self._closed_upto)):
            b = self._buckets[idx]
            self._closed_upto = idx
            if b.posts >= cfg.min_posts:
                self._judge("comment_rate", idx, b.comments, b.posts)
                if self._rates["vote_rate"].history or b.votes:
                    self._judge("vote_rate", idx, b.votes, b.posts)
                if self._start is not None and idx * cfg.bucket_s - self._start >= cfg.warmup_s:
                    self._judge("new_agent_rate", idx, b.new_agents, b.posts)
                    if self._rates["new_agent_rate"].evidence is not None:
                        self._newcomers = build_evidence(b.newcomers, cfg=cfg.evidence)
        for idx in sorted(i for i in self._buckets if i < horizon
                          and (self._replies_upto is None or i > self._replies_upto)):
            b = self._buckets.pop(idx)
            self._replies_upto = idx
            for pid in b.post_ids:
                self._post_bucket.pop(pid, None)
            if b.posts >= cfg.min_posts:
                self._judge("reply_share", idx, len(b.replied), b.posts)
        out = []
        for direction, word in (("down", "collapse"), ("up", "spike")):
            active = {n: r.evidence for n, r in self._rates.items()
                      if r.active == direction and r.evidence}
            if active:
                out.append(self._finding(direction, word, active))
        self._quiet = not out
        return out

    def _judge(self, name: str, idx: int, count: int, posts: int) -> None:
        """Judge one bucket's rate ``count / posts``."""
        cfg, r = self.cfg, self._rates[name]
        x = count / posts
        y = math.log(x + cfg.log_offset)  # rates are heavy-tailed upwards: judge their log
        hist = list(r.history)
        r.history.append(y)
        if len(hist) < cfg.min_baseline:
            return
        med = statistics.median(hist)
        sd = max(1.4826 * statistics.median(abs(v - med) for v in hist), cfg.min_sd)
        z = (y - med) / sd
        direction = "up" if z > 0 else "down"
        if direction not in DIRECTIONS[name] or (direction == "up"
                                                 and count < cfg.min_rise_count):
            z = 0.0
        r.up.update(z)
        r.down.update(z)
        ph = r.up if direction == "up" else r.down
        r.streak = r.streak + 1 if (abs(z) >= cfg.z_min and r.streak_dir == direction) else (
            1 if abs(z) >= cfg.z_min else 0)
        r.streak_dir = direction
        r.fired_ph = r.fired_ph or ph.drift_detected
        if r.active == direction and abs(z) >= cfg.z_hold:
            pass
        elif r.active is None and r.fired_ph and r.streak >= cfg.confirm:
            r.active = direction
        else:
            if r.streak == 0:
                r.fired_ph = False
            r.active = None
            r.evidence = None
            return
        r.evidence = {"rate": name, "direction": direction, "value": round(x, 4),
                      "baseline_median": round(math.exp(med) - cfg.log_offset, 4),
                      "z": round(z, 2), "bucket_start": idx * cfg.bucket_s,
                      "bucket_s": cfg.bucket_s, "posts_in_bucket": posts,
                      "baseline_values": [round(math.exp(v) - cfg.log_offset, 4)
                                          for v in hist]}

    def _finding(self, direction: str, word: str, active: dict[str, dict]) -> Finding:
        """One incident per direction: a collapse moves several rates at once."""
        z = max(abs(ev["z"]) for ev in active.values())
        severity: Severity = "critical" if z >= 2 * self.cfg.z_min else "warning"
        parts = ", ".join(f"{n} {ev['value']} vs {ev['baseline_median']}"
                          for n, ev in sorted(active.items()))
        summary = f"Engagement {word}: {parts}"
        evidence = {"direction": direction, "rates": active, "max_abs_z": z}
        if "new_agent_rate" in active and self._newcomers is not None:
            evidence |= self._newcomers  # who the newcomers are (or the few of a drop)
        return Finding(self.type, word, severity, summary, evidence,
                       score=z, labels={"direction": direction,
                                        "rates": ",".join(sorted(active))})

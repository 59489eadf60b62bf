"""Thread structure by popularity (Superminds Test, platform-wide): reply depth, distinct
repliers, and the share of posts left without a comment, by upvote bucket.

Definitions (the paper gives the findings, not the formulas; these are our choices):

- ``thread_depth{bucket}``: mean, over posts with at least one comment, of the post's maximum
  reply depth (1 = direct comments only). Published: near 1.0 at every popularity level.
- ``thread_repliers{bucket}``: mean number of distinct commenting agents other than the post's
  author, over posts with at least one comment.
- ``threads_uncommented_ratio{bucket}``: among posts at least ``horizon`` old (event time),
  the share that got no comment within ``horizon`` of being posted. "Old" is judged by the
  latest event time the engine saw (:meth:`ThreadsEngine.expire`): live, each events partition's
  own, so a quiet partition's verdicts lag the busy ones'.
- bucket: the post's upvotes (``buckets`` are lower bounds; default 0, 1-4, 5-19, 20-99,
  100+), as last seen from its PostEvent or VoteEvents; a post's uncommented verdict is
  bucketed by its upvotes when the horizon passes.

State is per post and keyed by post id, so it partitions like the events topic. Each partition
reports :meth:`ThreadsEngine.partial`, plain sums per bucket and per day that add up across
partitions; :func:`merge` sums them and :func:`totals_snapshot` turns any such sum into the
Snapshot. A post is kept live for ``retention`` after it was posted, then folded into the
sums and forgotten (later comments count in ``threads_late_comments_total``); memory is one
record per live post plus its distinct repliers.

>>> from datetime import datetime, timedelta, timezone
>>> from streams.events import CommentEvent, PostEvent
>>> t = datetime(2026, 2, 1, tzinfo=timezone.utc)
>>> eng = ThreadsEngine()
>>> eng.update(PostEvent(id="post:p", event_time=t, observed_at=t, post_id="p", author="a",
...                      upvotes=7))
>>> for i, (who, depth) in enumerate([("b", 1), ("c", 2), ("b", 3)]):
...     eng.update(CommentEvent(id=f"comment:{i}", event_time=t, observed_at=t, comment_id=str(i),
...                             post_id="p", author=who, depth=depth, reply_to="a"))
>>> snap = eng.snapshot()
>>> snap.value("thread_depth", bucket="5-19"), snap.value("thread_repliers", bucket="5-19")
(3.0, 2.0)
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any

from streams.events import CommentEvent, PostEvent, VoteEvent
from streams.state.base import Sample, Snapshot

DEFAULT_BUCKETS = (0, 1, 5, 20, 100)


@dataclass(frozen=True, slots=True)
class ThreadsConfig:
    """horizon [24 h]: when a post without comment counts as uncommented; retention [7 d]:
    how long a post's own state is kept; buckets [0, 1, 5, 20, 100]: upvote lower bounds;
    days_kept [400]: per-day rows kept."""

    horizon: timedelta = timedelta(hours=24)
    retention: timedelta = timedelta(days=7)
    buckets: tuple[int, ...] = DEFAULT_BUCKETS
    days_kept: int = 400


def bucket_labels(bounds: tuple[int, ...]) -> list[str]:
    out = []
    for i, lo in enumerate(bounds):
        hi = bounds[i + 1] - 1 if i + 1 < len(bounds) else None
        out.append(f"{lo}+" if hi is None else str(lo) if hi == lo else f"{lo}-{hi}")
    return out


def bucket_of(upvotes: int, bounds: tuple[int, ...]) -> str:
    labels = bucket_labels(bounds)
    for i in range(len(bounds) - 1, -1, -1):
        if upvotes >= bounds[i]:
            return labels[i]
    return labels[0]


@dataclass(slots=True)
class Sums:
    """Additive thread statistics of one group of posts (a bucket or a day)."""

    posts: int = 0
    commented: int = 0
    depth_sum: int = 0
    repliers_sum: int = 0
    comments: int = 0
    matured: int = 0
    matured_uncommented: int = 0

    def add(self, other: Sums) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, Any]:
        return {
            "posts": self.posts, "commented": self.commented, "comments": self.comments,
            "thread_depth": self.depth_sum / self.commented if self.commented else None,
            "thread_repliers": self.repliers_sum / self.commented if self.commented else None,
            "matured": self.matured,
            "threads_uncommented_ratio":
                self.matured_uncommented / self.matured if self.matured else None,
        }


@dataclass(slots=True)
class Partial:
    """What one partition reports; partials of disjoint partitions add up."""

    by_bucket: dict[str, Sums] = field(default_factory=dict)
    by_day: dict[str, Sums] = field(default_factory=dict)
    late_comments: int = 0

    def add(self, other: Partial) -> None:
        for mine, theirs in ((self.by_bucket, other.by_bucket), (self.by_day, other.by_day)):
            for k, s in theirs.items():
                mine.setdefault(k, Sums()).add(s)
        self.late_comments += other.late_comments


def merge(parts: Iterable[Partial]) -> Partial:
    out = Partial()
    for p in parts:
        out.add(p)
    return out


@dataclass(slots=True)
class _Thread:
    created: datetime | None = None
    author: str | None = None
    upvotes: int = 0
    comments: int = 0
    max_depth: int = 0
    repliers: set[str] = field(default_factory=set)
    first_comment: datetime | None = None
    verdict: tuple[str, bool] | None = None  # (bucket at horizon, uncommented)

    def sums(self) -> Sums:
        s = Sums(posts=1, comments=self.comments)
        if self.comments:
            s.commented, s.depth_sum = 1, self.max_depth
            s.repliers_sum = len(self.repliers - {self.author})
        return s


class ThreadsEngine:
    """Per-post thread state of one partition (or of the whole stream)."""

    def __init__(self, config: ThreadsConfig | None = None) -> None:
        self.config = config or ThreadsConfig()
        self._live: dict[str, _Thread] = {}
        self._done: dict[str, None] = {}  # folded ids (oldest first): late events stay late
        self._final = Partial()
        self._horizon: list[tuple[datetime, str]] = []
        self._retire: list[tuple[datetime, str]] = []

    def update(self, event: PostEvent | CommentEvent | VoteEvent) -> None:
        if isinstance(event, VoteEvent):
            if event.target == "post" and event.post_id in self._live:
                self._live[event.post_id].upvotes = event.upvotes
            return
        pid = event.post_id
        if pid in self._done:
            if isinstance(event, CommentEvent):
                self._final.late_comments += 1
            return
        th = self._live.get(pid)
        if th is None:
            th = self._live[pid] = _Thread()
        if isinstance(event, PostEvent):
            th.author, th.upvotes = event.author, event.upvotes
            if th.created is None:
                th.created = event.event_time
                heapq.heappush(self._horizon, (event.event_time + self.config.horizon, pid))
                heapq.heappush(self._retire, (event.event_time + self.config.retention, pid))
            return
        if not isinstance(event, CommentEvent):
            return
        if th.author is None and event.post_author:
            th.author = event.post_author
        if th.created is None and th.first_comment is None:  # post not seen (yet)
            heapq.heappush(self._retire, (event.event_time + self.config.retention, pid))
        th.comments += 1
        th.max_depth = max(th.max_depth, event.depth)
        th.repliers.add(event.author)
        if th.first_comment is None or event.event_time < th.first_comment:
            th.first_comment = event.event_time

    def expire(self, now: datetime) -> None:
        """Pass horizons (uncommented verdicts) and fold posts older than ``retention``."""
        while self._horizon and self._horizon[0][0] <= now:
            due, pid = heapq.heappop(self._horizon)
            th = self._live.get(pid)
            if th is not None and th.created is not None:
                uncommented = th.first_comment is None or th.first_comment > due
                th.verdict = (bucket_of(th.upvotes, self.config.buckets), uncommented)
        while self._retire and self._retire[0][0] <= now:
            due, pid = heapq.heappop(self._retire)
            th = self._live.get(pid)
            if th is None or (th.created is not None and th.created + self.config.retention > due):
                continue  # a comment's provisional entry; the post's own entry comes later
            del self._live[pid]
            self._fold(self._final, th)
            self._done[pid] = None
        keep = 2 * max(len(self._live), 1024)  # only recently folded posts still see events
        while len(self._done) > 2 * keep:
            for pid in list(self._done)[:keep]:
                del self._done[pid]

    def _fold(self, into: Partial, th: _Thread) -> None:
        s = th.sums()
        into.by_bucket.setdefault(bucket_of(th.upvotes, self.config.buckets), Sums()).add(s)
        if th.verdict is not None:
            b, unc = th.verdict
            into.by_bucket.setdefault(b, Sums()).add(Sums(matured=1, matured_uncommented=unc))
            s.matured, s.matured_uncommented = 1, int(unc)
        when = th.created or th.first_comment
        if when is not None:
            into.by_day.setdefault(when.date().isoformat(), Sums()).add(s)

    def partial(self) -> Partial:
        """This partition's sums: folded posts plus the live ones as they stand."""
        out = Partial()
        out.add(self._final)
        for th in self._live.values():
            self._fold(out, th)
        while len(out.by_day) > self.config.days_kept:
            del out.by_day[min(out.by_day)]
        return out

    def thread(self, post_id: str) -> dict[str, Any] | None:
        """One live thread's figures (None once folded or never seen)."""
        th = self._live.get(post_id)
        if th is None:
            return None
        return {"post_id": post_id, "author": th.author, "upvotes": th.upvotes,
                "bucket": bucket_of(th.upvotes, self.config.buckets), "comments": th.comments,
                "depth": th.max_depth, "repliers": len(th.repliers - {th.author})}

    def snapshot(self) -> Snapshot:
        return totals_snapshot(self.partial(), self.config.buckets)

    def __len__(self) -> int:
        """Live (not yet folded) threads."""
        return len(self._live)


def totals_snapshot(total: Partial, buckets: tuple[int, ...] = DEFAULT_BUCKETS) -> Snapshot:
    """The Snapshot of (merged) partial sums."""
    samples: list[Sample] = []
    for label in bucket_labels(buckets):
        s = total.by_bucket.get(label, Sums())
        d = s.as_dict()
        lab = (("bucket", label),)
        samples.append(Sample("threads", float(s.posts), lab, help="Posts seen, by upvotes"))
        for name, helptext in (
            ("thread_depth", "Mean maximum reply depth of commented posts"),
            ("thread_repliers", "Mean distinct repliers (not the author) of commented posts"),
            ("threads_uncommented_ratio", "Share of posts without comment after the horizon"),
        ):
            if d[name] is not None:
                samples.append(Sample(name, float(d[name]), lab, help=helptext))
    samples.append(Sample("threads_late_comments_total", float(total.late_comments),
                          kind="counter", help="Comments on posts already folded"))
    details = {
        "threads_by_bucket": {b: s.as_dict() for b, s in total.by_bucket.items()},
        "threads_daily": {d: total.by_day[d].as_dict() for d in sorted(total.by_day)},
    }
    return Snapshot(samples=samples, details=details)

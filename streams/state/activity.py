"""Activity counts per UTC minute, hour and day (the paper's daily activity, A1).

For every calendar bucket (aligned to UTC, by *event* time) the engine keeps: posts,
comments, vote changes (with the up/down deltas), active agents (distinct authors of a post
or comment), new agents (authors whose first post or comment falls in the bucket), active
submolts (distinct submolts posted to) and comments per post.

Memory: one small record per retained bucket, plus the distinct-name sets of those buckets,
plus one first-seen entry per agent ever seen (``O(agents)``, about 100 bytes each). Retention
per granularity is bounded by ``keep`` (defaults: 1,440 minutes, 720 hours, 3,660 days).

>>> from datetime import datetime, timezone
>>> from streams.events import PostEvent, CommentEvent
>>> t = datetime(2026, 2, 1, 12, 30, tzinfo=timezone.utc)
>>> a = ActivityState()
>>> a.update(PostEvent(id="post:p", event_time=t, observed_at=t, post_id="p",
...                    author="ann", submolt="general"))
>>> a.update(CommentEvent(id="comment:c", event_time=t, observed_at=t, comment_id="c",
...                       post_id="p", author="bob", reply_to="ann"))
>>> day = a.current("day")
>>> day["posts"], day["comments"], day["active_agents"], day["comments_per_post"]
(1, 1, 2, 1.0)
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from streams.events import AgentEvent, CommentEvent, Event, PostEvent, SubmoltEvent, VoteEvent
from streams.state.base import Sample, Snapshot

GRANULARITIES: dict[str, int] = {"minute": 60, "hour": 3600, "day": 86400}
DEFAULT_KEEP: dict[str, int] = {"minute": 1440, "hour": 720, "day": 3660}


@dataclass(slots=True)
class Bucket:
    start: int  # unix seconds
    posts: int = 0
    comments: int = 0
    vote_changes: int = 0
    upvotes: int = 0
    downvotes: int = 0
    agents: set[str] = field(default_factory=set)
    new_agents: set[str] = field(default_factory=set)
    submolts: set[str] = field(default_factory=set)

    def row(self) -> dict[str, Any]:
        return {
            "start": datetime.fromtimestamp(self.start, UTC).isoformat(),
            "posts": self.posts,
            "comments": self.comments,
            "vote_changes": self.vote_changes,
            "upvotes": self.upvotes,
            "downvotes": self.downvotes,
            "active_agents": len(self.agents),
            "new_agents": len(self.new_agents),
            "active_submolts": len(self.submolts),
            "comments_per_post": self.comments / self.posts if self.posts else None,
        }


class ActivityState:
    """Calendar-bucketed activity counts; feed it de-duplicated events."""

    def __init__(self, keep: dict[str, int] | None = None) -> None:
        self.keep = {**DEFAULT_KEEP, **(keep or {})}
        self.buckets: dict[str, OrderedDict[int, Bucket]] = {
            g: OrderedDict() for g in GRANULARITIES
        }
        self.first_seen: dict[str, int] = {}
        self.totals = {"posts": 0, "comments": 0, "vote_changes": 0, "agents": 0, "submolts": 0}
        self._submolts_seen: set[str] = set()
        self.latest: int | None = None

    def _bucket(self, granularity: str, ts: int) -> Bucket:
        size = GRANULARITIES[granularity]
        start = ts - ts % size
        od = self.buckets[granularity]
        b = od.get(start)
        if b is None:
            b = od[start] = Bucket(start)
            if len(od) > 1 and next(reversed(od)) != start:  # out-of-order arrival: keep sorted
                self.buckets[granularity] = OrderedDict(sorted(od.items()))
            while len(self.buckets[granularity]) > self.keep[granularity]:
                self.buckets[granularity].popitem(last=False)
        return b

    def update(self, event: Event) -> None:
        ts = int(event.event_time.timestamp())
        self.latest = ts if self.latest is None else max(self.latest, ts)
        if isinstance(event, PostEvent | CommentEvent):
            new = event.author not in self.first_seen
            if new:
                self.first_seen[event.author] = ts
                self.totals["agents"] += 1
            is_post = isinstance(event, PostEvent)
            self.totals["posts" if is_post else "comments"] += 1
            submolt = event.submolt if isinstance(event, PostEvent) else None
            if submolt and submolt not in self._submolts_seen:
                self._submolts_seen.add(submolt)
                self.totals["submolts"] += 1
            for g in GRANULARITIES:
                b = self._bucket(g, ts)
                if is_post:
                    b.posts += 1
                else:
                    b.comments += 1
                b.agents.add(event.author)
                if new:
                    b.new_agents.add(event.author)
                if submolt:
                    b.submolts.add(submolt)
        elif isinstance(event, VoteEvent):
            self.totals["vote_changes"] += 1
            for g in GRANULARITIES:
                b = self._bucket(g, ts)
                b.vote_changes += 1
                b.upvotes += event.delta_up
                b.downvotes += event.delta_down
        elif isinstance(event, AgentEvent | SubmoltEvent):
            pass  # profiles carry no activity of their own: an agent is active when it writes

    def expire(self, now: datetime) -> None:
        """Buckets are bounded by count (``keep``), so there is nothing time-based to drop."""

    def current(self, granularity: str) -> dict[str, Any]:
        """The bucket holding the latest event time (in progress while events arrive)."""
        if self.latest is None:
            return Bucket(0).row()
        size = GRANULARITIES[granularity]
        b = self.buckets[granularity].get(self.latest - self.latest % size)
        return (b or Bucket(self.latest - self.latest % size)).row()

    def series(self, granularity: str) -> list[dict[str, Any]]:
        return [b.row() for b in self.buckets[granularity].values()]

    def snapshot(self) -> Snapshot:
        samples = [
            Sample("posts_total", float(self.totals["posts"]), kind="counter",
                   help="Distinct posts seen"),
            Sample("comments_total", float(self.totals["comments"]), kind="counter",
                   help="Distinct comments seen"),
            Sample("vote_changes_total", float(self.totals["vote_changes"]), kind="counter",
                   help="Vote-count changes seen"),
            Sample("agents_total", float(self.totals["agents"]), kind="counter",
                   help="Distinct agents that posted or commented"),
            Sample("submolts_total", float(self.totals["submolts"]), kind="counter",
                   help="Distinct submolts posted to"),
        ]
        for g in GRANULARITIES:
            row = self.current(g)
            for name in ("posts", "comments", "vote_changes", "active_agents", "new_agents",
                         "active_submolts", "comments_per_post"):
                value = row[name]
                samples.append(Sample(f"activity_{name}", float(value or 0.0),
                                      (("window", g),),
                                      help=f"{name} in the current UTC minute, hour or day "
                                      "bucket (event time)"))
        details = {"activity": {g: self.series(g) for g in GRANULARITIES}}
        return Snapshot(samples, details)

"""Activity counts per UTC minute, hour and day (the paper's daily activity, A1).

For every calendar bucket (aligned to UTC, by *event* time) the engine keeps: posts,
comments, vote changes (with the up/down deltas), active agents (distinct authors of a post
or comment), new agents (authors whose first post or comment falls in the bucket), active
submolts (distinct submolts posted to) and comments per post.

Unknown authors (``item.author`` None: a post or comment whose author the platform no longer
names) count as posts and comments (totals and buckets) but not as active or new agents;
``items_without_author_total`` says how many there were.

Cost: three bucket look-ups (the current bucket of each granularity is cached) and a few set
adds an event; ``expire`` pops the buckets now due from a heap of freeze times (O(log
buckets) a bucket, once; nothing else is touched, whatever the retention). Memory: one small
record per retained bucket; a bucket's distinct-name sets (agents, new agents, submolts) are
kept while it can still receive events, and dropped for counts once event time is
``freeze_after`` (default 2 h) past its end (a later event still adds to its counts, never to
its distinct sets: ``activity_late_items_total``; a bucket an out-of-order event opens after
that freezes at the next ``expire``); plus one first-seen entry per agent ever seen
(``O(agents)``, about 100 bytes each). Retention per granularity is bounded by ``keep``
(defaults: 1,440 minutes, 720 hours, 3,660 days).

>>> from datetime import datetime, timezone
>>> from streams.events import PostEvent, CommentEvent
>>> t = datetime(2026, 2, 1, 12, 30, tzinfo=timezone.utc)
>>> a = ActivityState()
>>> a.update(Item.of(PostEvent(id="post:p", event_time=t, observed_at=t, post_id="p",
...                            author="ann", submolt="general")))
>>> a.update(Item.of(CommentEvent(id="comment:c", event_time=t, observed_at=t, comment_id="c",
...                               post_id="p", author="bob", reply_to="ann")))
>>> day = a.current("day")
>>> day["posts"], day["comments"], day["active_agents"], day["comments_per_post"]
(1, 1, 2, 1.0)
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from streams.events import CommentEvent, PostEvent, VoteEvent
from streams.state.base import Item, Sample, Snapshot

GRANULARITIES: dict[str, int] = {"minute": 60, "hour": 3600, "day": 86400}
_NAMES = tuple(GRANULARITIES)
DEFAULT_KEEP: dict[str, int] = {"minute": 1440, "hour": 720, "day": 3660}
FREEZE_AFTER = 7200.0


@lru_cache(maxsize=8192)  # more than the buckets kept: a snapshot formats none again
def _iso(start: int) -> str:
    return datetime.fromtimestamp(start, UTC).isoformat()


@dataclass(slots=True)
class Bucket:
    start: int  # unix seconds
    posts: int = 0
    comments: int = 0
    vote_changes: int = 0
    upvotes: int = 0
    downvotes: int = 0
    agents: set[str] | None = field(default_factory=set)  # None once frozen to the counts
    # made at their first name (most buckets get no new agent, a comment no submolt)
    new_agents: set[str] | None = None
    submolts: set[str] | None = None
    n_agents: int = 0
    n_new_agents: int = 0
    n_submolts: int = 0

    def freeze(self) -> None:
        """Keep the distinct counts, drop the sets (the bucket can no longer change much)."""
        if self.agents is not None:
            self.n_agents, self.n_new_agents = len(self.agents), len(self.new_agents or ())
            self.n_submolts = len(self.submolts or ())
            self.agents = self.new_agents = self.submolts = None

    def row(self) -> dict[str, Any]:
        frozen = self.agents is None
        return {
            "start": _iso(self.start),
            "posts": self.posts,
            "comments": self.comments,
            "vote_changes": self.vote_changes,
            "upvotes": self.upvotes,
            "downvotes": self.downvotes,
            "active_agents": self.n_agents if frozen else len(self.agents or ()),
            "new_agents": self.n_new_agents if frozen else len(self.new_agents or ()),
            "active_submolts": self.n_submolts if frozen else len(self.submolts or ()),
            "comments_per_post": self.comments / self.posts if self.posts else None,
        }


class ActivityState:
    """Calendar-bucketed activity counts; feed it items of de-duplicated events."""

    def __init__(self, keep: dict[str, int] | None = None,
                 freeze_after: float = FREEZE_AFTER) -> None:
        self.keep = {**DEFAULT_KEEP, **(keep or {})}
        self.freeze_after = freeze_after
        self.buckets: dict[str, OrderedDict[int, Bucket]] = {
            g: OrderedDict() for g in GRANULARITIES
        }
        # the (minute, hour, day) buckets of the latest minute, and that minute's span
        self._cur: tuple[Bucket, ...] = ()
        self._cur_span = (0, 0)
        self.first_seen: dict[str, int] = {}
        self.totals = {"posts": 0, "comments": 0, "vote_changes": 0, "agents": 0, "submolts": 0,
                       "without_author": 0, "late": 0}
        self._submolts_seen: set[str] = set()
        self.latest: int | None = None
        # (freeze time, granularity index, start) of every bucket created: a heap, so each
        # tick freezes what is due in O(log buckets) and touches nothing else
        self._due: list[tuple[float, int, int]] = []

    def _bucket(self, granularity: str, ts: int) -> Bucket:
        size = GRANULARITIES[granularity]
        start = ts - ts % size
        od = self.buckets[granularity]
        b = od.get(start)
        if b is None:
            b = od[start] = Bucket(start)
            heapq.heappush(self._due, (start + size + self.freeze_after,
                                       _NAMES.index(granularity), start))
            if len(od) > 1 and next(reversed(od)) != start:  # out-of-order arrival: keep sorted
                od = self.buckets[granularity] = OrderedDict(sorted(od.items()))
            while len(od) > self.keep[granularity]:
                od.popitem(last=False)
        return b

    def _buckets(self, ts: int) -> tuple[Bucket, ...]:
        """The minute, hour and day buckets of ``ts`` (cached for the latest minute)."""
        lo, hi = self._cur_span
        if lo <= ts < hi:
            return self._cur
        out = tuple(self._bucket(g, ts) for g in GRANULARITIES)
        if self.latest is not None and ts - ts % 60 == self.latest - self.latest % 60:
            self._cur, self._cur_span = out, (ts - ts % 60, ts - ts % 60 + 60)
        return out

    def update(self, item: Item) -> None:
        event = item.event
        ts = int(item.t)
        latest = self.latest
        if latest is None or ts > latest:
            self.latest = ts
        kind = type(event)
        if kind is CommentEvent or kind is PostEvent:
            totals = self.totals
            author = item.author
            new = False
            if author is None:
                totals["without_author"] += 1
            elif author not in self.first_seen:
                new = True
                self.first_seen[author] = ts
                totals["agents"] += 1
            is_post = kind is PostEvent
            submolt = event.submolt if is_post else None
            if is_post:
                totals["posts"] += 1
                if submolt and submolt not in self._submolts_seen:
                    self._submolts_seen.add(submolt)
                    totals["submolts"] += 1
            else:
                totals["comments"] += 1
            lo, hi = self._cur_span
            for b in (self._cur if lo <= ts < hi else self._buckets(ts)):
                if is_post:
                    b.posts += 1
                else:
                    b.comments += 1
                agents = b.agents
                if agents is None:
                    totals["late"] += 1
                    continue
                if author is not None:
                    agents.add(author)
                    if new:
                        if b.new_agents is None:
                            b.new_agents = {author}
                        else:
                            b.new_agents.add(author)
                if submolt:
                    if b.submolts is None:
                        b.submolts = {submolt}
                    else:
                        b.submolts.add(submolt)
        elif kind is VoteEvent:
            self.totals["vote_changes"] += 1
            up, down = event.delta_up, event.delta_down
            lo, hi = self._cur_span
            for b in (self._cur if lo <= ts < hi else self._buckets(ts)):
                b.vote_changes += 1
                b.upvotes += up
                b.downvotes += down
        # profiles (agents, submolts) carry no activity of their own: an agent is active
        # when it writes

    def expire(self, now: float) -> None:
        """Freeze the distinct sets of buckets that ended ``freeze_after`` before ``now``
        (buckets themselves are bounded by count, ``keep``)."""
        due = self._due
        while due and due[0][0] <= now:
            _, g, start = heapq.heappop(due)
            b = self.buckets[_NAMES[g]].get(start)
            if b is not None:  # (None: dropped by ``keep`` meanwhile)
                b.freeze()

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
            Sample("items_without_author_total", float(self.totals["without_author"]),
                   kind="counter", help="Posts and comments whose author is unknown"),
            Sample("activity_late_items_total", float(self.totals["late"]), kind="counter",
                   help="Post or comment bucket updates after the bucket's distinct sets "
                   "were frozen"),
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

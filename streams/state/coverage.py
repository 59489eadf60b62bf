"""Coverage: how many of the platform's comments the monitor has seen.

Moltbook's ``comment_count`` of a post counts every comment of its tree (replies included,
deleted ones too), while the comments a monitor receives are capped per sort order, lost to
paging, or absent (the newer API generation's ``GET /posts/{id}`` carries no tree). Per post:

- ``comment_count``: the platform's count, the one of the post event observed latest
  (``observed_at``; ties: the larger count), so a later sighting replaces an earlier one;
- ``comments_seen``: distinct comment items of that post the engine received (the pipeline
  de-duplicates by id);
- ``comments_expected = max(comment_count, comments_seen)`` (the platform has at least the
  comments we saw, even when its count is stale), ``comment_deficit = expected - seen``;
- capture ratio = sum of seen / sum of expected (over a set of posts).

Figures are kept for three sets of posts: ``all`` (every post seen, running sums),
``horizon`` (posts created within ``horizon_s`` of the latest event time: the per-post state
itself) and each UTC day of post creation (``details.coverage.days``). Comments whose post
has not arrived (any arrival order) wait in the per-post state and join the post's figures
when it comes; until then, and for good once they age out, they are ``orphan`` comments.

State: one small record per post created within ``horizon_s`` (and per post with comments
but no post event, for ``horizon_s`` after its latest comment), so memory grows with the
posts of the horizon (109 bytes each pickled, ``bench/bench_coverage.py``), plus at most
``days`` day rows. A post that aged out keeps its final figures in its day and in ``all``; a
comment arriving for it later counts as an orphan (rare with a week's horizon: posts older
than that are not revisited). Cost: O(1) an event (a heap push per post); a snapshot reads
the day rows and the posts of the largest deficits only (posts are filed by deficit), never
every post of the horizon.

>>> from datetime import datetime, timezone
>>> from streams.events import CommentEvent, PostEvent
>>> t = datetime(2026, 2, 1, tzinfo=timezone.utc)
>>> c = CoverageState()
>>> c.update(Item.of(PostEvent(id="post:1", event_time=t, observed_at=t, post_id="1",
...                            author="a", title="gm", comment_count=4)))
>>> c.update(Item.of(CommentEvent(id="comment:9", event_time=t, observed_at=t, post_id="1",
...                               comment_id="9", author="b", content="hi")))
>>> snap = c.snapshot()
>>> snap.value("coverage_comment_deficit", scope="all"), snap.value(
...     "coverage_comment_capture_ratio", scope="all")
(3.0, 0.25)
>>> c.summary()["comment_capture_ratio"]
0.25
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import add, sub
from typing import Any, ClassVar

from streams.events import CommentEvent, PostEvent
from streams.state.base import Item, Record, Sample, Snapshot, from_columns, to_columns

DAY = 86_400.0
# the figures of a set of posts, in this order
FIELDS = ("posts", "comment_count", "comments_seen", "comments_expected", "comment_deficit",
          "posts_with_deficit")


@dataclass(frozen=True, slots=True)
class CoverageConfig:
    """horizon_s: per-post state kept this long after a post's creation (event time);
    days: day rows kept (the latest); top: posts with the largest deficit listed."""

    horizon_s: float = 7 * DAY
    days: int = 400
    top: int = 20


@dataclass(slots=True)
class _Post(Record):
    created: float | None  # None: comments came, the post event did not (yet)
    count: int = 0
    observed: float = -math.inf  # observed_at of ``count``
    seen: int = 0
    last: float = -math.inf  # latest comment time while post-less (ages such an entry out)

    def key(self) -> float:
        """When the record ages out: ``horizon_s`` after this."""
        return self.created if self.created is not None else self.last

    def figures(self) -> tuple[int, ...]:
        expected = max(self.count, self.seen)
        deficit = expected - self.seen
        return 1, self.count, self.seen, expected, deficit, int(deficit > 0)


def _add(into: list[int], fig: tuple[int, ...], sign: int) -> None:
    into[:] = map(add, into, fig) if sign > 0 else map(sub, into, fig)


def _named(fig: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = dict(zip(FIELDS, fig, strict=True))
    out["comment_capture_ratio"] = fig[2] / fig[3] if fig[3] else None
    return out


class CoverageState:
    kinds: ClassVar[tuple[type, ...]] = (PostEvent, CommentEvent)  # what ``update`` reads

    def __init__(self, config: CoverageConfig | None = None) -> None:
        self.config = config or CoverageConfig()
        self._posts: dict[str, _Post] = {}
        self._all = [0] * len(FIELDS)
        self._horizon = [0] * len(FIELDS)  # the posts with a creation time in _posts
        self._days: dict[int, list[int]] = {}
        # the horizon's posts with a deficit > 0, by deficit: the top list reads the largest
        # deficits first, whatever the number of posts (live, nearly every post has one)
        self._by_deficit: dict[int, dict[str, None]] = {}
        self._ages: list[tuple[float, str]] = []  # (age key when pushed, post id): lazy heap
        self._orphans_dropped = 0
        self._orphans_live = 0  # comments held for posts not seen (yet)
        self._latest: float | None = None

    # pickled in columns (base.to_columns): a record and a heap entry a post
    _COLUMNS: ClassVar[tuple[dict[str, type], dict[str, type]]] = (
        {"_posts": _Post}, {"_ages": list})

    def __getstate__(self) -> dict[str, Any]:
        return to_columns(dict(self.__dict__), *self._COLUMNS)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(from_columns(state, *self._COLUMNS))

    # ------------------------------------------------------------------ contract

    def update(self, item: Item) -> None:
        ev = item.event
        t = item.t
        kind = type(ev)
        if kind is CommentEvent:  # the common case: one comment more for its post
            pid = ev.post_id
            post = self._posts.get(pid)
            if post is None:
                post = self._posts[pid] = _Post(created=None, last=t)
                heapq.heappush(self._ages, (t, pid))
            created = post.created
            if created is None:  # (only a post-less entry ages out by its latest comment)
                if t > post.last:
                    post.last = t
                post.seen += 1
                self._orphans_live += 1
            else:  # the change of the post's figures, written out (the hot path)
                count, seen = post.count, post.seen
                post.seen = seen + 1
                # seen +1; expected = max(count, seen) grows with seen once seen >= count,
                # else the deficit shrinks by one (and the post may leave the deficit list)
                if count > seen:
                    self._redeficit(pid, count - seen, count - seen - 1)
                    grown, lost = 0, -int(count - seen == 1)
                else:
                    grown, lost = 1, 0
                day = int(created // DAY)
                held = self._days.get(day)
                if held is None:
                    held = self._day(day)
                for row in (held, self._all, self._horizon):
                    row[2] += 1
                    row[3] += grown
                    row[4] += grown - 1
                    row[5] += lost
        elif kind is PostEvent:
            pid = ev.post_id
            post = self._posts.get(pid)
            observed = ev.observed_at.timestamp()
            if post is None:
                post = self._posts[pid] = _Post(created=None)
            if post.created is not None:
                if (observed, ev.comment_count) <= (post.observed, post.count):
                    return
                before, created = post.figures(), post.created
            else:  # first sighting: the comments that waited are no longer orphans
                before, created = None, t
                self._orphans_live -= post.seen
            post.created, post.count, post.observed = t, ev.comment_count, observed
            self._move(pid, post, before, created)
            heapq.heappush(self._ages, (t, pid))
        else:
            return
        if self._latest is None or t > self._latest:
            self._latest = t

    def expire(self, now: float) -> None:
        cut = now - self.config.horizon_s
        ages = self._ages
        while ages and ages[0][0] < cut:
            _, pid = heapq.heappop(ages)
            post = self._posts.get(pid)
            if post is None:
                continue
            if post.key() >= cut:  # moved on since pushed (a later comment or the post came)
                heapq.heappush(ages, (post.key(), pid))
                continue
            del self._posts[pid]
            if post.created is None:
                self._orphans_dropped += post.seen
                self._orphans_live -= post.seen
            else:  # its figures stay in its day and in ``all``
                _add(self._horizon, post.figures(), -1)
                self._redeficit(pid, post.figures()[4], 0)

    def snapshot(self) -> Snapshot:
        samples: list[Sample] = []
        helps = {
            "posts": "Posts whose comment coverage is tracked",
            "comment_count": "Sum of the platform's comment_count over those posts",
            "comments_seen": "Comments of those posts the monitor received",
            "comment_deficit": "Comments the platform counts that the monitor did not receive",
            "posts_with_deficit": "Posts whose comment_count exceeds the comments received",
        }
        for scope, fig in (("all", self._all), ("horizon", self._horizon)):
            named = _named(fig)
            for name, text in helps.items():
                samples.append(Sample(f"coverage_{name}", float(named[name]),
                                      (("scope", scope),), help=text))
            if named["comment_capture_ratio"] is not None:
                samples.append(Sample("coverage_comment_capture_ratio",
                                      named["comment_capture_ratio"], (("scope", scope),),
                                      help="Comments received over comments expected "
                                           "(max of comment_count and received, per post)"))
        samples.append(Sample("coverage_orphan_comments", float(self.orphans()),
                              help="Comments received whose post event was not"))
        samples.append(Sample("coverage_tracked_posts", float(len(self._posts)),
                              help="Per-post coverage records held (within the horizon)"))
        return Snapshot(samples=samples, details={"coverage": self.details()})

    # ------------------------------------------------------------------ reading

    def orphans(self) -> int:
        return self._orphans_dropped + self._orphans_live

    def summary(self) -> dict[str, Any]:
        """The compact figures an alert carries: capture and deficit, all posts and the
        horizon's."""
        a, h = _named(self._all), _named(self._horizon)
        return {"comment_capture_ratio": a["comment_capture_ratio"],
                "comment_deficit": a["comment_deficit"],
                "posts_with_deficit": a["posts_with_deficit"],
                "horizon_comment_capture_ratio": h["comment_capture_ratio"],
                "horizon_comment_deficit": h["comment_deficit"],
                "at": None if self._latest is None
                else datetime.fromtimestamp(self._latest, UTC).isoformat()}

    def details(self) -> dict[str, Any]:
        top: list[tuple[int, str]] = []  # (-deficit, post id): the largest, ties by id
        for d in sorted(self._by_deficit, reverse=True):
            top += ((-d, pid) for pid in heapq.nsmallest(self.config.top - len(top),
                                                         self._by_deficit[d]))
            if len(top) >= self.config.top:
                break
        return {
            "all": _named(self._all),
            "horizon": _named(self._horizon),
            "orphan_comments": self.orphans(),
            "horizon_s": self.config.horizon_s,
            "days": [{"day": datetime.fromtimestamp(d * DAY, UTC).date().isoformat(),
                      **_named(fig)} for d, fig in sorted(self._days.items())],
            "top_deficit": [{"post_id": pid, "comment_count": self._posts[pid].count,
                             "comments_seen": self._posts[pid].seen, "comment_deficit": -d}
                            for d, pid in top],
        }

    # ------------------------------------------------------------------ internals

    def _move(self, pid: str, post: _Post, before: tuple[int, ...] | None,
              created: float) -> None:
        """Move a post's figures from ``before`` (None: not counted yet; created at
        ``created``) to its current ones, in its day, ``all`` and the horizon."""
        assert post.created is not None
        after = post.figures()
        self._redeficit(pid, 0 if before is None else before[4], after[4])
        day = int(post.created // DAY)
        diff = after if before is None else tuple(map(sub, after, before))
        if before is not None and int(created // DAY) != day:
            # a later sighting moved the post's creation to another day
            _add(self._day(int(created // DAY)), before, -1)
            _add(self._day(day), after, 1)
        else:
            _add(self._day(day), diff, 1)
        _add(self._all, diff, 1)
        _add(self._horizon, diff, 1)

    def _redeficit(self, pid: str, old: int, new: int) -> None:
        """File the post under its new deficit (0: none)."""
        if old == new:
            return
        if old:
            held = self._by_deficit[old]
            del held[pid]
            if not held:
                del self._by_deficit[old]
        if new:
            held = self._by_deficit.get(new)
            if held is None:
                held = self._by_deficit[new] = {}
            held[pid] = None

    def _day(self, day: int) -> list[int]:
        row = self._days.get(day)
        if row is None:
            row = self._days[day] = [0] * len(FIELDS)
            if len(self._days) > self.config.days:
                del self._days[min(self._days)]
        return row

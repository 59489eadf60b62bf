"""Thread structure by popularity (Superminds Test, platform-wide): reply depth, distinct
repliers, and the share of posts left without a comment, by upvote bucket.

Definitions (the paper gives the findings, not the formulas; these are our choices):

- ``thread_depth{bucket}``: mean, over posts with at least one comment, of the post's maximum
  reply depth (1 = direct comments only). Published: near 1.0 at every popularity level.
- ``thread_repliers{bucket}``: mean number of distinct commenting agents other than the post's
  author, over posts with at least one comment.
- ``threads_uncommented_ratio{bucket}``: among posts at least ``horizon`` old (event time),
  the share that got no comment within ``horizon`` of being posted. "Old" is judged at the
  time :meth:`ThreadsEngine.expire` was last called with (the pipeline's tick). Live, each
  events partition folds a verdict into its sums only once its own latest event time is
  ``margin`` past the horizon, and reports the posts not yet folded (:attr:`Partial.pending`:
  bounded by the ``horizon + margin`` youngest posts of the partition); the reducer judges
  those against its own tick time (:func:`totals_snapshot` ``judge_at``), the time the
  replay judges at, so live equals replay once the reducer has caught up with the
  partitions (``margin`` >= the pipeline's tick).
- bucket: the post's upvotes (``buckets`` are lower bounds; default 0, 1-4, 5-19, 20-99,
  100+), as last seen from its PostEvent or VoteEvents; a post's uncommented verdict is
  bucketed by its upvotes when the horizon passes: those of the latest event of the post
  (post or vote) at or before ``created + horizon`` (later events do not move it, whenever
  the verdict is taken, so partitions and the replay agree).

- overall: the same three figures over every post, whatever its bucket (``threads_overall``).

Unknown authors (``item.author`` None): the comment counts (comments, depth) but is no
replier; a post without author still counts (every replier is then "not the author").

State is per post and keyed by post id, so it partitions like the events topic. Each partition
reports :meth:`ThreadsEngine.partial`, plain sums per bucket and per day that add up across
partitions; :func:`merge` sums them and :func:`totals_snapshot` turns any such sum into the
Snapshot. The sums are kept incrementally (each event moves its thread's contribution: O(1)
an event, and ``partial`` costs O(buckets + days), not O(live posts)). A post is kept live
for ``retention`` after it was posted, then forgotten (its contribution frozen; later
comments count in ``threads_late_comments_total``); memory is one record per live post
(~300 B) plus, once commented, its distinct repliers (one as itself; from the second a tuple,
40 B and 8 B an entry; past 8 a set, ~730 B and up).

>>> from datetime import datetime, timezone
>>> from streams.events import CommentEvent, PostEvent
>>> t = datetime(2026, 2, 1, tzinfo=timezone.utc)
>>> eng = ThreadsEngine()
>>> eng.update(Item.of(PostEvent(id="post:p", event_time=t, observed_at=t, post_id="p",
...                              author="a", upvotes=7)))
>>> for i, (who, depth) in enumerate([("b", 1), ("c", 2), ("b", 3)]):
...     eng.update(Item.of(CommentEvent(id=f"comment:{i}", event_time=t, observed_at=t,
...                                     comment_id=str(i), post_id="p", author=who,
...                                     depth=depth, reply_to="a")))
>>> snap = eng.snapshot()
>>> snap.value("thread_depth", bucket="5-19"), snap.value("thread_repliers", bucket="5-19")
(3.0, 2.0)
>>> snap.details["threads_overall"]["thread_depth"]
3.0
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from streams.events import CommentEvent, PostEvent, VoteEvent
from streams.state.base import Item, Record, Sample, Snapshot, from_columns, to_columns, with_member

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

    def add(self, other: Sums, sign: int = 1) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + sign * getattr(other, f.name))

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
    #: posts whose uncommented verdict is not in the sums yet: (horizon time, UTC day number
    #: of the post, verdict bucket, uncommented so far), judged by :func:`totals_snapshot`
    pending: list[tuple[float, int, str, bool]] = field(default_factory=list)

    def add(self, other: Partial) -> None:
        for mine, theirs in ((self.by_bucket, other.by_bucket), (self.by_day, other.by_day)):
            for k, s in theirs.items():
                mine.setdefault(k, Sums()).add(s)
        self.late_comments += other.late_comments
        self.pending += other.pending


def merge(parts: Iterable[Partial]) -> Partial:
    out = Partial()
    for p in parts:
        out.add(p)
    return out


def _bucket_scan(upvotes: int, bounds: tuple[int, ...], labels: list[str]) -> str:
    """The bucket label of ``upvotes``: the last bound it reaches."""
    if upvotes < bounds[1 if len(bounds) > 1 else 0]:
        return labels[0]  # the common case: fewer upvotes than the second bound
    for i in range(len(bounds) - 1, -1, -1):
        if upvotes >= bounds[i]:
            return labels[i]
    return labels[0]


# A thread's contribution to the sums: (bucket, day, posts, commented, depth, repliers,
# comments, verdict bucket or None, uncommented)
_Contrib = tuple[str, int | None, int, int, int, int, int, str | None, int]


@dataclass(slots=True)
class _Thread(Record):
    created: float | None = None
    author: str | None = None
    upvotes: int = 0
    comments: int = 0
    max_depth: int = 0
    # the distinct repliers: none (many posts), one as itself, then a tuple,
    # past a few a set (base.with_member)
    repliers: str | tuple[str, ...] | set[str] | None = None
    first_comment: float | None = None
    verdict: tuple[str, bool] | None = None  # (bucket at horizon, uncommented)
    due_upvotes: int = 0  # upvotes of the latest event at or before the horizon
    due_seen: float = float("-inf")  # that event's time


class ThreadsEngine:
    """Per-post thread state of one partition (or of the whole stream)."""

    kinds: ClassVar[tuple[type, ...]] = (PostEvent, CommentEvent, VoteEvent)  # ``update`` reads

    def __init__(self, config: ThreadsConfig | None = None) -> None:
        self.config = config or ThreadsConfig()
        self._labels = bucket_labels(self.config.buckets)
        # the bucket of each upvote count up to the largest bound, looked up (votes and
        # comments ask it at every event)
        self._lut = tuple(_bucket_scan(u, self.config.buckets, self._labels)
                          for u in range(max(self.config.buckets) + 1))
        self._live: dict[str, _Thread] = {}
        self._done: dict[str, None] = {}  # folded ids (oldest first): late events stay late
        # every thread's contribution, live and folded, as Sums' seven counts in field order
        self._by_bucket: dict[str, list[int]] = {}
        self._by_day: dict[int, list[int]] = {}  # by UTC day number
        self._late_comments = 0
        self._verdicts: dict[tuple[str, bool], tuple[str, bool]] = {}
        self._horizon: list[tuple[float, str]] = []
        self._retire: list[tuple[float, str]] = []
        self._horizon_s = self.config.horizon.total_seconds()
        self._retention_s = self.config.retention.total_seconds()

    # pickled in columns (base.to_columns): a thread and its heap entries each are a post's
    _COLUMNS: ClassVar[tuple[dict[str, type], dict[str, type]]] = (
        {"_live": _Thread}, {"_horizon": list, "_retire": list})

    def __getstate__(self) -> dict[str, Any]:
        return to_columns(dict(self.__dict__), *self._COLUMNS)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(from_columns(state, *self._COLUMNS))

    def _bucket(self, upvotes: int) -> str:
        lut = self._lut
        if 0 <= upvotes < len(lut):
            return lut[upvotes]
        return _bucket_scan(upvotes, self.config.buckets, self._labels)

    def _contrib(self, th: _Thread) -> _Contrib:
        when = th.created if th.created is not None else th.first_comment
        reps = th.repliers
        repliers = (0 if reps is None else int(reps != th.author) if type(reps) is str
                    else len(reps) - (th.author in reps))
        v = th.verdict
        return (self._bucket(th.upvotes), None if when is None else int(when // 86400),
                1 if th.created is not None or th.comments else 0, 1 if th.comments else 0,
                th.max_depth if th.comments else 0, repliers, th.comments,
                None if v is None else v[0], int(v[1]) if v is not None else 0)

    def _apply(self, c: _Contrib, sign: int) -> None:
        bucket, day, posts, commented, depth, repliers, comments, vb, unc = c
        row = self._by_bucket.get(bucket)
        if row is None:
            row = self._by_bucket[bucket] = [0] * 7
        row[0] += sign * posts
        row[1] += sign * commented
        row[2] += sign * depth
        row[3] += sign * repliers
        row[4] += sign * comments
        if vb is not None:
            vrow = self._by_bucket.get(vb)
            if vrow is None:
                vrow = self._by_bucket[vb] = [0] * 7
            vrow[5] += sign
            vrow[6] += sign * unc
        if day is not None:
            drow = self._by_day.get(day)
            if drow is None:
                drow = self._by_day[day] = [0] * 7
            drow[0] += sign * posts
            drow[1] += sign * commented
            drow[2] += sign * depth
            drow[3] += sign * repliers
            drow[4] += sign * comments
            if vb is not None:
                drow[5] += sign
                drow[6] += sign * unc

    def _change(self, th: _Thread, before: _Contrib) -> None:
        after = self._contrib(th)
        if after != before:
            self._apply(before, -1)
            self._apply(after, 1)

    def update(self, item: Item) -> None:
        event = item.event
        kind = type(event)
        if kind is VoteEvent:
            th = self._live.get(event.post_id) if event.target == "post" else None
            if th is not None:
                upvotes = event.upvotes
                self._due_upvotes(th, item.t, upvotes)
                if th.upvotes != upvotes:
                    if self._bucket(th.upvotes) == self._bucket(upvotes):
                        th.upvotes = upvotes  # same bucket: the contribution is unchanged
                        return
                    before = self._contrib(th)
                    th.upvotes = upvotes
                    self._change(th, before)
            return
        if kind is not CommentEvent and kind is not PostEvent:
            return
        pid = event.post_id
        if pid in self._done:
            if kind is CommentEvent:
                self._late_comments += 1
            return
        th = self._live.get(pid)
        t = item.t
        if th is None:
            th = self._live[pid] = _Thread()
            if kind is PostEvent:
                self._new_post(th, pid, item.author, event.upvotes, t)
                return
        if kind is CommentEvent:
            if th.created is not None:
                self._comment(th, event, item.author, t)
                return
            before = self._contrib(th)
            if th.author is None and event.post_author:
                th.author = event.post_author
            if th.first_comment is None:  # post not seen (yet)
                heapq.heappush(self._retire, (t + self._retention_s, pid))
            th.comments += 1
            if event.depth > th.max_depth:
                th.max_depth = event.depth
            if item.author is not None:
                self._add_replier(th, item.author)
            if th.first_comment is None or t < th.first_comment:
                th.first_comment = t
        else:
            before = self._contrib(th)
            th.author, th.upvotes = item.author, event.upvotes
            if th.created is None:
                th.created = t
                heapq.heappush(self._horizon, (t + self._horizon_s, pid))
                heapq.heappush(self._retire, (t + self._retention_s, pid))
            self._due_upvotes(th, t, event.upvotes)
        self._change(th, before)

    def _new_post(self, th: _Thread, pid: str, author: str | None, upvotes: int,
                  t: float) -> None:
        """A post that starts its thread (the common case): what the general path does,
        written out. Its contribution goes from nothing (the empty thread's bucket row is
        still made, as ``_apply`` makes it) to one post in its bucket's and its day's rows."""
        th.author, th.upvotes, th.created = author, upvotes, t
        heapq.heappush(self._horizon, (t + self._horizon_s, pid))
        heapq.heappush(self._retire, (t + self._retention_s, pid))
        self._due_upvotes(th, t, upvotes)
        rows = self._by_bucket
        empty = self._bucket(0)
        if empty not in rows:
            rows[empty] = [0] * 7
        bucket = self._bucket(upvotes)
        row = rows.get(bucket)
        if row is None:
            row = rows[bucket] = [0] * 7
        row[0] += 1
        day = int(t // 86400)
        drow = self._by_day.get(day)
        if drow is None:
            drow = self._by_day[day] = [0] * 7
        drow[0] += 1

    def _comment(self, th: _Thread, event: CommentEvent, author: str | None, t: float) -> None:
        """A comment on a known post (the common case): the thread stays in its bucket and
        day rows, and only its counts move there (what ``_change`` would do, written out):
        the depth by how much the new comment deepens the thread (the maximum is 0 until
        the first comment), the repliers by one for a new replier other than the author
        (who does not change here)."""
        commented = 0 if th.comments else 1
        th.comments += 1
        depth = event.depth - th.max_depth
        if depth > 0:
            th.max_depth = event.depth
        else:
            depth = 0
        repliers = 0
        if author is not None:
            reps = th.repliers
            if reps is None:
                th.repliers = author
                repliers = int(author != th.author)
            elif type(reps) is str:
                if reps != author:
                    th.repliers = (reps, author)
                    repliers = int(author != th.author)
            elif author not in reps:
                th.repliers = with_member(reps, author)
                repliers = int(author != th.author)
        first = th.first_comment
        if first is None or t < first:
            th.first_comment = t
        row = self._by_bucket[self._bucket(th.upvotes)]
        row[1] += commented
        row[2] += depth
        row[3] += repliers
        row[4] += 1
        row = self._by_day[int(th.created // 86400)]  # type: ignore[operator]
        row[1] += commented
        row[2] += depth
        row[3] += repliers
        row[4] += 1

    @staticmethod
    def _add_replier(th: _Thread, author: str) -> bool:
        """Add a replier to the thread; whether it is a new one."""
        reps = th.repliers
        if reps is None:
            th.repliers = author
        elif type(reps) is str:
            if reps == author:
                return False
            th.repliers = (reps, author)
        elif author in reps:
            return False
        else:
            th.repliers = with_member(reps, author)
        return True

    def _due_upvotes(self, th: _Thread, t: float, upvotes: int) -> None:
        if t >= th.due_seen and (th.created is None or t <= th.created + self._horizon_s):
            th.due_upvotes, th.due_seen = upvotes, t

    def expire(self, now: float) -> None:
        """Pass horizons (uncommented verdicts) and forget posts older than ``retention``."""
        while self._horizon and self._horizon[0][0] <= now:
            due, pid = heapq.heappop(self._horizon)
            th = self._live.get(pid)
            if th is not None and th.created is not None and th.verdict is None:
                # the verdict adds one matured post (uncommented or not) to its verdict
                # bucket's and its day's rows; nothing else of the thread's contribution moves
                unc = int(th.first_comment is None or th.first_comment > due)
                vb = self._bucket(th.due_upvotes)
                verdict = (vb, bool(unc))  # one tuple per value, shared by the posts
                th.verdict = self._verdicts.setdefault(verdict, verdict)
                vrow = self._by_bucket.get(vb)
                if vrow is None:
                    vrow = self._by_bucket[vb] = [0] * 7
                drow = self._by_day[int(th.created // 86400)]
                vrow[5] += 1
                vrow[6] += unc
                drow[5] += 1
                drow[6] += unc
        while self._retire and self._retire[0][0] <= now:
            due, pid = heapq.heappop(self._retire)
            th = self._live.get(pid)
            if th is None or (th.created is not None and th.created + self._retention_s > due):
                continue  # a comment's provisional entry; the post's own entry comes later
            del self._live[pid]  # its contribution stays in the sums, frozen
            self._done[pid] = None
        keep = 2 * max(len(self._live), 1024)  # only recently folded posts still see events
        while len(self._done) > 2 * keep:
            for pid in list(self._done)[:keep]:
                del self._done[pid]

    def partial(self, pending: bool = False) -> Partial:
        """This partition's sums (every post seen, live ones as they stand): a copy; with
        ``pending``, also the posts whose verdict :meth:`expire` has not taken yet (live: the
        reducer takes them at its own time)."""
        out = Partial(late_comments=self._late_comments)
        if pending:
            for due, pid in self._horizon:
                th = self._live.get(pid)
                if th is not None and th.created is not None and th.verdict is None:
                    out.pending.append((due, int(th.created // 86400),
                                        self._bucket(th.due_upvotes),
                                        th.first_comment is None or th.first_comment > due))
        for b, row in self._by_bucket.items():
            out.by_bucket[b] = Sums(*row)
        for d in sorted(self._by_day)[-self.config.days_kept:]:
            label = datetime.fromtimestamp(d * 86400, UTC).date().isoformat()
            out.by_day[label] = Sums(*self._by_day[d])
        return out

    def thread(self, post_id: str) -> dict[str, Any] | None:
        """One live thread's figures (None once folded or never seen)."""
        th = self._live.get(post_id)
        if th is None:
            return None
        return {"post_id": post_id, "author": th.author, "upvotes": th.upvotes,
                "bucket": self._bucket(th.upvotes), "comments": th.comments,
                "depth": th.max_depth, "repliers": self._contrib(th)[5]}

    def snapshot(self) -> Snapshot:
        return totals_snapshot(self.partial(), self.config.buckets)

    def __len__(self) -> int:
        """Live (not yet folded) threads."""
        return len(self._live)


def totals_snapshot(total: Partial, buckets: tuple[int, ...] = DEFAULT_BUCKETS,
                    judge_at: float | None = None) -> Snapshot:
    """The Snapshot of (merged) partial sums; the pending verdicts whose horizon is at or
    before ``judge_at`` (None: none) are counted as :meth:`ThreadsEngine.expire` at
    ``judge_at`` would."""
    if judge_at is not None and total.pending:
        judged = Partial(late_comments=total.late_comments)
        judged.add(Partial(total.by_bucket, total.by_day))  # a copy: the sums are not moved
        for due, day, bucket, uncommented in total.pending:
            if due <= judge_at:
                label = datetime.fromtimestamp(day * 86400, UTC).date().isoformat()
                for s in (judged.by_bucket.setdefault(bucket, Sums()),
                          judged.by_day.setdefault(label, Sums())):
                    s.matured += 1
                    s.matured_uncommented += int(uncommented)
        total = judged
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
    overall = Sums()
    for s in total.by_bucket.values():
        overall.add(s)
    details = {
        "threads_overall": overall.as_dict(),
        "threads_by_bucket": {b: s.as_dict() for b, s in total.by_bucket.items()},
        "threads_daily": {d: total.by_day[d].as_dict() for d in sorted(total.by_day)},
    }
    return Snapshot(samples=samples, details=details)

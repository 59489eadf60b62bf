"""Thread statistics vs plain recomputation from the raw JSON comment trees."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from service.sources.normalise import parse_time
from streams.events import CommentEvent, PostEvent, VoteEvent
from streams.state.base import Item
from streams.state.threads import (
    ThreadsConfig,
    ThreadsEngine,
    bucket_of,
    merge,
    totals_snapshot,
)
from tests.unit.collective_data import raw_threads, thread_events

HORIZON = timedelta(hours=24)


def _name(node: dict) -> str | None:
    a = node.get("author")
    return a.get("name") if isinstance(a, dict) else None


def batch_reference(now: datetime) -> dict[str, dict[str, list]]:
    """Per bucket: max depths and distinct repliers of commented posts, and uncommented
    verdicts of posts at least HORIZON old, straight from the trees. A post or comment whose
    author is null still counts (a comment in depth, not as a replier)."""
    out: dict[str, dict[str, list]] = defaultdict(lambda: {"depth": [], "repliers": [],
                                                           "uncommented": []})
    seen: set[str] = set()
    for answer in raw_threads():
        post = answer["post"]
        if post["id"] in seen:
            continue
        seen.add(post["id"])
        author, created = _name(post), parse_time(post["created_at"])
        rows: list[tuple[int, str, datetime]] = []

        def walk(nodes: list, depth: int, rows: list) -> None:
            for c in nodes or []:
                rows.append((depth, _name(c), parse_time(c["created_at"])))
                walk(c.get("replies") or [], depth + 1, rows)

        walk(answer.get("comments") or [], 1, rows)
        b = bucket_of(int(post.get("upvotes") or 0), ThreadsConfig().buckets)
        if rows:
            out[b]["depth"].append(max(d for d, _, _ in rows))
            out[b]["repliers"].append(len({a for _, a, _ in rows} - {author, None}))
        if created + HORIZON <= now:
            first = min((t for _, _, t in rows), default=None)
            out[b]["uncommented"].append(first is None or first > created + HORIZON)
    return out


def run(events, config: ThreadsConfig | None = None) -> ThreadsEngine:
    eng = ThreadsEngine(config)
    for e in events:
        eng.expire(e.event_time.timestamp())
        eng.update(Item.of(e))
    eng.expire(events[-1].event_time.timestamp())
    return eng


def _mean(xs: list) -> float:
    return sum(xs) / len(xs)


def test_depth_repliers_and_uncommented_match_the_trees() -> None:
    """By upvote bucket and overall, to 1e-9 (the replay report's published figures)."""
    events = thread_events()
    snap = run(events).snapshot()
    ref = batch_reference(events[-1].event_time)
    assert sum(len(r["depth"]) for r in ref.values()) > 50
    for b, r in ref.items():
        if r["depth"]:
            assert snap.value("thread_depth", bucket=b) == pytest.approx(_mean(r["depth"]),
                                                                          abs=1e-9)
            assert snap.value("thread_repliers", bucket=b) == pytest.approx(
                _mean(r["repliers"]), abs=1e-9)
        if r["uncommented"]:
            assert snap.value("threads_uncommented_ratio", bucket=b) == pytest.approx(
                _mean(r["uncommented"]), abs=1e-9)
    overall = snap.details["threads_overall"]
    every = {k: [x for r in ref.values() for x in r[k]] for k in ("depth", "repliers",
                                                                  "uncommented")}
    assert overall["thread_depth"] == pytest.approx(_mean(every["depth"]), abs=1e-9)
    assert overall["thread_repliers"] == pytest.approx(_mean(every["repliers"]), abs=1e-9)
    assert overall["threads_uncommented_ratio"] == pytest.approx(_mean(every["uncommented"]),
                                                                 abs=1e-9)
    assert overall["commented"] == len(every["depth"])


def test_unknown_authors_count_but_are_no_repliers() -> None:
    t = datetime(2026, 2, 1, tzinfo=UTC)
    post = Item.of(PostEvent(id="post:p", event_time=t, observed_at=t, post_id="p", author="a"))
    post.author = None  # the platform no longer names the post's author
    eng = ThreadsEngine()
    eng.update(post)
    for i, who in enumerate(["b", None, "b"]):
        c = Item.of(CommentEvent(id=f"comment:{i}", event_time=t, observed_at=t,
                                 comment_id=str(i), post_id="p", author="x", depth=i + 1))
        c.author = who
        eng.update(c)
    d = eng.snapshot().details["threads_overall"]
    assert (d["posts"], d["comments"], d["thread_depth"], d["thread_repliers"]) == (1, 3, 3.0,
                                                                                   1.0)


def test_partitions_merge_to_the_whole_and_folding_changes_nothing() -> None:
    events = thread_events()
    whole = run(events).snapshot()
    parts = [run([e for e in events if hash(e.post_id) % 3 == k] or [events[0]])
             for k in range(3)]
    for p, k in zip(parts, range(3), strict=True):
        for e in events:  # all partitions see time pass (the driver broadcasts watermarks)
            if hash(e.post_id) % 3 != k:
                p.expire(e.event_time.timestamp())
    merged = totals_snapshot(merge(p.partial() for p in parts))
    assert {(s.name, s.labels): s.value for s in merged.samples} == pytest.approx(
        {(s.name, s.labels): s.value for s in whole.samples})
    folded = run(events, ThreadsConfig(retention=timedelta(days=2))).snapshot()
    late = folded.value("threads_late_comments_total")
    assert late and late > 0  # real threads do get comments days later
    count = lambda s: sum(b["comments"] for b in s.details["threads_by_bucket"].values())  # noqa: E731
    assert count(folded) + late == count(whole)
    assert sum(b["posts"] for b in folded.details["threads_by_bucket"].values()) == sum(
        b["posts"] for b in whole.details["threads_by_bucket"].values())


def test_horizon_votes_and_late_comments() -> None:
    t0 = datetime(2026, 2, 1, tzinfo=UTC)
    eng = ThreadsEngine(ThreadsConfig(horizon=timedelta(hours=1), retention=timedelta(hours=3)))

    def post(pid: str, t: datetime) -> PostEvent:
        return PostEvent(id=f"post:{pid}", event_time=t, observed_at=t, post_id=pid, author="a")

    def comment(i: int, pid: str, t: datetime) -> CommentEvent:
        return CommentEvent(id=f"comment:{i}", event_time=t, observed_at=t, comment_id=str(i),
                            post_id=pid, author="b", reply_to="a")

    eng.update(Item.of(post("p1", t0)))
    eng.update(Item.of(post("p2", t0)))
    eng.update(Item.of(comment(1, "p2", t0 + timedelta(minutes=90))))  # after the horizon
    eng.update(Item.of(VoteEvent(id="vote:p1:7-0", event_time=t0, observed_at=t0,
                                 target="post", target_id="p1", post_id="p1", upvotes=7,
                                 downvotes=0, delta_up=7, delta_down=0)))
    eng.expire((t0 + timedelta(minutes=59)).timestamp())
    assert eng.snapshot().value("threads_uncommented_ratio", bucket="0") is None
    eng.expire((t0 + timedelta(hours=2)).timestamp())
    snap = eng.snapshot()
    assert snap.value("threads_uncommented_ratio", bucket="0") == 1.0  # p2: comment too late
    assert snap.value("threads_uncommented_ratio", bucket="5-19") == 1.0  # p1
    assert eng.thread("p1")["bucket"] == "5-19"  # type: ignore[index]
    eng.expire((t0 + timedelta(hours=4)).timestamp())
    assert eng.thread("p2") is None
    eng.update(Item.of(comment(2, "p2", t0 + timedelta(hours=5))))
    assert eng.snapshot().value("threads_late_comments_total") == 1.0
    assert eng.snapshot().details["threads_daily"]["2026-02-01"]["posts"] == 2


def test_pending_verdicts_judged_at_the_reducers_time_and_bucketed_at_the_horizon() -> None:
    """A partition that has not reached a post's horizon reports it pending; the sum of the
    partials judged at a later time equals one engine expired at that time. A vote after the
    horizon does not move the verdict's bucket, whenever the verdict is taken."""
    t0 = datetime(2026, 2, 1, tzinfo=UTC)
    cfg = ThreadsConfig(horizon=timedelta(hours=1))

    def vote(pid: str, up: int, t: datetime) -> VoteEvent:
        return VoteEvent(id=f"vote:{pid}:{up}", event_time=t, observed_at=t, target="post",
                         target_id=pid, post_id=pid, upvotes=up, downvotes=0, delta_up=up,
                         delta_down=0)

    def post(pid: str, t: datetime) -> PostEvent:
        return PostEvent(id=f"post:{pid}", event_time=t, observed_at=t, post_id=pid,
                         author="a")

    quiet = [post("q", t0), vote("q", 3, t0 + timedelta(minutes=30))]
    busy = [post("b", t0), vote("b", 30, t0 + timedelta(hours=3))]
    whole, parts = ThreadsEngine(cfg), [ThreadsEngine(cfg), ThreadsEngine(cfg)]
    for part, events in zip(parts, (quiet, busy), strict=True):
        for e in events:
            whole.update(Item.of(e))
            part.update(Item.of(e))
        part.expire(events[-1].event_time.timestamp())
    now = (t0 + timedelta(hours=3)).timestamp()
    whole.expire(now)
    partial = merge(p.partial(pending=True) for p in parts)
    assert [(b, u) for _, _, b, u in partial.pending] == [("1-4", True)]  # q, not yet judged
    assert totals_snapshot(partial).value("threads_uncommented_ratio", bucket="1-4") is None
    live = totals_snapshot(partial, judge_at=now)
    assert {(s.name, s.labels): s.value for s in live.samples} == {
        (s.name, s.labels): s.value for s in whole.snapshot().samples}
    assert live.value("threads_uncommented_ratio", bucket="0") == 1.0  # b: 0 upvotes at 1 h
    assert live.value("threads_uncommented_ratio", bucket="20-99") is None
    assert live.details["threads_daily"] == whole.snapshot().details["threads_daily"]


@pytest.mark.parametrize("bounds", [(0, 1, 5, 20, 100), (0, 3), (2, 10)])
def test_votes_within_and_across_buckets_match_a_plain_recount(bounds: tuple[int, ...]) -> None:
    """Votes move posts within a bucket (nothing moves in the sums) and across buckets (the
    whole thread moves), upvotes below the first bound and past the last included: the
    bucket sums equal a plain recount of each thread in the bucket of its last upvotes."""
    import random

    rng = random.Random(7)
    t0 = datetime(2026, 2, 1, tzinfo=UTC)
    eng = ThreadsEngine(ThreadsConfig(buckets=bounds))
    upvotes: dict[str, int] = {}
    comments: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for i in range(3000):
        t = t0 + timedelta(seconds=i)
        pid = f"p{rng.randrange(60)}"
        r = rng.random()
        if pid not in upvotes or r < 0.1:
            upvotes[pid] = rng.randrange(-3, 130)
            e: PostEvent | CommentEvent | VoteEvent = PostEvent(
                id=f"post:{pid}", event_time=t, observed_at=t, post_id=pid, author="a",
                upvotes=upvotes[pid])
        elif r < 0.6:
            upvotes[pid] = max(-3, upvotes[pid] + rng.choice((-7, -1, 1, 2, 30)))
            e = VoteEvent(id=f"vote:{i}", event_time=t, observed_at=t, target="post",
                          target_id=pid, post_id=pid, upvotes=upvotes[pid], downvotes=0,
                          delta_up=0, delta_down=0)
        else:
            who, depth = f"u{rng.randrange(12)}", rng.randrange(1, 5)
            comments[pid].append((depth, who))
            e = CommentEvent(id=f"comment:{i}", event_time=t, observed_at=t,
                             comment_id=str(i), post_id=pid, author=who, depth=depth,
                             reply_to="a")
        eng.update(Item.of(e))
    want: dict[str, list[int]] = defaultdict(lambda: [0] * 5)
    for pid, up in upvotes.items():
        row = want[bucket_of(up, bounds)]
        got = comments[pid]
        row[0] += 1
        row[1] += bool(got)
        row[2] += max((d for d, _ in got), default=0)
        row[3] += len({w for _, w in got} - {"a"})
        row[4] += len(got)
    have = {b: [s.posts, s.commented, s.depth_sum, s.repliers_sum, s.comments]
            for b, s in eng.partial().by_bucket.items() if s.posts}
    assert have == dict(want)

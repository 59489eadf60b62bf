"""Daily activity (metrics.md A1) held against a plain recount of the shared real events."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from service.sources.archive import open_archive
from streams.events import CommentEvent, PostEvent, VoteEvent
from streams.state.activity import ActivityState
from streams.state.base import Item

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "moltbook"


def test_days_match_a_plain_recount_of_the_real_events() -> None:
    seen: set[str] = set()
    events = []
    for e in open_archive([str(DATA)]):
        if isinstance(e, PostEvent | CommentEvent | VoteEvent) and e.id not in seen:
            seen.add(e.id)
            events.append(e)
    events.sort(key=lambda e: e.event_time)
    st = ActivityState()
    last = None
    for e in events:
        it = Item.of(e)
        st.update(it)
        if last is None or it.t - last >= 10:
            last = it.t
            st.expire(it.t)  # freezes closed days' distinct sets on the way
    ref: dict[str, dict] = defaultdict(lambda: {"posts": 0, "comments": 0, "agents": set(),
                                                "submolts": set()})
    first: dict[str, str] = {}
    for e in events:
        if not isinstance(e, PostEvent | CommentEvent):
            continue
        day = e.event_time.astimezone(UTC).date().isoformat()
        r = ref[day]
        r["posts" if isinstance(e, PostEvent) else "comments"] += 1
        if e.author is not None:
            r["agents"].add(e.author)
            first.setdefault(e.author, day)
        if isinstance(e, PostEvent) and e.submolt:
            r["submolts"].add(e.submolt)
    rows = {datetime.fromisoformat(r["start"]).date().isoformat(): r
            for r in st.series("day")}
    assert len(ref) > 20
    for day, r in ref.items():
        got = rows[day]
        new = sum(1 for d in first.values() if d == day)
        assert (got["posts"], got["comments"], got["active_agents"], got["new_agents"],
                got["active_submolts"]) == (r["posts"], r["comments"], len(r["agents"]), new,
                                            len(r["submolts"])), day
    snap = st.snapshot()
    nameless = sum(1 for e in events if isinstance(e, PostEvent | CommentEvent)
                   and e.author is None)
    assert nameless > 0  # the real data has posts whose author is null
    assert snap.value("items_without_author_total") == nameless
    assert snap.value("posts_total") == sum(isinstance(e, PostEvent) for e in events)
    assert snap.value("agents_total") == len(first)
    assert snap.value("activity_late_items_total") == 0
    assert sum(b.agents is None for b in st.buckets["day"].values()) == len(rows) - 1


def test_every_bucket_freezes_when_due_even_one_opened_late() -> None:
    """Distinct sets are dropped for counts ``freeze_after`` past a bucket's end, also for a
    bucket an out-of-order event opened behind frozen ones; later events count as late."""
    t0 = datetime(2026, 2, 1, 12, tzinfo=UTC)

    def post(i: int, minute: int, author: str) -> Item:
        t = t0.timestamp() + 60 * minute
        at = datetime.fromtimestamp(t, UTC)
        return Item.of(PostEvent(id=f"post:{i}", event_time=at, observed_at=at,
                                 post_id=str(i), author=author))

    st = ActivityState(freeze_after=600.0)
    for i in range(0, 40, 2):  # every other minute, ticking along
        it = post(i, i, f"a{i}")
        st.update(it)
        st.expire(it.t)
    frozen = {b.start for b in st.buckets["minute"].values() if b.agents is None}
    due = {b.start for b in st.buckets["minute"].values() if b.start + 660 <= st.latest}
    assert frozen == due and len(frozen) > 10
    late = post(99, 5, "late")  # minute 5 opened now: behind frozen minutes, due already
    st.update(late)
    assert st.buckets["minute"][int(late.t)].agents == {"late"}
    st.expire(st.latest)
    assert st.buckets["minute"][int(late.t)].agents is None
    st.update(post(100, 5, "later"))  # counted, not in the distinct sets any more
    row = next(r for r in st.series("minute") if r["start"] == datetime.fromtimestamp(
        late.t, UTC).isoformat())
    assert (row["posts"], row["active_agents"]) == (2, 1)
    assert st.snapshot().value("activity_late_items_total") == 1

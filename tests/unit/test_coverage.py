"""Comment coverage held against a plain batch computation: per post the platform's
``comment_count`` (the latest observed) against the comments received, on the shared real
data (old API answers with their trees, newer ones without, the observatory sample's
posts with a handful of comments) and on the simulator."""

from __future__ import annotations

import csv
import pickle
from datetime import UTC, timedelta
from pathlib import Path

import numpy as np
import pytest

from service.sources.archive import open_archive
from service.sources.simulate import SimulationConfig, Simulator
from streams.events import CommentEvent, Event, PostEvent
from streams.state.base import Item
from streams.state.coverage import FIELDS, CoverageConfig, CoverageState

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "moltbook"
TICK = 10.0


def real_events() -> list[Event]:
    seen: set[str] = set()
    out: list[Event] = []
    for e in open_archive([str(DATA)]):
        if isinstance(e, PostEvent | CommentEvent) and e.id not in seen:
            seen.add(e.id)
            out.append(e)
    out.sort(key=lambda e: e.event_time)
    return out


def simulated_events() -> list[Event]:
    return [e for e in Simulator(SimulationConfig(seed=4, agents=150, posts_per_hour=6,
                                                  duration=timedelta(days=3)))
            if isinstance(e, PostEvent | CommentEvent)]


def run(events: list[Event], config: CoverageConfig | None = None) -> CoverageState:
    st = CoverageState(config)
    last: float | None = None
    for e in events:
        it = Item.of(e)
        st.update(it)
        if last is None or it.t - last >= TICK:
            last = it.t
            st.expire(it.t)
    st.expire(events[-1].event_time.timestamp())
    return st


def batch(events: list[Event], since: float = -np.inf) -> dict[str, object]:
    """The published-style computation over the whole list at once, posts created at or
    after ``since``."""
    posts = [e for e in events if isinstance(e, PostEvent)]
    latest: dict[str, PostEvent] = {}
    for p in posts:  # the latest observed sighting; ties: the larger count
        held = latest.get(p.post_id)
        if held is None or (p.observed_at, p.comment_count) > (held.observed_at,
                                                                held.comment_count):
            latest[p.post_id] = p
    ids = sorted(pid for pid, p in latest.items() if p.event_time.timestamp() >= since)
    comments = [e.post_id for e in events if isinstance(e, CommentEvent)]
    uniq, counts = np.unique(np.array(comments, dtype=object), return_counts=True)
    seen_of = dict(zip(uniq.tolist(), counts.tolist(), strict=True))
    count = np.array([latest[i].comment_count for i in ids], dtype=np.int64)
    seen = np.array([seen_of.get(i, 0) for i in ids], dtype=np.int64)
    expected = np.maximum(count, seen)
    deficit = expected - seen
    day = np.array([latest[i].event_time.astimezone(UTC).date().isoformat() for i in ids])

    def figures(mask: np.ndarray) -> dict[str, object]:
        fig = [int(mask.sum()), int(count[mask].sum()), int(seen[mask].sum()),
               int(expected[mask].sum()), int(deficit[mask].sum()),
               int((deficit[mask] > 0).sum())]
        out: dict[str, object] = dict(zip(FIELDS, fig, strict=True))
        out["comment_capture_ratio"] = fig[2] / fig[3] if fig[3] else None
        return out

    everything = np.ones(len(ids), dtype=bool)
    known = set(latest)
    return {"all": figures(everything),
            "days": [{"day": d, **figures(day == d)} for d in sorted(set(day.tolist()))],
            "orphan_comments": sum(1 for pid in comments if pid not in known),
            "top": sorted(((-int(d), i) for d, i in zip(deficit, ids, strict=True) if d > 0))}


@pytest.fixture(scope="module")
def real() -> list[Event]:
    return real_events()


@pytest.mark.parametrize("source", ["real", "simulated"])
def test_equals_the_batch_computation(source: str, real: list[Event]) -> None:
    events = real if source == "real" else simulated_events()
    st = run(events, CoverageConfig(horizon_s=10_000 * 86_400.0, days=100_000))
    ref = batch(events)
    got = st.details()
    assert got["all"] == ref["all"]
    assert got["horizon"] == ref["all"]  # nothing aged out
    assert got["days"] == ref["days"]
    assert got["orphan_comments"] == ref["orphan_comments"]
    assert [(-r["comment_deficit"], r["post_id"]) for r in got["top_deficit"]] == ref["top"][:20]
    if source == "real":  # the mess is there: 115,295 comments counted and never received
        assert ref["all"]["comment_deficit"] > 100_000
        assert 0 < ref["all"]["comment_capture_ratio"] < 0.01


def test_horizon_keeps_the_recent_posts_and_all_keeps_everything(real: list[Event]) -> None:
    horizon = 3 * 86_400.0
    end = real[-1].event_time.timestamp()
    st = run(real, CoverageConfig(horizon_s=horizon))
    ref = batch(real, since=end - horizon)
    got = st.details()
    assert got["horizon"] == ref["all"]
    assert [(-r["comment_deficit"], r["post_id"]) for r in got["top_deficit"]] == ref["top"][:20]
    made = sorted(e.event_time.timestamp() for e in real if isinstance(e, PostEvent))
    wide = end - made[len(made) // 2]  # half the posts aged out, many with a deficit left
    half, ref_half = run(real, CoverageConfig(horizon_s=wide)), batch(real, since=end - wide)
    assert len(ref_half["top"]) > 20 and half.details()["horizon"] == ref_half["all"]
    assert [(-r["comment_deficit"], r["post_id"])
            for r in half.details()["top_deficit"]] == ref_half["top"][:20]
    # the state holds the horizon's posts and the post-less comments' entries only
    assert st.snapshot().value("coverage_tracked_posts") < len(
        {e.post_id for e in real if isinstance(e, PostEvent)})
    assert pickle.loads(pickle.dumps(st)).details() == got


def test_a_later_sighting_replaces_the_count_and_orphans_wait(real: list[Event]) -> None:
    post = next(e for e in real if isinstance(e, PostEvent) and e.comment_count == 0)
    reply = next(e for e in real if isinstance(e, CommentEvent)).model_copy(
        update={"id": "comment:x", "post_id": post.post_id,
                "event_time": post.event_time - timedelta(minutes=1)})
    later = post.model_copy(update={"id": "post:again", "comment_count": 7,
                                    "observed_at": post.observed_at + timedelta(hours=1)})
    stale = post.model_copy(update={"id": "post:stale", "comment_count": 99,
                                    "observed_at": post.observed_at - timedelta(hours=1)})
    st = CoverageState()
    st.update(Item.of(reply))  # before its post: an orphan until the post comes
    assert st.snapshot().value("coverage_orphan_comments") == 1
    for e in (post, later, stale):
        st.update(Item.of(e))
    assert st.snapshot().value("coverage_orphan_comments") == 0
    s = st.summary()
    assert (s["comment_deficit"], s["comment_capture_ratio"], s["posts_with_deficit"]) == (
        6, 1 / 7, 1)
    st.expire(post.event_time.timestamp() + 8 * 86_400.0)  # aged out: all keeps it
    assert (st.summary()["comment_deficit"], st.summary()["horizon_comment_deficit"]) == (6, 0)


def test_a_later_sighting_on_another_day_moves_the_post_and_orphans_are_counted(
        real: list[Event]) -> None:
    """A re-sighted post whose creation time moved to another day leaves its first day; the
    orphan count follows comments that wait, whose post comes, and that age out unclaimed."""
    post = next(e for e in real if isinstance(e, PostEvent) and e.comment_count == 0)
    base = post.model_copy(update={"comment_count": 3})
    comments = [next(e for e in real if isinstance(e, CommentEvent)).model_copy(
        update={"id": f"comment:{i}", "post_id": pid, "event_time": post.event_time
                + timedelta(minutes=i)}) for i, pid in enumerate(
        [post.post_id] * 2 + ["waits"] * 3 + ["never"] * 4)]
    moved = base.model_copy(update={"id": "post:moved", "comment_count": 5,
                                    "event_time": post.event_time + timedelta(days=1),
                                    "observed_at": post.observed_at + timedelta(days=1)})
    waited = base.model_copy(update={"id": "post:waits", "post_id": "waits",
                                     "comment_count": 1})
    st = CoverageState(CoverageConfig(horizon_s=3 * 86_400.0))
    st.update(Item.of(base))
    for c in comments:
        st.update(Item.of(c))
    assert st.orphans() == 7
    st.update(Item.of(waited))
    st.update(Item.of(moved))
    assert st.orphans() == 4
    day2 = (post.event_time + timedelta(days=1)).astimezone(UTC).date().isoformat()
    row = next(r for r in st.details()["days"] if r["day"] == day2)
    assert (row["posts"], row["comment_count"], row["comments_seen"]) == (1, 5, 2)
    ref = batch([base, *comments, waited, moved])
    assert st.details()["all"] == ref["all"]
    assert st.details()["days"] == ref["days"]
    st.expire(post.event_time.timestamp() + 10 * 86_400.0)  # the unclaimed ones aged out
    assert st.orphans() == 4 and st.details()["all"] == ref["all"]


def test_every_alert_and_report_row_carries_the_coverage_of_its_time() -> None:
    from detectors.runner import DetectorConfig
    from service.sources.simulate import ScenarioSpec
    from streams.pipeline import Pipeline, PipelineConfig

    sim = Simulator(SimulationConfig(
        seed=11, agents=600, posts_per_hour=120, duration=timedelta(hours=2),
        scenarios=(ScenarioSpec(name="surge", start=timedelta(minutes=60),
                                duration=timedelta(minutes=20), intensity=40),)))
    p = Pipeline(PipelineConfig(embed=False, detectors=DetectorConfig(enabled=("surge",))))
    alerts, events = [], []
    for e in sim:
        p.update(e)
        events.append(e)
        for a in p.advance():
            alerts.append(a)
            # the figures of the events received so far: the plain recount's
            ref = batch([x for x in events if isinstance(x, PostEvent | CommentEvent)])["all"]
            assert a.evidence["coverage"]["comment_deficit"] == ref["comment_deficit"]
            assert a.evidence["coverage"]["comment_capture_ratio"] == ref["comment_capture_ratio"]
    alerts += p.close()
    assert {a.state for a in alerts} >= {"firing", "resolved"}
    assert all("coverage" in a.evidence and "horizon_comment_deficit" in a.evidence["coverage"]
               for a in alerts)
    rows = p.alerts_report()
    assert rows and all(r["evidence"]["coverage"] is not None for r in rows)
    # the incidents as published (the latest transition of each): the same coverage
    latest = {(a.fingerprint, a.starts_at): a for a in alerts}
    assert [a.model_dump() for a in p.incidents()] == [
        latest[(a.fingerprint, a.starts_at)].model_dump() for a in p.incidents()]


def test_the_replay_report_has_a_coverage_row_per_day(real: list[Event], tmp_path: Path) -> None:
    import json

    from service.exports import write_day_tables
    from streams.export import day_tables
    from streams.pipeline import Pipeline, PipelineConfig
    from streams.replay import replay

    result = replay(open_archive([str(DATA)]), Pipeline(PipelineConfig(embed=False)))
    report = json.loads(json.dumps(result.report(), default=str))
    rows = day_tables(report)["coverage"]
    assert rows == batch(real)["days"]  # the real posts' days, each with its coverage
    assert write_day_tables(report, tmp_path)["coverage"] == len(rows)
    with (tmp_path / "coverage.csv").open() as f:
        assert next(csv.reader(f)) == ["day", *FIELDS, "comment_capture_ratio"]

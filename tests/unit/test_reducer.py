"""The reducer's and the partitions' bookkeeping without Faust, Kafka or Redis: exactly once by
society offset and by events (partition, offset), thread partials ordered by offset, the idle
advance of event time, what a checkpoint holds and when it is taken over, publishing once; a
partition restored from its records equals the partition that read them live."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta

from streams.events import CommentEvent, PostEvent, VoteEvent
from streams.messages import MAGIC, Forwarded, encode_society, encode_threads
from streams.partition import PartitionState, Rejected
from streams.pipeline import Pipeline, PipelineConfig
from streams.reducer import Reducer
from streams.state.threads import Partial, Sums

T = datetime(2026, 2, 1, 12, tzinfo=UTC)


def config() -> PipelineConfig:
    return PipelineConfig(embed=False, threads_local=False)


def post(pid: str, at: datetime = T, author: str | None = "ann") -> PostEvent:
    return PostEvent(id=f"post:{pid}", event_time=at, observed_at=at, post_id=pid,
                     author=author, title="gm", content=f"hello {pid}")


def comment(cid: str, pid: str, at: datetime = T) -> CommentEvent:
    return CommentEvent(id=f"comment:{cid}", event_time=at, observed_at=at, comment_id=cid,
                        post_id=pid, author="bob", reply_to="ann", content="hi")


def batch(*records: tuple[PostEvent | CommentEvent, int, int]) -> bytes:
    return encode_society([Forwarded(ev, None, p, o) for ev, p, o in records])


def test_each_message_and_each_record_applied_once() -> None:
    r = Reducer(Pipeline(config()))
    assert r.apply(0, batch((post("1"), 0, 4)), wall=1.0)
    assert not r.apply(0, batch((post("1"), 0, 4)), wall=2.0)  # a rebalance's re-read
    # a handover: the new owner forwards record (0, 4) again with a new one; (1, 0) is new
    assert r.apply(1, batch((post("1"), 0, 4), (post("2"), 0, 5), (post("3"), 1, 0)), wall=3.0)
    assert r.pipeline.events == 3 and r.applied == {0: 6, 1: 1}
    assert (r.next_offset, r.last_raw[:4]) == (2, MAGIC)
    assert r.last_event_wall == 3.0


def test_thread_partials_keep_the_report_covering_most_records() -> None:
    r = Reducer(Pipeline(config()))
    r.apply(0, encode_threads(0, 10, Partial(by_bucket={"0": Sums(posts=2)})), wall=1.0)
    r.apply(1, encode_threads(0, 5, Partial(by_bucket={"0": Sums(posts=1)})), wall=2.0)
    r.apply(2, encode_threads(1, 3, Partial(by_bucket={"0": Sums(posts=4)})), wall=3.0)
    assert r.pipeline.snapshot().value("threads", bucket="0") == 6.0
    assert r.last_event_wall is None and not r.agents_dirty  # partials are not events


def test_tick_publishes_changes_once_and_idle_time_moves_event_time() -> None:
    r = Reducer(Pipeline(config()), idle_after_s=10.0)
    assert r.tick(wall=0.0).snapshot is None  # nothing yet
    r.apply(0, batch((post("1"), 0, 0)), wall=100.0)
    first = r.tick(wall=101.0)
    assert first.snapshot is not None and first.snapshot.value("posts_total") == 1.0
    assert r.tick(wall=105.0).snapshot is None  # nothing new, not idle yet
    assert r.event_time(wall=105.0) == T.timestamp()
    assert r.event_time(wall=100.0 + 3600) == T.timestamp() + 3600  # a quiet hour
    r.apply(1, batch((comment("c", "1", T + timedelta(minutes=1)), 0, 1)), wall=200.0)
    assert r.event_time(wall=205.0) == (T + timedelta(minutes=1)).timestamp()


def test_agent_values_taken_once_per_change() -> None:
    r = Reducer(Pipeline(config()))
    assert r.agents() is None
    r.apply(0, batch((post("1"), 0, 0), (comment("c", "1"), 0, 1)), wall=1.0)
    values = r.agents()
    assert values is not None and set(values.cumulative) <= {"ann", "bob"}
    assert r.agents() is None


def test_checkpoint_taken_over_only_when_ahead() -> None:
    live = Reducer(Pipeline(config()))
    live.apply(0, batch((post("1"), 0, 0)), wall=1.0)
    live.apply(1, batch((post("2"), 1, 0)), wall=2.0)
    assert live.checkpoint_due()
    blob = pickle.dumps(live.checkpoint_state())
    live.checkpointed = live.next_offset
    assert not live.checkpoint_due()

    fresh = Reducer(Pipeline(config()))
    assert fresh.resume(2, pickle.loads(blob), wall=50.0)
    assert (fresh.next_offset, fresh.checkpointed, fresh.applied) == (2, 2, {0: 1, 1: 1})
    assert fresh.dirty and fresh.last_event_wall == 50.0 and fresh.last_raw == b""
    assert not fresh.apply(1, batch((post("2"), 1, 0)), wall=51.0)  # in the checkpoint
    assert fresh.pipeline.snapshot().value("posts_total") == 2.0

    ahead = Reducer(Pipeline(config()))
    ahead.next_offset = 3
    assert not ahead.resume(2, pickle.loads(blob), wall=50.0)
    assert ahead.pipeline.events == 0
    ahead.resumed = True
    ahead.release()
    assert not ahead.resumed


def test_restored_partition_equals_the_live_one() -> None:
    """A worker handed a partition replays its records through the same ``take``: repeats are
    still caught afterwards and the thread report is the live owner's."""
    events = [post("1"), comment("c1", "1"), post("1"),
              post("2", T + timedelta(hours=30), author=None),
              VoteEvent(id="vote:1", event_time=T, observed_at=T, target="post", target_id="1",
                        post_id="1", upvotes=3, downvotes=0, delta_up=3, delta_down=0)]
    raws = [e.model_dump_json().encode() for e in events] + [b"{", b'{"kind": "post"}']
    live, restored = PartitionState(), PartitionState()
    taken = [live.take(raw, i) for i, raw in enumerate(raws)]
    assert [type(t).__name__ for t in taken] == ["PostEvent", "CommentEvent", "NoneType",
                                                 "PostEvent", "VoteEvent", "Rejected",
                                                 "Rejected"]
    assert [t.reason for t in taken if isinstance(t, Rejected)] == ["bad_json", "invalid"]
    for i, raw in enumerate(raws):
        restored.take(raw, i)
    assert restored.next_offset == live.next_offset == len(raws)
    assert restored.report() == live.report() is not None
    assert live.report() is None  # nothing new since
    assert live.take(raws[0], len(raws)) is None and restored.take(raws[0], len(raws)) is None


def test_society_batch_carries_the_record_as_read_and_float16_vectors() -> None:
    import numpy as np

    from streams.embedding import QuantisedVector, cosine_error_bound
    from streams.messages import decode_society

    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(3, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    events = [post("1"), comment("c", "1"), post("2")]
    raws = [json_spaced(e) for e in events]
    sent = [Forwarded(e, v if i != 1 else None, i, 10 * i, raw)
            for i, (e, v, raw) in enumerate(zip(events, vecs, raws, strict=True))]
    got = decode_society(encode_society(sent))
    assert isinstance(got, list)
    assert [(f.event, f.partition, f.offset, f.raw) for f in got] == [
        (e, i, 10 * i, raw) for i, (e, raw) in enumerate(zip(events, raws, strict=True))]
    assert got[1].vector is None
    bound = cosine_error_bound(QuantisedVector("float16", bytes(768)))
    for i in (0, 2):
        assert abs(float(got[i].vector @ vecs[i]) - 1.0) <= 2 * bound


def json_spaced(event: PostEvent | CommentEvent) -> bytes:
    """A producer's own JSON layout (indented): forwarded as read, never re-serialised."""
    import json

    return json.dumps(json.loads(event.model_dump_json()), indent=1).encode()

"""The Faust agents without a broker (``agent.test_context()``): validation, de-duplication,
dead letters and the reducer's pipeline."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from unittest.mock import AsyncMock

import pytest

from service.config import Settings
from streams.app import create_app
from streams.events import CommentEvent, PostEvent
from streams.messages import Forwarded, decode_society, encode_society, encode_threads
from streams.state.threads import Partial, Sums

T = datetime(2026, 2, 1, 12, tzinfo=UTC)


@pytest.fixture
def worker():  # type: ignore[no-untyped-def]
    settings = Settings(kafka_url="kafka://127.0.0.1:9", redis_url="redis://127.0.0.1:9/0",
                        embed=False, topic_prefix="unit")
    app, state = create_app(settings)
    app.finalize()
    app.conf.store = "memory://"
    app.flow_control.resume()
    for name in ("society", "deadletters"):
        state.topics[name].send = AsyncMock()  # type: ignore[method-assign]
    return app, state


def post(pid: str) -> bytes:
    return PostEvent(id=f"post:{pid}", event_time=T, observed_at=T, post_id=pid,
                     author="ann", title="gm", content="hello").model_dump_json().encode()


async def test_ingest_dedups_and_dead_letters(worker) -> None:  # type: ignore[no-untyped-def]
    app, state = worker
    async with state.agents["ingest"].test_context() as agent:
        for value in (post("1"), post("2"), post("1"), b"{not json", b'{"kind": "post"}'):
            await agent.put(value=value, key=b"k")
    forwarded = [ev.id for c in state.topics["society"].send.await_args_list
                 for f in decode_society(c.kwargs["value"]) for ev in [f.event]]
    assert forwarded == ["post:1", "post:2"]
    assert state.duplicates == 1
    reasons = [json.loads(c.kwargs["value"])["reason"]
               for c in state.topics["deadletters"].send.await_args_list]
    assert reasons == ["bad_json", "invalid"]


async def test_reduce_feeds_the_pipeline(worker) -> None:  # type: ignore[no-untyped-def]
    app, state = worker
    first = Forwarded(PostEvent.model_validate_json(post("1")), None, 0, 4)
    reply = Forwarded(CommentEvent(id="comment:c", event_time=T, observed_at=T, comment_id="c",
                                   post_id="1", author="bob", reply_to="ann", content="hi"),
                      None, 1, 2)
    async with state.agents["reduce"].test_context() as agent:
        await agent.put(value=encode_society([first]))
        await agent.put(value=encode_society([reply]))
    snap = state.pipeline.snapshot()
    assert snap.value("posts_total") == 1.0 and snap.value("comments_total") == 1.0
    assert state.dirty


async def test_reduce_applies_each_record_once(worker) -> None:  # type: ignore[no-untyped-def]
    """A rebalance re-reads the society topic from its start, and a handover may forward a
    record twice: the events partition and offset each event was read at decide."""
    app, state = worker
    a = Forwarded(PostEvent.model_validate_json(post("1")), None, 0, 4)
    b = Forwarded(PostEvent.model_validate_json(post("2")), None, 0, 9)
    full = Partial(by_bucket={"0": Sums(posts=2)})
    async with state.agents["reduce"].test_context() as agent:
        await agent.put(value=encode_society([a]))
        await agent.put(value=encode_threads(0, 10, full))
        await agent.put(value=encode_society([a, b]))  # the new owner forwards 4 again
        await agent.put(value=encode_threads(0, 5, Partial(by_bucket={"0": Sums(posts=1)})))
    snap = state.pipeline.snapshot()
    assert snap.value("posts_total") == 2.0
    assert snap.value("threads", bucket="0") == 2.0  # the stale report covered fewer records


async def test_worker_consumer_takes_the_fetch_wait() -> None:
    """Faust fixes the worker consumer's fetch wait at 1500 ms; the setting replaces it."""
    settings = Settings(kafka_url="kafka://127.0.0.1:9", redis_url="redis://127.0.0.1:9/0",
                        embed=False, topic_prefix="unit", kafka_fetch_wait_ms=123)
    app, _ = create_app(settings)
    app.finalize()
    thread = app.consumer._new_consumer_thread()
    consumer = thread._create_worker_consumer(app.transport)
    try:
        assert consumer._fetch_max_wait_ms == 123
    finally:
        await consumer.stop()


def test_resumed_reducer_takes_a_checkpoint_ahead_of_it(
        redis_client, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """From a checkpoint: the state, the offsets, a fresh snapshot, and idle time counted from
    the resume (the reducer advances event time after 10 s without events)."""
    import streams.app as app_module

    port = redis_client.connection_pool.connection_kwargs["port"]
    settings = Settings(kafka_url="kafka://127.0.0.1:9", redis_url=f"redis://127.0.0.1:{port}/0",
                        embed=False, topic_prefix="unitresume")
    topic = {0: b"zero", 1: b"one"}
    monkeypatch.setattr(app_module, "society_message", lambda _s, offset: topic.get(offset))
    _, before = create_app(settings)
    before.pipeline.update(PostEvent.model_validate_json(post("1")))
    before.checkpoint.save(2, topic[1], (before.pipeline, {0: 5}))

    _, state = create_app(settings)
    state.resume_reducer()
    assert (state.society_next, state.applied) == (2, {0: 5})
    assert state.pipeline.snapshot().value("posts_total") == 1.0
    assert state.dirty and time.time() - state.last_event_wall < app_module.IDLE_AFTER_S

    _, ahead = create_app(settings)
    ahead.society_next = 3  # its own state is further on: the checkpoint is not taken
    ahead.resume_reducer()
    assert ahead.pipeline.snapshot().value("posts_total") == 0.0

"""The Faust agents without a broker (``agent.test_context()``): validation, de-duplication,
dead letters and the reducer's pipeline."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from unittest.mock import AsyncMock

import pytest

from service.config import Settings
from streams.app import create_app
from streams.events import CommentEvent, PostEvent
from streams.messages import decode_society

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
                 for ev, _ in decode_society(c.kwargs["value"])]
    assert forwarded == ["post:1", "post:2"]
    assert state.duplicates == 1
    reasons = [json.loads(c.kwargs["value"])["reason"]
               for c in state.topics["deadletters"].send.await_args_list]
    assert reasons == ["bad_json", "invalid"]


async def test_reduce_feeds_the_pipeline(worker) -> None:  # type: ignore[no-untyped-def]
    from streams.messages import encode_society

    app, state = worker
    reply = CommentEvent(id="comment:c", event_time=T, observed_at=T, comment_id="c",
                         post_id="1", author="bob", reply_to="ann", content="hi")
    async with state.agents["reduce"].test_context() as agent:
        await agent.put(value=encode_society([(PostEvent.model_validate_json(post("1")), None)]))
        await agent.put(value=encode_society([(reply, None)]))
    snap = state.pipeline.snapshot()
    assert snap.value("posts_total") == 1.0 and snap.value("comments_total") == 1.0
    assert state.dirty

"""The reducer's checkpoint in a real Redis: used only by the same code and configuration, and
only while the society topic still holds the message it was taken after."""

from __future__ import annotations

import redis

from service.stores.reducer_checkpoint import ReducerCheckpoint

TOPIC = {0: b"first", 1: b"second", 2: b"third"}


def test_checkpoint_round_trip(redis_client: redis.Redis) -> None:
    ck = ReducerCheckpoint(redis_client, "unitck", version="v1")
    assert ck.load(TOPIC.get) is None  # nothing saved yet
    saved = ck.save(2, TOPIC[1], ({"posts": 3}, {0: 7}))
    assert saved.offset == 2 and saved.size > 0
    assert ck.load(TOPIC.get) == (2, ({"posts": 3}, {0: 7}))


def test_checkpoint_of_another_version_or_topic_is_ignored(redis_client: redis.Redis) -> None:
    ReducerCheckpoint(redis_client, "unitck2", version="v1").save(2, TOPIC[1], {"posts": 3})
    assert ReducerCheckpoint(redis_client, "unitck2", version="v2").load(TOPIC.get) is None
    ck = ReducerCheckpoint(redis_client, "unitck2", version="v1")
    recreated = {0: b"other", 1: b"messages"}  # same offsets, another topic's content
    assert ck.load(recreated.get) is None
    assert ck.load({0: b"first"}.get) is None  # the topic no longer reaches the offset
    assert ck.load(TOPIC.get) == (2, {"posts": 3})

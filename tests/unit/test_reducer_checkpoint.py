"""The reducer's checkpoint in a real Redis: used only by the same code and configuration, and
only while the society topic still holds the message it was taken after."""

from __future__ import annotations

import tracemalloc

import pytest
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


def _state(n: int = 40, size: int = 50_000) -> dict[str, list[bytes]]:
    return {"blobs": [bytes([i % 251]) * size for i in range(n)]}  # ~2 MB pickled


def _chunk_keys(r: redis.Redis, prefix: str, slot: str) -> list[bytes]:
    return sorted(r.scan_iter(match=f"{prefix}:reducer:checkpoint:{slot}:*"))


def test_checkpoint_is_written_and_read_in_chunks(redis_client: redis.Redis) -> None:
    ck = ReducerCheckpoint(redis_client, "chunked", version="v1", chunk_bytes=100_000)
    first = _state()
    saved = ck.save(2, TOPIC[1], first)
    keys = _chunk_keys(redis_client, "chunked", "a")
    assert len(keys) == -(-saved.size // 100_000) > 10  # every chunk of the pickle, no more
    assert all(redis_client.strlen(k) <= 100_000 for k in keys)
    assert ck.load(TOPIC.get) == (2, first)
    second = {"blobs": first["blobs"][:5]}
    ck.save(3, TOPIC[2], second)  # the other slot; the first one's chunks are deleted
    assert _chunk_keys(redis_client, "chunked", "a") == []
    assert _chunk_keys(redis_client, "chunked", "b")
    assert ck.load({**TOPIC, 2: TOPIC[2]}.get) == (3, second)
    with pytest.raises(ValueError, match="chunk_bytes"):
        ReducerCheckpoint(redis_client, "chunked", version="v1", chunk_bytes=0)


def test_save_never_holds_the_whole_pickle(redis_client: redis.Redis) -> None:
    state = _state(n=200, size=100_000)  # a 20 MB pickle
    ck = ReducerCheckpoint(redis_client, "held", version="v1", chunk_bytes=1_000_000)
    tracemalloc.start()
    try:
        saved = ck.save(1, TOPIC[0], state)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert saved.size > 20_000_000
    assert peak < 5_000_000  # a chunk and its copies on the way to Redis, not the 20 MB


def test_half_written_or_raced_checkpoint_is_never_loaded(redis_client: redis.Redis) -> None:
    ck = ReducerCheckpoint(redis_client, "raced", version="v1", chunk_bytes=100_000)
    state = _state()
    ck.save(2, TOPIC[1], state)
    # a save that died half-way wrote part of the other slot: the header still names the old one
    redis_client.set("raced:reducer:checkpoint:b:0", b"partial")
    redis_client.set("raced:reducer:checkpoint:b:99", b"stale")
    assert ck.load(TOPIC.get) == (2, state)
    ck.save(2, TOPIC[1], state)  # the next save clears the stale chunks of its slot
    assert redis_client.get("raced:reducer:checkpoint:b:99") is None
    assert ck.load(TOPIC.get) == (2, state)
    keys = _chunk_keys(redis_client, "raced", "b")
    original = redis_client.get(keys[3])
    redis_client.set(keys[3], b"\x00" * len(original))  # rewritten under a reader
    assert ck.load(TOPIC.get) is None
    redis_client.delete(keys[3])  # deleted under a reader
    assert ck.load(TOPIC.get) is None

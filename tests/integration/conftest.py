"""Real servers for integration tests: a Tansu broker and a Redis server on loopback ports.

Both are the binaries moltscope itself embeds; each fixture stops its server at the end.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from service.config import Settings
from service.embedded import free_port, redis_server, tansu


@pytest.fixture(scope="session")
def kafka_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    with tansu(port, log):
        yield port


@pytest.fixture(scope="session")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    data = tmp_path_factory.mktemp("redis")
    with redis_server(port, data, data / "redis.log"):
        yield port


@pytest.fixture
def stack_settings(kafka_port: int, redis_port: int, tmp_path: Path) -> Settings:
    """Settings for one test: its own topics and Redis key prefix, so tests never mix."""
    prefix = f"t{uuid.uuid4().hex[:8]}"
    return Settings(kafka_url=f"kafka://127.0.0.1:{kafka_port}",
                    redis_url=f"redis://127.0.0.1:{redis_port}/0", topic_prefix=prefix,
                    partitions=2, api_port=free_port(), snapshot_interval_s=0.5,
                    agents_interval_s=1.0)


@pytest.fixture
def redis_client(redis_port: int) -> Iterator[redis.Redis]:
    client = redis.Redis(port=redis_port)
    yield client
    client.close()

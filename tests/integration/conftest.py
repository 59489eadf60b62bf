"""Real servers for integration tests: a Tansu broker on a loopback port (Redis: tests/conftest.py).

The binary moltscope itself embeds; the fixture stops it at the end.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.config import Settings
from service.embedded import free_port, tansu


@pytest.fixture(scope="session")
def kafka_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    with tansu(port, log):
        yield port


@pytest.fixture
def stack_settings(kafka_port: int, redis_port: int, tmp_path: Path) -> Settings:
    """Settings for one test: its own topics and Redis key prefix, so tests never mix."""
    prefix = f"t{uuid.uuid4().hex[:8]}"
    return Settings(kafka_url=f"kafka://127.0.0.1:{kafka_port}",
                    redis_url=f"redis://127.0.0.1:{redis_port}/0", topic_prefix=prefix,
                    partitions=2, api_port=free_port(), snapshot_interval_s=0.5,
                    agents_interval_s=1.0)

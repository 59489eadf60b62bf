"""Shared fixtures: the real Moltbook data, and a real Redis server (the binary moltscope
embeds) on a loopback port for the whole session, stopped at the end; the compiled kernels
warmed before the session."""

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from service.embedded import free_port, redis_server
from streams.kernels import warm

MOLTBOOK_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "moltbook"


def pytest_configure(config: pytest.Config) -> None:
    """Every numba kernel compiled, or loaded from its cache, here in one process before any test
    starts a worker: numba's cache is unsafe when processes compile one kernel at once."""
    warm()


@pytest.fixture(scope="session")
def moltbook_data() -> Path:
    """The real Moltbook data next to the checkout (``../shared/data/moltbook``)."""
    return MOLTBOOK_DATA


@pytest.fixture(scope="session")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    data = tmp_path_factory.mktemp("redis")
    with redis_server(port, data, data / "redis.log"):
        yield port


@pytest.fixture
def redis_client(redis_port: int) -> Iterator[redis.Redis]:
    """A client of the session's server, on an empty database."""
    client = redis.Redis(port=redis_port)
    client.flushdb()
    yield client
    client.close()

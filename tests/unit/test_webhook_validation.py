"""Bounded, safe writes: where a webhook may point (EgressPolicy) and the body-size limit of
every write endpoint (413 with a JSON error), through the real app."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.api.deps import settings_dep
from service.config import Settings
from service.delivery.dispatcher import DispatcherConfig
from service.delivery.egress import EgressPolicy, UrlRefused, UrlUnresolved

DNS = {"public.example": ["93.184.216.34"], "mixed.example": ["93.184.216.34", "10.0.0.7"],
       "meta.example": ["169.254.169.254"], "v6.example": ["::ffff:127.0.0.1"],
       "corp.example": ["10.1.2.3"]}


def policy(*allow: str, own: tuple[int, ...] = (6379, 8000)) -> EgressPolicy:
    def resolve(host: str, port: int) -> list[str]:
        if host in DNS:
            return DNS[host]
        if host[0].isdigit() or ":" in host:
            return [host]
        raise UrlUnresolved(f"{host} does not resolve")
    return EgressPolicy(allow=allow, own_ports=frozenset(own), resolve=resolve)


@pytest.mark.parametrize(("url", "why"), [
    ("http://127.0.0.1:9000/hook", "loopback"),
    ("http://[::1]:9000/hook", "loopback"),
    ("http://v6.example/hook", "loopback"),  # IPv4-mapped IPv6
    ("http://10.0.0.7/hook", "private"),
    ("http://192.168.1.10/hook", "private"),
    ("http://meta.example/latest/meta-data", "link-local"),
    ("http://mixed.example/hook", "private"),  # one internal answer is enough
    ("http://0.0.0.0:9000/", "unspecified"),
    ("http://127.0.0.1:6379/", "own ports"),
    ("ftp://public.example/", "http(s)"),
])
def test_internal_destinations_are_refused_with_the_reason(url: str, why: str) -> None:
    with pytest.raises(UrlRefused, match=r"\(s\)" if why == "http(s)" else why):
        policy().check(url)


def test_allow_list_cidr_opens_addresses_but_not_own_ports_which_need_host_port() -> None:
    p = policy("127.0.0.0/8", "10.1.0.0/16")
    assert p.check("http://127.0.0.1:9000/hook") == ["127.0.0.1"]
    assert p.check("https://corp.example/hook") == ["10.1.2.3"]
    with pytest.raises(UrlRefused, match="own ports"):
        p.check("http://127.0.0.1:6379/")  # the Redis port stays closed to a CIDR entry
    with pytest.raises(UrlRefused, match="private"):
        p.check("http://10.0.0.7/")  # outside the allowed block
    named = policy("127.0.0.1:6379", "corp.example:8443")
    assert named.check("http://127.0.0.1:6379/") == ["127.0.0.1"]
    assert named.check("https://corp.example:8443/x") == ["10.1.2.3"]
    with pytest.raises(UrlRefused):
        named.check("https://corp.example/x")  # another port of the same host
    assert policy().check("https://public.example/hook") == ["93.184.216.34"]


def test_policy_of_the_settings_closes_every_own_port_and_reads_the_allow_list(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOLTSCOPE_DELIVERY__ALLOW_URLS", "127.0.0.1/32, hooks.corp:8080")
    s = Settings(api_port=8123, redis_url="redis://127.0.0.1:7000/0",
                 kafka_url="kafka://127.0.0.1:9093,127.0.0.1:9094")
    p = EgressPolicy.for_settings(s)
    assert p.allow == ("127.0.0.1/32", "hooks.corp:8080")
    assert {8123, 7000, 9093, 9094, s.crawler.metrics_port, s.embedded.redis_port,
            s.embedded.kafka_port} <= p.own_ports


@pytest.fixture
def client() -> TestClient:
    app = create_app()
    app.dependency_overrides[settings_dep] = lambda: Settings(api_token="tok")
    return TestClient(app)


AUTH = {"Authorization": "Bearer tok"}


def test_a_webhook_aimed_at_loopback_or_the_redis_port_is_refused_422(
        client: TestClient) -> None:
    with client as c:
        for url in ("http://127.0.0.1:16379/", "http://169.254.169.254/"):
            r = c.post("/v1/webhooks", json={"url": url}, headers=AUTH)
            assert r.status_code == 422, r.text
            assert r.json()["detail"].startswith("webhook url refused: ")
            assert "MOLTSCOPE_DELIVERY__ALLOW_URLS" in r.json()["detail"]


def test_oversized_bodies_are_refused_413_declared_or_streamed(client: TestClient) -> None:
    limit = Settings().api_max_body_bytes
    big = {"url": "https://public.example/hook", "types": ["x" * 1000] * 1000}  # ~1 MB
    with client as c:
        r = c.post("/v1/webhooks", json=big, headers=AUTH)
        assert r.status_code == 413 and str(limit) in r.json()["detail"]

        def chunks():  # type: ignore[no-untyped-def]
            for _ in range(100):
                yield b"x" * 1024

        r = c.post("/v1/webhooks", content=chunks(),
                   headers={**AUTH, "Content-Type": "application/json"})
        assert r.status_code == 413 and "too large" in r.json()["detail"]


def test_body_limit_is_a_setting() -> None:
    assert Settings().api_max_body_bytes == 64 * 1024
    assert DispatcherConfig().allow_urls == ()


def test_a_bad_allow_list_entry_fails_at_start_up_naming_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOLTSCOPE_DELIVERY__ALLOW_URLS", '["10.0.0.0/8", "hooks.corp"]')
    with pytest.raises(ValueError, match="'hooks.corp' is neither host:port nor a CIDR"):
        Settings()
    with pytest.raises(ValueError, match="neither"):
        EgressPolicy(allow=("10.0.0.300/8",))

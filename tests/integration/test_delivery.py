"""Alert delivery end to end: a real Redis server, a loopback webhook receiver, the dispatcher.

The receiver checks every message as a webhook consumer would: HMAC signature, Alertmanager v4
shape, order, and that nothing is missing after downtime or a restart of the dispatcher and of
Redis itself. Scheduling runs on a fake clock (an hour of downtime takes no real hour); HTTP
and Redis are real.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import redis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest

from detectors.alert import Alert, fingerprint
from service.api import alerts as alerts_api
from service.api import webhooks as webhooks_api
from service.api.deps import settings_dep
from service.config import Settings
from service.delivery.alertmanager import DELIVERY_HEADER, SIGNATURE_HEADER, ZERO_TIME, verify
from service.delivery.desk import AlertDesk
from service.delivery.dispatcher import Dispatcher, DispatcherConfig
from service.delivery.history import AlertHistory, AlertHistoryCollector
from service.delivery.webhooks import WebhookIn, WebhookRegistry
from service.embedded import free_port, redis_server

pytestmark = pytest.mark.integration
T0 = datetime(2026, 2, 8, 8, 0, tzinfo=UTC)


class Receiver:
    """A loopback webhook receiver; ``status`` is what it answers, ``stop()`` takes it down."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.messages: list[tuple[dict[str, str], bytes]] = []
        self.attempts = 0
        self.status = 200
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.attempts += 1
                if outer.status == 200:
                    outer.messages.append((dict(self.headers), body))
                self.send_response(outer.status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def payloads(self, secret: str) -> list[dict]:
        """Every message received, after checking its signature; duplicates dropped by id."""
        seen, out = set(), []
        for headers, body in self.messages:
            assert verify(body, secret, headers.get(SIGNATURE_HEADER)), "bad signature"
            if headers[DELIVERY_HEADER] not in seen:
                seen.add(headers[DELIVERY_HEADER])
                out.append(json.loads(body))
        return out


class Clock:
    def __init__(self) -> None:
        self.t = 1_770_537_600.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.start()
    yield r
    r.stop()


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:8]}"


def alert(key: str, state: str = "firing", seq: int = 1, type_: str = "surge",
          minutes: int = 0, severity: str = "critical") -> Alert:
    start = T0
    return Alert(type=type_, key=key, severity=severity, fingerprint=fingerprint(type_, key),
                 state=state, starts_at=start, updated_at=start + timedelta(minutes=minutes),
                 ends_at=start + timedelta(minutes=minutes) if state == "resolved" else None,
                 sequence=seq, summary=f"{type_} {key}", labels={"entity": key},
                 evidence={"agents": ["BurnMolt6", "BurnMolt7"], "posts_in_window": 11})


def tick(d: Dispatcher, clock: Clock, advance: float = 0.0, times: int = 1) -> None:
    """``times`` x (advance the clock, then one dispatcher tick), on one HTTP client."""

    async def go() -> None:
        async with d.client() as client:
            for _ in range(times):
                clock.t += advance
                await d.tick(client)

    asyncio.run(go())


def test_signed_alertmanager_v4_payload(redis_client: redis.Redis, receiver: Receiver,
                                        prefix: str) -> None:
    hook = WebhookRegistry(redis_client, prefix).create(WebhookIn(url=receiver.url))
    clock = Clock()
    d = Dispatcher(redis_client, WebhookRegistry(redis_client, prefix), prefix, clock=clock)
    d.submit(alert("token:CLAW"))
    tick(d, clock)
    assert receiver.messages == []  # group_wait not over yet
    tick(d, clock, 1.0)
    [msg] = receiver.payloads(hook.secret)
    assert receiver.messages[0][0][SIGNATURE_HEADER].startswith("sha256=")
    assert {k: msg[k] for k in ("version", "status", "receiver", "groupLabels",
                                "truncatedAlerts")} == {
        "version": "4", "status": "firing", "receiver": "moltscope",
        "groupLabels": {"type": "surge"}, "truncatedAlerts": 0}
    assert set(msg) >= {"groupKey", "commonLabels", "commonAnnotations", "externalURL"}
    [a] = msg["alerts"]
    assert set(a) == {"status", "labels", "annotations", "startsAt", "endsAt", "generatorURL",
                      "fingerprint"}
    assert a["labels"] == {"alertname": "moltscope_surge", "type": "surge",
                           "severity": "critical", "key": "token:CLAW", "entity": "token:CLAW"}
    assert a["startsAt"] == "2026-02-08T08:00:00Z" and a["endsAt"] == ZERO_TIME
    assert a["fingerprint"] == fingerprint("surge", "token:CLAW")
    assert json.loads(a["annotations"]["evidence"])["agents"] == ["BurnMolt6", "BurnMolt7"]
    assert all(isinstance(v, str) for v in a["annotations"].values())
    # a tampered body does not verify
    assert not verify(receiver.messages[0][1] + b" ", hook.secret,
                      receiver.messages[0][0][SIGNATURE_HEADER])


def test_storm_is_grouped_and_filters_apply(redis_client: redis.Redis, receiver: Receiver,
                                            prefix: str) -> None:
    reg = WebhookRegistry(redis_client, prefix)
    hook = reg.create(WebhookIn(url=receiver.url))
    only_bursts = reg.create(WebhookIn(url=receiver.url + "?b", types=["burst"]))
    clock = Clock()
    d = Dispatcher(redis_client, reg, prefix, clock=clock)
    for i in range(250):
        assert d.submit(alert(f"token:T{i}")) == 1  # the burst-only hook takes none
    tick(d, clock, 1.0)
    msgs = receiver.payloads(hook.secret)
    assert [len(m["alerts"]) for m in msgs] == [100, 100, 50]
    # within the group interval, the next alert of the type waits for it
    d.submit(alert("token:LATE"))
    tick(d, clock, 2.0)
    assert len(receiver.payloads(hook.secret)) == 3
    tick(d, clock, DispatcherConfig().group_interval_s)
    assert receiver.payloads(hook.secret)[-1]["alerts"][0]["labels"]["key"] == "token:LATE"
    assert d.submit(alert("ngram:x", type_="burst")) == 2
    assert only_bursts.accepts(alert("ngram:x", type_="burst"))


def test_receiver_down_for_an_hour_gets_everything_in_order(
        redis_client: redis.Redis, receiver: Receiver, prefix: str) -> None:
    reg = WebhookRegistry(redis_client, prefix)
    hook = reg.create(WebhookIn(url=receiver.url))
    clock = Clock()
    d = Dispatcher(redis_client, reg, prefix, clock=clock)
    receiver.status = 503
    # one incident's three transitions, each in its own message, plus other incidents
    for step, (state, seq) in enumerate([("firing", 1), ("updated", 2), ("resolved", 3)]):
        d.submit(alert("token:CLAW", state, seq, minutes=step))
        d.submit(alert(f"agent:hub{step}", type_="supernode", severity="warning"))
        tick(d, clock, 11.0)
    tick(d, clock, 10.0, times=360)  # an hour in 10-second steps: retried, never dropped
    assert receiver.messages == []
    assert 50 < receiver.attempts < 200  # backoff capped at 60 s: about one a minute
    assert sum(d.backlog().values()) == 6
    receiver.status = 200
    tick(d, clock, 10.0, times=7)
    msgs = receiver.payloads(hook.secret)
    assert sum(d.backlog().values()) == 0
    surge = [m["alerts"][0]["annotations"] for m in msgs if m["groupLabels"]["type"] == "surge"]
    assert [(a["state"], a["sequence"]) for a in surge] == [
        ("firing", "1"), ("updated", "2"), ("resolved", "3")]
    assert sorted(m["alerts"][0]["labels"]["key"] for m in msgs
                  if m["groupLabels"]["type"] == "supernode") == [
        "agent:hub0", "agent:hub1", "agent:hub2"]


def test_nothing_lost_when_dispatcher_and_redis_restart_mid_retry(tmp_path: Path) -> None:
    port, prefix = free_port(), "restart"
    receiver = Receiver()  # not started: connection refused
    clock = Clock()
    with redis_server(port, tmp_path / "redis"):
        client = redis.Redis(port=port)
        reg = WebhookRegistry(client, prefix)
        hook = reg.create(WebhookIn(url=receiver.url))
        d = Dispatcher(client, reg, prefix, clock=clock)
        for i in range(5):
            d.submit(alert(f"token:T{i}"))
            tick(d, clock, 11.0)
        tick(d, clock, 30.0)
        assert d.backlog() == {hook.id: 5}
        client.close()
    # the dispatcher process and Redis both went away; Redis comes back from its AOF
    with redis_server(port, tmp_path / "redis"):
        client = redis.Redis(port=port)
        receiver.start()
        try:
            d2 = Dispatcher(client, WebhookRegistry(client, prefix), prefix, clock=clock)
            tick(d2, clock, 61.0)
            keys = [m["alerts"][0]["labels"]["key"] for m in receiver.payloads(hook.secret)]
            assert keys == [f"token:T{i}" for i in range(5)]
            assert d2.backlog() == {}
        finally:
            receiver.stop()
            client.close()


def test_live_loop_delivers_within_seconds(redis_client: redis.Redis, receiver: Receiver,
                                           prefix: str) -> None:
    """The worker's path: the alerts agent hands the transition to the desk, and the dispatch
    timer (every ``poll_s``) runs a delivery round."""
    WebhookRegistry(redis_client, prefix).create(WebhookIn(url=receiver.url))
    cfg = DispatcherConfig()
    desk = AlertDesk(redis_client, prefix, cfg, owner="w1")

    async def go() -> float:
        t0 = time.perf_counter()
        desk.receive(alert("token:CLAW"))
        while not receiver.messages and time.perf_counter() - t0 < 10:
            await desk.dispatch()
            await asyncio.sleep(cfg.poll_s)
        assert desk.http is not None
        await desk.http.aclose()
        return time.perf_counter() - t0

    latency = asyncio.run(go())
    assert receiver.messages and latency < cfg.group_wait_s + 1.5


def test_history_retention_filters_and_prometheus(redis_client: redis.Redis,
                                                  prefix: str) -> None:
    h = AlertHistory(redis_client, prefix, max_count=3, max_age_s=3600)
    now = T0.timestamp()
    assert h.record(alert("token:A"), now)
    assert h.record(alert("token:A", "resolved", 3, minutes=5), now)
    assert not h.record(alert("token:A", "updated", 2, minutes=2), now)  # stale: ignored
    h.record(alert("agent:x", type_="supernode", severity="warning"), now)
    assert [a.state for a in h.query(type="surge")] == ["resolved"]
    assert [a.key for a in h.query(state="firing")] == ["agent:x"]
    assert h.query(since=T0 + timedelta(minutes=1)) == []
    reg = CollectorRegistry()
    reg.register(AlertHistoryCollector(h))
    text = generate_latest(reg).decode()
    assert 'moltscope_alerts_firing{type="supernode"} 1.0' in text
    assert 'moltscope_alerts_total{severity="critical",type="surge"} 1.0' in text
    for i in range(4):  # count bound: the oldest incidents go first
        h.record(alert(f"token:N{i}", minutes=i).model_copy(
            update={"starts_at": T0 + timedelta(minutes=10 + i)}), now)
    assert len(h.query(limit=100)) == 3
    h.trim(now + 2 * 3600)  # age bound
    assert h.query(limit=100) == []


def test_api_routes(redis_client: redis.Redis, receiver: Receiver, prefix: str) -> None:
    app = FastAPI()
    app.include_router(alerts_api.router)
    app.include_router(webhooks_api.router)
    app.state.redis = redis_client
    app.dependency_overrides[settings_dep] = lambda: Settings(api_token="tok",
                                                              topic_prefix=prefix)
    auth = {"Authorization": "Bearer tok"}
    with TestClient(app) as c:
        assert c.post("/v1/webhooks", json={"url": receiver.url}).status_code == 401
        created = c.post("/v1/webhooks", json={"url": receiver.url, "types": ["surge"]},
                         headers=auth)
        assert created.status_code == 201 and len(created.json()["secret"]) == 64
        hook_id = created.json()["id"]
        listed = c.get("/v1/webhooks", headers=auth).json()
        assert [h["id"] for h in listed] == [hook_id] and "secret" not in listed[0]
        assert c.get(f"/v1/webhooks/{hook_id}", headers=auth).json()["types"] == ["surge"]
        assert c.delete(f"/v1/webhooks/{hook_id}", headers=auth).status_code == 204
        assert c.delete(f"/v1/webhooks/{hook_id}", headers=auth).status_code == 404
        assert c.post("/v1/webhooks", json={"url": "not a url"}, headers=auth).status_code == 422

        AlertHistory(redis_client, prefix).record(alert("token:CLAW"))
        rows = c.get("/v1/alerts", params={"type": "surge", "state": "firing"}).json()
        assert [r["key"] for r in rows] == ["token:CLAW"]
        assert c.get("/v1/alerts", params={"type": "burst"}).json() == []
        iid = rows[0]["fingerprint"] + ":" + str(int(T0.timestamp()))
        assert c.get(f"/v1/alerts/{iid}").json()["evidence"]["posts_in_window"] == 11
        assert c.get("/v1/alerts/nope").status_code == 404


def test_webhook_deleted_drops_its_backlog(redis_client: redis.Redis, prefix: str) -> None:
    reg = WebhookRegistry(redis_client, prefix)
    hook = reg.create(WebhookIn(url=f"http://127.0.0.1:{free_port()}/gone"))
    clock = Clock()
    d = Dispatcher(redis_client, reg, prefix, clock=clock)
    d.submit(alert("token:X"))
    tick(d, clock, 1.0)
    assert d.backlog() == {hook.id: 1}
    reg.delete(hook.id)
    tick(d, clock, 120.0)
    assert redis_client.llen(f"{prefix}:dq:queue:{hook.id}") == 0


def test_transport_errors_are_retried(redis_client: redis.Redis, prefix: str) -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) < 3:
            raise httpx.ReadTimeout("slow receiver", request=request)
        return httpx.Response(204)

    reg = WebhookRegistry(redis_client, prefix)
    reg.create(WebhookIn(url="http://127.0.0.1:9/hook"))
    clock = Clock()
    d = Dispatcher(redis_client, reg, prefix, clock=clock, transport=httpx.MockTransport(handler))
    d.submit(alert("token:X"))
    for _ in range(5):
        tick(d, clock, 5.0)
    assert len(calls) == 3 and d.backlog() == {}


def test_alert_desk_queues_each_transition_once_and_one_worker_delivers(
        redis_client: redis.Redis, receiver: Receiver, prefix: str) -> None:
    """The worker's side: a rebuilt reducer re-issues transitions (the history drops them),
    and of two workers only the one holding the delivery lease drains the queue."""
    WebhookRegistry(redis_client, prefix).create(WebhookIn(url=receiver.url))
    cfg = DispatcherConfig(group_wait_s=0.0)
    first, second = (AlertDesk(redis_client, prefix, cfg, owner=o) for o in ("w1", "w2"))
    first.receive(alert("token:CLAW"))
    second.receive(alert("token:CLAW"))  # the same transition again

    async def rounds() -> list[dict[str, int]]:
        out = [await first.dispatch(), await second.dispatch(), await first.dispatch()]
        for desk in (first, second):
            if desk.http is not None:
                await desk.http.aclose()
        return out

    got = asyncio.run(rounds())
    assert got[1] == {}  # the second worker does not hold the lease
    assert sum(r.get("delivered", 0) for r in got) == 1 and len(receiver.messages) == 1
    redis_client.delete(f"{prefix}:dq:lease")  # the first worker's lease lapsed
    assert second.holds_lease() and not first.holds_lease()

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
from detectors.runner import DetectorConfig, DetectorSuite
from service.api import alerts as alerts_api
from service.api import webhooks as webhooks_api
from service.api.deps import settings_dep
from service.config import Settings
from service.delivery.alertmanager import DELIVERY_HEADER, SIGNATURE_HEADER, ZERO_TIME, verify
from service.delivery.desk import AlertDesk
from service.delivery.dispatcher import Dispatcher, DispatcherConfig
from service.delivery.egress import EgressPolicy
from service.delivery.history import AlertHistory, AlertHistoryCollector
from service.delivery.webhooks import WebhookIn, WebhookRegistry
from service.embedded import free_port, redis_server
from service.sources.archive import open_archive
from streams.events import DeadLetter
from streams.state.base import Item

pytestmark = pytest.mark.integration
T0 = datetime(2026, 2, 8, 8, 0, tzinfo=UTC)
LOOPBACK = ("127.0.0.1/32",)  # the receivers here are on loopback: allow them
CFG = DispatcherConfig(allow_urls=LOOPBACK)


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
    d = Dispatcher(redis_client, WebhookRegistry(redis_client, prefix), prefix, CFG,
                   clock=clock)
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
    d = Dispatcher(redis_client, reg, prefix, CFG, clock=clock)
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
    d = Dispatcher(redis_client, reg, prefix, CFG, clock=clock)
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
        d = Dispatcher(client, reg, prefix, CFG, clock=clock)
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
            d2 = Dispatcher(client, WebhookRegistry(client, prefix), prefix, CFG, clock=clock)
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
    cfg = CFG
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
    app.dependency_overrides[settings_dep] = lambda: Settings(
        api_token="tok", topic_prefix=prefix, delivery=CFG)
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
    d = Dispatcher(redis_client, reg, prefix, CFG, clock=clock)
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
    d = Dispatcher(redis_client, reg, prefix, CFG, clock=clock,
                   transport=httpx.MockTransport(handler))
    d.submit(alert("token:X"))
    for _ in range(5):
        tick(d, clock, 5.0)
    assert len(calls) == 3 and d.backlog() == {}


def test_alert_desk_queues_each_transition_once_and_one_worker_delivers(
        redis_client: redis.Redis, receiver: Receiver, prefix: str) -> None:
    """The worker's side: a rebuilt reducer re-issues transitions (the history drops them),
    and of two workers only the one holding the delivery lease drains the queue."""
    WebhookRegistry(redis_client, prefix).create(WebhookIn(url=receiver.url))
    cfg = DispatcherConfig(group_wait_s=0.0, allow_urls=LOOPBACK)
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


def incident_states(payloads: list[dict], key: str) -> list[tuple[str, str]]:
    """(state, sequence) of one incident in the order the receiver got them."""
    return [(a["annotations"]["state"], a["annotations"]["sequence"])
            for m in payloads for a in m["alerts"] if a["labels"]["key"] == key]


def until(condition, step, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    """Run ``step()`` until ``condition()`` holds; fail past the deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        step()


def test_incident_opening_and_closing_within_one_group_wait_is_announced_firing(
        redis_client: redis.Redis, receiver: Receiver, prefix: str) -> None:
    reg = WebhookRegistry(redis_client, prefix)
    hook = reg.create(WebhookIn(url=receiver.url))
    clock = Clock()
    d = Dispatcher(redis_client, reg, prefix, CFG, clock=clock)
    d.submit(alert("token:CLAW"))
    d.submit(alert("token:CLAW", "updated", 2))
    d.submit(alert("token:CLAW", "resolved", 3))
    d.submit(alert("token:CLAW", "updated", 2))  # a stale transition never replaces a newer
    tick(d, clock, CFG.group_wait_s)
    [msg] = receiver.payloads(hook.secret)  # one coalesced message: firing first
    assert incident_states([msg], "token:CLAW") == [("firing", "1"), ("resolved", "3")]
    assert [a["status"] for a in msg["alerts"]] == ["firing", "resolved"]
    d.submit(alert("token:CLAW"))  # the same firing again: announced already, not re-sent
    tick(d, clock, CFG.group_interval_s)
    assert len(receiver.payloads(hook.secret)) == 1


def test_receiver_down_during_the_whole_incident_sees_firing_then_resolved(
        redis_client: redis.Redis, prefix: str) -> None:
    """A real loopback receiver, down while the incident opens and closes, comes back."""
    receiver = Receiver()  # not started: connection refused
    reg = WebhookRegistry(redis_client, prefix)
    hook = reg.create(WebhookIn(url=receiver.url))
    clock = Clock()
    d = Dispatcher(redis_client, reg, prefix, CFG, clock=clock)
    d.submit(alert("token:CLAW"))
    d.submit(alert("agent:hub", type_="supernode", severity="warning"))
    tick(d, clock, CFG.group_wait_s)
    assert d.backlog() == {hook.id: 2}  # tried, refused, queued
    d.submit(alert("token:CLAW", "updated", 2, minutes=5))
    d.submit(alert("agent:hub", "resolved", 2, type_="supernode", severity="warning",
                   minutes=6))
    d.submit(alert("token:CLAW", "resolved", 3, minutes=20))
    tick(d, clock, CFG.group_interval_s, times=3)
    assert receiver.attempts == 0 and sum(d.backlog().values()) >= 3
    receiver.start()
    try:
        until(lambda: not d.backlog(), lambda: tick(d, clock, 10.0))
        got = receiver.payloads(hook.secret)
        # the update and the resolution waited in one group: the newer replaced the older
        assert incident_states(got, "token:CLAW") == [("firing", "1"), ("resolved", "3")]
        assert incident_states(got, "agent:hub") == [("firing", "1"), ("resolved", "2")]
    finally:
        receiver.stop()


def test_a_transition_of_an_unannounced_incident_is_preceded_by_its_firing(
        redis_client: redis.Redis, receiver: Receiver, prefix: str) -> None:
    """The firing reached the history before the webhook existed, or reached the desk after
    the resolution (the history then drops it as stale): the receiver still sees it first."""
    desk = AlertDesk(redis_client, prefix, DispatcherConfig(group_wait_s=0.0,
                                                            allow_urls=LOOPBACK), owner="w1")
    desk.receive(alert("token:EARLY"))  # no webhook yet
    hook = WebhookRegistry(redis_client, prefix).create(WebhookIn(url=receiver.url))
    desk.receive(alert("token:EARLY", "resolved", 2, minutes=3))
    desk.receive(alert("token:LATE", "resolved", 2, minutes=4))  # its firing comes after
    desk.receive(alert("token:LATE"))

    asyncio.run(deliver_once(desk))
    got = receiver.payloads(hook.secret)
    for key in ("token:EARLY", "token:LATE"):
        states = incident_states(got, key)
        assert states == [("firing", "1"), ("resolved", "2")], key
    early = next(a for m in got for a in m["alerts"] if a["labels"]["key"] == "token:EARLY")
    assert early["startsAt"] == "2026-02-08T08:00:00Z" and early["endsAt"] == ZERO_TIME


async def deliver_once(desk: AlertDesk) -> None:
    await desk.dispatch()
    assert desk.http is not None
    await desk.http.aclose()


def test_dns_rebinding_is_refused_at_delivery_and_given_up_with_the_reason(
        redis_client: redis.Redis, receiver: Receiver, prefix: str) -> None:
    """A name checked public at registration that later resolves to loopback is not
    delivered to; a name that resolves to an allowed address is reached at that address."""
    answers = {"hooks.example": ["93.184.216.34"], "allowed.example": ["127.0.0.1"]}
    policy = EgressPolicy(allow=LOOPBACK, resolve=lambda host, port: answers[host])
    reg = WebhookRegistry(redis_client, prefix)
    assert policy.check("http://hooks.example/hook") == ["93.184.216.34"]  # registration
    rebound = reg.create(WebhookIn(url="http://hooks.example/hook", types=["surge"]))
    pinned = reg.create(WebhookIn(url=f"http://allowed.example:{receiver.port}/hook",
                                  types=["burst"]))
    answers["hooks.example"] = ["93.184.216.34", "127.0.0.2"]  # the name is rebound
    clock = Clock()
    d = Dispatcher(redis_client, reg, prefix, CFG, clock=clock, policy=policy)
    d.submit(alert("token:CLAW"))
    d.submit(alert("ngram:x", type_="burst"))
    tick(d, clock, CFG.group_wait_s)
    assert d.backlog() == {}
    [dead] = d.dead_letters(rebound.id)
    assert "destination refused" in dead["reason"] and "127.0.0.2" in dead["reason"]
    [(headers, _)] = receiver.messages  # the pinned one: sent to 127.0.0.1, named by its host
    assert headers["Host"] == f"allowed.example:{receiver.port}"
    assert receiver.payloads(pinned.secret)[0]["alerts"][0]["labels"]["key"] == "ngram:x"


def test_payload_carries_the_evidence_a_person_acts_on(
        redis_client: redis.Redis, receiver: Receiver, prefix: str,
        moltbook_data: Path) -> None:
    """The real CLAW mint flood of the archived profiles, through the surge detector and the
    alert book, delivered: the annotations carry a readable summary with the exemplar texts,
    the near-duplicate clusters, who led and who followed, and the page's view of it."""
    events = sorted((e for e in open_archive([moltbook_data / "api" / "agent-profiles.jsonl"])
                     if not isinstance(e, DeadLetter)), key=lambda e: e.event_time)
    suite = DetectorSuite(DetectorConfig(enabled=("surge",)))
    fired: list[Alert] = []
    last = None
    for e in events:
        suite.update(Item.of(e))
        t = e.event_time.timestamp()
        if last is None or t - last >= 10:
            suite.expire(t)
            fired += suite.evaluate(t)
            last = t
    first = fired[0]
    assert first.state == "firing" and first.evidence["exemplars"]
    reg = WebhookRegistry(redis_client, prefix)
    hook = reg.create(WebhookIn(url=receiver.url))
    clock = Clock()
    external = "https://moltscope.example.org/"
    d = Dispatcher(redis_client, reg, prefix,
                   DispatcherConfig(allow_urls=LOOPBACK, external_url=external), clock=clock)
    d.submit(first)
    tick(d, clock, 2.0, times=2)
    [msg] = receiver.payloads(hook.secret)
    assert msg["externalURL"] == external
    [a] = msg["alerts"]
    # still an Alertmanager alert: the same keys, every annotation a string
    assert set(a) == {"status", "labels", "annotations", "startsAt", "endsAt", "generatorURL",
                      "fingerprint"}
    notes = a["annotations"]
    assert all(isinstance(v, str) for v in notes.values())
    view = f"https://moltscope.example.org/#alert-{first.incident_id}"
    assert a["generatorURL"] == notes["link"] == view
    ev = first.evidence
    text = notes["description"]
    assert text.startswith(first.summary) and text.endswith(f"View: {view}")
    for x in ev["exemplars"]:
        assert x["agent"] in text and x["id"] in text
        assert " ".join(x["text"].split())[:60] in text
    assert notes["exemplars"].count("\n") == len(ev["exemplars"]) - 1
    biggest = ev["clusters"][0]
    assert f'- {biggest["size"]} texts by {biggest["agents"]} agents' in text
    leaders = [x["agent"] for x in ev["timeline"]["entries"] if x["role"] == "leader"]
    followers = [x for x in ev["timeline"]["entries"] if x["role"] == "follower"]
    assert f"led by {leaders[0]}" in text
    if followers:
        assert f'{followers[0]["agent"]} (+{round(followers[0]["delay_s"], 1):g} s)' in text
    assert json.loads(notes["evidence"])["timeline"] == ev["timeline"]

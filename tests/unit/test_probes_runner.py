"""The runner's safety: the live switch, the key, the kill switch, the budget clamped under the
platform's limits, the schedule, and the key kept out of logs and ``repr``."""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime

import httpx
import pytest
from pydantic import SecretStr

from service.config import ProbeSettings, Settings
from service.probes.bank import load_bank
from service.probes.client import MoltbookWriter, RateLimited
from service.probes.runner import (
    Budget,
    ProbeRunner,
    applied,
    campaign,
    next_action,
    refusal,
)
from service.probes.store import Ledger, ProbeStore

BANK = load_bank()
KEY = "moltbook_sk_TOPSECRET_do_not_log"
T0 = datetime(2026, 3, 2, 8, tzinfo=UTC).timestamp()
BUDGET = Budget.within(posts_per_day=12, comments_per_day=30, post_interval_s=7200,
                       comment_interval_s=60)


def test_refusal_needs_key_and_live_switch_and_no_kill() -> None:
    assert refusal(ProbeSettings(), None) == "no API key (MOLTSCOPE_PROBES__API_KEY)"
    assert refusal(ProbeSettings(live=True), None).startswith("no API key")
    keyed = ProbeSettings(api_key=SecretStr(KEY))
    assert refusal(keyed, None).startswith("live switch off")
    live = ProbeSettings(api_key=SecretStr(KEY), live=True)
    assert refusal(live, None) is None
    assert refusal(live, "operator") == "kill switch on (operator)"
    assert refusal(live.model_copy(update={"kill_switch": True}), None).startswith("kill switch")


def test_budget_is_clamped_under_the_platform_limits() -> None:
    greedy = Budget.within(posts_per_day=1000, comments_per_day=1000, post_interval_s=0,
                           comment_interval_s=0)
    assert greedy.posts_per_day == 38 and greedy.comments_per_day == 40
    assert greedy.post_interval_s == 2250 and greedy.comment_interval_s == 25
    assert (BUDGET.posts_per_day, BUDGET.comments_per_day) == (12, 30)
    assert (BUDGET.post_interval_s, BUDGET.comment_interval_s) == (7200, 60)


def test_campaign_interleaves_tiers() -> None:
    order = campaign(BANK, ["I", "III", "memory"])
    assert [p.tier for p in order[:6]] == ["I", "III", "memory"] * 2
    assert len(order) == 24 + 15 + 45
    assert not any(p.tier == "II" for p in order)


def test_schedule_spacing_daily_budget_and_followups_first() -> None:
    order = campaign(BANK, ["I", "II", "III", "memory"])
    records, ledger = {}, Ledger()
    a = next_action(order, records, ledger, BUDGET, T0, 600)
    assert a is not None and a.kind == "post" and a.probe.tier == "I"
    records, ledger = applied(a, records, ledger, post_id="p1")
    assert next_action(order, records, ledger, BUDGET, T0 + 7199, 600) is None
    b = next_action(order, records, ledger, BUDGET, T0 + 7200, 600)
    assert b is not None and b.probe.tier == "II"
    records, ledger = applied(b, records, ledger, post_id="p2")
    # the Tier II premises follow, 600 s apart, before any new post
    assert next_action(order, records, ledger, BUDGET, T0 + 7200 + 599, 600) is None
    c = next_action(order, records, ledger, BUDGET, T0 + 7200 + 600, 600)
    assert c is not None and (c.kind, c.followup) == ("comment", 0)
    assert c.text == b.probe.followups[0]
    records, ledger = applied(c, records, ledger, comment_id="c1")
    d = next_action(order, records, ledger, BUDGET, T0 + 14_400 + 5000, 600)
    assert d is not None and (d.kind, d.followup) == ("comment", 1)
    # a day's budget used up: nothing until the next UTC day
    full = Ledger(day="2026-03-02", posts=12, comments=30, last_post_at=T0,
                  last_comment_at=T0)
    assert next_action(order, {}, full, BUDGET, T0 + 3 * 3600, 600) is None
    nxt = next_action(order, {}, full, BUDGET, T0 + 16 * 3600 + 60, 600)  # 00:01 next day
    assert nxt is not None and nxt.kind == "post"
    # a 429's pause blocks every write
    blocked = Ledger(blocked_until=T0 + 100)
    assert next_action(order, {}, blocked, BUDGET, T0 + 99, 600) is None
    assert next_action(order, {}, blocked, BUDGET, T0 + 100, 600) is not None


def test_plan_stays_within_budget_and_writes_nothing(redis_client) -> None:  # noqa: ANN001
    store = ProbeStore(redis_client, "tplan")
    runner = ProbeRunner(ProbeSettings(api_key=SecretStr(KEY), live=True), store, BANK,
                         clock=lambda: T0)
    plan = runner.plan(T0, horizon_s=3 * 86_400)
    posts = [a for a in plan if a.kind == "post"]
    for day in {datetime.fromtimestamp(a.at, UTC).date() for a in plan}:
        on_day = [a for a in plan if datetime.fromtimestamp(a.at, UTC).date() == day]
        assert sum(a.kind == "post" for a in on_day) <= 12
        assert sum(a.kind == "comment" for a in on_day) <= 30
    assert all(b.at - a.at >= 7200 for a, b in zip(posts, posts[1:], strict=False))
    assert store.records() == {} and store.writes() == [] and store.ledger() == Ledger()


def test_dry_run_and_kill_switch_write_nothing(redis_client) -> None:  # noqa: ANN001
    calls: list[httpx.Request] = []
    transport = httpx.MockTransport(lambda req: calls.append(req) or httpx.Response(500))
    writer = MoltbookWriter("http://test/api/v1", SecretStr(KEY),
                            client=httpx.Client(base_url="http://test/api/v1",
                                                transport=transport))
    store = ProbeStore(redis_client, "tdry")
    for settings in (ProbeSettings(), ProbeSettings(api_key=SecretStr(KEY)),
                     ProbeSettings(live=True)):
        assert ProbeRunner(settings, store, BANK, writer).tick(T0) is None
    live = ProbeRunner(ProbeSettings(api_key=SecretStr(KEY), live=True), store, BANK, writer)
    store.kill("test")
    assert live.tick(T0) is None
    assert calls == [] and store.records() == {}


def _answer(req: httpx.Request) -> httpx.Response:
    body = json.loads(req.content)
    if req.url.path.endswith("/posts"):
        return httpx.Response(201, json={
            "success": True, "post": {"id": "p-1", "title": body["title"]},
            "verification_required": True,
            "verification": {"code": "v-1", "challenge": "A] lO-bS tEr ClAw Is TwEn Ty ThReE "
                             "NeWtOnS aNd MuLtIpLiEs By FiVe", "expires_at": "soon"}})
    if req.url.path.endswith("/verify"):
        ok = body == {"verification_code": "v-1", "answer": "115.00"}
        return httpx.Response(200 if ok else 400, json={"success": ok})
    return httpx.Response(429, headers={"Retry-After": "42"}, json={"success": False})


def test_key_never_in_logs_repr_or_write_log(redis_client, caplog) -> None:  # noqa: ANN001
    caplog.set_level(logging.DEBUG)
    store = ProbeStore(redis_client, "tkey")
    settings = ProbeSettings(api_key=SecretStr(KEY), live=True, tiers=["II"])
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return _answer(req)

    client = httpx.Client(base_url="http://test/api/v1", transport=httpx.MockTransport(handler))
    writer = MoltbookWriter("http://test/api/v1", settings.api_key, client=client,
                            on_write=store.log_write)
    runner = ProbeRunner(settings, store, BANK, writer)
    posted = runner.tick(T0)
    assert posted is not None and posted.kind == "post"
    rec = store.record(posted.probe.id)
    assert rec is not None and rec.post_id == "p-1" and rec.verified is True
    assert store.post_ids() == {"p-1"}
    assert all(r.headers["Authorization"] == f"Bearer {KEY}" for r in seen)  # sent, only there
    # the follow-up is rate limited: the runner pauses as told instead of retrying
    assert runner.tick(T0 + 600) is None
    assert store.ledger().blocked_until == T0 + 600 + 42
    assert [w["path"] for w in store.writes()] == ["/posts/p-1/comments", "/verify", "/posts"]
    assert [w["status"] for w in store.writes()] == [429, 200, 201]
    texts = [caplog.text, repr(writer), repr(settings), str(settings),
             repr(Settings(probes=settings)), json.dumps(store.writes()),
             json.dumps(runner.status(T0 + 601), default=str)]
    assert all(KEY not in t for t in texts)
    assert "**********" in repr(writer)
    with pytest.raises(RateLimited) as exc:
        writer.comment("p-1", "hello")
    assert exc.value.retry_after_s == 42


def test_a_write_that_may_have_happened_turns_the_kill_switch_on(redis_client) -> None:  # noqa: ANN001
    settings = ProbeSettings(api_key=SecretStr(KEY), live=True)

    def timeout(req: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("no answer", request=req)

    store = ProbeStore(redis_client, "tflight")
    client = httpx.Client(base_url="http://test/api/v1", transport=httpx.MockTransport(timeout))
    runner = ProbeRunner(settings, store, BANK,
                         MoltbookWriter("http://test/api/v1", settings.api_key, client=client))
    assert runner.tick(T0) is None
    assert store.killed().startswith("no answer to the post of t1-rec-001")
    assert runner.tick(T0 + 86_400) is None and store.records() == {}
    store.unkill()  # the operator checked Moltbook
    # a crash mid-write leaves its mark: the next tick refuses and turns the switch on
    store.begin_write("post of t2-library-002 at 1")
    calls: list[httpx.Request] = []
    ok = httpx.Client(base_url="http://test/api/v1",
                      transport=httpx.MockTransport(lambda r: calls.append(r) or _answer(r)))
    runner = ProbeRunner(settings, store, BANK,
                         MoltbookWriter("http://test/api/v1", settings.api_key, client=ok))
    assert runner.tick(T0) is None and calls == []
    assert store.killed().startswith("unfinished write (post of t2-library-002 at 1)")
    store.unkill()
    assert runner.tick(T0) is not None and len(calls) == 2  # the post and its verification
    assert store.begin_write("next") is None  # the finished write left no mark


def test_run_loop_stops_at_max_writes_and_on_the_kill_switch(redis_client) -> None:  # noqa: ANN001
    settings = ProbeSettings(api_key=SecretStr(KEY), live=True, poll_s=0.01)
    store = ProbeStore(redis_client, "tloop")
    client = httpx.Client(base_url="http://test/api/v1", transport=httpx.MockTransport(_answer))
    runner = ProbeRunner(settings, store, BANK,
                         MoltbookWriter("http://test/api/v1", settings.api_key, client=client),
                         clock=lambda: T0)
    assert runner.run(threading.Event(), max_writes=1) == 1
    assert list(store.records()) == ["t1-rec-001"]
    store.kill("test")
    assert runner.run(threading.Event()) == 0

"""The crawler against the loopback fake Moltbook (real payloads, production faults) and a
real Redis for its checkpoint."""

from __future__ import annotations

import logging
import random
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from service.api.app import create_app
from service.api.deps import redis_dep
from service.config import CrawlerSettings
from service.sources.crawler import MoltbookCrawler
from service.sources.normalise import normalise_post_detail, parse_time
from service.stores.checkpoint import CheckpointStore
from streams.events import AgentEvent, DeadLetter, VoteEvent
from tests.integration.fake_moltbook import FakeMoltbook, Faults, with_parents

pytestmark = pytest.mark.integration

RPM = 6000.0  # 100 requests/s: fast tests, still a ceiling the loopback could easily break
SECRET = "moltbook_sk_TEST_do_not_log_4f9a1c"
FAULTS = Faults(p_429=0.008, retry_after_s=0.2, p_429_bare=0.004, bare_block_s=0.3,
                p_5xx=0.03, p_slow=0.01, slow_s=0.8, p_truncated=0.02, p_malformed=0.02,
                p_repeat=0.3, p_skip=0.3, burst_429_at=(30, 300), bare_429_at=(150,))


def living(paging: str, seed: int) -> FakeMoltbook:
    return FakeMoltbook(paging=paging, faults=FAULTS, seed=seed, release_every=1,
                        reveal_ticks=100)


def options(fake: FakeMoltbook, **kw: Any) -> CrawlerSettings:
    base: dict[str, Any] = dict(
        base_url=fake.url, requests_per_minute=RPM, page_limit=20, timeout_s=0.5,
        horizon_s=400 * 86_400.0,  # the recorded posts are months old
        discovery_interval_s=0.3, sweep_interval_s=1.5, revisit_min_s=0.05, revisit_max_s=0.4,
        backoff_base_s=0.02, backoff_cap_s=0.2, ip_block_backoff_s=0.35,
        ip_block_backoff_cap_s=0.5, max_retries=6)
    return CrawlerSettings(**{**base, **kw})


def expected_ids(fake: FakeMoltbook) -> set[str]:
    """Every event id the final recorded payloads normalise to (posts, comments, entities)."""
    ids = set()
    for pid, payload in fake.payloads.items():
        for item in normalise_post_detail(payload, origin=pid):
            if not isinstance(item, DeadLetter):
                ids.add(item.id)
    return ids


def crawl(crawler: MoltbookCrawler, done: Callable[[list[Any]], bool], timeout: float = 60.0,
          emit_hook: Callable[[Any], None] | None = None) -> tuple[list[Any], BaseException | None]:
    """Run the crawler in a thread until ``done(items)`` or a crash; return what it emitted."""
    items: list[Any] = []
    stop = threading.Event()
    crash: list[BaseException] = []

    def emit(item: Any) -> None:
        if emit_hook:
            emit_hook(item)
        items.append(item)

    def target() -> None:
        try:
            crawler.run(emit, stop)
        except BaseException as exc:  # noqa: BLE001 - a "kill" is the point of one test
            crash.append(exc)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    deadline = time.monotonic() + timeout
    while t.is_alive() and not done(items) and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    t.join(10)
    assert not t.is_alive()
    crawler.close()
    return items, crash[0] if crash else None


def covers(expected: set[str], fake: FakeMoltbook) -> Callable[[list[Any]], bool]:
    def done(items: list[Any]) -> bool:
        got = {i.id for i in items if not isinstance(i, DeadLetter)}
        return fake.tick > fake.full_tick and expected <= got
    return done


def max_in_window(times: np.ndarray, window: float) -> int:
    ends = np.searchsorted(times, times + window, side="left")
    return int((ends - np.arange(len(times))).max())


def assert_votes_consistent(items: list[Any]) -> None:
    """Each target's vote events chain: delta = counts - previous counts, first from the
    counts its post/comment event carried; counts only grow on the fake, so ids are unique."""
    last: dict[str, tuple[int, int]] = {}
    for i in items:
        kind = getattr(i, "kind", None)
        if kind == "post":
            last[i.post_id] = (i.upvotes, i.downvotes)
        elif kind == "comment":
            last[i.comment_id] = (i.upvotes, i.downvotes)
        elif isinstance(i, VoteEvent):
            before = last[i.target_id]  # never a vote before the thing itself
            assert (i.delta_up, i.delta_down) == (i.upvotes - before[0], i.downvotes - before[1])
            assert (i.delta_up, i.delta_down) != (0, 0)
            last[i.target_id] = (i.upvotes, i.downvotes)


@pytest.mark.parametrize("paging", ["offset", "cursor"])
def test_every_post_and_comment_exactly_once_under_faults(
    paging: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with living(paging, seed={"offset": 1, "cursor": 2}[paging]) as fake:
        expected = expected_ids(fake)
        registry = CollectorRegistry()
        crawler = MoltbookCrawler(options(fake, api_key=SECRET),
                                  CheckpointStore(redis_client), registry=registry)
        items, crash = crawl(crawler, covers(expected, fake))
        log = list(fake.log)
    assert crash is None
    events = [i for i in items if not isinstance(i, DeadLetter)]
    counts = Counter(e.id for e in events)
    # every reachable post, comment, agent and submolt arrives, each exactly once; the vote
    # ids are unique too (counts only grow), so nothing relies on downstream de-duplication
    assert expected <= set(counts)
    assert max(counts.values()) == 1
    assert {e.id for e in events if e.kind != "vote"} == expected
    assert_votes_consistent(items)
    assert sum(e.kind == "vote" for e in events) > 100
    n_posts = sum(e.kind == "post" for e in events)
    assert n_posts == sum(1 for x in expected if x.startswith("post:"))
    assert sum(e.kind == "comment" for e in events) > 250
    # authors with a profile got the profile's AgentEvent (it has created_at), the rest the
    # payload's; each name was asked for once, at most plus retries of failed answers
    agents = {e.name: e for e in events if isinstance(e, AgentEvent)}
    with_profile = set(agents) & set(fake.profiles)
    assert len(with_profile) >= 5
    assert all(agents[n].created_at is not None for n in with_profile)
    asked = Counter(x.path for x in log if x.path.startswith("/api/v1/agents/profile")
                    and not x.fault)
    assert max(asked.values()) == 1
    # dead letters: only answers that are no JSON (a null-author post is a post)
    dead = [i for i in items if isinstance(i, DeadLetter)]
    assert {d.reason for d in dead} <= {"bad_json"}

    # the request rate never exceeds the bucket (burst 1 + rate * window, +1 for arrival
    # jitter), and no request arrived inside a pause a 429 announced or the per-IP block
    times = np.array(sorted(x.t for x in log))
    for window in (0.2, 1.0, 3.0):
        assert max_in_window(times, window) <= 1 + RPM / 60 * window + 1
    assert fake.violations == 0
    faults = Counter(x.fault for x in log)
    assert faults["429"] >= 2 and faults["bare"] >= 1 and faults["5xx"] >= 5
    assert faults["slow"] >= 1 and faults["trunc"] >= 1 and faults["malformed"] >= 1

    # the API key went out as a bearer token and never into the logs
    assert {x.auth for x in log} == {f"Bearer {SECRET}"}
    assert SECRET not in caplog.text and SECRET not in repr(crawler.opts)

    def metric(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, labels) or 0.0

    # every request the fake logged is counted exactly once: under its status, or as a
    # timeout/error when the client gave up first. Slow answers always time out; on a loaded
    # machine a prompt answer can too (the client's 0.5 s ran out before it read the answer),
    # and the fake cannot tell, so those "late" ones move from their status to the timeouts
    late = 0
    for code in (200, 404, 429, 503):
        sent = sum(x.code == code and x.fault != "slow" for x in log)
        counted = metric("moltscope_crawler_requests_total", status=str(code))
        assert counted <= sent, code
        late += int(sent - counted)
    assert sum(x.code == 429 for x in log) == fake.served_429
    gave_up = sum(metric("moltscope_crawler_requests_total", status=s) for s in ("timeout",
                                                                                 "error"))
    assert gave_up == faults["slow"] + late
    assert metric("moltscope_crawler_rate_limited_total") == metric(
        "moltscope_crawler_requests_total", status="429")
    assert metric("moltscope_crawler_backoff_seconds_total") >= 0.35 * faults["bare"] + 0.2 * (
        faults["429"])
    assert metric("moltscope_crawler_posts_discovered_total") == len(fake.payloads)
    assert metric("moltscope_crawler_revisit_queue_length") == len(fake.payloads)
    assert metric("moltscope_crawler_event_lag_seconds_count") == sum(
        e.kind in ("post", "comment") for e in events)


class Killed(BaseException):
    """The process dies: not an Exception, so nothing on the way catches it."""


class CountingStore(CheckpointStore):
    """Notes how many items had been emitted when each checkpoint committed."""

    def __init__(self, client: redis.Redis, emitted: list[Any]) -> None:
        super().__init__(client)
        self.emitted = emitted
        self.at_commit = 0

    def commit(self, **kw: Any) -> None:
        super().commit(**kw)
        self.at_commit = len(self.emitted)


@pytest.mark.parametrize("kill_after", [250])
def test_killed_and_restarted_loses_and_duplicates_nothing(
    kill_after: int, redis_client: redis.Redis
) -> None:
    with living("mixed", seed=kill_after) as fake:
        expected = expected_ids(fake)
        first: list[Any] = []
        store = CountingStore(redis_client, first)

        def die(item: Any) -> None:
            first.append(item)
            if len(first) == kill_after:
                raise Killed

        crawler = MoltbookCrawler(options(fake), store, registry=CollectorRegistry())
        _, crash = crawl(crawler, lambda _: False, emit_hook=die)
        assert isinstance(crash, Killed)
        in_flight = {i.id for i in first[store.at_commit:] if not isinstance(i, DeadLetter)}
        assert in_flight, "the kill should fall inside a unit of work"

        restarted = MoltbookCrawler(options(fake), CheckpointStore(redis_client),
                                    registry=CollectorRegistry())
        done = covers(expected, fake)
        second, crash = crawl(restarted, lambda items: done(first + items))
    assert crash is None
    ids1 = [i.id for i in first if not isinstance(i, DeadLetter)]
    ids2 = [i.id for i in second if not isinstance(i, DeadLetter)]
    assert len(set(ids1)) == len(ids1) and len(set(ids2)) == len(ids2)
    # nothing lost; repeated only what the killed crawler emitted after its last checkpoint,
    # with the same ids (so the downstream de-duplication drops them)
    assert expected <= set(ids1) | set(ids2)
    assert set(ids1) & set(ids2) <= in_flight
    assert_votes_consistent([*first[: store.at_commit], *second])


def test_schedule_favours_young_and_busy_posts_and_honours_the_horizon() -> None:
    """Simulated 13 hours on a fake clock, real payloads re-dated to chosen ages."""
    import copy
    import json
    from datetime import UTC, datetime

    import httpx

    from tests.integration.fake_moltbook import DATA, _comments_in_order

    now = [datetime(2026, 3, 1, 12, tzinfo=UTC).timestamp()]
    day = 86_400.0
    files = {"young": "0019c632-4d4c-4111-bf6d-f71b6cb8436c", "busy":
             "10b01acb-1acd-4a16-b105-2295d37618ff", "old": "35dab79a-3436-4262-bb78-7ca8800b2f91",
             "ancient": "00012ec8-3b39-410b-a6a7-50d204e227a2",
             "beyond": "000172e3-7252-4b78-9b21-7fe9e6c6abdb"}
    ages = {"young": 600.0, "busy": 2 * day, "old": 2 * day, "ancient": 2.95 * day,
            "beyond": 4 * day}
    payloads, names = {}, {}
    for name, pid in files.items():
        d = json.loads((DATA / "api" / "posts" / f"{pid}.json").read_text())
        created = datetime.fromtimestamp(now[0] - ages[name], UTC).isoformat()
        d["post"]["created_at"] = created
        payloads[pid], names[pid] = d, name
    busy_comments = _comments_in_order(payloads[files["busy"]]["comments"])
    visits: Counter[str] = Counter()
    posted_at: dict[str, str] = {}
    visit_times: dict[str, list[float]] = defaultdict(list)
    request_times: list[float] = []

    def detail(pid: str) -> dict[str, Any]:
        d = copy.deepcopy(payloads[pid])
        if names[pid] == "busy":  # one more recorded comment, written just now, each visit
            new = busy_comments[visits[pid] - 1]["id"]
            posted_at.setdefault(new, datetime.fromtimestamp(now[0], UTC).isoformat())

            def prune(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
                return [{**n, "created_at": posted_at[n["id"]],
                         "replies": prune(n.get("replies") or [])}
                        for n in nodes if n["id"] in posted_at]
            d["comments"] = prune(d["comments"])
        return d

    def handler(request: httpx.Request) -> httpx.Response:
        request_times.append(now[0])
        path = request.url.path.removeprefix("/api/v1")
        if path == "/posts":
            order = sorted(payloads, key=lambda p: payloads[p]["post"]["created_at"],
                           reverse=True)
            return httpx.Response(200, json={"success": True, "has_more": False,
                                             "posts": [payloads[p]["post"] for p in order],
                                             "count": len(order), "next_offset": len(order)})
        pid = path.rsplit("/", 1)[1]
        visits[pid] += 1
        visit_times[names[pid]].append(now[0])
        return httpx.Response(200, json=detail(pid))

    stop = threading.Event()
    end = now[0] + 13 * 3600

    def sleep(s: float) -> None:
        now[0] += s
        if now[0] >= end:
            stop.set()

    registry = CollectorRegistry()
    client = httpx.Client(base_url="http://moltbook.test/api/v1",
                          transport=httpx.MockTransport(handler))
    crawler = MoltbookCrawler(
        CrawlerSettings(base_url="http://moltbook.test/api/v1", requests_per_minute=60,
                       fetch_profiles=False, discovery_interval_s=600,
                       backfill_share=0, stats_interval_s=0),  # the revisits alone
        None, client=client, clock=lambda: now[0], sleep=sleep, registry=registry)
    items = list(crawler.events(stop))
    by_name = {names[p]: n for p, n in visits.items()}
    posts = {i.post_id for i in items if getattr(i, "kind", "") == "post"}
    assert posts == {pid for name, pid in files.items() if name != "beyond"}
    # young: ~log(13 h / 10 min) / log(1.25) visits; an equally old quiet post comes back
    # every 6 hours, a busy one (a new comment at each visit) every 3
    assert by_name["young"] >= 15
    assert np.diff(visit_times["old"])[:2] == pytest.approx([6 * 3600] * 2, abs=5)
    assert np.diff(visit_times["busy"])[:3] == pytest.approx([3 * 3600] * 3, abs=5)
    # the post 2.95 days old was visited once and left the queue at the 3-day horizon;
    # the 4-day-old post was never fetched
    assert by_name["ancient"] == 1 and "beyond" not in by_name
    assert registry.get_sample_value("moltscope_crawler_revisit_queue_length") == 3
    comments = [i for i in items if getattr(i, "kind", "") == "comment"]
    assert len(comments) == len({c.id for c in comments}) >= by_name["busy"] - 1
    # at 60/min on the simulated clock, requests are at least a second apart
    assert min(np.diff(request_times)) >= 1.0 - 1e-6


def _child() -> None:
    """Crawler process for the SIGKILL test: argv = options JSON, Redis port, output file.

    Writes each emitted item as a JSON line through a buffered file that the crawler flushes
    before each checkpoint (as a Kafka producer would be), and a ``{"commit": 1}`` line after
    each checkpoint commit returns.
    """
    import json

    opts = CrawlerSettings.model_validate_json(sys.argv[1])
    client = redis.Redis(host="127.0.0.1", port=int(sys.argv[2]))
    with open(sys.argv[3], "a") as out:  # buffered: flushed before each checkpoint

        class Marking(CheckpointStore):
            def commit(self, **kw: Any) -> None:
                super().commit(**kw)
                out.write(json.dumps({"commit": 1}) + "\n")

        def emit(item: Any) -> None:
            out.write(json.dumps({"id": getattr(item, "id", None)}) + "\n")

        MoltbookCrawler(opts, Marking(client), registry=CollectorRegistry()).run(
            emit, threading.Event(), flush=out.flush)


def test_sigkilled_process_restarts_from_the_redis_checkpoint(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A real crawler process killed with SIGKILL mid-run; a new one resumes from Redis."""
    import json
    import signal

    port = redis_client.connection_pool.connection_kwargs["port"]
    repo = Path(__file__).resolve().parents[2]
    with living("offset", seed=11) as fake:
        expected = expected_ids(fake)
        opts = options(fake).model_dump_json()

        def start(out: Path) -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                [sys.executable, "-c", "from tests.integration.test_crawler import _child; "
                 "_child()", opts, str(port), str(out)], cwd=repo)

        def lines(out: Path) -> list[dict[str, Any]]:
            text = out.read_text() if out.exists() else ""
            return [json.loads(x) for x in text.split("\n")[:-1]]  # a cut last line is lost

        out1, out2 = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
        proc = start(out1)
        try:
            deadline = time.monotonic() + 30
            while len(lines(out1)) < 500 and time.monotonic() < deadline:
                time.sleep(0.01)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            first = lines(out1)
            proc = start(out2)
            deadline = time.monotonic() + 60
            got = {x["id"] for x in first if x.get("id")}
            while time.monotonic() < deadline:
                if fake.tick > fake.full_tick and expected <= got | {
                        x["id"] for x in lines(out2) if x.get("id")}:
                    break
                time.sleep(0.1)
        finally:
            proc.kill()
            proc.wait(10)
        second = lines(out2)
    ids1 = [x["id"] for x in first if x.get("id")]
    ids2 = [x["id"] for x in second if x.get("id")]
    assert len(ids1) >= 300 and len(set(ids1)) == len(ids1) and len(set(ids2)) == len(ids2)
    assert not expected <= set(ids1)  # killed mid-run
    assert expected <= set(ids1) | set(ids2)
    # only items after the last commit marker can come again (the kill may fall between the
    # Redis commit and its marker, so allow from the one before)
    marks = [i for i, x in enumerate(first) if "commit" in x]
    uncommitted = {x["id"] for x in first[marks[-2] + 1:] if x.get("id")}
    assert set(ids1) & set(ids2) <= uncommitted


def test_probe_posts_no_listing_shows_are_revisited_and_their_replies_kept(
    redis_client: redis.Redis
) -> None:
    """Probe post ids in Redis (``{prefix}:probes:post_ids``) join the revisit queue, one read
    at start and one added mid-crawl (read at the next discovery walk), though no listing
    ever shows them; every comment on them passes the ProbeTap into the probe store."""
    import uuid

    from service.probes.bank import load_bank
    from service.probes.store import ProbeStore, ProbeTap

    with FakeMoltbook(seed=7, release_every=1, reveal_ticks=300) as fake:
        # two posts served from the start, with comments, that sort=new never lists
        commented = [p for p in fake.order[:fake.initial] if len(fake._comments[p]) >= 3]
        at_start, later = commented[0], commented[1]
        fake.order = [p for p in fake.order if p not in (at_start, later)]
        hidden = {at_start: len(fake._comments[at_start]), later: len(fake._comments[later])}
        store = ProbeStore(redis_client, f"t{uuid.uuid4().hex[:8]}")
        probes = load_bank().probes
        store.record_post(probes[0], at_start, time.time(), "v1", True)
        tap = ProbeTap(store, refresh_s=0.0)

        def hook(item: Any) -> None:
            tap.observe(item)
            if len(store.post_ids()) == 1 and fake.tick > 10:
                store.record_post(probes[1], later, time.time(), "v1", True)

        crawler = MoltbookCrawler(options(fake, fetch_profiles=False), None,
                                  registry=CollectorRegistry(), probe_ids=store.post_ids)
        items, crash = crawl(crawler, lambda _: all(
            len(store.replies(p)) == n for p, n in hidden.items()), emit_hook=hook)
        log = list(fake.log)
    assert crash is None
    for pid, n in hidden.items():
        kept = store.replies(pid)
        assert len(kept) == n
        assert {r.comment_id for r in kept} == {c["id"] for c in fake._comments[pid]}
        emitted = [i for i in items if getattr(i, "kind", "") == "post" and i.post_id == pid]
        assert len(emitted) == 1  # from its detail: no listing showed it
        # revisited until every comment came back (revealed over 300 requests)
        assert sum(x.path == f"/api/v1/posts/{pid}" for x in log) >= 2
    assert not any(pid in x.path for x in log if x.path.startswith("/api/v1/posts?")
                   for pid in hidden)


def test_probe_posts_revisited_at_the_minimum_interval_past_the_horizon() -> None:
    """Simulated 2 hours on a fake clock: a probe post 4 days old (past the 3-day horizon)
    comes back every ``revisit_min_s``; a plain post as old is never fetched; a probe post
    reaching the 7-day probe horizon leaves the queue and is not queued again."""
    import json
    from datetime import UTC, datetime

    import httpx

    from tests.integration.fake_moltbook import DATA

    now = [datetime(2026, 3, 1, 12, tzinfo=UTC).timestamp()]
    day = 86_400.0
    files = {"probe": "10b01acb-1acd-4a16-b105-2295d37618ff",
             "plain": "35dab79a-3436-4262-bb78-7ca8800b2f91",
             "expiring": "0019c632-4d4c-4111-bf6d-f71b6cb8436c"}
    ages = {"probe": 4 * day, "plain": 4 * day, "expiring": 7 * day - 3600}
    payloads, names = {}, {}
    for name, pid in files.items():
        d = json.loads((DATA / "api" / "posts" / f"{pid}.json").read_text())
        d["post"]["created_at"] = datetime.fromtimestamp(now[0] - ages[name], UTC).isoformat()
        payloads[pid], names[pid] = d, name
    visits: dict[str, list[float]] = defaultdict(list)

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api/v1")
        if path == "/posts":
            listed = [payloads[p]["post"] for p in payloads]
            return httpx.Response(200, json={"success": True, "has_more": False,
                                             "posts": listed, "count": len(listed),
                                             "next_offset": len(listed)})
        pid = path.rsplit("/", 1)[1]
        visits[names[pid]].append(now[0])
        return httpx.Response(200, json=payloads[pid])

    stop = threading.Event()
    start, end = now[0], now[0] + 2 * 3600

    def sleep(s: float) -> None:
        now[0] += s
        if now[0] >= end:
            stop.set()

    reads: list[float] = []

    def probe_ids() -> set[str]:
        reads.append(now[0])
        return {files["probe"], files["expiring"]}

    registry = CollectorRegistry()
    client = httpx.Client(base_url="http://moltbook.test/api/v1",
                          transport=httpx.MockTransport(handler))
    crawler = MoltbookCrawler(
        CrawlerSettings(base_url="http://moltbook.test/api/v1", requests_per_minute=60,
                       fetch_profiles=False, backfill_share=0, stats_interval_s=0),
        None, client=client, clock=lambda: now[0],
        sleep=sleep, registry=registry, probe_ids=probe_ids)
    items = list(crawler.events(stop))
    assert "plain" not in visits
    # read at start and at every discovery walk (one a minute)
    assert reads[0] == start and len(reads) >= 100
    # every 120 s (the bucket's 1 request/s and the walks can add a second or two)
    gaps = np.diff(visits["probe"])
    assert len(visits["probe"]) >= 55 and gaps.min() >= 120 and gaps.max() <= 125
    # the expiring probe post was revisited up to its 7-day horizon, then never again
    expires = start - ages["expiring"] + 7 * day
    assert len(visits["expiring"]) >= 25 and max(visits["expiring"]) < expires
    assert max(visits["expiring"]) > expires - 125
    assert registry.get_sample_value("moltscope_crawler_revisit_queue_length") == 1
    posts = {i.post_id for i in items if getattr(i, "kind", "") == "post"}
    assert posts == {files["probe"], files["expiring"]}


HOSTILE = Faults(p_429_bare=0.01, bare_block_s=5.0, p_5xx=0.02, p_repeat=0.3)


@pytest.mark.slow
def test_default_crawler_crawls_everything_once_through_a_hostile_api_in_10_minutes(
    redis_client: redis.Redis,
) -> None:
    """Issue 14 item 4, at the real rate: the DEFAULT settings (only the address pointed at
    the fake) against the platform's 60/min sliding minute on real time, 1 % header-less 429s
    (the per-IP limit, each blocking 5 s), 2 % 503s, pages that repeat items and new posts
    that push offset pages down. Every real post file and its nested comments arrive exactly
    once within 10 minutes, the minute is never exceeded, a header-less 429 costs a short
    back-off (not 15 minutes), and a null-author post is published (author None) from the
    first listing that shows it. Seeded faults; every wait is a condition with a deadline."""
    with FakeMoltbook(paging="offset", initial=138, release_every=8, reveal_ticks=0,
                      profile_posts=0, faults=HOSTILE, seed=14, lifetime_s=720.0,
                      per_minute=60, redate=(2.5 * 86_400.0, 5 * 3600.0)) as fake:
        posts = set(fake.payloads)
        comments = {c["id"] for p in posts for c in fake._comments[p]}
        null_author = {p for p in posts if fake.payloads[p]["post"].get("author") is None}
        assert (len(posts), len(comments), len(null_author)) == (158, 286, 10)  # the real files
        details_before: dict[str, int] = {}
        last_new = [0.0]

        def hook(item: Any) -> None:
            kind = getattr(item, "kind", "")
            if kind == "post":
                path = f"/api/v1/posts/{item.post_id}"
                details_before[item.post_id] = sum(x.path == path for x in list(fake.log))
            if kind in ("post", "comment"):
                last_new[0] = time.monotonic()

        def done(items: list[Any]) -> bool:
            got = {getattr(i, "post_id", None) for i in items if getattr(i, "kind", "") == "post"}
            seen = {getattr(i, "comment_id", None) for i in items
                    if getattr(i, "kind", "") == "comment"}
            return posts <= got and comments <= seen

        started = time.monotonic()
        crawler = MoltbookCrawler(CrawlerSettings(base_url=fake.url),
                                  CheckpointStore(redis_client), registry=CollectorRegistry(),
                                  rng=random.Random(14))
        items, crash = crawl(crawler, done, timeout=600.0, emit_hook=hook)
        log = list(fake.log)
    assert crash is None
    took = last_new[0] - started
    events = [i for i in items if not isinstance(i, DeadLetter)]
    assert Counter(e.id for e in events).most_common(1)[0][1] == 1
    emitted_posts = [e for e in events if e.kind == "post"]
    emitted_comments = [e for e in events if e.kind == "comment"]
    assert sorted(e.post_id for e in emitted_posts) == sorted(posts)
    assert sorted(e.comment_id for e in emitted_comments) == sorted(comments)
    assert took <= 600.0
    # null authors: a post (author None) from the listing, before any detail request for it
    for e in emitted_posts:
        assert (e.author is None) == (e.post_id in null_author)
    assert all(details_before[p] == 0 for p in null_author)

    # the sliding minute was never exceeded (nor a 429's pause or the per-IP block entered):
    # the bucket admits at most 1 + 55 requests in any 60 s (+1 for arrival jitter)
    times = np.array(sorted(x.t for x in log))
    assert fake.over_limit == 0 and fake.violations == 0
    assert max_in_window(times, 60.0) <= 57
    faults = Counter(x.fault for x in log)
    assert faults["bare"] >= 2 and faults["5xx"] >= 4
    # each header-less 429 cost one short back-off: no pause reached a minute
    gaps = np.diff(times)
    assert gaps.max() < 60.0
    # the pace between back-offs is the default 55/min; the back-offs lower the average
    pace = 60.0 / float(np.median(gaps))
    span = times[-1] - times[0]
    rate = 60.0 * (len(times) - 1) / span
    print(f"\nhostile crawl: {len(posts)} posts + {len(comments)} comments in {took:.0f} s; "
          f"{len(log)} requests over {span:.0f} s = {rate:.1f} requests/min on average, "
          f"pace {pace:.1f}/min, at most {max_in_window(times, 60.0)} in any 60 s; "
          f"faults {dict(faults)}; longest pause {gaps.max():.1f} s")
    assert 54.0 <= pace <= 55.5


def test_default_crawler_backs_off_30_s_on_a_lone_header_less_429_doubling_on_repeats() -> None:
    """On a fake clock, the default settings: a lone header-less 429 pauses 30 s (the same
    request is then repeated), two in a row 30 s then 60 s, and a success resets the streak;
    otherwise requests go 60/55 s apart (never above the platform's 60/min)."""
    import json

    import httpx

    from tests.integration.fake_moltbook import DATA

    pid = "10b01acb-1acd-4a16-b105-2295d37618ff"
    payload = json.loads((DATA / "api" / "posts" / f"{pid}.json").read_text())
    now = [parse_time(payload["post"]["created_at"]).timestamp() + 3600]  # type: ignore[union-attr]
    sent: list[tuple[float, str]] = []
    bare_at = {2, 5, 6}  # 0-based request numbers answered with a header-less 429

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append((now[0], request.url.path))
        if len(sent) - 1 in bare_at:
            return httpx.Response(429, json={"success": False, "error": "Too many requests"})
        if request.url.path.endswith("/posts"):
            return httpx.Response(200, json={"success": True, "posts": [payload["post"]],
                                             "has_more": False, "count": 1, "next_offset": 1})
        return httpx.Response(200, json=payload)

    stop = threading.Event()

    def sleep(s: float) -> None:
        now[0] += s
        if len(sent) >= 10:
            stop.set()

    registry = CollectorRegistry()
    crawler = MoltbookCrawler(
        CrawlerSettings(base_url="http://moltbook.test/api/v1", fetch_profiles=False,
                        discovery_interval_s=1.0, backfill_share=0, stats_interval_s=0), None,
        client=httpx.Client(base_url="http://moltbook.test/api/v1",
                            transport=httpx.MockTransport(handler)),
        clock=lambda: now[0], sleep=sleep, registry=registry)
    list(crawler.events(stop))
    gaps = np.diff([t for t, _ in sent[:10]])
    interval = 60 / 55
    assert gaps == pytest.approx([interval, interval, 30, interval, interval, 30, 60, interval,
                                  interval], abs=1e-5)
    assert [p for _, p in sent[2:4]] == [sent[2][1]] * 2  # the refused request, repeated
    assert registry.get_sample_value("moltscope_crawler_backoff_seconds_total") == 120


SORTS = ("new", "top", "old", "controversial")


def _comment_ids(answer: dict[str, Any]) -> set[str]:
    return {c["id"] for c, _ in with_parents(answer.get("comments") or [])}


def test_comment_deficits_backfilled_largest_first_within_the_budget() -> None:
    """Issue 13 item 3: a planted deficit (post answers carry one comment of their tree, the
    comments endpoint three a sort order, no paging). The backfill, at most a quarter of the
    pace, recovers every comment the API serves at all, the largest deficit first; what no
    order reaches stays as the crawler's deficit, and nothing is asked again."""
    share = 0.25
    with FakeMoltbook(initial=1000, reveal_ticks=0, profile_posts=0, detail_cap=1,
                      comments_cap=3, comment_paging=False) as fake:
        final = 10**9
        detail = {p: _comment_ids(fake.detail(p, final)) for p in fake.payloads}
        served = {p: detail[p].union(*(_comment_ids(fake.comments_page(
            p, {"sort": s, "limit": "500"}, final)) for s in SORTS)) for p in fake.payloads}
        counts = {p: fake.payloads[p]["post"].get("comment_count") or 0 for p in fake.payloads}
        left = {p: counts[p] - len(served[p]) for p in counts if counts[p] > len(served[p])}
        want = set().union(*served.values())
        assert len(want - set().union(*detail.values())) > 100 and sum(left.values()) > 100
        registry = CollectorRegistry()
        crawler = MoltbookCrawler(options(fake, page_limit=200, backfill_share=share,
                                          stats_interval_s=0), registry=registry)

        def metric(name: str) -> float | None:
            return registry.get_sample_value(name)

        def done(items: list[Any]) -> bool:
            got = {i.comment_id for i in items if getattr(i, "kind", "") == "comment"}
            return (want <= got and metric("moltscope_crawler_backfill_pending_posts") == 0
                    and metric("moltscope_crawler_comment_deficit") == sum(left.values()))

        items, crash = crawl(crawler, done)
        log = list(fake.log)
    assert crash is None
    comments = [i.comment_id for i in items if getattr(i, "kind", "") == "comment"]
    assert sorted(comments) == sorted(want)  # each once
    assert metric("moltscope_crawler_posts_with_deficit") == len(left)
    backfills = [x for x in log if x.path.split("?")[0].endswith("/comments")]
    assert metric("moltscope_crawler_backfill_requests_total") == len(backfills)
    assert metric("moltscope_crawler_backfill_comments_total") >= len(
        want - set().union(*detail.values()))
    # each post with a deficit went through the orders once: at most one request an order
    per_post = Counter(x.path.split("/")[-2] for x in backfills)
    assert max(per_post.values()) <= len(SORTS)
    # the largest deficit first (38 comments counted; the next 28)
    assert backfills[0].path.split("/")[-2] == max(counts, key=lambda p: (counts[p], p))
    # paced at most share x the budget: request i+1 leaves after answer i plus the interval
    gaps = np.diff([x.t for x in backfills])
    assert gaps.min() >= 60.0 / (RPM * share) * 0.999


def test_capture_ratio_against_the_platform_totals(redis_client: redis.Redis) -> None:
    """GET /stats: the platform's totals as gauges; the capture ratio counts what was created
    after the first answer. Posts are created as they appear (fresh), their comments with
    them; once all have appeared and been crawled, the posts' ratio is 1 and the comments'
    is the share of the counted comments the trees really hold. The progress the crawler
    commits with its checkpoint says the same, and ``GET /v1/crawler`` serves it."""
    store = CheckpointStore(redis_client)
    with FakeMoltbook(initial=20, release_every=2, reveal_ticks=0, profile_posts=0,
                      fresh=True) as fake:
        registry = CollectorRegistry()
        crawler = MoltbookCrawler(options(fake, stats_interval_s=0.05), store,
                                  registry=registry)

        def ratio(kind: str) -> float | None:
            return registry.get_sample_value("moltscope_crawler_capture_ratio", {"kind": kind})

        def base_visible() -> int:
            first = next(i for i, x in enumerate(list(fake.log)) if x.path == "/api/v1/stats")
            return len(fake.visible(first))

        def expected() -> float:
            after = fake.order[base_visible():]
            return (sum(len(fake._comments[p]) for p in after)
                    / sum(fake.payloads[p]["post"].get("comment_count") or 0 for p in after))

        def committed() -> dict[str, Any]:
            return (store.progress() or {}).get("capture_ratio", {})

        def done(items: list[Any]) -> bool:
            return (len(fake.visible(fake.tick)) == len(fake.order)
                    and ratio("posts") == 1.0 and ratio("comments") == expected()
                    and committed() == {"posts": 1.0, "comments": expected()})

        items, crash = crawl(crawler, done)
        stats = fake.stats(fake.tick)
    assert crash is None
    assert ratio("posts") == 1.0 and 0.5 < ratio("comments") == expected() < 1.0
    for kind in ("posts", "comments", "agents"):
        assert registry.get_sample_value("moltscope_crawler_platform_count",
                                         {"kind": kind}) == stats[kind]
    progress = store.progress()
    assert progress is not None and progress["posts_tracked"] > 0
    assert progress["platform"]["posts"] == stats["posts"]
    app = create_app()
    app.dependency_overrides[redis_dep] = lambda: redis_client
    with TestClient(app) as http:
        assert http.get("/v1/crawler").json() == {"reported": True, **progress}
        store.clear()
        assert http.get("/v1/crawler").json() == {"reported": False}

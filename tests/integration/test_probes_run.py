"""``probe run`` end to end without the internet: a loopback fake Moltbook write API (posts,
comments, the verification challenge, one 429) whose simulated society answers the probes,
a real Redis, the replies brought back by the real crawler through the probe tap, scores
held against a hand check of the recorded threads, the API and the ``probe_*`` metrics."""

from __future__ import annotations

import json
import logging
import random
import re
import threading
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest
from pydantic import SecretStr

from service.api import probes as probes_api
from service.api.deps import settings_dep
from service.config import CrawlerSettings, ProbeSettings, Settings
from service.probes.bank import Bank, Probe, load_bank
from service.probes.lookup import ArchiveLookup, RedisLookup
from service.probes.report import ProbeCollector, campaign_report
from service.probes.runner import Budget, ProbeRunner
from service.probes.simulate import Rates, Society
from service.probes.store import ProbeStore, ProbeTap
from service.probes.verify import make_challenge
from service.sources.crawler import MoltbookCrawler
from service.sources.normalise import normalise_post_detail
from streams.events import AgentEvent, PostEvent
from tests.integration.fake_moltbook import LoopbackServer

KEY = "moltbook_sk_integration_SECRET"
AGENT = "moltscope_prober"
T0 = datetime(2026, 3, 2, 6, tzinfo=UTC).timestamp()
DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "moltbook"


class FakeWriteMoltbook(LoopbackServer):
    """Loopback write API: ``POST /posts``, ``POST /posts/{id}/comments``, ``POST /verify``
    and ``GET /posts/{id}``. Every create asks for a verification; the ``rate_limit_at``-th
    create answers 429 once. The society answers each probe post as it is created."""

    def __init__(self, bank: Bank, society: Society, *, rate_limit_at: int = 3,
                 lifetime_s: float = 60.0) -> None:
        self.bank = {(p.title, p.content): p for p in bank.probes}
        self.society = society
        self.rate_limit_at = rate_limit_at
        self.creates = 0
        self.posts: dict[str, dict[str, Any]] = {}
        self.probe_of: dict[str, Probe] = {}
        self.challenges: dict[str, str] = {}
        self.verified: list[str] = []
        self.auth: list[str | None] = []
        self._rng = random.Random(5)
        self._lock = threading.Lock()
        self._serve(self._handler(), lifetime_s)

    def _challenge(self, target: str) -> dict[str, Any]:
        text, answer = make_challenge(self._rng)
        code = f"moltbook_verify_{uuid.uuid4().hex}"
        self.challenges[code] = answer
        return {"code": code, "challenge": text, "expires_at": "in 30 s",
                "instructions": "Solve and POST /verify with the answer (2 decimals)"}

    def _post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        now = datetime.now(UTC).isoformat()
        if path == "/api/v1/verify":
            ok = self.challenges.pop(body.get("verification_code"), None) == body.get("answer")
            if ok:
                self.verified.append(body["verification_code"])
            return (200, {"success": True}) if ok else \
                (400, {"success": False, "error": "Incorrect answer"})
        self.creates += 1
        if self.creates == self.rate_limit_at:
            return 429, {"success": False, "error": "Rate limit exceeded",
                         "retry_after_seconds": 1800}
        if path == "/api/v1/posts":
            pid = str(uuid.uuid4())
            post = {"id": pid, "title": body["title"], "content": body["content"], "url": None,
                    "upvotes": 0, "downvotes": 0, "comment_count": 0, "created_at": now,
                    "submolt": {"id": "s-1", "name": body["submolt"],
                                "display_name": body["submolt"]},
                    "author": {"id": "a-probe", "name": AGENT}}
            probe = self.bank[(body["title"], body["content"])]
            self.probe_of[pid] = probe
            self.posts[pid] = {"post": post, "comments": self.society.respond(
                probe, datetime.now(UTC).timestamp())}
            return 201, {"success": True, "post": post, "verification_required": True,
                         "verification": self._challenge(pid)}
        pid = path.split("/")[4]
        if pid not in self.posts:
            return 404, {"success": False, "error": "Post not found"}
        comment = {"id": str(uuid.uuid4()), "content": body["content"],
                   "parent_id": body.get("parent_id"), "upvotes": 0, "downvotes": 0,
                   "created_at": now, "author": {"id": "a-probe", "name": AGENT},
                   "replies": []}
        self.posts[pid]["comments"].append(comment)
        return 201, {"success": True, "comment": comment, "verification_required": True,
                     "verification": self._challenge(comment["id"])}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else 40 ms delayed-ACK stalls per answer

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, obj: dict[str, Any]) -> None:
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                if status == 429:
                    self.send_header("Retry-After", "1800")
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with fake._lock:
                    fake.auth.append(self.headers.get("Authorization"))
                    if self.headers.get("Authorization") != f"Bearer {KEY}":
                        status, obj = 401, {"success": False, "error": "No API key"}
                    else:
                        status, obj = fake._post(self.path, json.loads(raw))
                self._send(status, obj)

            def do_GET(self) -> None:  # noqa: N802
                split = urlsplit(self.path)
                with fake._lock:
                    if split.path == "/api/v1/posts":  # the crawler's discovery walk
                        q = {k: int(v[-1]) for k, v in parse_qs(split.query).items()
                             if k in ("limit", "offset")}
                        start, limit = q.get("offset", 0), q.get("limit", 25)
                        newest = [fake.posts[pid]["post"] for pid in reversed(fake.posts)]
                        page = newest[start:start + limit]
                        obj = {"success": True, "posts": page, "count": len(page),
                               "has_more": start + limit < len(newest),
                               "next_offset": start + len(page)}
                    else:
                        found = fake.posts.get(split.path.rsplit("/", 1)[1])
                        obj = {"success": True, **json.loads(json.dumps(found))} \
                            if found else None
                self._send(200, obj) if obj else self._send(404, {"success": False})

        return Handler


def _flat(tree: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for c in tree:
        out.append(c)
        out.extend(_flat(c["replies"]))
    return out


def _hand_check(fake: FakeWriteMoltbook) -> dict[str, dict[str, Any]]:
    """The figures read off the recorded threads directly, one rule at a time."""
    out: dict[str, dict[str, Any]] = {}
    for pid, thread in fake.posts.items():
        p = fake.probe_of[pid]
        replies = [c for c in _flat(thread["comments"]) if c["author"]["name"] != AGENT]
        f = out.setdefault(p.tier, {"probes": 0, "no_reply": 0, "hits": 0, "steps": 0,
                                    "correct_steps": 0})
        f["probes"] += 1
        f["no_reply"] += not replies
        if p.tier in ("I", "II"):
            f["hits"] += any(c["content"].endswith(f"the answer is {p.expected}.")
                             for c in replies)
        elif p.tier == "III":
            value = {c["id"]: float(c["content"]) for c in replies}
            for c in replies:
                parent = p.params["shown"][-1] if c["parent_id"] is None else \
                    value[c["parent_id"]]
                f["steps"] += 1
                f["correct_steps"] += value[c["id"]] == parent + p.params["step"]
    return out


@pytest.fixture
def real_store() -> tuple[ArchiveLookup, tuple[str, ...], tuple[str, ...]]:
    events = []
    for f in sorted((DATA / "api" / "posts").glob("*.json"))[:40]:
        events += normalise_post_detail(f.read_text(), origin=str(f))
    posts = tuple(e.post_id for e in events if isinstance(e, PostEvent))
    agents = tuple(e.name for e in events if isinstance(e, AgentEvent))
    return ArchiveLookup.from_events(events), posts, agents


def test_probe_run_against_loopback_moltbook(redis_client, real_store, caplog) -> None:  # noqa: ANN001
    caplog.set_level(logging.DEBUG)
    lookup, real_posts, real_agents = real_store
    bank = load_bank()
    rates = {"I": Rates(0.5, 1.5, 0.4, 1.0), "II": Rates(0.5, 1.5, 0.8, 1.0),
             "III": Rates(0.7, 2.5, 0.6, 1.0), "memory": Rates(0.6, 1.5, 0.0, 0.7, 0.5)}
    society = Society(rates, seed=11, real_posts=real_posts, real_agents=real_agents)
    prefix = f"t{uuid.uuid4().hex[:8]}"
    with FakeWriteMoltbook(bank, society) as fake:
        settings = ProbeSettings(api_key=SecretStr(KEY), live=True, base_url=fake.url,
                                 agent_name=AGENT, posts_per_day=38, comments_per_day=40,
                                 post_interval_s=0, comment_interval_s=0, followup_delay_s=300)
        store = ProbeStore(redis_client, prefix)
        now = T0
        runner = ProbeRunner(settings, store, bank, clock=lambda: now)
        budget = Budget.of(settings)
        done = []
        while now < T0 + 4 * 86_400 and len(store.records()) < len(bank.probes):
            if (a := runner.tick(now)) is not None:
                done.append(a)
            now += 300
        runner.writer().close()

        # every probe posted once, every premise commented, every write verified
        records = store.records()
        assert set(records) == {p.id for p in bank.probes}
        assert store.post_ids() == set(fake.posts)
        assert all(len(r.followups) == len(r.probe.followups) for r in records.values())
        assert all(r.verified is True for r in records.values())
        assert all(f["verified"] is True for r in records.values() for f in r.followups)
        assert len(fake.verified) == len(done) and fake.challenges == {}
        # the 429 paused writing for the Retry-After, then the probe was posted later
        writes = store.writes(10_000)
        assert [w["status"] for w in writes].count(429) == 1
        posts = sorted(r.posted_at for r in records.values())
        assert all(b - a >= budget.post_interval_s for a, b in zip(posts, posts[1:],
                                                                      strict=False))
        for day in {datetime.fromtimestamp(t, UTC).date() for t in posts}:
            assert sum(datetime.fromtimestamp(t, UTC).date() == day for t in posts) <= 38
        assert all(a == f"Bearer {KEY}" for a in fake.auth)
        assert KEY not in caplog.text and KEY not in json.dumps(writes)

        # the real crawler discovers and revisits the probe threads; its ordinary events
        # pass the tap, which keeps the comments on probe posts
        comments = sum(len(_flat(t["comments"])) for t in fake.posts.values())
        tap = ProbeTap(store)
        crawler = MoltbookCrawler(
            CrawlerSettings(base_url=fake.url, requests_per_minute=600_000, burst=100,
                            revisit_min_s=0.01, discovery_interval_s=0.05,
                            fetch_profiles=False), registry=CollectorRegistry(),
            probe_ids=store.post_ids)  # probe threads revisited (docs/probes.md)
        stop = threading.Event()
        events: list[Any] = []

        posts_seen = 0

        def emit(item: Any) -> None:
            # done once every comment was kept and every probe post seen (a post without a
            # comment can come after the last comment)
            nonlocal posts_seen
            events.append(item)
            posts_seen += isinstance(item, PostEvent)
            if tap.kept >= comments and posts_seen >= len(bank.probes):
                stop.set()

        watchdog = threading.Timer(30.0, stop.set)
        watchdog.start()
        try:
            crawler.run(tap.wrap(emit), stop)
        finally:
            watchdog.cancel()
            crawler.close()
        assert tap.kept == comments
        assert sum(isinstance(e, PostEvent) for e in events) == len(bank.probes)
        hand = _hand_check(fake)

    report = campaign_report(store, lookup, agent_name=AGENT, remember=True)
    summary = report["summary"]
    for tier, f in hand.items():
        assert summary[tier]["probes"] == f["probes"]
        assert summary[tier]["no_reply"] == f["no_reply"], tier
    assert summary["I"]["acc_individual"] == hand["I"]["hits"] / hand["I"]["probes"]
    assert sum(s["figures"]["correct"] for s in report["probes"] if s["tier"] == "II") == \
        hand["II"]["hits"]
    assert (summary["III"]["steps"], summary["III"]["correct_steps"]) == \
        (hand["III"]["steps"], hand["III"]["correct_steps"])
    # our own premises are comments on Tier II posts, never replies
    assert summary["II"]["replies"] == sum(
        len([c for c in _flat(t["comments"]) if c["author"]["name"] != AGENT])
        for pid, t in fake.posts.items() if fake.probe_of[pid].tier == "II")
    assert 0 < summary["memory"]["valid"] < summary["memory"]["cites"]
    assert 0 < summary["I"]["acc_individual"] < 1 and summary["III"]["correct_steps"] > 0

    # the API and the metrics read the same store; citations checked by the crawler's keys
    crawler = f"{prefix}:crawler"
    redis_client.sadd(f"{crawler}:seen", *[f"agent:{a}" for a in real_agents])
    redis_client.hset(f"{crawler}:posts", mapping={p: "{}" for p in real_posts})
    app = FastAPI()
    app.include_router(probes_api.router)
    app.state.redis = redis_client
    full = Settings(topic_prefix=prefix, probes=settings)
    full.crawler.checkpoint_prefix = crawler
    app.dependency_overrides[settings_dep] = lambda: full
    with TestClient(app) as http:
        listed = http.get("/v1/probes").json()
        assert listed["summary"] == json.loads(json.dumps(summary))
        assert len(listed["probes"]) == len(bank.probes)
        one = next(s for s in report["probes"] if s["tier"] == "III" and s["replies"] > 1)
        got = http.get(f"/v1/probes/{one['probe_id']}").json()
        assert got["score"]["figures"] == one["figures"]
        assert got["stimulus"]["expected"] is not None and got["post_id"] in fake.posts
        assert all("why" in e and "quality_why" in e for e in got["score"]["evidence"])
        assert http.get("/v1/probes/nope").status_code == 404
    registry = CollectorRegistry()
    registry.register(ProbeCollector(store, RedisLookup(redis_client, prefix=prefix,
                                                        crawler_prefix=crawler), budget,
                                     agent_name=AGENT, clock=lambda: now))
    text = generate_latest(registry).decode()
    assert 'moltscope_probe_posted_total{tier="III"} 15.0' in text
    assert f'moltscope_probe_continuation_ratio{{tier="III"}} ' \
           f'{summary["III"]["continuation_accuracy"]!r}' in text
    assert 'moltscope_probe_out_of_band{figure="continuation_accuracy",tier="III"} 0.0' in text
    assert "probe_id" not in text and "t3-by" not in text
    doc = (Path(__file__).resolve().parents[2] / "docs" / "probes.md").read_text()
    families = set(re.findall(r"^# TYPE (moltscope_probe_\w+) (\w+)", text, re.M))
    assert len(families) == 13
    for name, kind in families:
        assert (name.removesuffix("_total") + "_total" if kind == "counter" else name) in doc

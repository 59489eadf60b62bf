"""The live page and the local API docs in a real browser (Debian's Chromium driven by
Playwright) against the API process and a real Redis holding what the reducer and the alert
path write there.

Every wait has a deadline; nothing may load from outside the loopback.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np
import pytest
import redis
from playwright.sync_api import Browser, ConsoleMessage, Page, Request, sync_playwright

from detectors.alert import Alert, AlertBook, fingerprint
from detectors.evidence import Sighting, build_evidence
from detectors.surge import SurgeConfig, SurgeDetector
from service.config import Settings
from service.delivery.history import AlertHistory
from service.embedded import ManagedProcess, free_port, port_open
from service.stack import settings_env
from service.stores.agents import AgentStore
from service.stores.checkpoint import CheckpointStore
from service.stores.metrics import MetricStore
from streams.events import PostEvent
from streams.reducer import AgentValues
from streams.state.base import Item, Sample, Snapshot

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")  # Debian's; Playwright's own download needs the internet
PROFILES = (Path(__file__).resolve().parents[2].parent / "shared" / "data" / "moltbook" / "api"
            / "agent-profiles.jsonl")
HOSTILE = '<img src=x onerror="document.body.dataset.pwned=1"> ignore previous instructions'
WAIT_MS = 15_000


def agent_names(n: int) -> list[str]:
    with PROFILES.open() as f:
        return [json.loads(line)["name"] for line in f][:n]


def snapshot(rng: np.random.Generator, step: int, now: float, agents: list[str]) -> Snapshot:
    """Samples and details under the names and labels the engines give them."""
    s: list[Sample] = []

    def add(name: str, value: float, kind: str = "gauge", **labels: str) -> None:
        s.append(Sample(name, float(value), tuple(sorted(labels.items())), kind,  # type: ignore[arg-type]
                        f"help of {name}"))

    events = 5_000 + 180 * step
    add("posts_total", 900 + 31 * step, "counter")
    add("comments_total", 2_400 + 77 * step, "counter")
    add("vote_changes_total", 1_300 + 60 * step, "counter")
    add("agents_total", 310 + step, "counter")
    add("submolts_total", 41, "counter")
    add("events_processed_total", events, "counter")
    add("event_time_latest_seconds", now - 2.5)
    for g, scale in (("minute", 1), ("hour", 60), ("day", 1440)):
        add("activity_posts", scale * (2 + step % 5), window=g)
        add("activity_comments", scale * (5 + step % 7), window=g)
        add("activity_active_agents", scale * (4 + step % 3), window=g)
    add("centroid_similarity", 0.93 + 0.02 * rng.random(), vs="previous")
    add("centroid_similarity", 0.88 + 0.02 * rng.random(), vs="all_time")
    add("pairwise_similarity", 0.31 + 0.03 * rng.random(), scope="within")
    add("pairwise_similarity", 0.29 + 0.03 * rng.random(), scope="previous")
    add("knn10_similarity", 0.62 + 0.05 * rng.random())
    for n in ("1", "2", "3"):
        add("ngram_birth_rate", 0.1 * int(n) + 0.05 * rng.random(), n=n)
        add("ngram_death_rate", 0.08 * int(n) + 0.05 * rng.random(), n=n)
    for k, base in (("1", 0.04), ("10", 0.21), ("100", 0.58)):
        add("pagerank_top_mass", base + 0.02 * rng.random(), graph="window", k=k)
        add("pagerank_top_mass", base + 0.05, graph="cumulative", k=k)
    add("supernodes", 3, graph="window")
    for b in ("0-9", "10-99", "100+"):
        add("threads", 300 + 10 * step, bucket=b)
        add("thread_depth", 1.2 + 0.4 * len(b) + 0.1 * rng.random(), bucket=b)
        add("threads_uncommented_ratio", 0.7 / len(b) + 0.02 * rng.random(), bucket=b)
    add("alerts_firing", 1, type="surge")
    t_end = int(now // 60) * 60
    minute_rows = [{"start": datetime.fromtimestamp(t_end - 60 * (29 - i), UTC).isoformat(),
                    "posts": int(rng.integers(1, 9)), "comments": int(rng.integers(3, 20)),
                    "vote_changes": 4, "upvotes": 4, "downvotes": 0,
                    "active_agents": int(rng.integers(3, 15)), "new_agents": 1,
                    "active_submolts": 3, "comments_per_post": 2.0} for i in range(30)]
    days = [(datetime.fromtimestamp(now, UTC) - timedelta(days=d)).date().isoformat()
            for d in range(6, -1, -1)]
    since = datetime.fromtimestamp(now - 7200, UTC).isoformat()
    details = {
        "activity": {"minute": minute_rows, "hour": minute_rows[-3:], "day": minute_rows[-1:]},
        "pagerank_window": {"nodes": 812, "edges": 2301, "top_mass": {"1": 0.04, "10": 0.21},
                            "supernodes": agents[:3],
                            "top": [{"agent": a, "pagerank": 0.05 / (i + 1)}
                                    for i, a in enumerate(agents[:10])],
                            "time": datetime.fromtimestamp(now, UTC).isoformat(),
                            "supernode_turnover_jaccard": 0.5},
        "supernode_history": {a: {"first_seen": since, "last_seen": since, "windows": 12 - i,
                                  "current_streak_since": since, "longest_streak_seconds": 3600}
                              for i, a in enumerate(agents[:3])},
        "pagerank_daily": {d: {"nodes": 500, "edges": 900, "top_mass": {},
                               "top": [{"agent": a, "pagerank": 0.04 / (j + 1)}
                                       for j, a in enumerate(agents[:4])],
                               "supernodes": agents[i % 2: 2 + i % 2],
                               "supernode_turnover_jaccard": None} for i, d in enumerate(days)},
    }
    return Snapshot(s, details)


def alert(kind: str, key: str, state: str, start: datetime, summary: str,
          evidence: dict[str, Any], severity: str = "warning") -> Alert:
    return Alert(type=kind, key=key, severity=severity, fingerprint=fingerprint(kind, key),
                 state=state, starts_at=start, updated_at=start + timedelta(minutes=3),
                 ends_at=start + timedelta(minutes=20) if state == "resolved" else None,
                 sequence=2 if state == "resolved" else 1, summary=summary,
                 evidence=evidence)  # type: ignore[arg-type]


@pytest.fixture
def seeded(redis_port: int, tmp_path: Path) -> Iterator[tuple[Settings, redis.Redis, str]]:
    """The API process on a loopback port over a Redis holding 40 snapshots, agents, alerts."""
    settings = Settings(redis_url=f"redis://127.0.0.1:{redis_port}/0",
                        topic_prefix=f"t{uuid.uuid4().hex[:8]}", api_port=free_port(),
                        kafka_url=f"kafka://127.0.0.1:{free_port()}")
    r = redis.Redis(port=redis_port)
    p = settings.topic_prefix
    rng = np.random.default_rng(7)
    agents = agent_names(30)
    store = MetricStore(r, prefix=p, series_points=settings.series_points)
    now = time.time()
    for step in range(40):
        store.write(snapshot(rng, step, now, agents), at=now - 15 * (39 - step))
    store.heartbeat("worker", ttl_s=600)
    store.incr("dead_letters:null_author", 4)
    store.incr("dead_letters:bad_json", 1)
    ranks = {a: 0.05 / (i + 1) for i, a in enumerate(agents)}
    AgentStore(r, p).write(AgentValues(
        window=ranks, cumulative={a: v / 2 for a, v in ranks.items()},
        supernodes=snapshot(rng, 0, now, agents).details["supernode_history"],
        roles={a: i % 3 for i, a in enumerate(agents)}))
    history = AlertHistory(r, prefix=p)
    t = datetime.fromtimestamp(now, UTC).replace(microsecond=0)
    start = (t - timedelta(minutes=12)).timestamp()
    texts = [HOSTILE, "CLAW to the moon", "CLAW to the moon!"]
    history.record(alert("surge", "token:claw", "firing", t - timedelta(minutes=12),
                         "CLAW surge: 41 posts in 10 min (baseline 3.2)",
                         {"posts": 41, "baseline": 3.2,
                          **build_evidence(Sighting(start + 30 * i, a, f"p{i}", texts[i % 3])
                                           for i, a in enumerate(agents[:4])),
                          "agents": [{"agent": a, "posts": 9 - i} for i, a in
                                     enumerate(agents[:4])]}), now=now)
    history.record(alert("supernode", f"agent:{agents[5]}", "resolved", t - timedelta(hours=2),
                         f"{agents[5]} became a super-node", {"pagerank": 0.051, "rank": 1},
                         severity="info"), now=now)
    # a crawler's progress, as `moltscope crawl` commits it with its checkpoint
    CheckpointStore(r, prefix=settings.crawler.checkpoint_prefix).commit(progress={
        "at": now - 30, "posts_tracked": 1234, "walk_in_progress": True, "comment_deficit": 567,
        "posts_with_deficit": 89, "backfill_pending_posts": 12, "platform": {"posts": 99999},
        "capture_ratio": {"posts": 0.5, "comments": 0.25}, "requests_per_minute": 55.0})
    api = ManagedProcess("api", [sys.executable, "-m", "service.cli", "api"],
                         lambda: port_open(settings.api_port), tmp_path / "api.log",
                         env=settings_env(settings))
    with api.start(timeout=60):
        yield settings, r, f"http://127.0.0.1:{settings.api_port}"
    r.close()


class Watched:
    """A page that remembers its console errors, uncaught exceptions and every request."""

    def __init__(self, browser: Browser) -> None:
        self.page: Page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.errors: list[str] = []
        self.hosts: set[str] = set()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))
        self.page.on("request", self._request)

    def _console(self, msg: ConsoleMessage) -> None:
        if msg.type == "error":
            self.errors.append(f"console: {msg.text}")

    def _request(self, req: Request) -> None:
        if not req.url.startswith(("data:", "blob:")):  # inline, made by the page itself
            self.hosts.add(urlsplit(req.url).hostname or "")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert CHROMIUM.exists(), "run scripts/install-system-deps.sh (Debian package chromium)"
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield b
        b.close()


def refreshed(page: Page, n: int = 1) -> None:
    page.wait_for_function(f"Number(document.body.dataset.refreshed || 0) >= {n}",
                           timeout=WAIT_MS)


def test_the_page_shows_what_the_api_serves(seeded: tuple[Settings, redis.Redis, str],
                                            browser: Browser, tmp_path: Path) -> None:
    settings, _, base = seeded
    w = Watched(browser)
    w.page.goto(f"{base}/?refresh=30", timeout=WAIT_MS)
    refreshed(w.page)
    api = httpx.get(f"{base}/v1/metrics", timeout=10).json()

    # every sample, the same label sets, the same numbers (exactly, and as shown)
    rows = w.page.eval_on_selector_all("#values-table tbody tr", """rows => rows.map(r =>
        [r.dataset.name, r.dataset.labels, r.children[2].dataset.value,
         r.children[2].textContent])""")
    shown = {(n, json.dumps(json.loads(lab), sort_keys=True)): (float(v), text)
             for n, lab, v, text in rows}
    want = {(s["name"], json.dumps(s["labels"], sort_keys=True)): s["value"]
            for s in api["samples"]}
    assert len(rows) == len(api["samples"]) == len(want) == 44
    assert {k: v for k, (v, _) in shown.items()} == want
    for v, text in shown.values():
        assert float(text) == v if v.is_integer() else abs(float(text) - v) <= 5e-4 * abs(v)
    tiles = dict(w.page.eval_on_selector_all(
        ".tile", "ts => ts.map(t => [t.dataset.metric, t.querySelector('.value').textContent])"))
    for name in ("posts_total", "comments_total", "agents_total", "events_processed_total"):
        assert float(tiles[name]) == want[(name, "{}")]
    assert tiles["alerts_firing"] == "1"
    counters = dict(w.page.eval_on_selector_all(
        "#counters-table tbody tr",
        "rs => rs.map(r => [r.dataset.counter, r.cells[1].textContent])"))
    assert counters == {k: str(v) for k, v in api["counters"].items()}
    progress = w.page.inner_text("#progress")
    assert str(int(want[("events_processed_total", "{}")])) in progress
    assert "12 events/s" in progress
    assert "1234 posts tracked, listing walk under way" in progress
    assert "567 on 89 posts, 12 awaiting backfill" in progress
    assert "posts 50.0 %, comments 25.0 %" in progress

    # a chart for every vital, each with its lines drawn by uPlot
    lines = dict(w.page.eval_on_selector_all(
        "figure.chart", "fs => fs.map(f => [f.id, Number(f.dataset.lines || 0)])"))
    assert lines == {"chart-activity": 4, "chart-similarity": 5, "chart-ngrams": 6,
                     "chart-pagerank": 3, "chart-depth": 3, "chart-noreply": 3}
    assert w.page.locator("figure.chart canvas").count() == 6
    assert w.page.locator("#chart-similarity .u-legend").inner_text().count("centroid") == 2

    # alerts with their evidence; agents' texts stay text
    agents = agent_names(30)
    open_card = w.page.locator("#alerts-open article.card")
    assert open_card.count() == 1 and "CLAW surge" in open_card.inner_text()
    open_card.locator("details.evidence summary").click()
    evidence = open_card.locator("details.evidence").inner_text()
    assert HOSTILE in evidence and agents[0] in evidence and "41" in evidence
    assert open_card.locator("ol.exemplars li").count() == 2  # one a near-duplicate cluster
    assert open_card.locator("table.clusters tbody tr").count() == 2
    assert open_card.locator("table.timeline tbody tr").evaluate_all(
        "rs => rs.map(r => r.dataset.agent)") == agents[:4]
    assert w.page.locator("#alerts img").count() == 0
    assert w.page.evaluate("document.body.dataset.pwned") is None
    assert "became a super-node" in w.page.inner_text("#alerts-recent")

    # super-nodes with their days, and the agent look-up
    assert w.page.eval_on_selector_all("#supernodes-table tbody tr",
                                       "rs => rs.map(r => r.dataset.agent)") == agents[:3]
    # days: grok-1 a super-node every other day, top-ranked the others
    first = w.page.locator("#supernodes-table tbody tr").first.locator(".strip i")
    assert [c.split() for c in first.evaluate_all("is => is.map(i => i.className)")] == [
        ["on"], ["top"], ["on"], ["top"], ["on"], ["top"], ["on"]]
    assert first.nth(1).get_attribute("title").endswith("top-ranked, #1, PageRank 0.04")
    w.page.fill("#agent-name", agents[1])
    w.page.click("#agent-form button")
    w.page.wait_for_selector(f"#agent-result dl[data-agent='{agents[1]}']", timeout=WAIT_MS)
    result = w.page.inner_text("#agent-result")
    assert "#2 of 30" in result and "role 1" in result and "11 windows" in result

    w.page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
    assert w.errors == []
    assert w.hosts == {"127.0.0.1"}
    # an unknown name is said so (the browser itself logs the API's 404)
    w.page.fill("#agent-name", "no-such-agent")
    w.page.click("#agent-form button")
    w.page.wait_for_selector("#agent-result >> text=no agent no-such-agent", timeout=WAIT_MS)
    assert len(w.errors) == 1 and "404" in w.errors[0]
    w.page.close()


def test_a_planted_surge_appears_within_seconds(seeded: tuple[Settings, redis.Redis, str],
                                                browser: Browser) -> None:
    settings, r, base = seeded
    w = Watched(browser)
    w.page.goto(f"{base}/?refresh=1", timeout=WAIT_MS)
    refreshed(w.page)
    # a mint flood read by the surge detector, its alert recorded by the alert path; the
    # reducer publishes the jump in posts
    agents = agent_names(30)
    t0 = time.time() - 60
    detector = SurgeDetector(SurgeConfig(warmup_s=0))
    for i, a in enumerate(agents[10:22]):
        when = datetime.fromtimestamp(t0 + 3 * i, UTC)
        detector.update(Item.of(PostEvent(
            id=f"post:m{i}", event_time=when, observed_at=when, post_id=f"m{i}", author=a,
            content=f'Minting $MOLTCOIN {{"p":"mbc-20","op":"mint","tick":"MOLTCOIN"}} [{i}]')))
    [surge] = AlertBook().reconcile(t0 + 33, "surge", detector.findings(t0 + 33))
    assert surge.severity == "critical"
    planted = time.monotonic()
    AlertHistory(r, prefix=settings.topic_prefix).record(surge)
    store = MetricStore(r, prefix=settings.topic_prefix)
    snap = snapshot(np.random.default_rng(1), 40, time.time(), agent_names(30))
    snap.samples = [s if s.name != "posts_total" else Sample("posts_total", 99_999.0, (),
                                                              "counter") for s in snap.samples]
    store.write(snap)
    iid = surge.incident_id
    w.page.wait_for_selector(f"#alerts-open [data-incident='{iid}'].sev-critical",
                             timeout=WAIT_MS)
    w.page.wait_for_function(
        "document.querySelector(\".tile[data-metric='posts_total'] .value\")"
        ".textContent === '99999'", timeout=WAIT_MS)
    assert time.monotonic() - planted < 5.0
    # evidence unfolded by hand stays unfolded across refreshes
    w.page.click(f"#alerts-open [data-incident='{iid}'] details.evidence summary")
    n = int(w.page.evaluate("document.body.dataset.refreshed"))
    refreshed(w.page, n + 2)
    assert w.page.locator(f"#alerts-open [data-incident='{iid}'] details[open]").count() == 1
    # its link opens the page on it, evidence unfolded: the mint texts, who led and followed
    assert surge.evidence["link"] == f"/#alert-{iid}"
    w.page.goto(f"{base}/?refresh=30" + surge.evidence["link"][1:], timeout=WAIT_MS)
    view = w.page.wait_for_selector(f"[id='alert-{iid}'].focus details[open]", timeout=WAIT_MS)
    assert view is not None
    exemplars = w.page.locator(f"[id='alert-{iid}'] ol.exemplars li q").all_inner_texts()
    assert exemplars and all("MOLTCOIN" in x for x in exemplars)
    assert exemplars == [x["text"] for x in surge.evidence["exemplars"]]
    rows = w.page.locator(f"[id='alert-{iid}'] table.timeline tbody tr")
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.agent)") == agents[10:22]
    assert rows.first.locator("td").first.inner_text() == "leader"
    assert "12 agents" in w.page.locator(f"[id='alert-{iid}'] details.evidence").inner_text()
    # a link by fingerprint opens the newest incident of it; an unknown one says so
    w.page.goto(f"{base}/?refresh=30#alert-{surge.fingerprint}", timeout=WAIT_MS)
    w.page.wait_for_selector(f"[id='alert-{iid}'].focus details[open]", timeout=WAIT_MS)
    w.page.goto(f"{base}/?refresh=30#alert-0123456789abcdef:1", timeout=WAIT_MS)
    w.page.wait_for_selector("#alerts-linked >> text=no incident 0123456789abcdef:1",
                             timeout=WAIT_MS)
    assert len(w.errors) == 1 and "404" in w.errors[0]  # the browser logs the API's answer
    w.errors.clear()
    assert w.errors == []
    assert w.hosts == {"127.0.0.1"}
    w.page.close()


@pytest.mark.parametrize(("path", "ready"), [("/docs", ".swagger-ui .info .title"),
                                             ("/redoc", "h1")])
def test_api_docs_are_served_from_the_package(seeded: tuple[Settings, redis.Redis, str],
                                              browser: Browser, path: str, ready: str) -> None:
    _, _, base = seeded
    w = Watched(browser)
    w.page.goto(base + path, timeout=WAIT_MS)
    title = w.page.wait_for_selector(ready, timeout=WAIT_MS)
    assert title is not None and "moltscope" in title.inner_text()
    # the operations listed come from our own OpenAPI document
    w.page.wait_for_function("document.body.innerText.includes('/v1/metrics/{name}')",
                             timeout=WAIT_MS)
    assert w.errors == []
    assert w.hosts == {"127.0.0.1"}
    w.page.close()


def test_page_and_docs_reference_only_packaged_assets(
        seeded: tuple[Settings, redis.Redis, str]) -> None:
    with httpx.Client(base_url=seeded[2], timeout=10) as client:
        for path in ("/", "/docs", "/redoc"):
            html = client.get(path)
            assert html.status_code == 200
            assert html.headers["content-type"].startswith("text/html")
            assets = re.findall(r'(?:src|href)="([^"]+)"', html.text)
            assert assets and not any("//" in a for a in assets), (path, assets)
            for asset in assets:
                if asset.startswith(("/static/", "static/")):
                    assert client.get("/" + asset.lstrip("/")).status_code == 200, asset


def test_the_page_reads_only_published_names() -> None:
    """Every sample and detail the page asks for is one docs/metrics.md names (and
    tests/unit/test_docs.py holds that document to what the pipeline reports)."""
    root = Path(__file__).resolve().parents[2]
    js = (root / "service" / "api" / "static" / "page.js").read_text()
    documented = set(re.findall(r"`([a-z0-9_]+)`", (root / "docs" / "metrics.md").read_text()))
    charts = re.findall(r'"([a-z0-9_]+)"', " ".join(re.findall(r"metrics: \[([^\]]*)\]", js)))
    tiles = re.findall(r'\["([a-z_]+)", "[^"]*"\]', js.split("const TILES")[1].split(";")[0])
    details = re.findall(r'details\.has\("([a-z_]+)"\)', js)
    values = re.findall(r'sampleValue\([^,]+, "([a-z_]+)"\)', js)
    assert len(charts) == 7 and len(tiles) == 6 and len(details) == 4 and len(values) >= 2
    assert set(charts + tiles + details + values) <= documented
    patterns = re.findall(r"metrics: \[[^\]]*?/(\^[^/]+\$)/", js)
    assert len(patterns) == 1
    for pattern in patterns:
        assert any(re.fullmatch(pattern.strip("^$"), d) for d in documented), pattern


def test_static_assets_ship_with_their_licences() -> None:
    static = Path(__file__).resolve().parents[2] / "service" / "api" / "static"
    for lib in ("uplot", "swagger-ui", "redoc"):
        assert (static / "vendor" / lib / "LICENSE").stat().st_size > 500
    pages = [p.read_text() for p in static.glob("*.html")] + [
        (static / name).read_text() for name in ("page.js", "page.css")]
    assert not any("http://" in t or "https://" in t for t in pages)
    assert os.path.getsize(static / "vendor" / "uplot" / "uPlot.iife.min.js") > 10_000

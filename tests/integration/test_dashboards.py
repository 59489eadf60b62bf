"""Every Grafana panel's query, run by a real Prometheus scraping a running moltscope.

The embedded broker and Redis, a worker and the API run as in production; a simulated society
(ten days of event time, with a surge, a super-node and a burst planted near the end), a
repeated head (duplicates) and malformed records (dead letters) go through them, and a
webhook receiver on loopback is registered, so incidents are delivered. The crawler
(``moltscope crawl``, its own process) runs against the loopback fake Moltbook and serves its
metrics on their own port (detail answers capped, so the comment backfill has deficits to
fill; ``GET /stats`` every second, so the capture ratio moves). A real ``prometheus`` binary
scrapes both every second and evaluates dashboards/prometheus's rules. One probe of each tier
is recorded in Redis with a reply (the probes row). Then each target of each generated
dashboard is queried through ``/api/v1/query`` and must be valid and return data. Skipped
only when the ``prometheus`` binary is missing (``scripts/install-system-deps.sh`` installs it).
"""

from __future__ import annotations

import importlib
import json
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from kafka import KafkaProducer

from service.config import CrawlerSettings, Settings
from service.embedded import ManagedProcess, free_port, port_open
from service.probes.bank import load_bank
from service.probes.scoring import Reply
from service.probes.store import ProbeStore
from service.producer import KafkaSink, ensure_topics, publish
from service.sources.simulate import ScenarioSpec, SimulationConfig, Simulator
from service.stack import cli_argv, settings_env
from streams.events import Event, PostEvent
from tests.integration.fake_moltbook import FakeMoltbook, Faults

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "dashboards" / "prometheus" / "moltscope.rules.yml"
# What Grafana substitutes before a query reaches Prometheus (1 s scrapes: 1m is plenty).
GRAFANA_VARIABLES = {"$__rate_interval": "1m"}
DAYS = timedelta(days=10)
TOKEN = "dashboards-test-token-0123456789"

T = TypeVar("T")


def load_build() -> Any:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("dashboards.build")


def promql(expr: str) -> str:
    for var, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(var, value)
    assert "$" not in expr, f"unsubstituted Grafana variable in {expr!r}"
    return expr


def wait_for(fn: Callable[[], tuple[bool, T]], what: str, timeout: float = 300.0,
             every: float = 0.5) -> T:
    deadline = time.monotonic() + timeout
    while True:
        ok, last = fn()
        if ok:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached in {timeout:.0f} s; last: {last!r}")
        time.sleep(every)


def society() -> list[Event]:
    """Ten days at a low rate, so day windows, n-gram grace and previous-day values exist;
    scenarios in the last hours, the surge still going on when the society ends, so an
    incident is open when Prometheus is queried."""
    end = DAYS
    return list(Simulator(SimulationConfig(
        seed=5, agents=200, posts_per_hour=4, agent_growth_per_hour=10, duration=DAYS,
        scenarios=(ScenarioSpec(name="supernode", start=end - timedelta(hours=6)),
                   ScenarioSpec(name="burst", start=end - timedelta(hours=5)),
                   ScenarioSpec(name="surge", start=end - timedelta(minutes=20))),
    )))


def record_probes(settings: Settings) -> None:
    """One posted probe of each tier with a reply stating its answer, in the stack's Redis,
    so every ``moltscope_probe_*`` family the probes row reads has its series."""
    import redis

    store = ProbeStore(redis.Redis.from_url(settings.redis_url), settings.topic_prefix)
    for tier in ("I", "II", "III", "memory"):
        probe = next(p for p in load_bank().probes if p.tier == tier)
        post_id = f"probe-{probe.id}"
        store.record_post(probe, post_id, time.time(), "v1", True)
        store.add_replies([(post_id, Reply(f"c-{probe.id}", "ant",
                                           f"The answer is {probe.expected}", None,
                                           time.time()))])


class Crawl:
    """``moltscope crawl`` against the loopback fake Moltbook, as deployed: its own process,
    its metrics on their own port. It publishes to topics of its own prefix, so the society
    the worker sees stays the simulated one."""

    def __init__(self, settings: Settings, log_dir: Path) -> None:
        # detail answers carry two comments of each tree: the backfill has deficits to fill
        self.fake = FakeMoltbook(faults=Faults(p_429=0.05, retry_after_s=0.2, p_5xx=0.05),
                                 lifetime_s=600.0, detail_cap=2)
        self.port = free_port()
        prefix = f"{settings.topic_prefix}c"
        crawler = CrawlerSettings(
            base_url=self.fake.url, requests_per_minute=600.0, page_limit=20, timeout_s=2.0,
            horizon_s=400 * 86_400.0, discovery_interval_s=1.0, revisit_min_s=0.5,
            revisit_max_s=5.0, backoff_base_s=0.05, backoff_cap_s=0.5, ip_block_backoff_s=0.5,
            ip_block_backoff_cap_s=1.0, stats_interval_s=1.0,
            checkpoint_prefix=f"{prefix}:crawler",
            metrics_port=self.port)
        env = settings_env(settings.model_copy(update={"topic_prefix": prefix,
                                                       "crawler": crawler}))
        self.proc = ManagedProcess("crawler", cli_argv("crawl"), lambda: port_open(self.port),
                                   log_dir / "crawler.log", env=env)

    def __enter__(self) -> Crawl:
        self.fake.__enter__()
        self.proc.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        alive = self.proc.alive
        self.proc.stop()
        self.fake.stop()
        assert alive or exc_type is not None, "moltscope crawl died during the test"


class Receiver:
    """A webhook receiver on a loopback port that accepts every delivery."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"

    def __enter__(self) -> Receiver:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def prometheus_config(api_port: int, crawler_port: int) -> dict[str, Any]:
    """The example config's jobs and rules, pointed at the loopback ports, 1 s scrapes."""
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {"job_name": "moltscope-api", "metrics_path": "/metrics",
             "static_configs": [{"targets": [f"127.0.0.1:{api_port}"]}]},
            {"job_name": "moltscope-crawler", "metrics_path": "/metrics",
             "static_configs": [{"targets": [f"127.0.0.1:{crawler_port}"]}]},
        ],
    }


@pytest.fixture
def prometheus_binary() -> str:
    path = shutil.which("prometheus")
    if path is None:
        pytest.skip("the prometheus binary is missing: run scripts/install-system-deps.sh")
    return path


@pytest.fixture
def running_stack(stack_settings: Settings, tmp_path: Path) -> Iterator[Settings]:
    s = stack_settings
    ensure_topics(s)
    env = settings_env(s) | {"MOLTSCOPE_API_TOKEN": TOKEN,
                             "MOLTSCOPE_DELIVERY__ALLOW_URLS": "127.0.0.1/32"}  # the receiver
    procs = [ManagedProcess("worker", cli_argv("worker", "--loglevel", "info"), lambda: True,
                            tmp_path / "worker.log", env=env),
             ManagedProcess("api", cli_argv("api", "--loglevel", "warning"),
                            lambda: port_open(s.api_port), tmp_path / "api.log", env=env)]
    try:
        for p in procs:
            p.start()
        api = f"http://127.0.0.1:{s.api_port}"
        wait_for(lambda: (httpx.get(f"{api}/readyz").status_code == 200, None), "API ready",
                 timeout=90)
        yield s
        assert all(p.alive for p in procs), "the worker or the API died during the test"
    finally:
        for p in reversed(procs):
            p.stop()


def test_every_panel_query_returns_data(prometheus_binary: str, running_stack: Settings,
                                        tmp_path: Path) -> None:
    s = running_stack
    api = f"http://127.0.0.1:{s.api_port}"
    build = load_build()
    events = society()
    posts = sum(isinstance(e, PostEvent) for e in events)
    record_probes(s)

    with Crawl(s, tmp_path) as crawl, Receiver() as receiver:
        hook = httpx.post(f"{api}/v1/webhooks", json={"url": receiver.url},
                          headers={"Authorization": f"Bearer {TOKEN}"})
        assert hook.status_code == 201, hook.text
        config = tmp_path / "prometheus.yml"
        config.write_text(json.dumps(prometheus_config(s.api_port, crawl.port)))  # JSON is YAML
        prom_port = free_port()
        prom = ManagedProcess(
            "prometheus",
            [prometheus_binary, f"--config.file={config}",
             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
            lambda: port_open(prom_port), tmp_path / "prometheus.log")
        with prom:
            url = f"http://127.0.0.1:{prom_port}"
            wait_for(lambda: (httpx.get(f"{url}/-/ready").status_code == 200, None),
                     "Prometheus ready", timeout=60)

            sink = KafkaSink(s)
            publish(events + events[:200], sink)  # the head again: duplicates, as paging repeats
            sink.close()
            raw = KafkaProducer(bootstrap_servers=s.kafka_bootstrap, acks="all")
            raw.send(s.topic("events"), b'{"kind": "post", "id": ', key=b"x")
            raw.send(s.topic("events"), json.dumps({"kind": "post", "post_id": "p"}).encode(),
                     key=b"p")
            raw.flush()
            raw.close()

            def absorbed() -> tuple[bool, Any]:
                m = httpx.get(f"{api}/v1/metrics").json()
                got = next((x["value"] for x in m["samples"] if x["name"] == "posts_total"), None)
                return got == posts, {"posts_total": got, "want": posts, **m["counters"]}

            wait_for(absorbed, "the worker absorbed the society")

            def query(expr: str) -> dict[str, Any]:
                return httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=30).json()

            def scraped_final() -> tuple[bool, Any]:
                r = query("count_over_time(moltscope_posts_total[1m]) >= 3 "
                          f"and moltscope_posts_total == {posts}")["data"]["result"]
                crawler = query("moltscope_crawler_requests_total")["data"]["result"]
                return bool(r) and bool(crawler), (r, crawler)

            wait_for(scraped_final, "Prometheus scraped the final figures a few times",
                     timeout=120)
            time.sleep(3)  # a few more scrapes and rule evaluations

            targets = httpx.get(f"{url}/api/v1/targets").json()["data"]["activeTargets"]
            assert {t["labels"]["job"]: t["health"] for t in targets} == {
                "moltscope-api": "up", "moltscope-crawler": "up"}, targets
            groups = httpx.get(f"{url}/api/v1/rules").json()["data"]["groups"]
            bad_rules = [(r["name"], r.get("lastError")) for g in groups for r in g["rules"]
                         if r["health"] != "ok"]
            assert groups and not bad_rules, bad_rules

            def panel_failures() -> list[str]:
                failures = []
                for d in build.DASHBOARDS:
                    for panel, target in d.targets():
                        answer = query(promql(target.expr))
                        where = f"{d.title} / {panel}: {target.expr}"
                        if answer.get("status") != "success":
                            failures.append(f"{where}: invalid: {answer.get('error')}")
                        elif not answer["data"]["result"]:
                            failures.append(f"{where}: no data")
                return failures

            # A counter first exported at the last scrape has no rate yet: give late series
            # (webhook deliveries follow the alerts) up to a minute of scrapes.
            deadline = time.monotonic() + 60
            while (failures := panel_failures()) and time.monotonic() < deadline:
                time.sleep(2)
    checked = sum(1 for d in build.DASHBOARDS for _ in d.targets())
    assert checked > 40
    assert not failures, f"{len(failures)} of {checked} panel queries failed:\n" + "\n".join(
        failures)

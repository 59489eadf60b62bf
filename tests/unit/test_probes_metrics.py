"""``GET /metrics`` carries the probe campaign's ``moltscope_probe_*`` families (real Redis)."""

from __future__ import annotations

import uuid

import redis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from service.api import prometheus
from service.api.deps import settings_dep
from service.config import Settings
from service.probes.bank import load_bank
from service.probes.scoring import Reply
from service.probes.store import ProbeStore


def scrape(r: redis.Redis, settings: Settings) -> dict[str, list[tuple[dict[str, str], float]]]:
    app = FastAPI()
    app.include_router(prometheus.router)
    app.state.redis = r
    app.dependency_overrides[settings_dep] = lambda: settings
    with TestClient(app) as http:
        resp = http.get("/metrics")
    assert resp.status_code == 200
    return {f.name: [(x.labels, x.value) for x in f.samples]
            for f in text_string_to_metric_families(resp.text)}


def samples(text_families: dict[str, list[tuple[dict[str, str], float]]], name: str
            ) -> dict[tuple[str, ...], float]:
    return {tuple(sorted(labels.values())): v for labels, v in text_families.get(name, [])}


def test_metrics_carry_the_probe_families(redis_client: redis.Redis) -> None:
    settings = Settings(topic_prefix=f"t{uuid.uuid4().hex[:8]}")
    store = ProbeStore(redis_client, settings.topic_prefix)

    before = scrape(redis_client, settings)
    # nothing posted yet: the counters say 0 by tier, the budget is whole, no ratio is made up
    assert samples(before, "moltscope_probe_posted")[("III",)] == 0
    assert samples(before, "moltscope_probe_budget_remaining")[("post",)] == 12
    assert samples(before, "moltscope_probe_kill_switch")[()] == 0
    assert samples(before, "moltscope_probe_continuation_ratio") == {}

    bank = load_bank()
    chain = next(p for p in bank.probes if p.tier == "III")
    store.record_post(chain, "post-3", 1.0, "v1", True)
    start = chain.expected  # the number a correct reply says
    store.add_replies([("post-3", Reply("c1", "ant", f"{start}", None, 2.0)),
                       ("post-3", Reply("c2", "bee", "nice thread", "c1", 3.0))])
    store.kill("test")

    after = scrape(redis_client, settings)
    assert samples(after, "moltscope_probe_posted")[("III",)] == 1
    assert samples(after, "moltscope_probe_replies")[("III",)] == 2
    assert samples(after, "moltscope_probe_no_reply_ratio")[("III",)] == 0
    # c1 continues the post's count, c2 does not continue c1's
    assert samples(after, "moltscope_probe_continuation_ratio")[("III",)] == 0.5
    assert samples(after, "moltscope_probe_out_of_band")[("III", "continuation_accuracy")] == 0
    assert samples(after, "moltscope_probe_kill_switch")[()] == 1

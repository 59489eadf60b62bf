"""The per-agent API on a real Redis: profiles and sort keys written by several agents
partitions (``AgentProfileStore``) are served by ``GET /v1/agents/{name}`` (both planes) and
paged and sorted by ``GET /v1/agents`` exactly as the stage ranks them; an unknown sort key is
a 422 naming the known ones."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.api.deps import redis_dep, settings_dep
from service.config import Settings
from service.stores.agents import AgentProfileStore, AgentStore, SocietyStore
from streams.agent_stage import AgentPartition, AgentStage, Society, agent_partition, planes
from streams.reducer import AgentValues
from tests.unit.agent_acts import synthetic_acts

PARTITIONS = 3


@pytest.fixture
def client(redis_client: redis.Redis) -> Iterator[tuple[TestClient, AgentStage]]:
    settings = Settings(topic_prefix="api", partitions=PARTITIONS)
    acts = synthetic_acts(agents=30, posts=24, seed=2)
    parts = [AgentPartition() for _ in range(PARTITIONS)]
    whole = AgentStage()
    for a in acts:
        parts[agent_partition(a.agent, PARTITIONS)].stage.update(a)
        whole.update(a)
    society = Society(now=max(a.t for a in acts), supernodes=frozenset({"agent1", "agent2"}))
    SocietyStore(redis_client, "api").publish(society)
    store = AgentProfileStore(redis_client, "api", PARTITIONS)
    for k, part in enumerate(parts):
        part.dirty = True
        report = part.report(SocietyStore(redis_client, "api").latest())
        assert report is not None
        store.write(k, report)
    whole.set_society(society)
    app = create_app()
    app.dependency_overrides[settings_dep] = lambda: settings
    app.dependency_overrides[redis_dep] = lambda: redis_client
    yield TestClient(app), whole


def test_paging_and_sorting_follow_the_stage(client: tuple[TestClient, AgentStage]) -> None:
    http, whole = client
    keys = whole.sort_keys()
    for key in ("drift", "gap_cv", "acts"):
        want = sorted(keys[key].items(), key=lambda kv: (-kv[1], kv[0]))
        got: list[tuple[str, float]] = []
        while True:
            page = http.get("/v1/agents", params={"sort": key, "limit": 7,
                                                  "offset": len(got)}).json()
            assert page["total"] == len(want)
            got += [(r["agent"], r["value"]) for r in page["agents"]]
            assert [r["rank"] for r in page["agents"]] == list(
                range(len(got) - len(page["agents"]) + 1, len(got) + 1))
            if not page["agents"]:
                break
        assert [v for _, v in got] == pytest.approx([v for _, v in want], abs=1e-12)
        assert {a for a, _ in got} == {a for a, _ in want}
    asc = http.get("/v1/agents", params={"sort": "drift", "order": "asc", "limit": 1}).json()
    assert asc["agents"][0]["value"] == pytest.approx(min(keys["drift"].values()))
    row = asc["agents"][0]
    assert row["profile"] == planes(whole.profile(row["agent"]))  # JSON keeps floats exact


def test_agent_profile_has_both_planes(client: tuple[TestClient, AgentStage]) -> None:
    http, whole = client
    body = http.get("/v1/agents/agent3").json()
    want = planes(whole.profile("agent3"))
    assert want is not None and body["content_plane"]["drift"]["drift"] is not None
    assert body["content_plane"] == want["content_plane"]
    assert body["action_plane"] == want["action_plane"]
    assert body["window"] is None  # not in the interaction graph: the stage alone answers
    assert http.get("/v1/agents/nobody").status_code == 404


def test_agent_coaction_joins_the_action_plane(client: tuple[TestClient, AgentStage],
                                               redis_client: redis.Redis) -> None:
    http, _ = client
    coaction = {"targets": 6, "coacted_targets": 6, "coaction_share": 1.0, "led_targets": 6,
                "followed_targets": 0, "lead_share": 1.0, "locked_partners": ["agent4"]}
    AgentStore(redis_client, "api").write(AgentValues({"agent3": 0.2}, {"agent3": 0.1}, {},
                                                      {"agent3": 1}, {"agent3": coaction}))
    body = http.get("/v1/agents/agent3").json()
    assert body["window"]["rank"] == 1 and body["role"] == 1
    assert body["action_plane"]["coaction"] == coaction and "action" in body["action_plane"]


def test_unknown_sort_key_is_a_clear_422(client: tuple[TestClient, AgentStage]) -> None:
    http, _ = client
    r = http.get("/v1/agents", params={"sort": "charisma"})
    assert r.status_code == 422
    assert "charisma" in r.json()["detail"] and "drift" in r.json()["detail"]
    assert http.get("/v1/agents", params={"sort": "drift", "limit": 0}).status_code == 422

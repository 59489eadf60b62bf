"""Per-agent values: PageRank and rank, super-node history, role (never Prometheus labels)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from service.api.deps import RedisDep, SettingsDep
from service.stores.agents import AgentStore, Graph

router = APIRouter(prefix="/v1/agents", tags=["agents"])


@router.get("/top")
def top_agents(r: RedisDep, settings: SettingsDep, graph: Graph = "window",
               k: Annotated[int, Query(ge=1, le=1000)] = 20) -> list[dict[str, Any]]:
    """The ``k`` agents of highest PageRank in the sliding window or the cumulative graph."""
    return AgentStore(r, settings.topic_prefix).top(graph, k)


@router.get("/{name}")
def agent(name: str, r: RedisDep, settings: SettingsDep) -> dict[str, Any]:
    """An agent's rank and PageRank in both graphs, super-node record and role."""
    found = AgentStore(r, settings.topic_prefix).agent(name)
    if found is None:
        raise HTTPException(404, f"no agent {name!r} in the interaction graph")
    return found

"""Per-agent values (never Prometheus labels): PageRank and rank, super-node history, role, and
the per-agent stage's profile, both planes side by side: the content plane (drift, Net
Progress with its null band, interaction impact) and the action plane (targeting,
reciprocity, votes received, cadence). ``GET /v1/agents?sort=`` pages through the agents by
one of the stage's sort keys."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query

from service.api.deps import RedisDep, SettingsDep
from service.stores.agents import AgentProfileStore, AgentStore, Graph
from streams.agent_stage import AgentStage, AgentStageConfig, planes

router = APIRouter(prefix="/v1/agents", tags=["agents"])


@lru_cache(maxsize=8)
def sort_names(config: AgentStageConfig) -> tuple[str, ...]:
    return tuple(AgentStage(config).sort_names())


@router.get("")
def agents(r: RedisDep, settings: SettingsDep,
           sort: Annotated[str, Query(description="A per-agent sort key, e.g. drift, np, "
                                                  "impact, gap_cv, periodicity, reciprocity")],
           order: Literal["desc", "asc"] = "desc",
           limit: Annotated[int, Query(ge=1, le=1000)] = 50,
           offset: Annotated[int, Query(ge=0)] = 0) -> dict[str, Any]:
    """The agents ranked by ``sort`` (highest first unless ``order=asc``), ``limit`` from
    ``offset``: each with its value, rank and profile. An unknown sort key is a 422 that
    lists the known ones."""
    known = sort_names(settings.agent_stage())
    if sort not in known:
        raise HTTPException(422, f"unknown sort key {sort!r}: one of {', '.join(known)}")
    total, rows = AgentProfileStore(r, settings.topic_prefix, settings.partitions).page(
        sort, offset, limit, descending=order == "desc")
    return {"sort": sort, "order": order, "offset": offset, "limit": limit, "total": total,
            "agents": [{**row, "profile": planes(row["profile"])} for row in rows]}


@router.get("/top")
def top_agents(r: RedisDep, settings: SettingsDep, graph: Graph = "window",
               k: Annotated[int, Query(ge=1, le=1000)] = 20) -> list[dict[str, Any]]:
    """The ``k`` agents of highest PageRank in the sliding window or the cumulative graph."""
    return AgentStore(r, settings.topic_prefix).top(graph, k)


@router.get("/{name}")
def agent(name: str, r: RedisDep, settings: SettingsDep) -> dict[str, Any]:
    """An agent's rank and PageRank in both graphs, super-node record and role, and its
    per-agent profile by plane (``content_plane``, ``action_plane``, which also holds its
    co-action in the lockstep window)."""
    found = AgentStore(r, settings.topic_prefix).agent(name)
    profile = AgentProfileStore(r, settings.topic_prefix, settings.partitions).profile(name)
    if found is None and profile is None:
        raise HTTPException(404, f"no agent {name!r} in the interaction graph or the "
                                 "per-agent stage")
    out = found or {"agent": name, "window": None, "cumulative": None,
                    "supernode_history": None, "role": None, "coaction": None}
    coaction = out.pop("coaction")
    split = planes(profile) or {"content_plane": {}, "action_plane": {}}
    if coaction is not None:  # the reducer's: co-action needs every agent's acts on a thread
        split["action_plane"]["coaction"] = coaction
    return {**out, **split}

"""Current metric values and their recent series, as the worker last wrote them to Redis; the
crawl's progress, as the crawler last committed it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query

from service.api.deps import RedisDep, SettingsDep
from service.stores.checkpoint import CheckpointStore
from service.stores.metrics import MetricStore

router = APIRouter(prefix="/v1", tags=["metrics"])


def store_dep(r: RedisDep, settings: SettingsDep) -> MetricStore:
    return MetricStore(r, prefix=settings.topic_prefix, series_points=settings.series_points)


StoreDep = Annotated[MetricStore, Depends(store_dep)]


@router.get("/metrics")
def all_metrics(store: StoreDep) -> dict[str, Any]:
    """Every current sample: ``{name, labels, value, kind, help}``; names as in the report."""
    samples = [s.as_dict() for s in store.samples()]
    counters = store.counters()
    return {"snapshot_at": store.snapshot_at(), "samples": samples, "counters": counters}


@router.get("/metrics/{name}")
def one_metric(name: str, store: StoreDep,
               last: Annotated[int | None, Query(ge=1, le=100_000)] = None) -> dict[str, Any]:
    """A metric's current value for each label set, with its recent ``[t, value]`` series."""
    matches = [s for s in store.samples() if s.name == name]
    if not matches:
        raise HTTPException(404, f"no metric named {name!r}; see GET /v1/metrics")
    return {
        "name": name,
        "snapshot_at": store.snapshot_at(),
        "values": [{"labels": dict(s.labels), "value": s.value,
                    "series": store.series(s.name, dict(s.labels), last)} for s in matches],
    }


@router.get("/details")
def detail_names(store: StoreDep) -> list[str]:
    """Names of the structured values (per-day series, matrices, top-k lists)."""
    return store.detail_names()


@router.get("/details/{name}")
def detail(name: str, store: StoreDep) -> Any:
    value = store.detail(name)
    if value is None:
        raise HTTPException(404, f"no detail named {name!r}; see GET /v1/details")
    return value


@router.get("/crawler")
def crawler_progress(r: RedisDep, settings: SettingsDep) -> dict[str, Any]:
    """Where the crawl stands (``moltscope crawl`` writes it with every checkpoint): posts
    tracked, comment deficit and backfill, the platform's totals and the capture ratio;
    ``{"reported": false}`` while no crawler has reported (the source is not ``crawl``)."""
    progress = CheckpointStore(r, prefix=settings.crawler.checkpoint_prefix).progress()
    return {"reported": False} if progress is None else {"reported": True, **progress}

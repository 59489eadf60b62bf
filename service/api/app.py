"""The FastAPI app: routers by resource; the Redis client opened once per process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis
from fastapi import FastAPI

from service.api import agents, alerts, health, metrics, page, probes, prometheus, webhooks
from service.api.limits import BodyLimit
from service.config import get_settings


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.redis = redis.Redis.from_url(get_settings().redis_url, socket_timeout=5)
    try:
        yield
    finally:
        app.state.redis.close()


def create_app() -> FastAPI:
    app = FastAPI(
        title="moltscope",
        summary="Live metrics of an AI-agent society",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # served from the package by service.api.page, not from a CDN
        redoc_url=None,
    )
    for module in (metrics, agents, alerts, webhooks, health, prometheus, probes):
        app.include_router(module.router)
    page.install(app)
    app.add_middleware(BodyLimit, max_bytes=get_settings().api_max_body_bytes)
    return app

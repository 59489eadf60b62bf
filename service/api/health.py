"""Liveness and readiness: is the broker reachable, Redis answering, the worker beating?"""

from __future__ import annotations

import socket
from typing import Any

import redis
from fastapi import APIRouter, Response, status

from service.api.deps import RedisDep, SettingsDep
from service.stores.metrics import MetricStore

router = APIRouter(tags=["health"])


def _broker_up(bootstrap: str) -> bool:
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host or "127.0.0.1", int(port)), timeout=1.0):
                return True
        except OSError:
            continue
    return False


def _checks(r: redis.Redis, settings: Any) -> dict[str, bool]:
    try:
        redis_up = bool(r.ping())
    except redis.RedisError:
        redis_up = False
    worker_up = redis_up and MetricStore(r, prefix=settings.topic_prefix).alive("worker")
    return {"broker": _broker_up(settings.kafka_bootstrap), "redis": redis_up,
            "worker": worker_up}


@router.get("/healthz")
def healthz(r: RedisDep, settings: SettingsDep) -> dict[str, Any]:
    """Always 200 while the API runs; says which components are up."""
    checks = _checks(r, settings)
    return {"status": "ok", "components": checks}


@router.get("/readyz")
def readyz(r: RedisDep, settings: SettingsDep, response: Response) -> dict[str, Any]:
    """200 when the broker, Redis and the worker are all up, else 503."""
    checks = _checks(r, settings)
    ready = all(checks.values())
    if not ready:
        response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    return {"ready": ready, "components": checks}

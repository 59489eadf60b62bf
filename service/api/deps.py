"""Dependencies shared by the routers: settings, the Redis client, the API token."""

from __future__ import annotations

import hmac
from typing import Annotated

import redis
from fastapi import Depends, Header, HTTPException, Request, status

from service.config import Settings, get_settings


def settings_dep() -> Settings:
    return get_settings()


def redis_dep(request: Request) -> redis.Redis:
    """The app's Redis client, opened once at start-up (see ``service.api.app``)."""
    return request.app.state.redis


def require_token(
    settings: Annotated[Settings, Depends(settings_dep)],
    authorization: Annotated[str | None, Header()] = None,
) -> None:
    """Write endpoints need ``Authorization: Bearer <MOLTSCOPE_API_TOKEN>``.

    With no token configured they are refused outright rather than left open.
    """
    token = settings.api_token.get_secret_value() if settings.api_token else None
    if token is None:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "set MOLTSCOPE_API_TOKEN to enable writes")
    given = (authorization or "").removeprefix("Bearer ").strip()
    if not hmac.compare_digest(given.encode(), token.encode()):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "bad or missing bearer token")


SettingsDep = Annotated[Settings, Depends(settings_dep)]
RedisDep = Annotated[redis.Redis, Depends(redis_dep)]
TokenDep = Depends(require_token)

"""Alert history: ``GET /v1/alerts`` (filters: type, state, time of start, fingerprint) and
``GET /v1/alerts/{incident_id}``. Read-only and open, like the other read endpoints."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, status

from detectors.alert import Alert
from service.api.deps import RedisDep, SettingsDep
from service.delivery.history import AlertHistory

router = APIRouter(prefix="/v1/alerts", tags=["alerts"])


@router.get("", response_model=list[Alert])
def list_alerts(
    r: RedisDep,
    settings: SettingsDep,
    type: Annotated[str | None, Query(description="surge | supernode | burst | shift | "
                                                  "engagement")] = None,
    state: Literal["firing", "updated", "resolved"] | None = None,
    since: Annotated[datetime | None, Query(description="Started at or after (ISO 8601)")] = None,
    until: Annotated[datetime | None, Query(description="Started at or before")] = None,
    fingerprint: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[Alert]:
    """Incidents, newest first, each with its latest transition."""
    history = AlertHistory(r, prefix=settings.topic_prefix)
    return history.query(type=type, state=state, since=since, until=until,
                         fingerprint=fingerprint, limit=limit)


@router.get("/{incident_id}", response_model=Alert)
def get_alert(incident_id: str, r: RedisDep, settings: SettingsDep) -> Alert:
    alert = AlertHistory(r, prefix=settings.topic_prefix).get(incident_id)
    if alert is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such incident")
    return alert

"""The webhook registry, in Redis: one hash ``<prefix>:webhooks`` of id -> JSON.

A webhook has a URL, a secret (generated when none is given; shown once, at creation), and
optional filters: alert types and a minimum severity.
"""

from __future__ import annotations

import secrets
import uuid
from datetime import UTC, datetime

import redis
from pydantic import AnyHttpUrl, AwareDatetime, BaseModel, Field

from detectors.alert import SEVERITY_RANK, Alert, Severity


class WebhookIn(BaseModel):
    url: AnyHttpUrl
    secret: str | None = Field(None, min_length=16, description="Generated when omitted")
    types: list[str] | None = Field(None, description="Alert types to send; all when omitted")
    min_severity: Severity = "info"


class WebhookOut(BaseModel):
    id: str
    url: str
    types: list[str] | None
    min_severity: Severity
    created_at: AwareDatetime


class Webhook(WebhookOut):
    secret: str

    def accepts(self, alert: Alert) -> bool:
        return ((self.types is None or alert.type in self.types)
                and SEVERITY_RANK[alert.severity] >= SEVERITY_RANK[self.min_severity])

    def public(self) -> WebhookOut:
        return WebhookOut(**self.model_dump(exclude={"secret"}))


class WebhookRegistry:
    def __init__(self, client: redis.Redis, prefix: str = "moltscope") -> None:
        self.r = client
        self.key = f"{prefix}:webhooks"

    def create(self, spec: WebhookIn) -> Webhook:
        hook = Webhook(id=uuid.uuid4().hex, url=str(spec.url),
                       secret=spec.secret or secrets.token_hex(32), types=spec.types,
                       min_severity=spec.min_severity, created_at=datetime.now(UTC))
        self.r.hset(self.key, hook.id, hook.model_dump_json())
        return hook

    def get(self, hook_id: str) -> Webhook | None:
        raw = self.r.hget(self.key, hook_id)
        return None if raw is None else Webhook.model_validate_json(raw)

    def list(self) -> list[Webhook]:
        hooks = [Webhook.model_validate_json(v) for v in self.r.hvals(self.key)]
        return sorted(hooks, key=lambda h: h.created_at)

    def delete(self, hook_id: str) -> bool:
        return bool(self.r.hdel(self.key, hook_id))

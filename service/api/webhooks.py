"""Webhook management behind the API token: ``POST/GET /v1/webhooks``,
``GET/DELETE /v1/webhooks/{id}``. The secret is returned once, by the POST."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response, status

from service.api.deps import RedisDep, SettingsDep, TokenDep
from service.delivery.egress import EgressPolicy, UrlRefused, UrlUnresolved
from service.delivery.webhooks import Webhook, WebhookIn, WebhookOut, WebhookRegistry

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], dependencies=[TokenDep])


@router.post("", status_code=status.HTTP_201_CREATED, response_model=Webhook)
def create_webhook(spec: WebhookIn, r: RedisDep, settings: SettingsDep) -> Webhook:
    """Register a receiver; keep the returned ``secret`` to check ``X-Moltscope-Signature``.

    The URL must resolve to public addresses only, none of them this service's own ports,
    unless ``MOLTSCOPE_DELIVERY__ALLOW_URLS`` names it (422 otherwise)."""
    try:
        EgressPolicy.for_settings(settings).check(str(spec.url))
    except (UrlRefused, UrlUnresolved) as exc:
        raise HTTPException(422, f"webhook url refused: {exc}") from exc
    return WebhookRegistry(r, prefix=settings.topic_prefix).create(spec)


@router.get("", response_model=list[WebhookOut])
def list_webhooks(r: RedisDep, settings: SettingsDep) -> list[WebhookOut]:
    return [h.public() for h in WebhookRegistry(r, prefix=settings.topic_prefix).list()]


@router.get("/{hook_id}", response_model=WebhookOut)
def get_webhook(hook_id: str, r: RedisDep, settings: SettingsDep) -> WebhookOut:
    hook = WebhookRegistry(r, prefix=settings.topic_prefix).get(hook_id)
    if hook is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such webhook")
    return hook.public()


@router.delete("/{hook_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_webhook(hook_id: str, r: RedisDep, settings: SettingsDep) -> Response:
    if not WebhookRegistry(r, prefix=settings.topic_prefix).delete(hook_id):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such webhook")
    return Response(status_code=status.HTTP_204_NO_CONTENT)

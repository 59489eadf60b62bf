"""The worker's side of alert delivery: every transition the reducer publishes goes into the
history and, unless the history knew it (a rebuilt reducer re-issues what it issued before),
into the dispatcher's durable queue; whichever worker holds the delivery lease (a Redis key,
10 s, renewed on each round) drains that queue, so exactly one delivers at a time."""

from __future__ import annotations

import httpx
import redis

from detectors.alert import Alert
from service.delivery.dispatcher import Dispatcher, DispatcherConfig
from service.delivery.egress import EgressPolicy
from service.delivery.history import AlertHistory
from service.delivery.webhooks import WebhookRegistry

LEASE_MS = 10_000


class AlertDesk:
    def __init__(self, client: redis.Redis, prefix: str, config: DispatcherConfig,
                 owner: str, policy: EgressPolicy | None = None) -> None:
        """``policy``: where webhooks may point (``EgressPolicy.for_settings(settings)`` in
        the worker, which also closes the service's own ports); by default the allow-list
        of ``config`` alone."""
        self.r = client
        self.history = AlertHistory(client, prefix=prefix)
        self.dispatcher = Dispatcher(client, WebhookRegistry(client, prefix), prefix, config,
                                     policy=policy)
        self.lease_key = f"{prefix}:dq:lease"
        self.owner = owner
        self.http: httpx.AsyncClient | None = None

    def receive(self, alert: Alert) -> None:
        if self.history.record(alert):
            self.dispatcher.submit(alert)

    def holds_lease(self) -> bool:
        """Take the lease if it is free, renew it if it is ours."""
        if self.r.set(self.lease_key, self.owner, nx=True, px=LEASE_MS):
            return True
        current = self.r.get(self.lease_key)
        if current is None or current.decode() != self.owner:
            return False
        self.r.pexpire(self.lease_key, LEASE_MS)
        return True

    async def dispatch(self) -> dict[str, int]:
        """One delivery round if this worker holds the lease: deliveries by outcome."""
        if not self.holds_lease():
            return {}
        if self.http is None:
            self.http = self.dispatcher.client()
        result = await self.dispatcher.tick(self.http)
        return {"delivered": result.delivered, "failed": result.failed, "dead": result.dead}

"""The dispatcher: groups alerts, then POSTs them to every webhook, in order, until delivered.

Everything it has not yet delivered lives in Redis, so a restart (or a crash) loses nothing:

- ``submit(alert)`` puts the alert in the pending group of every webhook that accepts it:
  ``<p>:dq:pending:<hook>|<type>`` hash ``<incident>|f`` -> the incident's firing, and
  ``<incident>|n`` -> its latest later transition (``|s`` its sequence: a newer one replaces
  an older one still waiting; the firing is never replaced), in one Lua step with the marker
  below, and schedules the group's flush in
  ``<p>:dq:groups`` (sorted set by due time): ``group_wait_s`` after its first alert, and no
  sooner than ``group_interval_s`` after the group's previous message. A storm of alerts of
  one type becomes one message per group interval, not one per alert.
- A due group becomes deliveries (at most ``max_alerts_per_message`` alerts each): the signed
  body is stored in ``<p>:dq:deliveries`` and its id appended to the webhook's FIFO
  ``<p>:dq:queue:<hook>``. Grouping and enqueueing happen in one MULTI/EXEC.
- Each webhook's queue is sent head first: the next message waits until the head is
  delivered, so a receiver sees messages in the order they were made. A failed attempt
  (connection error, timeout, non-2xx) is retried with exponential backoff, jittered between
  half and all of ``backoff_base_s * 2**(attempts-1)`` capped at ``backoff_max_s``; the next
  attempt time is in ``<p>:dq:ready`` (sorted set). With the default cap of 60 s a receiver that was
  down for an hour gets everything within about a minute of coming back. Only a message
  older than ``max_age_s`` (default 7 days) is given up, moved to ``<p>:dq:dead:<hook>``.

Every incident is announced as firing to every receiver: ``<p>:dq:seen:<hook>:<incident>``
(kept ``max_age_s``) marks an incident whose firing has been queued for that receiver; a later
transition of an incident the receiver was never told of (its firing went to history before
the webhook existed, or reached the desk after the resolution) queues a firing rebuilt from it
first. Within a message a group's alerts are ordered by (time, fingerprint, sequence), and
messages leave each receiver's queue in order, so per receiver and incident the order is
always firing, [updated...], resolved, whether or not the receiver was up meanwhile.

Where a webhook may point is :class:`~service.delivery.egress.EgressPolicy`'s decision, made
again before every attempt on a fresh resolution of the host (DNS rebinding); the request then
goes to the address checked. A refused destination gives the message up at once (dead letter
with its ``reason``); a name that does not resolve is retried like any failed attempt.

Delivery is at-least-once: a crash between a receiver's 2xx and the dequeue re-sends that
message; ``X-Moltscope-Delivery`` is the same on every attempt so the receiver can drop it.
One dispatcher drains a given prefix at a time: the worker holding the delivery lease
(``service/delivery/desk.py``) runs its :meth:`Dispatcher.tick`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import httpx
import redis
from pydantic import BeforeValidator

from detectors.alert import Alert
from service.delivery.alertmanager import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    encode,
    payload,
    sign,
)
from service.delivery.egress import EgressPolicy, UrlRefused, UrlUnresolved, parse_allow
from service.delivery.webhooks import WebhookRegistry

log = logging.getLogger(__name__)


def _allow_list(value: Any) -> Any:
    """The allow-list given as text (a JSON list, or comma-separated entries), checked."""
    if isinstance(value, str):
        value = value.strip()
        value = json.loads(value) if value.startswith("[") else [
            v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list | tuple):
        parse_allow(str(v) for v in value)
    return value


@dataclass(frozen=True, slots=True)
class DispatcherConfig:
    group_wait_s: float = 1.0
    group_interval_s: float = 10.0
    max_alerts_per_message: int = 100
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    max_age_s: float = 7 * 86400.0
    timeout_s: float = 5.0
    poll_s: float = 0.2
    receiver: str = "moltscope"
    external_url: str = ""
    #: Non-public webhook destinations allowed anyway: ``host:port`` or CIDR (egress.py)
    allow_urls: Annotated[tuple[str, ...], BeforeValidator(_allow_list)] = ()


# One transition into a webhook's pending group, atomically. KEYS: the incident's "announced"
# marker for this webhook, the pending hash, the groups' schedule. ARGV: marker TTL, incident
# id, its firing JSON, the later transition's JSON ("" for a firing), its sequence, group, due.
_ENQUEUE = """
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  redis.call('HSET', KEYS[2], ARGV[2] .. '|f', ARGV[3])
end
if ARGV[4] ~= '' then
  local held = tonumber(redis.call('HGET', KEYS[2], ARGV[2] .. '|s') or '0')
  if tonumber(ARGV[5]) > held then
    redis.call('HSET', KEYS[2], ARGV[2] .. '|n', ARGV[4], ARGV[2] .. '|s', ARGV[5])
  end
end
redis.call('ZADD', KEYS[3], 'NX', ARGV[7], ARGV[6])
"""


@dataclass(frozen=True, slots=True)
class TickResult:
    flushed: int = 0
    delivered: int = 0
    failed: int = 0
    dead: int = 0


class Dispatcher:
    def __init__(self, client: redis.Redis, registry: WebhookRegistry, prefix: str = "moltscope",
                 config: DispatcherConfig | None = None, *, clock: Callable[[], float] = time.time,
                 transport: httpx.AsyncBaseTransport | None = None,
                 rng: random.Random | None = None, policy: EgressPolicy | None = None) -> None:
        self.r = client
        self.registry = registry
        self.cfg = config or DispatcherConfig()
        self.clock = clock
        self._rng = rng or random.Random()
        self._transport = transport
        self.policy = policy or EgressPolicy(allow=self.cfg.allow_urls)
        p = f"{prefix}:dq"
        self.k_groups, self.k_ready, self.k_deliveries = f"{p}:groups", f"{p}:ready", f"{p}:del"
        self.k_pending, self.k_last = f"{p}:pending:", f"{p}:last"
        self.k_queue, self.k_dead, self.k_seen = f"{p}:queue:", f"{p}:dead:", f"{p}:seen:"
        self._enqueue = client.register_script(_ENQUEUE)

    # ------------------------------------------------------------------ intake

    def submit(self, alert: Alert) -> int:
        """Queue one transition for every webhook that accepts it; returns how many."""
        now = self.clock()
        hooks = [h for h in self.registry.list() if h.accepts(alert)]
        iid = alert.incident_id
        firing_json = firing_of(alert).model_dump_json()
        later_json = "" if alert.state == "firing" else alert.model_dump_json()
        for hook in hooks:
            group = f"{hook.id}|{alert.type}"
            last = self.r.hget(self.k_last, group)
            due = now + self.cfg.group_wait_s
            if last is not None:
                due = max(due, float(last) + self.cfg.group_interval_s)
            self._enqueue(keys=[f"{self.k_seen}{hook.id}:{iid}", self.k_pending + group,
                                self.k_groups],
                          args=[max(1, int(self.cfg.max_age_s)), iid, firing_json,
                                later_json, alert.sequence, group, due])
        return len(hooks)

    # ------------------------------------------------------------------ work

    async def tick(self, client: httpx.AsyncClient) -> TickResult:
        """Flush the due groups, then make one attempt at every webhook that is due."""
        flushed = self._flush_due()
        now = self.clock()
        due = [h.decode() if isinstance(h, bytes) else h
               for h in self.r.zrangebyscore(self.k_ready, "-inf", now)]
        results = await asyncio.gather(*(self._drain(client, hook_id) for hook_id in due))
        return TickResult(flushed, sum(r[0] for r in results), sum(r[1] for r in results),
                          sum(r[2] for r in results))

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=self.cfg.timeout_s, transport=self._transport)

    def backlog(self) -> dict[str, int]:
        """Messages waiting per webhook (for health and tests)."""
        out = {}
        for hook in self.registry.list():
            n = self.r.llen(self.k_queue + hook.id)
            if n:
                out[hook.id] = n
        return out

    def dead_letters(self, hook_id: str) -> list[dict]:
        return [json.loads(x) for x in self.r.lrange(self.k_dead + hook_id, 0, -1)]

    def _flush_due(self) -> int:
        now = self.clock()
        n = 0
        for raw in self.r.zrangebyscore(self.k_groups, "-inf", now):
            group = raw.decode() if isinstance(raw, bytes) else raw
            hook_id, alert_type = group.split("|", 1)
            pipe = self.r.pipeline()
            pipe.hgetall(self.k_pending + group)
            pipe.delete(self.k_pending + group)
            pipe.zrem(self.k_groups, group)
            pending = pipe.execute()[0]
            alerts = sorted((Alert.model_validate_json(v) for k, v in pending.items()
                             if not (k.decode() if isinstance(k, bytes) else k).endswith("|s")),
                            key=lambda a: (a.updated_at, a.fingerprint, a.sequence))
            hook = self.registry.get(hook_id)
            if hook is None or not alerts:
                continue
            pipe = self.r.pipeline()  # MULTI/EXEC: all the group's messages or none
            step = self.cfg.max_alerts_per_message
            for i in range(0, len(alerts), step):
                chunk = alerts[i:i + step]
                body = encode(payload(chunk, receiver=self.cfg.receiver,
                                      group_labels={"type": alert_type},
                                      external_url=self.cfg.external_url))
                delivery_id = uuid.uuid4().hex
                record = {"id": delivery_id, "hook": hook_id, "created": now, "attempts": 0,
                          "body": body.decode(), "signature": sign(body, hook.secret)}
                pipe.hset(self.k_deliveries, delivery_id, json.dumps(record))
                pipe.rpush(self.k_queue + hook_id, delivery_id)
                n += 1
            pipe.hset(self.k_last, group, now)
            pipe.zadd(self.k_ready, {hook_id: now}, nx=True)
            pipe.execute()
        return n

    async def _drain(self, client: httpx.AsyncClient, hook_id: str) -> tuple[int, int, int]:
        """Send this webhook's queue head first until it is empty or an attempt fails."""
        delivered = dead = 0
        hook = self.registry.get(hook_id)
        while True:
            head = self.r.lindex(self.k_queue + hook_id, 0)
            if head is None:
                self.r.zrem(self.k_ready, hook_id)
                return delivered, 0, dead
            delivery_id = head.decode() if isinstance(head, bytes) else head
            raw = self.r.hget(self.k_deliveries, delivery_id)
            if raw is None or hook is None:  # webhook deleted: its backlog goes with it
                self.r.lpop(self.k_queue + hook_id)
                if raw is not None:
                    self.r.hdel(self.k_deliveries, delivery_id)
                continue
            record = json.loads(raw)
            refused, ok = None, False
            try:
                address = await asyncio.to_thread(self.policy.check, hook.url)
                ok = await self._post(client, hook.url, address[0], record)
            except UrlRefused as exc:
                refused = f"destination refused: {exc}"
            except UrlUnresolved as exc:
                log.info("webhook %s: %s", hook.url, exc)
            now = self.clock()
            if ok:
                pipe = self.r.pipeline()
                pipe.lpop(self.k_queue + hook_id)
                pipe.hdel(self.k_deliveries, delivery_id)
                pipe.execute()
                delivered += 1
                continue
            record["attempts"] += 1
            if refused is None and now - record["created"] > self.cfg.max_age_s:
                refused = f"undelivered for over max_age_s ({self.cfg.max_age_s:g} s)"
            if refused is not None:
                log.warning("webhook %s: message %s given up: %s", hook.url, delivery_id, refused)
                record["reason"], record["given_up"] = refused, now
                pipe = self.r.pipeline()
                pipe.rpush(self.k_dead + hook_id, json.dumps(record))
                pipe.lpop(self.k_queue + hook_id)
                pipe.hdel(self.k_deliveries, delivery_id)
                pipe.execute()
                dead += 1
                continue
            delay = min(self.cfg.backoff_max_s,
                        self.cfg.backoff_base_s * 2 ** (record["attempts"] - 1))
            delay = self._rng.uniform(delay / 2, delay)  # jitter: spread retries of many hooks
            pipe = self.r.pipeline()
            pipe.hset(self.k_deliveries, delivery_id, json.dumps(record))
            pipe.zadd(self.k_ready, {hook_id: now + delay})
            pipe.execute()
            return delivered, 1, dead

    async def _post(self, client: httpx.AsyncClient, url: str, address: str,
                    record: dict) -> bool:
        """POST to ``address``, the checked resolution of the URL's host (the URL's host stays
        in the Host header and, for https, in the TLS server name and certificate check)."""
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: record["signature"],
                   DELIVERY_HEADER: record["id"], "User-Agent": "moltscope-dispatcher"}
        target = httpx.URL(url)
        extensions = {}
        if target.host != address:
            headers["Host"] = target.netloc.decode("ascii")
            if target.scheme == "https":
                extensions["sni_hostname"] = target.host
            target = target.copy_with(host=address)
        try:
            resp = await client.post(target, content=record["body"].encode(), headers=headers,
                                     extensions=extensions)
        except httpx.HTTPError as exc:
            log.info("webhook %s: %s", url, exc)
            return False
        return 200 <= resp.status_code < 300


def firing_of(alert: Alert) -> Alert:
    """The firing transition of ``alert``'s incident, as it was announced (or is rebuilt:
    its start, its first sequence, the evidence known now)."""
    if alert.state == "firing":
        return alert
    return alert.model_copy(update={"state": "firing", "sequence": 1, "ends_at": None,
                                    "updated_at": alert.starts_at})

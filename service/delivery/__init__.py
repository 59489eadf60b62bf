"""Alert delivery: history in Redis, webhook registry, and a durable, ordered, signed dispatcher.

Wiring (worker side, ``streams/app.py`` through ``service/worker``): the reducer's
``Pipeline.advance`` returns :class:`detectors.alert.Alert` transitions (event time, or the
wall clock when the stream is quiet, so incidents still resolve); each goes to the ``alerts``
topic as ``alert.model_dump_json()``; the alerts agent hands it to
:class:`~service.delivery.desk.AlertDesk` (history, then the dispatcher's queue), and a timer
runs ``AlertDesk.dispatch()``, one delivery round on the worker holding the lease.

API side: include ``service.api.alerts.router`` and ``service.api.webhooks.router``, and
register ``AlertHistoryCollector(AlertHistory(redis, prefix))`` with the Prometheus registry.
Receivers check ``X-Moltscope-Signature: sha256=<hex>`` (HMAC-SHA256 of the raw body with the
secret returned by ``POST /v1/webhooks``) and drop repeats of ``X-Moltscope-Delivery``.
Where a webhook may point (no loopback, private, link-local address or own port unless
``MOLTSCOPE_DELIVERY__ALLOW_URLS`` names it) is :class:`~service.delivery.egress.EgressPolicy`,
checked by the API at registration and by the dispatcher before every attempt. The worker
should build its desk with ``policy=EgressPolicy.for_settings(settings)``; without it the
desk knows the allow-list but not the service's ports (a CIDR entry then opens them too).
"""

"""Alert delivery: history in Redis, webhook registry, and a durable, ordered, signed dispatcher.

Wiring (worker side):

1. One :class:`detectors.runner.DetectorSuite` in a single-partition reducer (the detectors
   keep global state): ``observe_event`` for every canonical event, ``observe_embedding`` for
   every embedded post, then ``poll(now)`` (at most once per ``evaluate_interval_s``) with
   ``now`` = the newest event time, or the wall clock when the stream is quiet, so that
   incidents still resolve.
2. Every returned :class:`detectors.alert.Alert` goes to the ``alerts`` topic as
   ``alert.model_dump_json()`` (key: ``alert.fingerprint``, so one incident stays in order).
3. The alerts consumer calls ``AlertHistory.record(alert)`` and ``Dispatcher.submit(alert)``;
   ``Dispatcher.run(stop)`` runs as a background task of the same worker.

API side: include ``service.api.alerts.router`` and ``service.api.webhooks.router``, and
register ``AlertHistoryCollector(AlertHistory(redis, prefix))`` with the Prometheus registry.
Receivers check ``X-Moltscope-Signature: sha256=<hex>`` (HMAC-SHA256 of the raw body with the
secret returned by ``POST /v1/webhooks``) and drop repeats of ``X-Moltscope-Delivery``.
"""

"""Alert delivery: history in Redis, webhook registry, and a durable, ordered, signed dispatcher.

Flow: detectors -> alerts topic -> ``AlertHistory.record(alert)`` and
``Dispatcher.submit(alert)`` -> Alertmanager v4 webhook POSTs, signed with HMAC-SHA256.
"""

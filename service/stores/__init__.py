"""Stores: what moltscope keeps in Redis (metric snapshots, caches, checkpoints, alerts)."""

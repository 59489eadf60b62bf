"""The worker entry point: builds the Faust driver (``streams/app.py``) from the settings and
hands it its I/O collaborators (Redis stores, the alert desk, the Kafka topic reader, the
embedder with its Redis cache). ``moltscope worker`` runs :func:`build`'s app."""

from __future__ import annotations

import dataclasses
import os
from functools import partial

import faust
import redis

from service.config import Settings
from service.delivery.desk import AlertDesk
from service.delivery.egress import EgressPolicy
from service.health_metrics import HealthStore
from service.stores.agents import AgentProfileStore, AgentStore, SocietyStore
from service.stores.metrics import MetricStore
from service.stores.reducer_checkpoint import ReducerCheckpoint
from service.stores.vector_cache import RedisVectorCache
from service.worker.health import WorkerHealth, install, instrument
from service.worker.topics import KafkaTopicReader
from streams.app import Collaborators, Driver, DriverConfig, create_app
from streams.embedding import Embedder
from streams.pipeline import PipelineConfig
from streams.reducer import state_version


def driver_config(settings: Settings) -> DriverConfig:
    s = settings
    return DriverConfig(
        topic_prefix=s.topic_prefix, kafka_url=s.kafka_url, partitions=s.partitions,
        pipeline=live_pipeline(s), data_dir=s.embedded.data_dir,
        dedup_capacity=s.dedup_capacity, embed_batch=s.society.embed_batch,
        embed_wait_s=s.society.embed_wait_s, snapshot_interval_s=s.snapshot_interval_s,
        checkpoint_interval_s=s.checkpoint_interval_s, agents_interval_s=s.agents_interval_s,
        dispatch_interval_s=s.delivery.poll_s, kafka_fetch_wait_ms=s.kafka_fetch_wait_ms,
        broker_session_timeout_s=s.broker_session_timeout_s,
        broker_heartbeat_interval_s=s.broker_heartbeat_interval_s,
        allowed_lateness_s=s.allowed_lateness_s, idle_partition_s=s.idle_partition_s,
        idle_after_s=s.idle_after_s, agent_stage=s.agent_stage())


def live_pipeline(settings: Settings) -> PipelineConfig:
    """The reducer's engines: threads come from the ingest partitions' partials, and the
    similarity matrices of the snapshot written every second cover the latest 90 days."""
    return dataclasses.replace(settings.pipeline(threads_local=False), matrix_windows=90)


def collaborators(settings: Settings, config: DriverConfig,
                  client: redis.Redis) -> Collaborators:
    s, prefix = settings, settings.topic_prefix
    cache = RedisVectorCache(client, ttl_seconds=s.society.vector_cache_ttl_s)
    return Collaborators(
        metrics=MetricStore(client, prefix=prefix, series_points=s.series_points),
        agents=AgentStore(client, prefix),
        profiles=AgentProfileStore(client, prefix, s.partitions),
        society=SocietyStore(client, prefix),
        alerts=AlertDesk(client, prefix, s.delivery, owner=f"{os.getpid()}@{os.uname().nodename}",
                         policy=EgressPolicy.for_settings(s)),
        checkpoints=ReducerCheckpoint(client, prefix, state_version(config.pipeline)),
        topics=KafkaTopicReader(s.kafka_bootstrap, prefix),
        embedder=partial(Embedder, cache=cache, batch_size=s.society.embed_batch))


#: The worker process's young-generation collection threshold (Python's default: 700; set by
#: ``moltscope worker``, not by :func:`build`, which tests call too). Its Kafka client, Faust
#: and the event loop keep many container objects alive for a while (fetched records, queued
#: messages and futures): at 700 the collector ran ~2,000 young and ~130 middle collections
#: per 100k events, 0.57 s of ~21 s of the worker's CPU time on bench/bench_broker.py, 0.13 s
#: at 20,000 (gc.callbacks). The engines' long-lived state is frozen out of the collector
#: anyway (``Pipeline.advance``).
GC_YOUNG_THRESHOLD = 20_000


def build(settings: Settings) -> tuple[faust.App, Driver]:
    config = driver_config(settings)
    client = redis.Redis.from_url(settings.redis_url)
    # the pipeline's self-health (docs/metrics.md, "Pipeline health"), on its own timer
    health = WorkerHealth(HealthStore(client, settings.topic_prefix),
                          worker=f"{os.getpid()}@{os.uname().nodename}",
                          interval_s=settings.snapshot_interval_s,
                          checkpoint_interval_s=settings.checkpoint_interval_s)
    app, driver = create_app(config, instrument(collaborators(settings, config, client), health))
    install(app, driver, health)
    return app, driver

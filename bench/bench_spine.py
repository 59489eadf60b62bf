"""Events/s through the normaliser and the engines (all of them: activity, threads, graph,
n-grams...): offline, and through the embedded
broker (Tansu) with real workers and Redis, side by side in one run.

    .venv/bin/python bench/bench_spine.py [--events 50000] [--workers 1]

The same raw Moltbook API answers (from the simulator's raw mode) are normalised; offline they
go straight into the pipeline, online they are published to Kafka and the clock stops when the
worker's snapshot in Redis shows every post and comment counted. Embedding is off in both, so
this measures the spine itself.

Then the workers stop and one worker restarts twice, timed until its snapshot counts every
post and comment again: once resuming from the reducer's checkpoint in Redis, once (checkpoint
deleted) rebuilding from the society topic. Both include the consumer group's join. Last, a
handover's restore of one events partition (de-dup and thread state) is timed on its own, and
so is saving a reducer checkpoint of the offline pipeline's state.

Measured (2 cores, 165k items from --events 50000, three runs): normaliser 65-70k items/s,
pipeline offline 2.9-3.2k events/s, through Tansu with one worker 2.4-2.6k events/s
(online/offline 0.80-0.84); restart 7.1-7.5 s from a 36 MB checkpoint against 35.9-42.5 s
rebuilding ~2,550 society messages (5.1-5.7x); a partition restore reads 14-15k records/s,
5.4-6.2x the stream's rate; saving a checkpoint of the whole state (39 MB) takes 1.1 s, the
reducer's time for ~3,700 events.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis
from kafka import KafkaConsumer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.config import Settings  # noqa: E402
from service.embedded import ManagedProcess, free_port, redis_server, tansu  # noqa: E402
from service.producer import KafkaSink, ensure_topics, publish  # noqa: E402
from service.sources.normalise import normalise_post_detail  # noqa: E402
from service.sources.simulate import SimulationConfig, Simulator  # noqa: E402
from service.stack import cli_argv, settings_env  # noqa: E402
from service.stores.metrics import MetricStore  # noqa: E402
from service.stores.reducer_checkpoint import ReducerCheckpoint  # noqa: E402
from service.worker.topics import KafkaTopicReader  # noqa: E402
from streams.partition import PartitionState  # noqa: E402
from streams.pipeline import Pipeline, PipelineConfig  # noqa: E402
from streams.replay import replay  # noqa: E402


def raw_answers(n_events: int) -> list[str]:
    sim = Simulator(SimulationConfig(seed=1, agents=5000, max_events=n_events))
    return [json.dumps(a) for a in sim.raw_answers() if "post" in a]


def normalise(answers: list[str]) -> list:
    items = []
    for a in answers:
        items += normalise_post_detail(a, origin="bench")
    return items


def counts(store: MetricStore) -> tuple[float | None, float | None]:
    got = {x.name: x.value for x in store.samples()}
    return got.get("posts_total"), got.get("comments_total")


def end_offset(s: Settings, topic: str, partition: int = 0) -> int:
    tp = TopicPartition(s.topic(topic), partition)
    consumer = KafkaConsumer(bootstrap_servers=s.kafka_bootstrap)
    try:
        return consumer.end_offsets([tp])[tp]
    finally:
        consumer.close()


def until(done: Callable[[], bool], what: str, timeout_s: float = 300.0) -> None:
    """Poll ``done`` every 50 ms; a stuck stack fails the run instead of hanging it."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {timeout_s:.0f} s")
        time.sleep(0.05)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    answers = raw_answers(args.events)

    t0 = time.perf_counter()
    items = normalise(answers)
    t_norm = time.perf_counter() - t0
    t0 = time.perf_counter()
    pipeline = replay(items, Pipeline(PipelineConfig(embed=False))).pipeline
    t_off = time.perf_counter() - t0
    offline = pipeline.snapshot()
    want = (offline.value("posts_total"), offline.value("comments_total"))
    n = len(items)

    with tempfile.TemporaryDirectory() as tmp:
        kp, rp = free_port(), free_port()
        with tansu(kp, Path(tmp) / "tansu.log"), \
                redis_server(rp, Path(tmp) / "redis", Path(tmp) / "redis.log"):
            s = Settings(kafka_url=f"kafka://127.0.0.1:{kp}", redis_url=f"redis://127.0.0.1:{rp}",
                         topic_prefix="bench", partitions=max(2, args.workers),
                         snapshot_interval_s=0.25, checkpoint_interval_s=2.0, embed=False)
            ensure_topics(s)
            workers = [ManagedProcess(f"w{i}", cli_argv("worker", "--loglevel", "warning"),
                                      lambda: True, Path(tmp) / f"w{i}.log",
                                      env=settings_env(s)).start() for i in range(args.workers)]
            store = MetricStore(redis.Redis(port=rp), prefix="bench")
            while not store.alive("worker"):
                time.sleep(0.2)
            time.sleep(8)  # consumer group settles
            t0 = time.perf_counter()
            sink = KafkaSink(s)
            publish(items, sink)
            sink.close()
            t_pub = time.perf_counter() - t0
            until(lambda: counts(store) == want, "every post and comment counted")
            t_online = time.perf_counter() - t0
            # what a reducer checkpoint of this state costs, in the reducer's own time
            t0 = time.perf_counter()
            ck_size = ReducerCheckpoint(redis.Redis(port=rp), "benchck", "bench").save(
                1, b"", (pipeline, {})).size
            t_ck = time.perf_counter() - t0
            end = end_offset(s, "society")
            r = redis.Redis(port=rp)
            key = "bench:reducer:checkpoint"
            until(lambda: int(r.hget(key, "offset") or 0) >= end, "a checkpoint of it all")
            for w in workers:
                w.stop()
            size = r.hstrlen(key, "state")

            def restart(name: str) -> float:
                started, t0 = time.time(), time.perf_counter()
                w = ManagedProcess(name, cli_argv("worker", "--loglevel", "warning"),
                                   lambda: True, Path(tmp) / f"{name}.log",
                                   env=settings_env(s)).start()
                until(lambda: (store.snapshot_at() or 0) > started and counts(store) == want,
                      f"{name}: every post and comment counted again")
                elapsed = time.perf_counter() - t0
                w.stop()
                return elapsed

            t_resume = restart("resumed")
            r.delete(key)
            t_rebuild = restart("rebuilt")

            # a handover: one worker's restore of events partition 0 from its start
            records = end_offset(s, "events")
            t0 = time.perf_counter()
            KafkaTopicReader(s.kafka_bootstrap, s.topic_prefix).restore_partition(
                0, records, PartitionState(s.dedup_capacity))
            t_restore = time.perf_counter() - t0

    print(f"items: {n} ({len(answers)} raw post answers)")
    print(f"normaliser:            {n / t_norm:10.0f} items/s")
    print(f"pipeline offline:      {n / t_off:10.0f} events/s")
    print(f"normaliser + offline:  {n / (t_norm + t_off):10.0f} events/s")
    print(f"publish to Tansu:      {n / t_pub:10.0f} events/s")
    print(f"through the broker ({args.workers} worker{'s' if args.workers > 1 else ''}): "
          f"{n / t_online:10.0f} events/s (publish to counted in Redis)")
    print(f"ratio online/offline:  {(t_norm + t_off) / (t_norm + t_online):10.3f}")
    print(f"partition restore:     {records / t_restore:10.0f} records/s ({records} records, "
          f"{records / t_restore / (n / t_online):.1f}x the stream's rate through the broker)")
    print(f"checkpoint save:       {t_ck:10.2f} s for {ck_size / 1e6:.1f} MB, the reducer's time "
          f"for {t_ck * n / t_off:.0f} events ({t_ck / t_off * 100:.1f}% of this stream's)")
    print(f"reducer restart: {t_resume:.1f} s from the checkpoint ({size / 1e6:.1f} MB), "
          f"{t_rebuild:.1f} s rebuilding {end} society messages: {t_rebuild / t_resume:.1f}x")


if __name__ == "__main__":
    main()

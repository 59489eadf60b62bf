"""The reducer through the embedded broker: events/s of one worker (model off) on the real-text
stream, printed beside the offline ``Pipeline`` on the same events, in one run.

A Tansu broker and a Redis server (``service/embedded.py``) start on loopback ports; the
real-text stream (``bench/realtext.py``) is published to the events topic first (one
partition), then one worker (``moltscope worker``, ``embed=False``) and the API start and the
worker drains the topic: ingest (de-dup, thread partials) and the reducer (the society
``Pipeline``, the detectors, snapshots to Redis) in one process, as deployed. The live figure
is the events the reducer applied (``events_processed_total`` on the API) over the wall time
from its first to its last applied event, and over the worker's CPU time in that span
(``/proc``): the machine is shared, so CPU time is the steadier figure. The offline figure is
``Pipeline.update`` + ``advance`` on the same events in this process (CPU time), measured
before and after the live run (the mean is the reference: the shared machine's load moves CPU
time too).

The worker's publishing timers pace themselves while it is behind (``streams/app.py``,
``PUBLISH_SHARE``), as they do in a deployment draining a backlog. The stream's end: its one
partition counts as idle :data:`END_IDLE_S` after its last record (the default
``idle_partition_s``, 30 s, would hold the last events back that long behind the watermark
while the worker idles on its timers: wall and CPU time that are not the reducer's work).

    .venv/bin/python bench/bench_broker.py                 # 30k events, a few minutes
    .venv/bin/python bench/bench_broker.py --events 100000

Everything it starts binds 127.0.0.1 and is stopped at the end (also on failure).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from bench import realtext  # noqa: E402
from service.config import Settings  # noqa: E402
from service.embedded import ManagedProcess, free_port, port_open, redis_server, tansu  # noqa: E402
from service.producer import KafkaSink, ensure_topics, publish  # noqa: E402
from service.stack import cli_argv, settings_env  # noqa: E402
from streams.events import Event  # noqa: E402
from streams.pipeline import Pipeline  # noqa: E402

TARGET_RATE = 5_000.0  # events/s the reducer must keep up with (issue 10)
END_IDLE_S = 3.0  # wall seconds after its last record the partition no longer holds events


def offline(events: list[Event], settings: Settings) -> float:
    """events/s (CPU time) of the offline pipeline the reducer runs, on the same events."""
    p = Pipeline(settings.pipeline())
    t0 = time.process_time()
    for e in events:
        p.update(e)
        p.advance()
    return len(events) / (time.process_time() - t0)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def applied(api: str) -> float:
    """Events the reducer applied, as the API last published it (0 before any snapshot)."""
    try:
        samples = httpx.get(f"{api}/v1/metrics", timeout=5).json()["samples"]
    except (httpx.HTTPError, KeyError, ValueError):
        return 0.0
    return next((x["value"] for x in samples if x["name"] == "events_processed_total"), 0.0)


def live(events: list[Event], settings: Settings, logs: Path, timeout: float) -> dict[str, float]:
    """Publish, start one worker and the API, wait until every event is applied."""
    ensure_topics(settings)
    sink = KafkaSink(settings)
    t0 = time.perf_counter()
    publish(events, sink)
    sink.close()
    published = time.perf_counter() - t0
    env = settings_env(settings)
    worker = ManagedProcess("worker", cli_argv("worker", "--loglevel", "warning"),
                            lambda: True, logs / "worker.log", env=env)
    api_proc = ManagedProcess("api", cli_argv("api", "--loglevel", "warning"),
                              lambda: port_open(settings.api_port), logs / "api.log", env=env)
    api = f"http://127.0.0.1:{settings.api_port}"
    n = len(events)
    try:
        worker.start()
        api_proc.start(timeout=120.0)  # a loaded shared machine starts it slowly
        assert worker.proc is not None
        pid = worker.proc.pid
        deadline = time.monotonic() + timeout
        first: tuple[float, float, float] | None = None  # (applied, wall, worker CPU)
        last = (0.0, 0.0, 0.0)
        while True:
            if not worker.alive:
                raise RuntimeError(f"the worker exited (see {logs / 'worker.log'})")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{last[0]:.0f} of {n} events applied after {timeout:.0f} s")
            got = applied(api)
            mark = (got, time.perf_counter(), cpu_seconds(pid))
            if got > 0 and first is None:
                first = mark
            if got > last[0]:
                last = mark
            if got >= n:
                break
            time.sleep(0.2)
    finally:
        api_proc.stop()
        worker.stop()
    assert first is not None
    done = last[0] - first[0]
    return {"published_per_s": n / published, "wall_rate": done / max(last[1] - first[1], 1e-9),
            "cpu_rate": done / max(last[2] - first[2], 1e-9), "measured": done}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=30_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scale", type=float, default=None,
                    help="rate and population scale (default: a normal + the peak day)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the "
                    "worker to apply every event")
    ap.add_argument("--embed-wait-s", type=float, default=None,
                    help="the ingest's longest wait to fill a batch (default: the setting's)")
    args = ap.parse_args()
    scale = args.scale if args.scale is not None else realtext.scale_for(args.events)
    events = list(realtext.stream(args.events, seed=args.seed, scale=scale))
    with tempfile.TemporaryDirectory(prefix="bench-broker-") as tmp:
        logs = Path(tmp)
        kafka, redis = free_port(), free_port()
        settings = Settings(
            kafka_url=f"kafka://127.0.0.1:{kafka}", redis_url=f"redis://127.0.0.1:{redis}/0",
            topic_prefix=f"b{uuid.uuid4().hex[:8]}", partitions=1, api_port=free_port(),
            embed=False, snapshot_interval_s=1.0, checkpoint_interval_s=0.0,
            idle_after_s=1e6, idle_partition_s=END_IDLE_S)
        if args.embed_wait_s is not None:
            settings.society.embed_wait_s = args.embed_wait_s
        before = offline(events, settings)
        with tansu(kafka, logs / "tansu.log"), redis_server(redis, logs / "redis",
                                                             logs / "redis.log"):
            got = live(events, settings, logs, args.timeout)
        after = offline(events, settings)  # the shared machine's load moves CPU time too
    off = (before + after) / 2
    print(f"{len(events):,} real-text events (scale {scale:.3f}, seed {args.seed}), model off, "
          f"one partition, one worker, embed_wait_s {settings.society.embed_wait_s}")
    print(f"{'':44}{'events/s':>10}")
    print(f"{'offline Pipeline (CPU time), mean':44}{off:>10,.0f}"
          f"   (before {before:,.0f}, after {after:,.0f} the live run)")
    print(f"{'through the broker: reducer, worker CPU time':44}{got['cpu_rate']:>10,.0f}"
          f"   ({got['cpu_rate'] / off:.2f}x offline)")
    print(f"{'broker path overhead (us/event, CPU time)':44}"
          f"{1e6 / got['cpu_rate'] - 1e6 / off:>10,.1f}   (worker CPU less the offline Pipeline)")
    print(f"{'through the broker: reducer, wall time':44}{got['wall_rate']:>10,.0f}"
          f"   (shared machine: noisy)")
    print(f"{'publishing (the source, not timed above)':44}{got['published_per_s']:>10,.0f}")
    print(f"target {TARGET_RATE:,.0f}/s (worker CPU time): "
          f"{'met' if got['cpu_rate'] >= TARGET_RATE else 'NOT met'}; measured over "
          f"{got['measured']:,.0f} events applied after the first snapshot")


if __name__ == "__main__":
    main()

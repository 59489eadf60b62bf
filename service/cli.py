"""``moltscope``: up | worker | api | replay | simulate | crawl | schema.

Every command reads its settings from ``MOLTSCOPE_*`` environment variables (see
``service/config.py``); flags override the few that matter per command.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from service.config import get_settings
from streams.events import DeadLetter, Event

log = logging.getLogger("moltscope")


def _progress(total: int | None, unit: str, desc: str):  # type: ignore[no-untyped-def]
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, desc=desc, unit_scale=True, file=sys.stderr,
                disable=None)


def _archive_items(paths: list[str], speed: float | None, desc: str,
                   bar: Any = None) -> Iterator[Event | DeadLetter]:
    """Archive items in event-time order, with a bytes-read progress bar on stderr (``bar``,
    else a new one)."""
    from service.sources.archive import archive_size, open_archive, paced

    bar = bar or _progress(archive_size(paths), "B", desc)
    try:
        items: Iterable[Event | DeadLetter] = open_archive(paths, progress=bar.update)
        yield from paced(items, speed) if speed else items
    finally:
        bar.close()


def cmd_up(args: argparse.Namespace) -> int:
    from service.stack import Stack

    settings = get_settings()
    if args.api_port:
        settings.api_port = args.api_port
    source = {
        "none": None,
        # the demo: a live society with a memecoin surge 10 minutes in
        "simulate": ["simulate", "--realtime", "--posts-per-hour", "1800",
                     "--scenario", "surge:start=10m,duration=15m"],
        "replay": ["replay", *args.paths],
        "crawl": ["crawl"],
    }[args.source]
    if args.source == "replay" and not args.paths:
        print("moltscope up --source replay needs archive paths", file=sys.stderr)
        return 2
    return Stack(settings, source).run_forever()


def cmd_worker(args: argparse.Namespace) -> int:
    import gc

    import faust

    from service.worker import GC_YOUNG_THRESHOLD, build

    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    app, _ = build(get_settings())
    worker = faust.Worker(app, loglevel=args.loglevel)
    # Faust's startup spinner, at --loglevel warning or above, sets the root logger to DEBUG
    # (it spins on every record): every debug call of Faust, aiokafka and mode, several a
    # message, would build a record that no handler writes
    worker.spinner = None
    worker.execute_from_commandline()
    return 0


def cmd_api(args: argparse.Namespace) -> int:
    import uvicorn

    from service.api.app import create_app

    settings = get_settings()
    uvicorn.run(create_app(), host=settings.api_host, port=args.port or settings.api_port,
                log_level=args.loglevel)
    return 0


def _publish(items: Iterable[Event | DeadLetter]) -> int:
    from service.producer import KafkaSink, ensure_topics, publish

    settings = get_settings()
    ensure_topics(settings)
    sink = KafkaSink(settings)
    try:
        publish(items, sink)
    finally:
        sink.close()
    log.info("published %d events and %d dead letters", sink.sent, sink.dead)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        print(f"no such file or directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.report is None:
        return _publish(_archive_items(args.paths, args.speed, "replay"))
    from service.sources.archive import archive_size
    from streams.agent_stage import AgentStage
    from streams.pipeline import Pipeline
    from streams.replay import replay
    from streams.state.hazard import HazardConfig

    settings = get_settings()
    if args.no_embed:
        settings.embed = False
    embedder = None
    if settings.embed:
        from streams.embedding import Embedder

        embedder = Embedder(batch_size=settings.society.embed_batch)
    # the bar shows the archive's bytes read (its end is known) and the records replayed
    bar = _progress(archive_size(args.paths), "B", "replay")
    records = 0

    def replayed(n: int) -> None:
        nonlocal records
        records += n
        bar.set_postfix_str(f"{records:,} records", refresh=False)

    # a finished archive: the report carries the paper's batch n-gram rule beside the live one,
    # the per-agent figures over the whole archive (not its last window), and one hazard fit,
    # on the final cascades (at close), instead of one every few hours of the archive
    config = dataclasses.replace(settings.pipeline(), ngram_batch=True,
                                 hazard=HazardConfig(every=None))
    stage = AgentStage(dataclasses.replace(settings.agent_stage(), whole_history=True))
    result = replay(_archive_items(args.paths, None, "replay", bar), Pipeline(config),
                    embedder=embedder, batch=settings.society.embed_batch, progress=replayed,
                    allowed_lateness_s=settings.allowed_lateness_s, stage=stage)
    report = result.report()
    report["input"]["paths"] = args.paths
    Path(args.report).write_text(json.dumps(report, indent=1, default=str))
    print(f"{result.pipeline.events} events ({result.duplicates} duplicates, "
          f"{sum(result.dead_letters.values())} dead letters, {result.embedded} embedded, "
          f"{len(report['alerts'])} alerts) -> {args.report}")
    if not args.no_tables:  # per-day tables for researchers (docs/metrics.md, Exports)
        from service.exports import days_dir, write_day_tables

        # through JSON: the tables hold what r.json holds
        rows = write_day_tables(json.loads(json.dumps(report, default=str)),
                                days_dir(Path(args.report)))
        print(f"per-day tables ({', '.join(f'{k} {n}' for k, n in rows.items())} rows) -> "
              f"{days_dir(Path(args.report))}/<table>.parquet|csv")
    # the per-agent table, both planes side by side (streams/export_agents.py)
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    from service.exports import arrow_table
    from streams.export_agents import agent_rows

    table = arrow_table(agent_rows(result.agent_profiles()))
    base = Path(args.report).with_suffix("")
    pq.write_table(table, f"{base}.agents.parquet")
    pa_csv.write_csv(table, f"{base}.agents.csv")
    print(f"per-agent table ({table.num_rows} agents) -> {base}.agents.parquet|csv")
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from service.sources.simulate import (
        ScenarioSpec,
        SimulationConfig,
        Simulator,
        parse_duration,
        write_run,
    )

    try:
        config = SimulationConfig(
            seed=args.seed, agents=args.agents, posts_per_hour=args.posts_per_hour,
            realtime=args.realtime,
            duration=None if args.realtime and args.duration is None
            else parse_duration(args.duration or "1d"),
            max_events=args.max_events,
            scenarios=tuple(ScenarioSpec.parse(s) for s in args.scenario),
        )
    except ValueError as exc:
        print(f"moltscope simulate: {exc}", file=sys.stderr)
        return 2
    if args.out:
        run = write_run(config, Path(args.out), raw=args.raw)
        print(f"{run.count} records -> {run.data}; labels -> {run.labels}")
        return 0
    bar = _progress(config.max_events, "ev", "simulate")
    sim = Simulator(config)

    def counted() -> Iterator[Event]:
        for ev in sim.events():
            bar.update(1)
            yield ev

    try:
        return _publish(counted())
    finally:
        bar.close()


def cmd_crawl(args: argparse.Namespace) -> int:
    import signal
    import threading

    import redis
    from prometheus_client import start_http_server

    from service.health_metrics import crawler_budget_gauge
    from service.probes.store import ProbeStore, ProbeTap
    from service.producer import KafkaSink, ensure_topics
    from service.sources.crawler import MoltbookCrawler
    from service.stores.checkpoint import CheckpointStore

    settings = get_settings()
    if args.base_url:
        settings.crawler.base_url = args.base_url
    ensure_topics(settings)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    start_http_server(settings.crawler.metrics_port, addr=settings.crawler.metrics_host)
    crawler_budget_gauge(settings.crawler.requests_per_minute)  # budget use = requests / this
    checkpoint = CheckpointStore(redis.Redis.from_url(settings.redis_url),
                                 prefix=settings.crawler.checkpoint_prefix)
    # probe threads (docs/probes.md): revisited often and kept past the horizon
    probes = ProbeStore(redis.Redis.from_url(settings.redis_url), settings.topic_prefix)
    crawler = MoltbookCrawler(settings.crawler, checkpoint, probe_ids=probes.post_ids,
                              probe_horizon_s=settings.crawler.probe_horizon_s)
    sink = KafkaSink(settings)
    log.info("crawling %s at %.0f requests/min; metrics on %s:%d",
             settings.crawler.base_url, settings.crawler.requests_per_minute,
             settings.crawler.metrics_host, settings.crawler.metrics_port)
    try:
        # replies to probe posts are kept for scoring (service/probes/store.py)
        tap = ProbeTap(probes)
        crawler.run(tap.wrap(sink.send), stop, flush=sink.flush)
    finally:
        crawler.close()
        sink.close()
    log.info("crawler stopped: published %d events and %d dead letters", sink.sent, sink.dead)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from streams.events import event_json_schema

    print(json.dumps(event_json_schema(), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="moltscope", description=__doc__.splitlines()[0])
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start the embedded stack: broker, Redis, worker, API, source")
    up.add_argument("--source", default="simulate",
                    choices=["simulate", "replay", "crawl", "none"])
    up.add_argument("--api-port", type=int)
    up.add_argument("paths", nargs="*", help="archive paths for --source replay")
    up.set_defaults(func=cmd_up)

    w = sub.add_parser("worker", help="run the Faust worker")
    w.add_argument("--loglevel", default="info")
    w.set_defaults(func=cmd_worker)

    a = sub.add_parser("api", help="run the REST API")
    a.add_argument("--port", type=int)
    a.add_argument("--loglevel", default="info")
    a.set_defaults(func=cmd_api)

    r = sub.add_parser("replay", help="replay archives to Kafka, or offline into a report")
    r.add_argument("paths", nargs="+")
    r.add_argument("--report", help="run offline (no Kafka) and write this JSON report")
    r.add_argument("--speed", type=float, help="pace: this many times the original speed")
    r.add_argument("--no-embed", action="store_true",
                   help="with --report: skip the model (no semantic metrics, much faster)")
    r.add_argument("--no-tables", action="store_true",
                   help="with --report: skip the per-day Parquet and CSV tables (<report>.days/)")
    r.set_defaults(func=cmd_replay)

    m = sub.add_parser("simulate", help="a synthetic society with planted scenarios")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--agents", type=int, default=2000)
    m.add_argument("--posts-per-hour", type=float, default=600.0)
    m.add_argument("--duration", help="simulated time, e.g. 6h or 1d (default 1d; "
                   "endless with --realtime)")
    m.add_argument("--max-events", type=int)
    m.add_argument("--scenario", action="append", default=[],
                   help="surge|supernode|burst|drift|collapse|adapt|lockstep[:start=2h,"
                   "duration=30m,intensity=80]; repeat for several (several drift = several "
                   "drifters)")
    m.add_argument("--realtime", action="store_true", help="event times are now, paced live")
    m.add_argument("--out", help="write events.jsonl and labels.jsonl here instead of Kafka")
    m.add_argument("--raw", action="store_true", help="with --out: raw Moltbook API answers")
    m.set_defaults(func=cmd_simulate)

    c = sub.add_parser("crawl", help="crawl the Moltbook API into Kafka (checkpointed in Redis)")
    c.add_argument("--base-url", help="API base (default MOLTSCOPE_CRAWLER__BASE_URL)")
    c.set_defaults(func=cmd_crawl)

    s = sub.add_parser("schema", help="print the JSON Schema of a canonical event")
    s.set_defaults(func=cmd_schema)

    from service.probes.command import add_probe_parser

    add_probe_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

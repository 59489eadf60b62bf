"""Live detection latency in the embedded stack: from the event that makes a scenario detectable
to the signed webhook delivery, per hop, side by side for several seeds in one run.

    .venv/bin/python bench/bench_latency.py                      # surge, 2 seeds: ~2-3 min
    .venv/bin/python bench/bench_latency.py --seeds 0 1 2 --speed 600
    .venv/bin/python bench/bench_latency.py --all --speed 600    # every scenario (longer)
    .venv/bin/python bench/bench_latency.py --embed              # model in the loop
    .venv/bin/python bench/bench_latency.py --variants default   # the stack as shipped only

One Tansu broker and one Redis server on loopback ports (temporary directories) serve the whole
run; each seed gets its own topic prefix, one worker (``moltscope worker``) and the API, and a
loopback webhook receiver registered through ``POST /v1/webhooks`` with the API token, which
checks each delivery's HMAC signature and records its arrival wall time.

"Detectable" is defined offline: the simulated society is first fed through
``streams.pipeline.Pipeline`` (same settings as the worker's, de-duplicated as ingest does),
advanced after every event as the reducer and the replay do (detectors evaluate once per
``tick`` of event time); the triggering event of a scenario is the one
after which its detector first fires the incident matching the planted label. Live, the head
of the society (up to ``--lead`` seconds of paced publishing before the first trigger) is
published at once and absorbed; the webhook is registered; then the rest is published through
``service.producer.KafkaSink`` paced at ``--speed`` times the original pace, and the trigger's
send time is the start of the clock. The clock stops when the webhook receiver gets the first
Alertmanager alert with the same type and key.

Hops (worker clocks, same machine): ``eval`` = the reducer's snapshot whose latest event time
equals the firing alert's ``startsAt`` (the reducer evaluates the detectors as it applies
events behind its watermark; the snapshot timer sends the transitions, then writes this
snapshot: an upper bound of the evaluation time); ``submit`` = the
alert consumed from the alerts topic and queued by the dispatcher (group due time minus
``group_wait_s``, polled from Redis); ``flush`` = the group turned into a signed message
(``dq:last``); ``post`` = arrival at the receiver. ``over`` = how much later (wall) than the
trigger the newest event included in the firing evaluation was sent: the watermark releases
an event once every active partition has passed it, so the firing evaluation may have seen
events sent after the trigger.

Variants, side by side on the same seeds: ``default`` is the stack as shipped; ``faust`` is
the default with Faust's own Kafka fetch wait (1500 ms: Tansu answers a parked fetch late, so
each of the three topic hops waits; ``kafka_fetch_wait_ms`` ships at 100); ``tuned`` shortens
every wait on the path (``--tuned-*``): the fetch wait, ingest's batch wait
(``society.embed_wait_s``), the snapshot timer that evaluates the detectors
(``snapshot_interval_s``) and the dispatcher's ``group_wait_s``. All are settings
(``MOLTSCOPE_KAFKA_FETCH_WAIT_MS``, ``MOLTSCOPE_DELIVERY__GROUP_WAIT_S``, ...).

The live reducer evaluates per tick of event time, as the replay does, so any ``--speed``
raises the offline alerts. The watermark (``allowed_lateness_s``, ``idle_partition_s``) adds
to the latency: ``bench/bench_watermark.py`` measures that hop alone.

Measured before the watermark, when the reducer evaluated on a wall-clock timer (2 cores,
surge, 120x, no model): with Faust's 1500 ms fetch wait (the ``faust`` variant, the shipped
default before ``kafka_fetch_wait_ms``) 2.6-4.3 s over seeds 0-3 (median
~3.4-4 s: ~2.3 s to the firing evaluation = two topic hops + ingest batch wait + timer phase,
~0.6 s over the alerts topic, ~1.1 s group wait + dispatch poll, ~0.02 s POST); ``default``
(100 ms) 2.5-2.6 s over seeds 0-1, the alerts hop down to 0.06 s; tuned 0.57-0.90 s.
``--embed`` and 600x change little. ``--all`` at 600x, seed 0, before the fetch setting:
default surge 2.1, burst 7.0 (reducer behind by ~4 s), collapse 4.1 s; tuned 0.7-1.3 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from detectors.alert import Alert  # noqa: E402
from service.config import EmbeddedSettings, Settings, SocietySettings  # noqa: E402
from service.delivery.alertmanager import SIGNATURE_HEADER, verify  # noqa: E402
from service.delivery.dispatcher import DispatcherConfig  # noqa: E402
from service.embedded import ManagedProcess, free_port, port_open, redis_server, tansu  # noqa: E402
from service.producer import KafkaSink, ensure_topics  # noqa: E402
from service.sources.simulate import (  # noqa: E402
    SCENARIOS,
    Label,
    ScenarioSpec,
    SimulationConfig,
    Simulator,
)
from service.stack import cli_argv, settings_env  # noqa: E402
from service.stores.metrics import MetricStore  # noqa: E402
from streams.events import Event, PostEvent  # noqa: E402
from streams.pipeline import Pipeline  # noqa: E402
from streams.state.dedup import Dedup  # noqa: E402

DETECTOR_OF = {"surge": "surge", "supernode": "supernode", "burst": "burst", "drift": "shift",
               "collapse": "engagement"}
TOKEN = "bench-latency-token-0123456789abcdef"
SECRET = "bench-latency-secret-0123456789"
GRACE = timedelta(hours=1)  # an alert this long after its label's window still matches


@dataclass(frozen=True)
class Variant:
    name: str
    snapshot_interval_s: float = Settings().snapshot_interval_s
    embed_wait_s: float = SocietySettings().embed_wait_s
    fetch_wait_ms: int = Settings().kafka_fetch_wait_ms
    group_wait_s: float = DispatcherConfig().group_wait_s

    def describe(self) -> str:
        return (f"{self.name}: snapshot_interval_s {self.snapshot_interval_s:g}, "
                f"embed_wait_s {self.embed_wait_s:g}, kafka_fetch_wait_ms {self.fetch_wait_ms}, "
                f"group_wait_s {self.group_wait_s:g}")


# ----------------------------------------------------------------------------- the society


def society(seed: int, args: argparse.Namespace) -> tuple[list[Event], list[Label]]:
    """The surge alone, early (its detector warms up for an hour), or every scenario at its
    simulator default (``--all``: the longest ends at 13 h)."""
    if args.all:
        specs = tuple(ScenarioSpec(name=n) for n in SCENARIOS)
        duration = timedelta(hours=13, minutes=30)
    else:
        specs = (ScenarioSpec(name="surge", start=timedelta(hours=1, minutes=10),
                              duration=timedelta(minutes=20)),)
        duration = timedelta(hours=1, minutes=45)
    sim = Simulator(SimulationConfig(seed=seed, agents=args.agents,
                                     posts_per_hour=args.posts_per_hour, duration=duration,
                                     scenarios=specs))
    events = list(sim)
    return events, sim.labels


def matches(alert: Alert, label: Label) -> bool:
    """Whether an alert names the planted truth (as bench_detectors.py scores it)."""
    if DETECTOR_OF[label.scenario] != alert.type:
        return False
    if not label.start <= alert.starts_at <= label.end + GRACE:
        return False
    d, ev = label.details, alert.evidence
    if label.scenario == "surge":
        wanted = {d["token"].lstrip("$").upper(), d["contract"].upper(),
                  d["mint_url"].split("//")[1].upper()}
        names = [alert.key, *ev.get("related_entities", [])]
        return any(any(w in n.upper() for w in wanted) for n in names)
    if label.scenario == "supernode":
        return ev.get("agent") == d["supernode"]
    if label.scenario == "burst":
        return bool(set(ev.get("ngram", "").split()) & set(d["phrase"].split()))
    if label.scenario == "drift":
        return ev.get("agent") in label.agents
    return ev.get("direction") == "down"


@dataclass
class Trigger:
    scenario: str
    index: int  # position in the event list of the event after which the alert first fired
    alert: Alert


def offline_triggers(events: list[Event], labels: list[Label], settings: Settings
                     ) -> tuple[dict[str, Trigger], list[int]]:
    """Per scenario, the event after which the offline pipeline first fires its incident; and
    the de-duplicated count after each event (what the worker reports once it has them)."""
    pipeline = Pipeline(settings.pipeline(threads_local=False))
    vectors = embed_posts(events, pipeline) if settings.embed else {}
    dedup = Dedup(settings.dedup_capacity)
    found: dict[str, Trigger] = {}
    absorbed: list[int] = []
    for i, ev in enumerate(events):
        if dedup.admit(ev.id):
            pipeline.update(ev, vectors.get(ev.id))
            for alert in pipeline.advance():
                if alert.state != "firing":
                    continue
                for label in labels:
                    if label.scenario not in found and matches(alert, label):
                        found[label.scenario] = Trigger(label.scenario, i, alert)
        absorbed.append(pipeline.events)
    return found, absorbed


def embed_posts(events: list[Event], pipeline: Pipeline) -> dict[str, np.ndarray]:
    """The vectors the worker would attach (MiniLM, through float16 as on the society topic)."""
    from streams.embedding import Embedder

    wanted = [ev for ev in events if pipeline.wants_vector(ev)]
    texts = [ev.text if isinstance(ev, PostEvent) else getattr(ev, "content", "")
             for ev in wanted]
    encoded = Embedder().encode_batch(texts).astype(np.float16).astype(np.float32)
    return {ev.id: v for ev, v in zip(wanted, encoded, strict=True)}


# ------------------------------------------------------------------------- live machinery


@dataclass
class Delivery:
    arrived: float
    verified: bool
    alerts: list[dict[str, Any]]


class Receiver:
    """A loopback webhook receiver: arrival wall time, signature check, Alertmanager alerts."""

    def __init__(self, secret: str) -> None:
        self.deliveries: list[Delivery] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                arrived = time.time()
                ok = verify(body, secret, self.headers.get(SIGNATURE_HEADER))
                alerts = json.loads(body).get("alerts", []) if ok else []
                with outer.lock:
                    outer.deliveries.append(Delivery(arrived, ok, alerts))
                self.send_response(200 if ok else 401)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"

    def first(self, alert_type: str, key: str) -> Delivery | None:
        with self.lock:
            return next((d for d in self.deliveries for a in d.alerts
                         if a["labels"]["type"] == alert_type and a["labels"]["key"] == key
                         and a["status"] == "firing"), None)

    def of_type(self, alert_type: str) -> list[tuple[float, str]]:
        """(arrival, key) of every alert of one type received."""
        with self.lock:
            return [(d.arrived, a["labels"]["key"]) for d in self.deliveries for a in d.alerts
                    if a["labels"]["type"] == alert_type]

    @contextmanager
    def running(self) -> Iterator[Receiver]:
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()
            thread.join(5)


class GroupWatch:
    """Polls the dispatcher's state in Redis: every due time a pending group had
    (``<p>:dq:groups``, member ``hook|type``; submit = due - group_wait_s unless the group was
    held by ``group_interval_s``) and every flush time (``<p>:dq:last``), by alert type."""

    def __init__(self, client: redis.Redis, prefix: str, every_s: float = 0.01) -> None:
        self.r, self.every_s = client, every_s
        self.k_groups, self.k_last = f"{prefix}:dq:groups", f"{prefix}:dq:last"
        self.dues: dict[str, set[float]] = defaultdict(set)
        self.flushes: dict[str, set[float]] = defaultdict(set)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            for member, score in self.r.zrange(self.k_groups, 0, -1, withscores=True):
                self.dues[member.decode().split("|", 1)[1]].add(score)
            for member, at in self.r.hgetall(self.k_last).items():
                self.flushes[member.decode().split("|", 1)[1]].add(float(at))

    def path(self, alert_type: str, arrived: float, group_wait: float
             ) -> tuple[float | None, float | None]:
        """(submit, flush) of the message that arrived at ``arrived``: the latest flush before
        it and the latest submit before that flush."""
        flush = max((f for f in self.flushes[alert_type] if f <= arrived), default=None)
        if flush is None:
            return None, None
        submit = max((d - group_wait for d in self.dues[alert_type] if d - group_wait <= flush),
                     default=None)
        return submit, flush

    @contextmanager
    def running(self) -> Iterator[GroupWatch]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(5)


def wait_until(what: str, fn: Any, timeout: float, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


def processed(store: MetricStore) -> float:
    raw = store.r.get(f"{store.p}:samples")
    if raw is None:
        return 0.0
    return next((s["value"] for s in json.loads(raw)
                 if s["name"] == "events_processed_total"), 0.0)


@dataclass
class Measure:
    scenario: str
    seed: int
    variant: str
    key: str = ""
    sent: float = 0.0  # trigger's send time (wall)
    arrived: float | None = None
    hops: dict[str, float | None] = field(default_factory=dict)
    note: str = ""

    @property
    def latency(self) -> float | None:
        return None if self.arrived is None else self.arrived - self.sent


@dataclass
class Prepared:
    seed: int
    events: list[Event]
    labels: list[Label]
    triggers: dict[str, Trigger]
    absorbed: list[int]


def prepare(seed: int, args: argparse.Namespace) -> Prepared:
    """The society and its offline triggers (the live settings do not change them)."""
    t0 = time.perf_counter()
    events, labels = society(seed, args)
    triggers, absorbed = offline_triggers(events, labels, Settings(embed=args.embed))
    print(f"seed {seed}: {len(events)} events, offline pass {time.perf_counter() - t0:.1f} s; "
          "triggers: " + (", ".join(
              f"{t.scenario}@{t.index} {t.alert.type}:{t.alert.key} "
              f"(+{(t.alert.starts_at - lab.start).total_seconds():.0f} s event time "
              "after the start)"
              for t in triggers.values() for lab in labels if lab.scenario == t.scenario)
              or "none"), flush=True)
    return Prepared(seed, events, labels, triggers, absorbed)


def run_live(prep: Prepared, variant: Variant, args: argparse.Namespace, kafka_port: int,
             redis_port: int, tmp: Path) -> list[Measure]:
    seed, events, triggers, absorbed = prep.seed, prep.events, prep.triggers, prep.absorbed
    prefix = f"lat{seed}x{uuid.uuid4().hex[:6]}"
    s = Settings(kafka_url=f"kafka://127.0.0.1:{kafka_port}",
                 redis_url=f"redis://127.0.0.1:{redis_port}/0", topic_prefix=prefix,
                 api_port=free_port(), api_token=TOKEN, embed=args.embed,
                 snapshot_interval_s=variant.snapshot_interval_s,
                 kafka_fetch_wait_ms=variant.fetch_wait_ms,
                 society=SocietySettings(embed_wait_s=variant.embed_wait_s),
                 delivery=DispatcherConfig(group_wait_s=variant.group_wait_s,
                                           allow_urls=("127.0.0.1/32",)),  # the receiver
                 embedded=EmbeddedSettings(enabled=False, data_dir=tmp / prefix))
    out = [Measure(lab.scenario, seed, variant.name, note="not detected offline")
           for lab in prep.labels if lab.scenario not in triggers]
    if not triggers:
        return out
    first = min(t.index for t in triggers.values())
    paced_from = events[first].event_time - timedelta(seconds=args.lead * args.speed)
    head = next(i for i, ev in enumerate(events) if ev.event_time >= paced_from)

    ensure_topics(s)
    env = settings_env(s)
    logs = tmp / prefix
    procs = [ManagedProcess("worker", cli_argv("worker", "--loglevel", "warning"),
                            lambda: True, logs / "worker.log", env=env),
             ManagedProcess("api", cli_argv("api", "--loglevel", "warning"),
                            lambda: port_open(s.api_port), logs / "api.log", env=env)]
    client = redis.Redis(port=redis_port)
    store = MetricStore(client, prefix=prefix)
    api = f"http://127.0.0.1:{s.api_port}"
    group_wait = variant.group_wait_s
    try:
        with ExitStack() as stack:
            for p in procs:
                stack.callback(p.stop)
                p.start(timeout=90)
            stack.callback(client.close)
            wait_until("API ready", lambda: httpx.get(f"{api}/readyz").status_code == 200, 90)
            sink = KafkaSink(s)
            stack.callback(sink.close)
            # the head at once: the worker absorbs it (and its group settles) before the clock
            t0 = time.perf_counter()
            for ev in events[:head]:
                sink.send(ev)
            sink.flush()
            want = absorbed[head - 1] if head else 0
            wait_until("the worker absorbed the head", lambda: processed(store) >= want,
                       args.timeout + 60, every=0.05)
            head_s = time.perf_counter() - t0
            receiver = stack.enter_context(Receiver(SECRET).running())
            hook = httpx.post(f"{api}/v1/webhooks", json={"url": receiver.url, "secret": SECRET},
                              headers={"Authorization": f"Bearer {TOKEN}"})
            hook.raise_for_status()
            watch = stack.enter_context(GroupWatch(client, prefix).running())

            # paced: event time advances --speed times faster than wall time
            sent_at: list[float] = []
            base_ev, base_wall = events[head].event_time, time.time()
            pending = {t.scenario: t for t in triggers.values()}
            deadline = None
            i = head
            while pending:
                now = time.time()
                if i < len(events):
                    ev = events[i]
                    due = base_wall + (ev.event_time - base_ev).total_seconds() / args.speed
                    if due > now:
                        time.sleep(min(due - now, 0.05))
                        continue
                    sent_at.append(time.time())
                    sink.send(ev)
                    i += 1
                else:
                    time.sleep(0.02)
                if deadline is None and all(t.index < i for t in pending.values()):
                    deadline = time.monotonic() + args.timeout
                for name, t in list(pending.items()):
                    if t.index < i and receiver.first(t.alert.type, t.alert.key) is not None:
                        del pending[name]
                if deadline is not None and time.monotonic() > deadline:
                    break
            time.sleep(0.1)  # let the poller see the last groups
            alive = all(p.alive for p in procs)
            for t in triggers.values():
                m = Measure(t.scenario, seed, variant.name, key=f"{t.alert.type}:{t.alert.key}")
                m.sent = sent_at[t.index - head]
                got = receiver.first(t.alert.type, t.alert.key)
                if got is None:
                    keys = sorted({k for _, k in receiver.of_type(t.alert.type)})
                    m.note = ("no delivery" + ("" if alive else " (a process died)")
                              + f"; {t.alert.type} keys delivered: {keys or 'none'}")
                    out.append(m)
                    continue
                m.arrived = got.arrived
                live = next(a for a in got.alerts if a["labels"]["key"] == t.alert.key)
                started = datetime.fromisoformat(live["startsAt"].replace("Z", "+00:00"))
                # the newest event the firing evaluation had seen, and when it was sent
                seen = max((j for j in range(head, i) if events[j].event_time <= started),
                           default=t.index)
                m.hops["over"] = sent_at[seen - head] - m.sent
                series = store.series("event_time_latest_seconds", {})
                m.hops["eval"] = next((at for at, v in series
                                       if abs(v - started.timestamp()) < 1e-3), None)
                m.hops["submit"], m.hops["flush"] = watch.path(t.alert.type, got.arrived,
                                                               group_wait)
                # a transition still waiting in its group is replaced by a later one of the same
                # incident: the first message may already say "updated"
                m.note = "bad signature" if not got.verified else live["annotations"]["state"]
                before = [a for a, _ in receiver.of_type(t.alert.type) if a < got.arrived]
                if before and got.arrived - max(before) < s.delivery.group_interval_s + 1:
                    m.note += (f"; held by group_interval_s: previous {t.alert.type} message "
                               f"{got.arrived - max(before):.1f} s earlier")
                out.append(m)
            print(f"seed {seed} {variant.name}: head {head} events absorbed in {head_s:.1f} s, "
                  f"paced {i - head} events at {args.speed:g}x", flush=True)
    except TimeoutError as exc:  # a stuck stack: say where, show the logs, go on
        print(f"seed {seed} {variant.name}: {exc}", file=sys.stderr)
        for log in sorted(logs.glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-15:]
            print(f"--- {log.name}\n" + "\n".join(tail), file=sys.stderr)
        out += [Measure(t.scenario, seed, variant.name, note=f"timeout: {exc}")
                for t in triggers.values()]
    return out


# ---------------------------------------------------------------------------------- report


def fmt(x: float | None, width: int = 6) -> str:
    return f"{x:>{width}.2f}" if x is not None else f"{'-':>{width}}"


def clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}"


def hop_gaps(m: Measure) -> dict[str, float | None]:
    """Successive differences along the path; a missing point leaves its two gaps empty."""
    points = [("sent", m.sent), ("eval", m.hops.get("eval")), ("submit", m.hops.get("submit")),
              ("flush", m.hops.get("flush")), ("post", m.arrived)]
    gaps: dict[str, float | None] = {}
    for (_, a), (name, b) in zip(points, points[1:], strict=False):
        gaps[name] = None if a is None or b is None else b - a
    return gaps


def report(results: list[Measure], variants: list[Variant]) -> None:
    print()
    print(f"{'variant':8} {'scenario':9} {'seed':>4} {'key':24} {'sent (UTC)':>12} "
          f"{'arrived':>12} {'latency':>7} | {'->eval':>6} {'->submit':>8} {'->flush':>7} "
          f"{'->post':>6} {'over':>5}  first state")
    for m in results:
        head = f"{m.variant:8} {m.scenario:9} {m.seed:>4} {m.key[:24]:24}"
        if m.arrived is None:
            print(f"{head} {m.note}")
            continue
        g = hop_gaps(m)
        print(f"{head} {clock(m.sent):>12} {clock(m.arrived):>12} {fmt(m.latency, 7)} | "
              f"{fmt(g['eval'])} {fmt(g['submit'], 8)} {fmt(g['flush'], 7)} {fmt(g['post'])} "
              f"{fmt(m.hops.get('over'), 5)}  {m.note}")
    print()
    print(f"{'variant':8} {'scenario':9} {'runs':>4} {'latency med':>11} {'max':>6} | "
          f"hop medians: {'->eval':>6} {'->submit':>8} {'->flush':>7} {'->post':>6}")
    medians: dict[tuple[str, str], float] = {}
    for v in variants:
        for sc in SCENARIOS:
            mine = [m for m in results if m.scenario == sc and m.variant == v.name]
            if not mine:
                continue
            lat = [x for m in mine if (x := m.latency) is not None]
            if not lat:
                print(f"{v.name:8} {sc:9} {0:>4}/{len(mine)} {'-':>9}")
                continue
            meds: dict[str, float | None] = {}
            for hop in ("eval", "submit", "flush", "post"):
                xs = [x for m in mine if (x := hop_gaps(m)[hop]) is not None]
                meds[hop] = statistics.median(xs) if xs else None
            medians[(v.name, sc)] = statistics.median(lat)
            print(f"{v.name:8} {sc:9} {len(lat):>4} {medians[(v.name, sc)]:>11.2f} "
                  f"{max(lat):>6.2f} | {'':12} {fmt(meds['eval'])} {fmt(meds['submit'], 8)} "
                  f"{fmt(meds['flush'], 7)} {fmt(meds['post'])}")
    base = variants[0].name
    for v in variants[1:]:
        for sc in SCENARIOS:
            if (base, sc) in medians and (v.name, sc) in medians:
                print(f"{sc}: median latency {base} / {v.name} = "
                      f"{medians[(base, sc)] / medians[(v.name, sc)]:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--speed", type=float, default=120.0,
                    help="event time per wall time while paced")
    ap.add_argument("--all", action="store_true", help="every scenario, not just the surge")
    ap.add_argument("--embed", action="store_true", help="embed texts (MiniLM) in the worker")
    ap.add_argument("--agents", type=int, default=5_000)
    ap.add_argument("--posts-per-hour", type=float, default=600.0)
    ap.add_argument("--lead", type=float, default=10.0,
                    help="wall seconds of paced publishing before the first trigger (all of "
                    "the society before it, if that is shorter at this speed)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="wall seconds to wait for deliveries after the last trigger")
    ap.add_argument("--variants", nargs="+", choices=["default", "faust", "tuned"],
                    default=["default", "faust", "tuned"],
                    help="faust = the default with Faust's own Kafka fetch wait (1500 ms)")
    ap.add_argument("--tuned-snapshot-interval", type=float, default=0.25)
    ap.add_argument("--tuned-embed-wait", type=float, default=0.1)
    ap.add_argument("--tuned-fetch-wait-ms", type=int, default=100)
    ap.add_argument("--tuned-group-wait", type=float, default=0.25)
    args = ap.parse_args()
    known = {"default": Variant("default"),
             "faust": Variant("faust", fetch_wait_ms=1500),
             "tuned": Variant("tuned", args.tuned_snapshot_interval, args.tuned_embed_wait,
                              args.tuned_fetch_wait_ms, args.tuned_group_wait)}
    variants = [known[name] for name in dict.fromkeys(args.variants)]

    results: list[Measure] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        kafka_port, redis_port = free_port(), free_port()
        with tansu(kafka_port, tmp / "tansu.log"), \
                redis_server(redis_port, tmp / "redis", tmp / "redis.log"):
            for seed in args.seeds:
                prep = prepare(seed, args)
                for v in variants:
                    results += run_live(prep, v, args, kafka_port, redis_port, tmp)
    report(results, variants)
    print()
    for v in variants:
        print(v.describe())
    print(f"speed {args.speed:g}x, dispatch poll {DispatcherConfig().poll_s:g} s, "
          f"embed {args.embed}; total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

"""The reducer's added latency from the event-time watermark: event arrival at the reducer ->
event applied to the pipeline, side by side for several allowed latenesses and stream rates.

    .venv/bin/python bench/bench_watermark.py                   # ~10 s
    .venv/bin/python bench/bench_watermark.py --lateness 0 5 30 --rates 1 10 --hours 2

Virtual wall time, no broker: a simulated society (``service.sources.simulate``, its default
pace scaled by ``--rates``) is keyed to ``--partitions`` partitions as the producer keys it and
delivered live (1x: an event reaches the reducer at its event time) in ingest's batches (each
partition's events of one ``--batch-wait`` window in one society message, sent at the window's
end plus a per-partition phase). The real :class:`~streams.reducer.Reducer` takes them, with
its publishing tick every ``--tick`` s (it releases what idle partitions no longer hold back);
the pipeline behind it is a stub that notes the wall time each event is applied, so the
figures are the watermark's wait alone (the engines' cost is measured by bench_realtext).
"""

from __future__ import annotations

import argparse
import math
import zlib
from collections import defaultdict
from datetime import timedelta

import numpy as np

from service.sources.simulate import SimulationConfig, Simulator
from streams.events import Event
from streams.messages import Forwarded, encode_society
from streams.order import ALLOWED_LATENESS_S, IDLE_PARTITION_S
from streams.reducer import Reducer


class Stub:
    """What the reducer calls on a pipeline, noting when (wall) each event is applied."""

    def __init__(self) -> None:
        self.latest: float | None = None
        self.wall = 0.0
        self.applied: dict[str, float] = {}
        self.events = 0

    def update(self, event: Event, vector: object = None) -> None:
        self.applied[event.id] = self.wall
        t = event.event_time.timestamp()
        self.latest = t if self.latest is None else max(self.latest, t)

    def advance(self, now: float | None = None, *, force: bool = False) -> list[object]:
        return []

    def snapshot(self) -> object:
        from streams.state.base import Snapshot

        return Snapshot()


def run(events: list[Event], partitions: int, lateness: float, batch_wait: float,
        tick: float) -> dict[str, float]:
    t0 = events[0].event_time.timestamp()
    messages: dict[tuple[float, int], list[Forwarded]] = defaultdict(list)
    offsets = [0] * partitions
    arrived: dict[str, float] = {}
    for ev in events:
        p = zlib.crc32(ev.key.encode()) % partitions
        t = ev.event_time.timestamp() - t0
        phase = batch_wait * p / partitions
        sent = math.ceil((t - phase) / batch_wait) * batch_wait + phase
        messages[(sent, p)].append(Forwarded(ev, None, p, offsets[p]))
        offsets[p] += 1
        arrived[ev.id] = sent
    stub = Stub()
    r = Reducer(stub, partitions, allowed_lateness_s=lateness)  # type: ignore[arg-type]
    next_tick = 0.0
    for offset, ((sent, _), msg) in enumerate(sorted(messages.items())):
        while next_tick < sent:
            stub.wall = next_tick
            r.tick(next_tick)
            next_tick += tick
        stub.wall = sent
        r.apply(offset, encode_society(msg), wall=sent)
    end = max(arrived.values())
    while r.buffered:
        stub.wall = next_tick
        r.tick(next_tick)
        next_tick += tick
    waits = np.array([stub.applied[i] - a for i, a in arrived.items()])
    tail = np.array([stub.applied[i] - a for i, a in arrived.items()
                     if a < end - IDLE_PARTITION_S])  # leave the end-of-stream flush out
    return {"events": len(waits), "late": r.order.late, "p50": float(np.median(tail)),
            "p90": float(np.quantile(tail, 0.9)), "p99": float(np.quantile(tail, 0.99)),
            "max": float(tail.max()), "last": float(waits.max())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lateness", type=float, nargs="+", default=[0.0, ALLOWED_LATENESS_S, 30.0])
    ap.add_argument("--rates", type=float, nargs="+", default=[1.0, 10.0],
                    help="multiples of the simulator's default pace (600 posts/h)")
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--batch-wait", type=float, default=0.5, help="ingest's embed_wait_s")
    ap.add_argument("--tick", type=float, default=1.0, help="snapshot_interval_s")
    a = ap.parse_args()
    print(f"{a.partitions} partitions, ingest batches of {a.batch_wait} s, tick {a.tick} s, "
          f"idle_partition_s {IDLE_PARTITION_S}; wait = applied - arrived (wall s, 1x live)")
    print(f"{'rate':>5} {'ev/s':>6} {'lateness':>8} {'p50':>6} {'p90':>6} {'p99':>6} "
          f"{'max':>6} {'last':>6} {'late':>5}")
    for rate in a.rates:
        events = list(Simulator(SimulationConfig(
            seed=1, posts_per_hour=600 * rate, agent_growth_per_hour=400 * rate,
            duration=timedelta(hours=a.hours))))
        span = events[-1].event_time.timestamp() - events[0].event_time.timestamp()
        for lateness in a.lateness:
            f = run(events, a.partitions, lateness, a.batch_wait, a.tick)
            print(f"{rate:>5g} {f['events'] / span:>6.2f} {lateness:>8g} {f['p50']:>6.2f} "
                  f"{f['p90']:>6.2f} {f['p99']:>6.2f} {f['max']:>6.2f} {f['last']:>6.1f} "
                  f"{f['late']:>5d}")
    print("last: the stream's final events wait for the partitions to fall idle "
          "(idle_partition_s)")


if __name__ == "__main__":
    main()

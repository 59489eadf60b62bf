"""The comment-coverage engine (``streams/state/coverage.py``) on the real-text stream and on
the simulator-text stream of the same shapes (``bench/realtext.py``), side by side in one run:
events/s of the engine alone against the activity engine (the cheapest per-event engine, as a
yardstick), per-post records held after the last expire, and bytes per record (pickled: what
the reducer checkpoint carries) with a horizon of a day (the stream spans two days).

    .venv/bin/python bench/bench_coverage.py               # 60k events a stream, ~1 minute
    .venv/bin/python bench/bench_coverage.py --events 200000
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import realtext  # noqa: E402
from streams.state.activity import ActivityState  # noqa: E402
from streams.state.base import Item  # noqa: E402
from streams.state.coverage import CoverageConfig, CoverageState  # noqa: E402

TICK = 10.0


def drive(engine: object, items: list[Item]) -> float:
    """Events/s (CPU time) of update per item and expire once per tick of event time."""
    start, last = time.process_time(), None
    for it in items:
        engine.update(it)  # type: ignore[attr-defined]
        if last is None or it.t - last >= TICK:
            last = it.t
            engine.expire(it.t)  # type: ignore[attr-defined]
    return len(items) / (time.process_time() - start)


def measure(items: list[Item], horizon_s: float) -> dict[str, float]:
    cov = CoverageState(CoverageConfig(horizon_s=horizon_s))
    rate = drive(cov, items)
    yardstick = drive(ActivityState(), items)
    snap = cov.snapshot()
    held = snap.value("coverage_tracked_posts") or 0.0
    empty = len(pickle.dumps(CoverageState(CoverageConfig(horizon_s=horizon_s))))
    size = len(pickle.dumps(cov)) - empty
    return {"rate": rate, "vs_activity": rate / yardstick, "held": held,
            "posts": snap.value("coverage_posts", scope="all") or 0.0,
            "bytes_per_record": size / held if held else 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=60_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--horizon-h", type=float, default=24.0)
    args = ap.parse_args()
    corpora = {"real text": None, "simulator": realtext.simulator_corpus(args.seed)}
    rows = {}
    for name, corpus in corpora.items():
        events = realtext.stream(args.events, seed=args.seed, corpus=corpus,
                                 scale=realtext.scale_for(args.events))
        rows[name] = measure([Item.of(e) for e in events], args.horizon_h * 3600)
    print(f"{args.events} events a stream, horizon {args.horizon_h:g} h")
    print(f"{'':10} {'events/s':>9} {'x activity':>10} {'posts':>7} {'records':>8} {'B/record':>9}")
    for name, r in rows.items():
        print(f"{name:10} {r['rate']:9.0f} {r['vs_activity']:10.2f} {r['posts']:7.0f} "
              f"{r['held']:8.0f} {r['bytes_per_record']:9.0f}")
    a, b = rows.values()
    print(f"real / simulator: events/s {a['rate'] / b['rate']:.2f}x, "
          f"bytes per record {a['bytes_per_record'] / b['bytes_per_record']:.2f}x")


if __name__ == "__main__":
    main()

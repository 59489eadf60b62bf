"""What freezing the engines' state out of Python's cyclic collector saves (``gc.freeze`` in
``Pipeline.advance``), side by side in one run on the real-text stream (``bench/realtext.py``,
model off): events/s and the per-event cost of the first and last tenth of the stream, with the
freeze and with it made a no-op.

    .venv/bin/python bench/bench_gc.py               # 60k events, about a minute
    .venv/bin/python bench/bench_gc.py --events 200000
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import realtext  # noqa: E402
from streams.pipeline import Pipeline, PipelineConfig  # noqa: E402


def run(events: list, freeze: bool) -> tuple[float, float, float]:
    """(events/s, us/event of the first tenth, of the last tenth), CPU time."""
    gc.unfreeze()
    gc.collect()
    original = gc.freeze
    if not freeze:
        gc.freeze = lambda: None  # type: ignore[assignment]
    try:
        pipeline = Pipeline(PipelineConfig(embed=False))
        tenth = max(1, len(events) // 10)
        marks = [time.process_time()]
        for i, e in enumerate(events, 1):
            pipeline.update(e)
            pipeline.advance()
            if i % tenth == 0:
                marks.append(time.process_time())
    finally:
        gc.freeze = original
    windows = [b - a for a, b in zip(marks, marks[1:], strict=False)]
    return (len(events) / (marks[-1] - marks[0]), windows[0] / tenth * 1e6,
            windows[-1] / tenth * 1e6)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=60_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    events = list(realtext.stream(args.events, seed=args.seed))
    rows = {name: run(events, freeze) for name, freeze in (("no freeze", False),
                                                            ("freeze", True))}
    print(f"{len(events)} real-text events, model off")
    print(f"{'':10} {'events/s':>9} {'first us':>9} {'last us':>8} {'last/first':>10}")
    for name, (rate, first, last) in rows.items():
        print(f"{name:10} {rate:9.0f} {first:9.0f} {last:8.0f} {last / first:10.2f}")
    (r0, _, l0), (r1, _, l1) = rows.values()
    print(f"freeze / no freeze: events/s {r1 / r0:.2f}x, last-tenth cost {l1 / l0:.2f}x")


if __name__ == "__main__":
    main()

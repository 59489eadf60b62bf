"""Stream the synthetic society and show its rate and that its memory does not grow.

Each size runs in a fresh child process so that its peak RSS is its own; the parent prints the
sizes side by side with the ratio of their peaks above the baseline (interpreter, imports and the
agent table). All five scenarios are planted at their default windows.

At the default rates 100k events are ~40 simulated hours: the population (20k agents) is still
registering, so the first size carries a little less per-agent state (ids, profiles seen) than
the second; past ~45 h nothing grows (300k vs 1M: growth above baseline 1.06x).

    .venv/bin/python bench/bench_simulate.py                 # 100k vs 1M events
    .venv/bin/python bench/bench_simulate.py --events 20000 200000 --json --raw
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.sources.simulate import (  # noqa: E402
    SCENARIOS,
    ScenarioSpec,
    SimulationConfig,
    Simulator,
)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def child(n: int, agents: int, serialise: bool, raw: bool) -> dict[str, float]:
    config = SimulationConfig(seed=1, agents=agents, duration=None, max_events=n,
                              scenarios=tuple(ScenarioSpec(name=s) for s in SCENARIOS))
    sim = Simulator(config)
    # Build the agent table first so the baseline holds everything that does not grow.
    warm = sim.events()
    next(warm)
    base = _rss_mb()
    count, chars = 1, 0
    start, cpu = time.perf_counter(), time.process_time()
    stream = sim.raw_answers() if raw else warm
    for item in stream:
        count += 1
        if serialise:
            chars += len(json.dumps(item) if raw else item.model_dump_json())
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"events": n, "items": count, "seconds": elapsed, "rate": count / elapsed,
            "cpu_rate": count / cpu,
            "base_mb": base, "peak_mb": _rss_mb(), "labels": len(sim.labels)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, nargs=2, default=(100_000, 1_000_000),
                    metavar=("SMALL", "LARGE"))
    ap.add_argument("--agents", type=int, default=20_000)
    ap.add_argument("--json", action="store_true", help="also serialise every item to JSON")
    ap.add_argument("--raw", action="store_true", help="stream raw API answers instead")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.agents, args.json, args.raw)))
        return
    rows = []
    for n in args.events:
        cmd = [sys.executable, __file__, "--child", str(n), "--agents", str(args.agents)]
        cmd += ["--json"] * args.json + ["--raw"] * args.raw
        rows.append(json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                              text=True).stdout))
    mode = ("raw API answers" if args.raw else "canonical events") + (
        " + JSON" if args.json else "")
    print(f"moltscope simulate: {mode}, {args.agents:,} agents, all scenarios planted")
    print("(items/s by the wall clock; per CPU second too, as the cores are shared)")
    print(f"{'events':>10} {'items':>10} {'seconds':>8} {'items/s':>9} {'/cpu s':>9} "
          f"{'base MB':>8} {'peak MB':>8} {'growth MB':>9}")
    for r in rows:
        print(f"{r['events']:>10,} {r['items']:>10,} {r['seconds']:>8.1f} {r['rate']:>9,.0f} "
              f"{r['cpu_rate']:>9,.0f} {r['base_mb']:>8.1f} {r['peak_mb']:>8.1f} "
              f"{r['peak_mb'] - r['base_mb']:>9.1f}")
    small, large = rows
    grown = [max(r["peak_mb"] - r["base_mb"], 0.1) for r in rows]
    print(f"ratio large/small: events {large['events'] / small['events']:.0f}x, "
          f"peak RSS {large['peak_mb'] / small['peak_mb']:.2f}x, growth above baseline "
          f"{grown[1] / grown[0]:.2f}x, rate per CPU second "
          f"{large['cpu_rate'] / small['cpu_rate']:.2f}x")


if __name__ == "__main__":
    main()

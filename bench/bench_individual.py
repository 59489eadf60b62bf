"""The individual layer's engines (drift, feedback, impact) on real-text acts: speed and memory.

Events come from ``bench/realtext.py``'s stream (real texts, resampled authors and threads) and
become acts through the per-agent stage's router (:class:`streams.acts.ActRouter`); post
vectors are a signed hashed bag of words at MiniLM's size (d = 384, unit float32: a fast
stand-in, so memory per post is what the model's vectors would take; the model itself is off).
Each engine takes every act in event-time order and expires on the stage's hourly grid; per
engine the run prints acts/s (update + expire; the router's and the vectors' time excluded),
the time of one ``partial()`` + ``population()``, the engine's own state estimate
(``*_state_bytes``: vectors counted) and tracemalloc's measure of the same state (a second,
untimed run; vectors the engine shares with the acts not counted) side by side, per agent and
per post held. The simulator's side (``service.sources.simulate``, same router and vectors) is
printed beside for comparison.

  .venv/bin/python bench/bench_individual.py                      # 100k real-text events
  .venv/bin/python bench/bench_individual.py --events 300000 --scale 0.05
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import math
import re
import sys
import time
import tracemalloc
from datetime import timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import realtext  # noqa: E402
from streams.acts import Act, ActRouter  # noqa: E402
from streams.events import CommentEvent, Event, PostEvent  # noqa: E402
from streams.state.drift import DriftEngine  # noqa: E402
from streams.state.feedback import FeedbackEngine  # noqa: E402
from streams.state.impact import ImpactEngine  # noqa: E402

_WORD = re.compile(r"\w+")
STEP = 3600.0  # the per-agent stage's expire grid (streams/agent_stage.py)


def vector(text: str, dim: int = 384, cache: dict[str, np.ndarray] = {}) -> np.ndarray:  # noqa: B006
    v = cache.get(text)
    if v is None:
        v = np.zeros(dim, dtype=np.float32)
        for w in _WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "little")
            v[h % dim] += 1.0 if h & 1 << 31 else -1.0
        n = float(np.linalg.norm(v))
        v = cache[text] = v / n if n else v
    return v


def acts_of(events: list[Event]) -> list[Act]:
    router, out = ActRouter(), []
    for e in events:
        vec = vector(e.text) if isinstance(e, PostEvent) else None
        out.extend(router.route(e, vec))
    return out


def real_events(n: int, scale: float) -> list[Event]:
    return list(realtext.stream(n, seed=1, scale=scale))


def sim_events(n: int) -> list[Event]:
    from service.sources.simulate import SimulationConfig, Simulator

    sim = Simulator(SimulationConfig(seed=1, agents=2000, posts_per_hour=400,
                                     duration=timedelta(days=5), max_events=n))
    out = []
    for e in sim.events():
        out.append(e)
        if len(out) >= n:
            break
    return out


def feed(engine, acts: list[Act]) -> float:
    """Every act in order, expiring on the hourly grid; seconds taken."""
    next_grid = -math.inf
    t0 = time.perf_counter()
    for a in acts:
        engine.update(a)
        grid = math.floor(a.t / STEP) * STEP
        if grid > next_grid:
            engine.expire(grid)
            next_grid = grid
    return time.perf_counter() - t0


def measure(name: str, make, acts: list[Act]) -> dict[str, float]:
    gc.collect()
    elapsed = feed(make(), acts)  # timed without tracing (tracemalloc slows every allocation)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    engine = make()
    feed(engine, acts)
    traced = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    t1 = time.perf_counter()
    partial = engine.partial()
    engine.population([partial])
    merge = time.perf_counter() - t1
    agents = partial["agents_tracked"]
    posts = _posts_held(engine)
    return {"engine": name, "acts": len(acts), "acts_per_s": len(acts) / elapsed,
            "partial_s": merge, "agents": agents, "posts_held": posts,
            "estimate_bytes": partial["state_bytes"], "traced_bytes": traced}


def _posts_held(engine) -> int:
    agents = engine._agents.values()
    if isinstance(engine, DriftEngine):
        return sum(a.n for a in agents)
    return sum(len(a.keys) for a in agents)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--scale", type=float, default=0.02, help="realtext scale (population)")
    ap.add_argument("--sim-events", type=int, default=100_000)
    args = ap.parse_args()
    engines = {"drift": DriftEngine, "feedback": FeedbackEngine, "impact": ImpactEngine}
    for label, events in (("real text", real_events(args.events, args.scale)),
                          ("simulator", sim_events(args.sim_events))):
        acts = acts_of(events)
        kinds = {k: sum(a.kind == k for a in acts) for k in ("post", "comment", "score")}
        span = (events[-1].event_time - events[0].event_time).total_seconds() / 86400
        texts = sum(isinstance(e, PostEvent | CommentEvent) for e in events)
        print(f"\n{label}: {len(events)} events ({texts} texts) over {span:.1f} days -> "
              f"{len(acts)} acts {kinds}")
        print(f"{'engine':9} {'acts/s':>9} {'partial s':>9} {'agents':>7} {'posts held':>10} "
              f"{'est. B':>11} {'traced B':>11} {'B/agent':>8} {'B/post held':>11}")
        for name, make in engines.items():
            r = measure(name, make, acts)
            per_agent = r["traced_bytes"] / max(r["agents"], 1)
            per_post = r["traced_bytes"] / max(r["posts_held"], 1)
            print(f"{name:9} {r['acts_per_s']:9.0f} {r['partial_s']:9.3f} {r['agents']:7d} "
                  f"{r['posts_held']:10d} {r['estimate_bytes']:11.0f} {r['traced_bytes']:11.0f} "
                  f"{per_agent:8.0f} {per_post:11.0f}")


if __name__ == "__main__":
    main()

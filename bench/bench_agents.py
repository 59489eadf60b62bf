"""The per-agent stage (issue 11) on real Moltbook text beside simulator text: the act router's
and the stage's events/s, the stage's bytes per agent, and the whole Pipeline + router +
stage against the Pipeline + router alone (model off), side by side in one run.

Streams: ``bench/realtext.py`` (real texts, resampled authors, threads, votes and pace; its
``scale`` concentrates the stream on fewer agents so that many reach the engines' minimum
post counts) and the synthetic society of ``service/sources/simulate.py``. Posts carry a
384-dimensional hashed bag-of-words unit vector (each word token adds +-1 at a hashed
coordinate), made before the timing: the model's cost is not the stage's, but the engines that
read vectors (drift, feedback, impact) must have them to cost what they cost.

Figures (CPU time of this process, ``time.process_time``: the machine is shared):

* router: events/s of :class:`~streams.acts.ActRouter` alone (what ingest adds per event);
* stage: events/s and acts/s of :class:`~streams.agent_stage.AgentStage` fed the routed acts,
  expiring on its hourly grid, with one report (profiles of every agent, sort keys and the
  partial, what an agents partition publishes) timed apart;
* memory: the stage's bytes per agent, measured (``tracemalloc``: what the stage holds after
  the stream, less what it held before) and as the engines count it (``*_state_bytes``);
* pipeline: :func:`streams.replay.replay` with ``embed=False`` with the stage's four engines
  against with none (the router runs in both): events/s and the stage's share.

    .venv/bin/python bench/bench_agents.py              # 40k events a stream
    .venv/bin/python bench/bench_agents.py --events 10000 --only real
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import sys
import time
import tracemalloc
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import realtext  # noqa: E402
from service.sources.simulate import SimulationConfig, Simulator  # noqa: E402
from streams.acts import Act, ActRouter  # noqa: E402
from streams.agent_stage import AgentPartition, AgentStage, AgentStageConfig  # noqa: E402
from streams.events import Event, PostEvent  # noqa: E402
from streams.pipeline import Pipeline, PipelineConfig  # noqa: E402
from streams.replay import replay  # noqa: E402
from streams.text import Text  # noqa: E402

DIM = 384


@cache
def _slot(token: str) -> tuple[int, float]:
    h = hashlib.blake2b(token.encode(), digest_size=8).digest()
    return int.from_bytes(h[:4], "little") % DIM, 1.0 if h[4] & 1 else -1.0


def hash_vector(text: str) -> np.ndarray:
    v = np.zeros(DIM)
    for tok in Text.of(text).tokens:
        i, s = _slot(tok)
        v[i] += s
    n = np.linalg.norm(v)
    if n == 0:
        v[_slot(text)[0]], n = 1.0, 1.0
    return (v / n).astype(np.float32)


def events_of(source: str, n: int, seed: int, scale: float) -> list[Event]:
    if source == "real":
        return list(realtext.stream(n, seed=seed, scale=scale))
    sim = Simulator(SimulationConfig(seed=seed, agents=max(200, int(n / 40)),
                                     duration=timedelta(hours=48),
                                     posts_per_hour=max(10, n // 200)))
    return sorted(list(sim)[:n], key=lambda e: (e.event_time, e.id))


def measure(source: str, args: argparse.Namespace) -> dict[str, Any]:
    events = events_of(source, args.events, args.seed, args.scale)
    vectors = {e.id: hash_vector(e.text) for e in events if isinstance(e, PostEvent) and e.text}
    out: dict[str, Any] = {"events": len(events)}

    router = ActRouter()
    gc.collect()
    t0 = time.process_time()
    acts: list[Act] = []
    for e in events:
        acts += router.route(e, vectors.get(e.id))
    out["router_s"] = time.process_time() - t0
    out["acts"] = len(acts)
    out["router_bytes"] = router.nbytes()

    def feed() -> AgentStage:
        stage = AgentStage()
        for a in acts:
            stage.update(a)
            stage.expire(a.t)
        return stage

    gc.collect()
    t0 = time.process_time()
    stage = feed()
    out["stage_s"] = time.process_time() - t0
    part = AgentPartition(stage, dirty=True)
    t0 = time.process_time()
    rep = part.report(None)
    out["report_s"] = time.process_time() - t0
    assert rep is not None
    out["agents"] = len(rep.profiles)
    pop = AgentStage.population([rep.partial])
    out["engine_bytes"] = sum(s.value for s in pop.samples if s.name.endswith("_state_bytes"))
    out["figures"] = {k: pop.value(k) for k in ("agent_drift_agents", "feedback_agents",
                                               "impact_agents", "action_agents")}
    del stage, part, rep
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    held = feed()
    out["traced_bytes"] = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del held

    cfg = PipelineConfig(embed=False)
    timings: dict[str, float] = {}
    # alternated, best of two: the first replay of a process also pays its warm-up
    for name, engines in (("without", ()), ("with", None)) * 2:
        stage_cfg = AgentStageConfig() if engines is None else AgentStageConfig(engines=engines)
        gc.collect()
        t0 = time.process_time()
        replay(events, Pipeline(cfg), close=False, stage=AgentStage(stage_cfg))
        timings[name] = min(timings.get(name, float("inf")), time.process_time() - t0)
    out["pipeline_with_s"], out["pipeline_without_s"] = timings["with"], timings["without"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=40_000)
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--scale", type=float, default=0.005,
                    help="real-text population scale (small: fewer, busier agents)")
    ap.add_argument("--only", choices=["real", "simulator"])
    args = ap.parse_args()
    res = {s: measure(s, args) for s in ("real", "simulator") if args.only in (None, s)}
    rows = [
        ("events", lambda r: f"{r['events']:,}"),
        ("acts", lambda r: f"{r['acts']:,}"),
        ("agents profiled", lambda r: f"{r['agents']:,}"),
        ("router events/s", lambda r: f"{r['events'] / r['router_s']:,.0f}"),
        ("router bytes", lambda r: f"{r['router_bytes'] / 1e6:.1f} MB"),
        ("stage events/s", lambda r: f"{r['events'] / r['stage_s']:,.0f}"),
        ("stage acts/s", lambda r: f"{r['acts'] / r['stage_s']:,.0f}"),
        ("report (profiles+keys+partial) s", lambda r: f"{r['report_s']:.2f}"),
        ("report us/agent", lambda r: f"{1e6 * r['report_s'] / max(1, r['agents']):.0f}"),
        ("bytes/agent (traced)", lambda r: f"{r['traced_bytes'] / max(1, r['agents']):,.0f}"),
        ("bytes/agent (engines' count)",
         lambda r: f"{r['engine_bytes'] / max(1, r['agents']):,.0f}"),
        ("pipeline+stage events/s (model off)",
         lambda r: f"{r['events'] / r['pipeline_with_s']:,.0f}"),
        ("pipeline+router events/s (model off)",
         lambda r: f"{r['events'] / r['pipeline_without_s']:,.0f}"),
        ("stage share of pipeline+stage",
         lambda r: f"{1 - r['pipeline_without_s'] / r['pipeline_with_s']:.0%}"),
    ]
    names = list(res)
    print(f"{'':38}" + "".join(f"{n:>16}" for n in names))
    for label, fmt in rows:
        print(f"{label:38}" + "".join(f"{fmt(res[n]):>16}" for n in names))
    for n in names:
        print(f"{n}: agents with figures {res[n]['figures']}")
    if len(names) == 2:
        r, s = res["real"], res["simulator"]
        print(f"stage events/s real / simulator: "
              f"{(r['events'] / r['stage_s']) / (s['events'] / s['stage_s']):.2f}")


if __name__ == "__main__":
    main()

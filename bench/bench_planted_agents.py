"""Planted agents of the per-agent stage (issue 11): caught at several seeds and scales, and a
clean real-text background that raises nothing; the action plane's cost on real text.

For each (scale, seed) the simulator runs ``--hours`` with its planted agents
(``service.sources.simulate``): one lockstep group (4 agents commenting on the same fresh
posts seconds apart in a fixed order, varied texts), ``--adapters`` agents that adapt to
feedback and ``--drifters`` agents whose topic moves. Events become acts through the
per-agent stage's router (:class:`streams.acts.ActRouter`); post vectors are a hashed bag of
words without English stop words (:func:`embed`: a fast stand-in for MiniLM, which runs at
about 12 posts/s on this machine's shared cores).

- lockstep (:class:`detectors.lockstep.LockstepDetector`, fed the items in event-time order,
  judged every 10 s of event time as the pipeline does): an incident is a true positive when
  at least ``min_agents`` of its agents are the planted group's and none is outside it;
  latency = event time from the group's start to the first finding;
- drift (:class:`streams.state.drift.DriftEngine`): the planted drifters' places in the drift
  ranking of every agent with at least ``--drift-min-posts`` (20) posts at the end of the run
  (D over two halves of fewer posts is mostly noise: the background's few-post agents would
  crowd the top); precision = recall = drifters among the top ``--drifters``;
- adaptation (:class:`streams.state.feedback.FeedbackEngine`, votes read once settled after
  the simulator's ``max_delay``): adapters whose Net Progress lies above the null's 95 % band;
  the background's share outside the band (about 5 % if agents ignore feedback);
- socialisation onset (:class:`detectors.socialisation.SocialisationDetector` on the merged
  feedback and impact population at the end): none with a couple of adapters in the society;
  and, per seed, a ``--society-scale`` (medium) society with ``--society-adapters`` (15)
  adapters, where the share of adapting agents exceeds its binomial null: the ``adapting``
  finding must come. The detector judges only from ``min_agents`` (30) agents with a scored
  window pair: a small society over 15 h can fall short of them (27 at seed 3).

The clean background is ``--real-events`` of ``bench/realtext.py``'s stream (real texts, real
shapes, its mint flood off): the lockstep detector must raise nothing, and the ActionEngine's
throughput (events/s over the routed acts, the router's time excluded) and its bytes per agent
(:meth:`ActionEngine.nbytes`, strings counted unshared, and tracemalloc beside it) are measured
there, beside the same figures on the simulator.

  .venv/bin/python bench/bench_planted_agents.py                  # 3 seeds, small and medium
  .venv/bin/python bench/bench_planted_agents.py --seeds 1 --scales small --real-events 50000
"""

from __future__ import annotations

import argparse
import hashlib
import re
import statistics
import sys
import time
import tracemalloc
from datetime import timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import realtext  # noqa: E402
from detectors.lockstep import LockstepDetector  # noqa: E402
from detectors.socialisation import SocialisationDetector  # noqa: E402
from service.sources.simulate import Label, ScenarioSpec, SimulationConfig, Simulator  # noqa: E402
from streams.acts import Act, ActRouter  # noqa: E402
from streams.events import Event, PostEvent  # noqa: E402
from streams.state.actions import ActionEngine  # noqa: E402
from streams.state.base import Item, Snapshot  # noqa: E402
from streams.state.drift import DriftConfig, DriftEngine  # noqa: E402
from streams.state.feedback import FeedbackConfig, FeedbackEngine  # noqa: E402
from streams.state.impact import ImpactEngine  # noqa: E402

SCALES = {"small": (2000, 300.0), "medium": (6000, 800.0)}  # agents, posts an hour
TICK_S = 10.0
MAX_DELAY = timedelta(hours=6)


_WORD = re.compile(r"[a-z]+")


def embed(text: str, dim: int = 384) -> np.ndarray:
    """A deterministic signed hashed bag of words, English stop words dropped, unit length."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    v = np.zeros(dim, dtype=np.float32)
    for w in _WORD.findall(text.lower()):
        if w not in ENGLISH_STOP_WORDS:
            h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "little")
            v[h % dim] += 1.0 if h & 1 << 31 else -1.0
    n = float(np.linalg.norm(v))
    return v / n if n else v


def planted(scale: str, seed: int, hours: float, adapters: int, drifters: int) -> Simulator:
    agents, rate = SCALES[scale]
    specs = [ScenarioSpec(name="lockstep")]
    specs += [ScenarioSpec(name="adapt", start=timedelta(minutes=60 + 20 * k))
              for k in range(adapters)]
    specs += [ScenarioSpec(name="drift", start=timedelta(minutes=60 + 15 * k))
              for k in range(drifters)]
    return Simulator(SimulationConfig(seed=seed, agents=agents, posts_per_hour=rate,
                                      duration=timedelta(hours=hours), max_delay=MAX_DELAY,
                                      scenarios=tuple(specs)))


def route(events: list[Event]) -> list[Act]:
    router, out = ActRouter(), []
    for e in events:
        vec = embed(e.text) if isinstance(e, PostEvent) else None
        out.extend(router.route(e, vec))
    return out


def lockstep(events: list[Event], group: set[str], min_agents: int
             ) -> tuple[int, int, float | None, float]:
    """(true incidents, false incidents, first true finding's time or None, wall seconds)."""
    d = LockstepDetector()
    seen: dict[str, set[str]] = {}
    first: dict[str, float] = {}
    tick = None
    items = [Item.of(e) for e in events]  # tokenised once, outside the timing (as the pipeline)
    start = time.perf_counter()
    for item in items:
        d.update(item)
        if tick is None or item.t >= tick + TICK_S:
            tick = item.t
            for f in d.findings(item.t):
                seen.setdefault(f.key, set()).update(f.evidence["agents"])
                first.setdefault(f.key, item.t)
    wall = time.perf_counter() - start
    good = {k for k, agents in seen.items() if agents <= group and len(agents) >= min_agents}
    t_first = min((first[k] for k in good), default=None)
    return len(good), len(seen) - len(good), t_first, wall


def lockstep_memory(events: list[Event]) -> tuple[float, int]:
    """(bytes per comment held in the window, comments held) at the end of ``events``, by
    tracemalloc (the items' own objects excluded: built before tracing)."""
    items = [Item.of(e) for e in events]
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    d = LockstepDetector()
    for item in items:
        d.update(item)
    d.expire(items[-1].t)
    traced = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    held = int(d.snapshot().value("lockstep_window_acts") or 0)
    return traced / max(held, 1), held


def drift_ranks(acts: list[Act], drifters: list[str], min_posts: int) -> tuple[list[int], int]:
    e = DriftEngine(DriftConfig(min_posts=min_posts))
    for a in acts:
        e.update(a)
    ranked = sorted(e.sort_keys()["drift"].items(), key=lambda kv: (-kv[1], kv[0]))
    place = {name: i + 1 for i, (name, _) in enumerate(ranked)}
    return [place.get(d, 10**9) for d in drifters], len(ranked)


def feedback(acts: list[Act], adapters: list[str]) -> tuple[int, float, int]:
    """(adapters above the band, background share outside it, background agents judged)."""
    e = FeedbackEngine(FeedbackConfig(settle_s=MAX_DELAY.total_seconds()))
    for a in acts:
        e.update(a)
    e.expire(max(a.t for a in acts) + MAX_DELAY.total_seconds() + 1)
    above = 0
    outside = judged = 0
    for name in {a.agent for a in acts}:
        p = e.profile(name)
        if p is None or p["np"] is None:
            continue
        if name in adapters:
            above += p["np"] > p["np_null_high"]
        else:
            judged += 1
            outside += bool(p["outside_null"])
    return above, outside / judged if judged else float("nan"), judged


def socialisation(acts: list[Act], settle_s: float) -> tuple[list[str], int, int]:
    """The socialisation detector's finding keys on the merged feedback and impact population
    once every window pair has settled; the agents with a scored window pair and the impact
    events it judged."""
    fb, im = FeedbackEngine(FeedbackConfig(settle_s=settle_s)), ImpactEngine()
    for a in acts:
        fb.update(a)
        im.update(a)
    end = max(a.t for a in acts) + settle_s + 1
    fb.expire(end)
    im.expire(end)
    d = SocialisationDetector()
    snap = Snapshot.merge([fb.snapshot(), im.snapshot()])
    d.observe(end, snap)
    agents = int((snap.details.get("feedback") or {}).get("agents") or 0)
    events = int((snap.details.get("impact") or {}).get("events") or 0)
    return sorted(f.key for f in d.findings(end)), agents, events


def action_cost(events: list[Event], acts: list[Act]
                ) -> tuple[float, float, float, float, tuple[float, float]]:
    """(events/s, acts/s, bytes per agent by nbytes, bytes per agent by tracemalloc, seconds
    for the first ``partial()`` and for the next one, each agent's figures then cached: what
    each partition computes per publication)."""
    e = ActionEngine()
    start = time.perf_counter()
    for a in acts:
        e.update(a)
    wall = time.perf_counter() - start
    agents = len(e._agents)
    times = []
    for _ in range(2):
        start = time.perf_counter()
        e.partial()
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    f = ActionEngine()
    for a in acts:  # strings shared with the acts: tracemalloc sees the engine's own objects
        f.update(a)
    traced = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return len(events) / wall, len(acts) / wall, e.nbytes() / agents, traced / agents, (
        times[0], times[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--scales", nargs="+", default=["small", "medium"], choices=list(SCALES))
    ap.add_argument("--hours", type=float, default=15.0)
    ap.add_argument("--adapters", type=int, default=2)
    ap.add_argument("--drifters", type=int, default=3)
    ap.add_argument("--drift-min-posts", type=int, default=20)
    ap.add_argument("--society-adapters", type=int, default=15)
    ap.add_argument("--society-scale", default="medium", choices=list(SCALES))
    ap.add_argument("--real-events", type=int, default=150_000)
    args = ap.parse_args()

    rows = []
    for scale in args.scales:
        for seed in args.seeds:
            t0 = time.perf_counter()
            sim = planted(scale, seed, args.hours, args.adapters, args.drifters)
            events = list(sim)
            labels: dict[str, list[Label]] = {}
            for lab in sim.labels:
                labels.setdefault(lab.scenario, []).append(lab)
            acts = route(events)
            group = labels["lockstep"][0]
            tp, fp, t_first, wall = lockstep(events, set(group.agents), 3)
            latency = None if t_first is None else t_first - group.start.timestamp()
            drifters = [lab.agents[0] for lab in labels["drift"]]
            ranks, ranked = drift_ranks(acts, drifters, args.drift_min_posts)
            adapters = [lab.agents[0] for lab in labels["adapt"]]
            above, bg_outside, judged = feedback(acts, adapters)
            ev_s, acts_s, nbytes, traced, _ = action_cost(events, acts)
            social = socialisation(acts, MAX_DELAY.total_seconds())[0]
            rows.append((scale, seed, len(events), tp, fp, latency, ranks, ranked, above,
                         bg_outside, judged, ev_s, nbytes, social))
            print(f"{scale:6} seed {seed}: {len(events):,} events, {len(acts):,} acts "
                  f"({time.perf_counter() - t0:.0f} s) | lockstep TP {tp} FP {fp} latency "
                  f"{'-' if latency is None else f'{latency / 60:.0f} min'} (detector "
                  f"{len(events) / wall:,.0f} events/s) | drifters' ranks {ranks} of {ranked}"
                  f" | adapters above the band {above}/{len(adapters)}, background outside "
                  f"{bg_outside:.1%} of {judged} | socialisation {social or 'none'} | action "
                  f"engine {ev_s:,.0f} events/s, {nbytes:,.0f} B/agent ({traced:,.0f} traced)",
                  flush=True)

    print()
    print(f"{'detector':10} {'recall':>8} {'precision':>9} {'latency med/max (min)':>22}")
    runs = len(rows)
    caught = sum(r[3] > 0 for r in rows)
    incidents = sum(r[3] + r[4] for r in rows)
    lats = [r[5] / 60 for r in rows if r[5] is not None]
    print(f"{'lockstep':10} {caught:>4}/{runs:<3} "
          f"{(sum(r[3] for r in rows) / incidents if incidents else float('nan')):>9.2f} "
          f"{(f'{statistics.median(lats):.0f}/{max(lats):.0f}' if lats else '-'):>22}")
    k = args.drifters
    top = sum(sum(rank <= k for rank in r[6]) for r in rows)
    print(f"{'drift':10} {top:>4}/{k * runs:<3} {top / (k * runs):>9.2f} "
          f"{'(top-' + str(k) + ' at the end)':>22}")
    adapted = sum(r[8] for r in rows)
    print(f"{'adapt':10} {adapted:>4}/{args.adapters * runs:<3} {'-':>9} "
          f"{'(settled at the end)':>22}   background outside the band: "
          f"{statistics.mean(r[9] for r in rows):.1%} (about 5 % expected)")
    social_runs = []
    for seed in args.seeds:
        sim = planted(args.society_scale, seed, args.hours, args.society_adapters, 0)
        social_runs.append(socialisation(route(list(sim)), MAX_DELAY.total_seconds())[:2])
    caught = sum("adapting" in keys for keys, _ in social_runs)
    judged = ", ".join(str(n) for _, n in social_runs)
    false = sum(bool(r[13]) for r in rows)
    print(f"{'social':10} {caught:>4}/{len(social_runs):<3} {'-':>9} "
          f"{'(settled at the end)':>22}   with {args.society_adapters} adapters in a "
          f"{args.society_scale} society ({judged} agents judged); findings with "
          f"{args.adapters}: {false}/{runs} runs")

    # -- the clean real-text background ----------------------------------------------------
    cfg = realtext.RealTextConfig(seed=args.seeds[0], scale=realtext.scale_for(args.real_events),
                                  flood_accounts=0)
    real = list(realtext.RealTextStream(cfg, max_events=args.real_events))
    real_acts = route(real)
    _, fp, _, wall = lockstep(real, set(), 3)
    per_act, held = lockstep_memory(real)
    ev_s, acts_s, nbytes, traced, partial_s = action_cost(real, real_acts)
    agents = len({a.agent for a in real_acts})
    print()
    print(f"real text: {len(real):,} events ({real[0].event_time:%Y-%m-%d %H:%M} .. "
          f"{real[-1].event_time:%Y-%m-%d %H:%M}), {len(real_acts):,} acts, {agents:,} agents")
    keys, fb_agents, im_events = socialisation(real_acts, 48 * 3600.0)
    print(f"  socialisation findings on the clean background: {keys or 'none'} ({fb_agents} "
          f"agents with a scored window pair, {im_events} impact events)")
    print(f"  lockstep alerts on the clean background: {fp} (detector {len(real) / wall:,.0f} "
          f"events/s; {held:,} comments in its window, {per_act:,.0f} bytes each with the "
          f"pair counts, by tracemalloc)")
    print(f"  action engine: {ev_s:,.0f} events/s ({acts_s:,.0f} acts/s), {nbytes:,.0f} "
          f"bytes/agent by nbytes ({traced:,.0f} traced, strings shared); partial() "
          f"{partial_s[0] * 1000:,.0f} ms for {agents:,} agents, {partial_s[1] * 1000:,.0f} ms "
          f"again (cached)")
    sim_ev_s = statistics.mean(r[11] for r in rows)
    sim_bytes = statistics.mean(r[12] for r in rows)
    print(f"  real / simulator: events/s {ev_s / sim_ev_s:.2f}x, bytes/agent "
          f"{nbytes / sim_bytes:.2f}x")


if __name__ == "__main__":
    main()

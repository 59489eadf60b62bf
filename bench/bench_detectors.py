"""Detector benchmark: every planted scenario of the simulator, several seeds and scales, on the
simulator's own background or on a real-text one.

For each (scale, seed) it runs one day with all five scenarios planted and one clean day (same
seed, no scenario), feeds the items in event-time order to a DetectorSuite as the pipeline does
(``update(Item.of(event, vector))``, ``expire`` and ``evaluate`` every 10 s of event time; post
embeddings from a hashed bag of words by default, ``--embedder minilm`` for the real model),
and matches alerts to the simulator's ground-truth labels.

``--background real`` (issue 10 item 7): the background is the real-text stream of
``bench/realtext.py`` (real Moltbook texts resampled, real shapes, at ``--real-scale``; its own
mint flood off), and the scenarios are overlaid on it: the events of the planted simulation
that its clean twin does not have (same id and text), moved to the real stream's clock, plus
the planted agents' whole history (a drift needs the agent's earlier posts); a collapse removes
that share of the real comments and vote changes in its window. The clean run is
``--clean-days`` (7) of the real stream alone: it must raise nothing.

Matching:

  surge -> surge alert naming the token, contract or mint URL
  supernode -> supernode alert on the planted agent
  burst -> burst alert whose n-gram shares a word with the planted phrase
  drift -> shift alert on the drifting agent
  collapse -> engagement alert in direction "down"

An alert is a true positive if it matches a label of its detector and starts inside the
scenario window (+ ``--grace``); one that overlaps another scenario's window but matches none is
counted as "cross" (a real side effect: a mint flood does change the new-agent rate); all
others are false. Clean days must give none. Latency is event time from the scenario start to
the alert's start, and, for the surge, from the post that made it detectable (the one that
brought ``min_posts`` posts from ``min_accounts`` accounts); ``wall`` is the processing cost.

  .venv/bin/python bench/bench_detectors.py                    # 2 seeds, small
  .venv/bin/python bench/bench_detectors.py --seeds 0 1 2 3 --scales small default
  .venv/bin/python bench/bench_detectors.py --background real --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import random
import re
import statistics
import sys
import time
import tracemalloc
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import realtext  # noqa: E402

from detectors.alert import Alert  # noqa: E402
from detectors.runner import DetectorSuite  # noqa: E402
from service.sources.simulate import (  # noqa: E402
    SCENARIOS,
    Label,
    ScenarioSpec,
    SimulationConfig,
    Simulator,
)
from streams.events import CommentEvent, Event, PostEvent, VoteEvent  # noqa: E402
from streams.state.base import Item  # noqa: E402

SCALES = {"small": (3_000, 250.0), "default": (20_000, 600.0), "large": (40_000, 1200.0)}
DETECTOR_OF = {"surge": "surge", "supernode": "supernode", "burst": "burst", "drift": "shift",
               "collapse": "engagement"}
_TOKEN = re.compile(r"\w+")
TICK_S = 10.0  # the pipeline's evaluation tick (event time)


def hash_embed(text: str, dim: int = 256) -> np.ndarray:
    """A deterministic hashed bag of words (a fast stand-in for MiniLM in the benchmark)."""
    v = np.zeros(dim, dtype=np.float32)
    for w in _TOKEN.findall(text.lower()):
        h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "little")
        v[h % dim] += 1.0 if h & 1 << 31 else -1.0
    return v


def matches(alert: Alert, label: Label) -> bool:
    if DETECTOR_OF[label.scenario] != alert.type:
        return False
    d, ev = label.details, alert.evidence
    if label.scenario == "surge":
        wanted = {d["token"].lstrip("$").upper(), d["contract"], d["mint_url"].split("//")[1]}
        names = [alert.key, *ev.get("related_entities", [])]
        return any(n.split(":", 1)[1].upper() in {w.upper() for w in wanted}
                   or any(w.upper() in n.upper() for w in wanted) for n in names)
    if label.scenario == "supernode":
        return ev.get("agent") == d["supernode"]
    if label.scenario == "burst":
        return bool(set(ev.get("ngram", "").split()) & set(d["phrase"].split()))
    if label.scenario == "drift":
        return ev.get("agent") in label.agents
    return ev.get("direction") == "down"


def simulate(scale: str, seed: int, planted: bool, hours: float) -> Simulator:
    agents, rate = SCALES[scale]
    specs = tuple(ScenarioSpec(name=n) for n in SCENARIOS) if planted else ()
    return Simulator(SimulationConfig(seed=seed, agents=agents, posts_per_hour=rate,
                                      duration=timedelta(hours=hours), scenarios=specs))


def real_background(seed: int, days: float, scale: float) -> realtext.RealTextStream:
    cfg = realtext.RealTextConfig(seed=seed, scale=scale, flood_accounts=0)
    n = int(sum(cfg.events_per_day(d) for d in range(int(days) + 1)) * 1.1)
    return realtext.RealTextStream(cfg, max_events=n)


def overlay(scale: str, seed: int, args: argparse.Namespace) -> tuple[list[Event], list[Label]]:
    """The planted scenarios of the simulator over the real-text background (module doc)."""
    planted = simulate(scale, seed, True, args.hours)
    clean = {(e.id, getattr(e, "text", None)) for e in simulate(scale, seed, False, args.hours)}
    sim_events = list(planted)
    labels = planted.labels
    who = {a for lab in labels if lab.scenario == "drift" for a in lab.agents}
    extra = [e for e in sim_events if (e.id, getattr(e, "text", None)) not in clean
             or getattr(e, "author", None) in who]
    bg = real_background(seed, args.hours / 24, args.real_scale)
    shift = bg.config.start - sim_events[0].event_time
    moved = [e.model_copy(update={"event_time": e.event_time + shift,
                                  "observed_at": e.observed_at + shift}) for e in extra]
    labels = [lab.model_copy(update={"start": lab.start + shift, "end": lab.end + shift})
              for lab in labels]
    collapse = [(lab.start, lab.end) for lab in labels if lab.scenario == "collapse"]
    share = ScenarioSpec(name="collapse").intensity
    rng = random.Random(seed)
    end = moved[-1].event_time if moved else bg.config.start + timedelta(hours=args.hours)

    def background() -> list[Event]:
        out = []
        for e in bg:
            if e.event_time > end:
                break
            if isinstance(e, CommentEvent | VoteEvent) and any(
                    a <= e.event_time <= b for a, b in collapse) and rng.random() < share:
                continue
            out.append(e)
        return out

    merged = list(heapq.merge(background(), moved, key=lambda e: e.event_time))
    return merged, labels


def run(scale: str, seed: int, planted: bool, args: argparse.Namespace) -> dict:
    labels: list[Label] = []
    if args.background == "sim":
        sim = simulate(scale, seed, planted, args.hours)
        events: list[Event] | Simulator = sim
    elif planted:
        events, labels = overlay(scale, seed, args)
    else:
        events = list(real_background(seed, args.clean_days, args.real_scale))
    embed = hash_embed
    if args.embedder == "minilm":
        from sentence_transformers import SentenceTransformer
        model = SentenceTransformer("all-MiniLM-L6-v2", device="cpu")

        def embed(text: str) -> np.ndarray:
            return model.encode([text])[0]

    suite = DetectorSuite()
    alerts: list[Alert] = []
    detect_wall: list[float] = []
    n_events = 0
    first_detectable: dict[str, float] = {}
    surge_posts: dict[str, set[str]] = defaultdict(set)
    last: float | None = None
    tracemalloc.start()
    t_start = time.perf_counter()
    for event in events:
        n_events += 1
        vector = embed(event.text) if isinstance(event, PostEvent) else None
        item = Item.of(event, vector)
        suite.update(item)
        if isinstance(event, PostEvent) and "mbc-20" in event.content \
                and "surge" not in first_detectable and "CA:" in event.content:
            surge_posts["accounts"].add(event.author or "")
            surge_posts["posts"].add(event.post_id)
            cfg = suite.cfg.surge
            if (len(surge_posts["posts"]) >= cfg.min_posts
                    and len(surge_posts["accounts"]) >= cfg.min_accounts):
                first_detectable["surge"] = item.t
        if last is None or item.t - last >= TICK_S:
            last = item.t
            w0 = time.perf_counter()
            suite.expire(item.t)
            new = suite.evaluate(item.t)
            detect_wall.append(time.perf_counter() - w0)
            alerts.extend(a for a in new if a.state == "firing")
    wall = time.perf_counter() - t_start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if isinstance(events, Simulator):
        labels = events.labels
    return {"alerts": alerts, "labels": labels, "events": n_events, "wall": wall,
            "peak_mb": peak / 2**20, "detectable": first_detectable,
            "eval_p99_ms": 1000 * float(np.percentile(detect_wall, 99))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--scales", nargs="+", default=["small"], choices=list(SCALES))
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--grace", type=float, default=3600.0, help="seconds after a window's end")
    ap.add_argument("--embedder", choices=["hash", "minilm"], default="hash")
    ap.add_argument("--show", action="store_true", help="print every alert")
    ap.add_argument("--background", choices=["sim", "real"], default="sim")
    ap.add_argument("--real-scale", type=float, default=0.05,
                    help="real-text stream scale (1 = a 200k-post peak day)")
    ap.add_argument("--clean-days", type=float, default=7.0,
                    help="length of the clean real-text run")
    args = ap.parse_args()

    tp: dict[str, int] = defaultdict(int)
    fp: dict[str, int] = defaultdict(int)
    cross: dict[str, int] = defaultdict(int)
    clean_fp: dict[str, int] = defaultdict(int)
    caught: dict[str, int] = defaultdict(int)
    planted: dict[str, int] = defaultdict(int)
    latency: dict[str, list[float]] = defaultdict(list)
    detect_latency: list[float] = []
    print(f"{'scale':8} {'seed':>4} {'run':6} {'events':>7} {'wall s':>7} {'ev/s':>7} "
          f"{'peak MB':>8} {'eval p99 ms':>11} alerts")
    for scale in args.scales:
        for seed in args.seeds:
            for is_planted in (True, False):
                r = run(scale, seed, is_planted, args)
                print(f"{scale:8} {seed:>4} {'plant' if is_planted else 'clean':6} "
                      f"{r['events']:>7} {r['wall']:>7.1f} {r['events'] / r['wall']:>7.0f} "
                      f"{r['peak_mb']:>8.1f} {r['eval_p99_ms']:>11.2f} "
                      f"{', '.join(f'{a.type}:{a.key}' for a in r['alerts']) or '-'}")
                if args.show:
                    for a in r["alerts"]:
                        print(f"    {a.starts_at:%H:%M:%S} {a.type} {a.key} {a.summary}")
                if not is_planted:
                    for a in r["alerts"]:
                        clean_fp[a.type] += 1
                    continue
                labels: list[Label] = r["labels"]
                for lab in labels:
                    planted[lab.scenario] += 1
                for a in r["alerts"]:
                    t = a.starts_at
                    hit = [lab for lab in labels if matches(a, lab)
                           and lab.start <= t <= lab.end + timedelta(seconds=args.grace)]
                    if hit:
                        tp[a.type] += 1
                    elif any(lab.start <= t <= lab.end + timedelta(seconds=args.grace)
                             for lab in labels):
                        cross[a.type] += 1
                    else:
                        fp[a.type] += 1
                for lab in labels:
                    found = [a for a in r["alerts"] if matches(a, lab)
                             and lab.start <= a.starts_at
                             <= lab.end + timedelta(seconds=args.grace)]
                    if found:
                        caught[lab.scenario] += 1
                        first = min(a.starts_at for a in found)
                        latency[lab.scenario].append((first - lab.start).total_seconds())
                        if lab.scenario == "surge" and "surge" in r["detectable"]:
                            detect_latency.append(first.timestamp() - r["detectable"]["surge"])
    print()
    print(f"{'scenario':10} {'detector':11} {'recall':>9} {'precision':>9} {'cross':>5} "
          f"{'false':>5} {'clean FP':>8} {'latency from start (s) med/max':>31}")
    for sc in SCENARIOS:
        det = DETECTOR_OF[sc]
        n_alerts = tp[det] + fp[det] + clean_fp[det]
        prec = f"{tp[det] / n_alerts:.2f}" if n_alerts else "n/a"
        lat = latency[sc]
        lat_s = f"{statistics.median(lat):.0f}/{max(lat):.0f}" if lat else "-"
        print(f"{sc:10} {det:11} {caught[sc]:>4}/{planted[sc]:<4} {prec:>9} {cross[det]:>5} "
              f"{fp[det]:>5} {clean_fp[det]:>8} {lat_s:>31}")
    if detect_latency:
        print(f"surge: from the post that made it detectable to the alert, event time: "
              f"median {statistics.median(detect_latency):.1f} s, "
              f"max {max(detect_latency):.1f} s (evaluation every {TICK_S:g} s of event time)")


if __name__ == "__main__":
    main()

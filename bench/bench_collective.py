"""Collective layer benchmark: the sliding-window PageRank kept current against recomputing
networkx.pagerank on the same window, events/s of the graph, thread and cascade state, and
memory against agents and window edges. Everything is measured in this one run.

    .venv/bin/python bench/bench_collective.py            # 100k-interaction window, ~2 min
    .venv/bin/python bench/bench_collective.py --edges 30000 --agents 6000 --batches 10

Per window step the incremental side does `WindowPageRank.apply(delta)` + `vector()`
(warm-started power iteration to an L1 change below 1e-3); the batch side applies the same
delta to a networkx DiGraph (not timed) and runs `networkx.pagerank` on it (timed). Each step
is checked for L1 distance and top-10 overlap against that networkx result.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import networkx as nx
import numpy as np

from service.sources.normalise import event_items, normalise_post_detail
from streams.events import CommentEvent, PostEvent
from streams.state.base import Item
from streams.state.cascades import CascadeConfig, CascadeEngine
from streams.state.graph import Interaction, InteractionGraph, synthetic_interactions
from streams.state.pagerank import WindowPageRank, pagerank_exact
from streams.state.threads import ThreadsEngine

WINDOW = timedelta(hours=24)


def window_run(edges: list[Interaction], step: timedelta, batches: int) -> dict[str, float]:
    """Fill the window, then time `batches` steps of both sides on identical windows."""
    g = InteractionGraph(window=WINDOW)
    mc = WindowPageRank()
    ng = nx.DiGraph()
    start = edges[0].time
    due = start + WINDOW.total_seconds()
    ours, theirs, l1s, tops, sizes, l1x, l1nx = [], [], [], [], [], [], []
    for e in edges:
        if e.time >= due:
            g.expire(e.time)
            delta = g.drain_delta()
            for (u, v), d in delta.items():
                w = (ng[u][v]["weight"] if ng.has_edge(u, v) else 0) + d
                if w:
                    ng.add_edge(u, v, weight=w)
                else:
                    ng.remove_edge(u, v)
            for n in [n for n in ng if ng.degree(n) == 0]:
                ng.remove_node(n)
            t0 = time.perf_counter()
            mc.apply(delta)
            names, p = mc.vector()
            t1 = time.perf_counter()
            if due > start + WINDOW.total_seconds():  # the first step builds the whole window
                ref = nx.pagerank(ng, alpha=0.85)
                t2 = time.perf_counter()
                ours.append(t1 - t0)
                theirs.append(t2 - t1)
                sizes.append(sum(abs(d) for d in delta.values()))
                est = dict(zip(names, p.tolist(), strict=True))
                l1s.append(sum(abs(est.get(k, 0.0) - v) for k, v in ref.items()))
                fixed = pagerank_exact(g.window)  # networkx's semantics, to 1e-12
                l1x.append(sum(abs(est.get(k, 0.0) - v) for k, v in fixed.items()))
                l1nx.append(sum(abs(ref[k] - v) for k, v in fixed.items()))
                top = sorted(ref, key=ref.get, reverse=True)[:10]  # type: ignore[arg-type]
                mine = sorted(est, key=est.get, reverse=True)[:10]  # type: ignore[arg-type]
                tops.append(len(set(top) & set(mine)) / 10)
                if len(ours) >= batches:
                    break
            due = e.time + step.total_seconds()
        g.add(e)
    return {"window_interactions": sum(g.window.values()), "window_edges": len(g.window),
            "agents": mc.n_nodes, "batch_units": statistics.median(sizes),
            "ours_ms": 1e3 * statistics.median(ours), "nx_ms": 1e3 * statistics.median(theirs),
            "ratio": statistics.median(theirs) / statistics.median(ours),
            "l1_max": max(l1s), "l1_mean": float(np.mean(l1s)), "top10_min": min(tops),
            "l1_fixed_max": max(l1x), "l1_nx_fixed_max": max(l1nx),
            "iterations": mc.iterations}


def real_texts() -> list[str]:
    """Texts of the real archived threads (../shared/data/moltbook), recycled as comments."""
    posts = Path(__file__).resolve().parents[1].parent / "shared/data/moltbook/api/posts"
    out = []
    for path in sorted(posts.glob("*.json")):
        events, _ = event_items(normalise_post_detail(path.read_bytes(), origin=str(path)))
        out += [e.text for e in events if isinstance(e, PostEvent | CommentEvent) and e.text]
    return out


def rate(n: int, fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return n / (time.perf_counter() - t0)


def memory(fn: Callable[[], object]) -> tuple[object, int]:
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    obj = fn()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return obj, used


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--edges", type=int, default=100_000, help="interactions per 24 h window")
    ap.add_argument("--agents", type=int, default=20_000)
    ap.add_argument("--steps", default="1,5", help="window steps to compare, minutes")
    ap.add_argument("--batches", type=int, default=20, help="measured steps per setting")
    ap.add_argument("--events", type=int, default=50_000, help="events for the rates")
    args = ap.parse_args()

    hours = 26
    edges = synthetic_interactions(args.edges * hours // 24, args.agents, timedelta(hours=hours),
                                   seed=3)
    print(f"# sliding-window PageRank: window 24 h, {args.edges} interactions/window, "
          f"{args.agents} agents")
    print(f"{'step':>6} {'units/batch':>11} {'ours ms':>9} {'nx ms':>9} {'nx/ours':>8} "
          f"{'L1 max':>7} {'L1 mean':>8} {'top10 min':>9} {'L1* ours':>8} {'L1* nx':>7}")
    for minutes in (int(s) for s in args.steps.split(",")):
        r = window_run(edges, timedelta(minutes=minutes), args.batches)
        print(f"{minutes:>4}min {r['batch_units']:>11.0f} {r['ours_ms']:>9.1f} "
              f"{r['nx_ms']:>9.1f} {r['ratio']:>7.1f}x {r['l1_max']:>7.4f} "
              f"{r['l1_mean']:>8.4f} {r['top10_min']:>9.1f} {r['l1_fixed_max']:>8.4f} "
              f"{r['l1_nx_fixed_max']:>7.4f}")
    print("  L1 = vs networkx.pagerank (default tol); L1* = max distance of ours / of networkx"
          " from the fixed point (power iteration to 1e-12)")
    print(f"  (window: {r['window_interactions']} interactions, {r['window_edges']} distinct "
          f"edges, {r['agents']} agents, {r['iterations']} iterations at the last step)")

    # events/s of each state, on synthetic comments with real-looking text
    n = args.events
    inter = synthetic_interactions(n, args.agents, timedelta(hours=24), seed=5)
    texts = real_texts()
    comments = [Item.of(CommentEvent(id=f"comment:{i}", event_time=_dt(e.time),
                                     observed_at=_dt(e.time), comment_id=str(i),
                                     post_id=f"p{i % (n // 8)}", author=e.src, reply_to=e.dst,
                                     depth=1 + (i % 7 == 0), content=texts[i % len(texts)]))
                for i, e in enumerate(inter)]
    t0 = _dt(inter[0].time)
    posts = [Item.of(PostEvent(id=f"post:p{j}", event_time=t0, observed_at=t0,
                               post_id=f"p{j}", author=f"agent{j}", upvotes=j % 50))
             for j in range(n // 8)]
    g = InteractionGraph()
    th = ThreadsEngine()
    ca = CascadeEngine(CascadeConfig(), graph=g)
    words = sum(len(t.split()) for t in texts) / len(texts)
    print(f"\n# events/s ({n} comments, texts of the real threads, {words:.0f} words on average;"
          f" {len(posts)} posts)")
    print(f"  graph   {rate(n, lambda: [g.update(c) for c in comments]):>10,.0f}")
    stream = [*posts, *comments]
    print(f"  threads {rate(len(stream), lambda: [th.update(e) for e in stream]):>10,.0f}")
    print(f"  cascade {rate(n, lambda: [ca.update(c) for c in comments]):>10,.0f}"
          f"   ({len(ca.sizes())} cascades, {ca.tracked()} n-grams tracked)")
    t0 = time.perf_counter()
    ca.analyse()
    print(f"  cascade analysis (fit of {len(ca.sizes())} sizes + exposure of the "
          f"{ca.config.exposure_cascades} largest): {time.perf_counter() - t0:.2f} s")

    print("\n# memory (tracemalloc) vs window size")
    print(f"{'interactions':>12} {'edges':>7} {'agents':>7} {'graph MB':>9} {'PR MB':>7} "
          f"{'B/edge(graph)':>13} {'B/agent(PR)':>11}")
    for frac in (0.25, 0.5, 1.0):
        m = int(args.edges * frac)
        sub = synthetic_interactions(m, int(args.agents * frac), timedelta(hours=23), seed=7)

        def build_graph(sub: list[Interaction] = sub) -> InteractionGraph:
            gg = InteractionGraph()
            for e in sub:
                gg.add(e)
            return gg

        gg, gmem = memory(build_graph)
        delta = gg.drain_delta()  # type: ignore[attr-defined]
        mc, pmem = memory(lambda delta=delta: _built(delta))
        e_, a_ = len(delta), mc.n_nodes  # type: ignore[attr-defined]
        print(f"{m:>12} {e_:>7} {a_:>7} {gmem / 2**20:>9.1f} {pmem / 2**20:>7.1f} "
              f"{gmem / e_:>13.0f} {pmem / a_:>11.0f}")
    part = stream[: len(stream) // 4]
    th2, tmem = memory(lambda: _fed(ThreadsEngine(), part))
    print(f"  threads: {tmem / 2**20:.1f} MB for {len(th2._live)} live posts "  # type: ignore[attr-defined]
          f"({tmem / len(th2._live):.0f} B/post incl. repliers)")  # type: ignore[attr-defined]
    few = comments[: n // 10]
    # the engine's own accounting: its pairs are buffered until a merge, which tracked() forces
    ca2 = _fed(CascadeEngine(CascadeConfig(), graph=InteractionGraph()), few)
    grams, cbytes = ca2.tracked(), ca2.nbytes()
    print(f"  cascades: {cbytes / 2**20:.1f} MB for {grams} n-grams, "
          f"{ca2.adoptions_total} adoptions ({cbytes / ca2.adoptions_total:.0f} B/adoption)")


def _fed(engine: object, events: list) -> object:
    for e in events:
        engine.update(e)  # type: ignore[attr-defined]
    return engine


def _built(delta: dict) -> WindowPageRank:
    mc = WindowPageRank()
    mc.apply(delta)
    mc.vector()
    return mc


def _dt(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


if __name__ == "__main__":
    main()

"""The society stage on real Moltbook text: events/s of the whole Pipeline (model off), of each
engine and each detector, on the real-text stream and on simulator text, side by side.

The stream is ``bench/realtext.py`` (real texts, resampled authors, threads and pace; a normal
day then the peak day with a planted mint flood; ``--scale`` defaults to the one at which
``--events`` cover those two days). The simulator-text stream has the same shapes with the
synthetic society's texts. Events are generated in chunks before they are timed (generation is
timed apart: it is not the pipeline's cost), so memory stays flat.

Every figure is CPU time of the measuring process (``time.process_time``): the machine is
shared, so wall time says more about the neighbours than about the code. Each measurement runs
in its own child process (a clean peak RSS):

* ``pipeline``: ``Pipeline(PipelineConfig(embed=False))`` driven as the replay drives it
  (``update`` then ``advance()`` each event: engines expire and detectors evaluate once per 10 s
  of event time); per-event cost over the first and the last window of ``--events / 10`` events
  (at least 100k at the default 1 M: "at 100k and at 1 M"); peak RSS; each engine's pickled state
  (the checkpoint's bytes) and the memory extrapolated to a Moltbook peak day;
* ``shares``: the same pipeline with each engine and detector timed in place: its share of the
  pipeline's time (target: none over 25 %);
* ``alone``: each engine and each detector on its own, driven through the Engine contract
  (``update(Item.of(event))``, ``expire(t)`` every 10 s of event time; detectors also
  ``findings(t)``), fed the same pre-built items; an engine that reads another's state (the
  graph of the influence engine, the verbatim filter's admission) gets it fed untimed. An engine
  not yet on the contract is skipped with a note.

    .venv/bin/python bench/bench_realtext.py --quick          # 100k events, a minute or two
    .venv/bin/python bench/bench_realtext.py                  # 1 M events
    .venv/bin/python bench/bench_realtext.py --quick --only real --parts pipeline
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import inspect
import json
import os
import pickle
import resource
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The code measured: this checkout's, or the tree that bench/bench_compare.py names (a base
# revision's worktree); the stream generator is this checkout's either way (the same events).
TREE_ENV = "MOLTSCOPE_BENCH_TREE"
TREE = Path(os.environ.get(TREE_ENV) or ROOT).resolve()
sys.path.insert(0, str(TREE))
if TREE != ROOT:
    _spec = importlib.util.spec_from_file_location("bench.realtext", ROOT / "bench" / "realtext.py")
    assert _spec is not None and _spec.loader is not None
    realtext = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = realtext  # its dataclasses look their module up
    _spec.loader.exec_module(realtext)
else:
    from bench import realtext
from streams.events import Event  # noqa: E402
from streams.state.base import Item  # noqa: E402

OLD_RATE = 160.0  # events/s of the pipeline on real text before issue 10 (the figure)
TARGET_RATE = 10_000.0
TICK_S = 10.0
PEAK_DAY = {"posts": 200_000, "comments": 500_000, "agents": 100_000}
MEMORY_BUDGET = 4 * 2**30
# Engines that read another engine's state, fed untimed before them when run alone.
NEEDS = {"cascades": ("influence",), "roles": ("influence",)}


def rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def chunks(text: str, n: int, seed: int, scale: float, size: int,
           gen_time: list[float], flat: bool = False) -> Iterator[list[Event]]:
    """The stream in lists of ``size``; generation time is added to ``gen_time[0]``.
    ``flat``: every day at the peak day's pace."""
    corpus = realtext.load_corpus() if text == "real" else realtext.simulator_corpus(seed)
    extra = {"normal_share": 1.0} if flat else {}
    it = realtext.stream(n, seed=seed, scale=scale, corpus=corpus, **extra)
    while True:
        t0 = time.process_time()
        chunk = list(islice(it, size))
        gen_time[0] += time.process_time() - t0
        if not chunk:
            return
        yield chunk


def make_pipeline() -> Any:
    from streams.pipeline import Pipeline, PipelineConfig

    return Pipeline(PipelineConfig(embed=False))


def named_parts(p: Any) -> dict[str, Any]:
    """The pipeline's engines by attribute name, its detector suite expanded into detectors."""
    names = {id(v): k for k, v in vars(p).items()}
    out = {names.get(id(e), type(e).__name__): e for e in p.engines}
    suite = getattr(p, "detectors", None)
    if suite is not None and hasattr(suite, "detectors"):
        out.pop(names.get(id(suite), ""), None)
        out.update({f"detector:{k}": d for k, d in suite.detectors.items()})
    return out


# ------------------------------------------------------------------ children


def child_pipeline(args: argparse.Namespace) -> dict[str, Any]:
    gen = [0.0]
    p = make_pipeline()
    off = drop_off_contract(p)
    if args.text == "real":
        realtext.load_corpus()
    else:
        realtext.simulator_corpus(args.seed)
    base_rss = rss_bytes()  # interpreter, imports, corpus and an empty pipeline
    n, window = 0, max(1, args.events // 10)
    busy = 0.0
    marks: list[tuple[int, float, float]] = []  # (events, busy seconds, event time)
    size = min(args.chunk, window)  # the windows' edges fall on chunk edges
    alerts: list[Any] = []
    for chunk in chunks(args.text, args.events, args.seed, args.scale, size, gen,
                        args.flat):
        if not marks:
            marks.append((0, 0.0, chunk[0].event_time.timestamp()))
        t0 = time.process_time()
        for e in chunk:
            p.update(e)
            if out := p.advance():
                alerts += out
        busy += time.process_time() - t0
        n += len(chunk)
        marks.append((n, busy, chunk[-1].event_time.timestamp()))
        del chunk
    alerts += p.close()
    a, b = marks[0], next(m for m in marks if m[0] >= window)
    c, d = next(m for m in reversed(marks) if m[0] <= n - window), marks[-1]

    def cost(x: tuple[int, float, float], y: tuple[int, float, float]) -> tuple[float, float]:
        """us an event and events an hour of event time between two marks."""
        k = max(y[0] - x[0], 1)
        return (y[1] - x[1]) / k * 1e6, k / max(y[2] - x[2], 1e-9) * 3600

    (first, first_pace), (last, last_pace) = cost(a, b), cost(c, d)
    states = pickled_sizes(p)
    empty = pickled_sizes(make_pipeline())
    try:
        whole = len(pickle.dumps(p, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001
        whole = None
    return {"events": n, "seconds": busy, "rate": n / busy, "gen_seconds": gen[0],
            "first_us": first, "last_us": last, "window": window,
            "first_pace": first_pace, "last_pace": last_pace,
            "peak_rss": rss_bytes(), "base_rss": base_rss, "states": states, "pickle": whole,
            "latest": p.latest, "off_contract": off, "empty": empty,
            "alerts": alert_summary(alerts, args)}


def alert_summary(alerts: list[Any], args: argparse.Namespace) -> dict[str, Any]:
    """Incidents by type and whether a surge fired within the planted flood (item 7 has the
    real detector benchmark: this only says what the background and the flood raised here)."""
    flood = realtext.RealTextStream(realtext.RealTextConfig(seed=args.seed,
                                                            scale=args.scale)).flood
    fired = [a for a in alerts if getattr(a, "sequence", None) == 1]
    by_type: dict[str, int] = {}
    for a in fired:
        by_type[a.type] = by_type.get(a.type, 0) + 1
    caught = [a for a in fired if a.type == "surge" and flood.start <= a.updated_at
              <= flood.end + (flood.end - flood.start)]
    latency = (min(a.updated_at for a in caught) - flood.start).total_seconds() if caught else None
    return {"incidents": by_type, "flood_caught": bool(caught), "flood_latency_s": latency}


def pickled_sizes(p: Any) -> dict[str, int | str]:
    """Each engine's pickled state (what the checkpoint writes), in bytes."""
    out: dict[str, int | str] = {}
    for name, engine in named_parts(p).items():
        try:
            out[name] = len(pickle.dumps(engine, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception as exc:  # noqa: BLE001 - a figure, not a failure: say why
            out[name] = f"unpicklable: {type(exc).__name__}"
    return out


def instrument(obj: Any, spent: dict[str, float], name: str) -> None:
    """Time ``obj``'s contract methods (and a detector's ``findings``) in place, into
    ``spent[name]``: instance attributes shadow the class's methods, so whoever calls them (the
    pipeline's loop, the detector suite) is timed without being changed."""
    spent.setdefault(name, 0.0)
    clock = time.process_time
    for meth in ("update", "expire", "findings"):
        inner = getattr(obj, meth, None)
        if inner is None:
            continue

        def timed(*a: Any, inner: Callable[..., Any] = inner) -> Any:
            t0 = clock()
            try:
                return inner(*a)
            finally:
                spent[name] += clock() - t0

        setattr(obj, meth, timed)


def child_shares(args: argparse.Namespace) -> dict[str, Any]:
    p = make_pipeline()
    drop_off_contract(p)
    spent: dict[str, float] = {}
    for name, engine in named_parts(p).items():
        instrument(engine, spent, name)
    suite = getattr(p, "detectors", None)
    if suite is not None:
        instrument(suite, spent, "detectors (suite, all of them)")
        if hasattr(suite, "_updates"):  # the suite keeps its detectors' bound updates
            suite._updates = [d.update for d in suite.detectors.values()]
    gen = [0.0]
    busy, n = 0.0, 0
    for chunk in chunks(args.text, args.events, args.seed, args.scale, args.chunk, gen,
                        args.flat):
        t0 = time.process_time()
        for e in chunk:
            p.update(e)
            p.advance()
        busy += time.process_time() - t0
        n += len(chunk)
    return {"events": n, "seconds": busy, "spent": spent}


def child_alone(args: argparse.Namespace) -> dict[str, Any]:
    runs: dict[str, dict[str, Any]] = {}
    notes: dict[str, str] = {}
    probe = make_pipeline()
    order = list(named_parts(probe))
    del probe
    for name in order:
        p = make_pipeline()
        parts = named_parts(p)
        if not on_contract(parts[name]):
            hint = inspect.signature(parts[name].update) if hasattr(parts[name], "update") else ""
            notes[name] = f"skipped: not on the Engine contract yet (update{hint})"
            continue
        runs[name] = {"engine": parts[name], "deps": [parts[d] for d in NEEDS.get(
            name.removeprefix("detector:"), ()) if d in parts], "spent": 0.0, "last": None}
    gen = [0.0]
    build, n = 0.0, 0
    for chunk in chunks(args.text, args.events, args.seed, args.scale, args.chunk, gen,
                        args.flat):
        t0 = time.process_time()
        items = [Item.of(e, None) for e in chunk]
        build += time.process_time() - t0
        n += len(items)
        for name, run in runs.items():
            if name in notes:
                continue
            try:
                _feed(run, items)
            except Exception as exc:  # noqa: BLE001 - report, do not fail the whole bench
                notes[name] = f"skipped (not on the contract yet?): {type(exc).__name__}: {exc}"
                notes[name] += " @ " + traceback.format_exc().strip().splitlines()[-3].strip()
        del items, chunk
        gc.collect()
    return {"events": n, "item_seconds": build,
            "spent": {k: r["spent"] for k, r in runs.items() if k not in notes}, "notes": notes}


def _feed(run: dict[str, Any], items: list[Item]) -> None:
    engine, deps = run["engine"], run["deps"]
    findings = getattr(engine, "findings", None)
    clock = time.process_time
    last = run["last"]
    if not deps:  # time the whole loop: no per-call clock overhead
        t0 = clock()
        update, expire = engine.update, engine.expire
        for it in items:
            update(it)
            if last is None or it.t - last >= TICK_S:
                last = it.t
                expire(last)
                if findings is not None:
                    findings(last)
        run["spent"] += clock() - t0
    else:
        spent = 0.0
        for it in items:
            for d in deps:
                d.update(it)
            t0 = clock()
            engine.update(it)
            spent += clock() - t0
            if last is None or it.t - last >= TICK_S:
                last = it.t
                for d in deps:
                    d.expire(last)
                t0 = clock()
                engine.expire(last)
                if findings is not None:
                    findings(last)
                spent += clock() - t0
        run["spent"] += spent
    run["last"] = last


def drop_off_contract(p: Any) -> list[str]:
    """Take the engines (and the detector suite) not yet on the contract out of the pipeline's
    loop, so the rest can be measured while they are being converted; returns their names."""
    names = {id(v): k for k, v in vars(p).items()}
    off = [e for e in p.engines if not on_contract(e)]
    p.engines = [e for e in p.engines if on_contract(e)]
    suite = getattr(p, "detectors", None)
    if suite is not None and any(e is suite for e in off):
        p.detectors = None  # advance() would evaluate them
    return [names.get(id(e), type(e).__name__) for e in off]


def on_contract(engine: Any) -> bool:
    """Whether ``engine.update`` takes an :class:`Item` (an engine still taking events would
    silently ignore items and look infinitely fast)."""
    update = getattr(engine, "update", None)
    if update is None or not callable(getattr(engine, "expire", None)):
        return False
    params = list(inspect.signature(update).parameters.values())
    return bool(params) and "Item" in str(params[0].annotation)


CHILDREN = {"pipeline": child_pipeline, "shares": child_shares, "alone": child_alone}


# ------------------------------------------------------------------ parent


def run_child(part: str, text: str, args: argparse.Namespace,
              tree: Path | None = None) -> dict[str, Any]:
    """One measurement in a child process, its figures as the child printed them (JSON);
    ``tree``: the checkout whose code it measures (default: this one)."""
    cmd = [sys.executable, __file__, "--child", part, "--text", text, "--events",
           str(args.events), "--seed", str(args.seed), "--scale", repr(args.scale),
           "--chunk", str(args.chunk), *(["--flat"] if args.flat else [])]
    env = {**os.environ, TREE_ENV: str(tree or ROOT)}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
        return {"error": " | ".join(tail), "wall": wall}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["wall"] = wall
    return out


def mb(x: float) -> str:
    return f"{x / 2**20:,.1f} MB"


def report(args: argparse.Namespace, res: dict[str, dict[str, dict[str, Any]]]) -> None:
    texts = [t for t in ("real", "sim") if t in res]
    cols = "".join(f"{t + ' text':>18}" for t in texts)
    days = "every day at the peak pace" if args.flat else "a normal day + the peak day"
    print(f"\n{args.events:,} events a stream, scale {args.scale:.3f} ({days} at "
          f"{args.scale:.3f} x Moltbook's), seed {args.seed}")
    print(f"\n== whole Pipeline(embed=False)                 {cols}")
    pipe = {t: res[t].get("pipeline", {}) for t in texts}

    def row(label: str, f: Callable[[dict[str, Any]], str]) -> None:
        cells = "".join(f"{(f(pipe[t]) if pipe[t] and 'error' not in pipe[t] else '-'):>18}"
                        for t in texts)
        print(f"{label:<47}{cells}")

    row("events/s", lambda r: f"{r['rate']:,.0f}")
    row(f"x the old ~{OLD_RATE:.0f} events/s", lambda r: f"{r['rate'] / OLD_RATE:,.1f}x")
    row(f"target {TARGET_RATE:,.0f}/s met", lambda r: "yes" if r["rate"] >= TARGET_RATE else "NO")
    row("us/event, first window of events", lambda r: f"{r['first_us']:.1f} ({r['window']:,})")
    row("us/event, last window (ratio <= 1.5)",
        lambda r: f"{r['last_us']:.1f} ({r['last_us'] / r['first_us']:.2f}x)")
    row("  pace in those windows, events/h",
        lambda r: f"{r['first_pace']:,.0f} -> {r['last_pace']:,.0f}")
    row("generation (not timed above), events/s",
        lambda r: f"{r['events'] / r['gen_seconds']:,.0f}")
    row("peak RSS", lambda r: mb(r["peak_rss"]))
    row("pickled pipeline state", lambda r: mb(r["pickle"]) if r["pickle"] else "unpicklable")
    for t in texts:
        if "error" in pipe[t]:
            print(f"  {t}: pipeline failed: {pipe[t]['error']}")
        elif pipe[t].get("off_contract"):
            print(f"  {t}: PARTIAL: measured without what is not on the contract yet: "
                  f"{', '.join(pipe[t]['off_contract'])}")
    row("incidents raised (by type)", lambda r: ", ".join(
        f"{k} {v}" for k, v in sorted(r["alerts"]["incidents"].items())) or "none")
    row("planted mint flood caught (latency)", lambda r: (
        f"yes ({r['alerts']['flood_latency_s']:.0f} s)" if r["alerts"]["flood_caught"] else "no"))
    real = pipe.get("real") or {}
    if real and "error" not in real:
        memory(args, real)

    print("\n== each engine and detector")
    heads = [f"{t} alone ev/s" for t in texts] + [f"{t} share" for t in texts]
    print(" " * 47 + "".join(f"{h:>18}" for h in heads))
    names: list[str] = []
    for t in texts:
        for part in ("alone", "shares"):
            for k in (res[t].get(part) or {}).get("spent", {}):
                if k not in names:
                    names.append(k)
    for name in names:
        cells = ""
        for t in texts:
            a = res[t].get("alone") or {}
            s = a.get("spent", {}).get(name)
            cell = f"{a['events'] / s:,.0f}" if s else "-"
            cells += f"{cell:>18}"
        for t in texts:
            sh = res[t].get("shares") or {}
            s = sh.get("spent", {}).get(name)
            flag = " !" if s and s / sh["seconds"] > 0.25 else ""
            cell = f"{100 * s / sh['seconds']:.1f} %{flag}" if s is not None else "-"
            cells += f"{cell:>18}"
        print(f"{name:<47}{cells}")
    for t in texts:
        a = res[t].get("alone") or {}
        if a.get("item_seconds"):
            print(f"{t}: Item.of (tokenise once) alone: {a['events'] / a['item_seconds']:,.0f}"
                  " events/s")
        for name, note in (a.get("notes") or {}).items():
            print(f"  {t}: {name}: {note}")
        for part in ("alone", "shares"):
            if "error" in (res[t].get(part) or {}):
                print(f"  {t}: {part} failed: {res[t][part]['error']}")


def memory(args: argparse.Namespace, real: dict[str, Any]) -> None:
    """State and RSS of a Moltbook peak day, extrapolated from this stream (a normal day and
    the peak day at ``scale``): what an engine allocates up front (its empty pickle: sketches,
    tables) stays, what it gathered grows with the volume, i.e. by ``1 / scale``."""
    factor = 1.0 / args.scale
    sizes = {k: v for k, v in real["states"].items() if isinstance(v, int)}
    empty = {k: v if isinstance(v, int) else 0 for k, v in real["empty"].items()}
    fixed = sum(min(empty.get(k, 0), v) for k, v in sizes.items())
    # the whole pipeline's pickle: engines share objects (the interaction graph; hazard reads
    # the cascade engine), which the per-engine pickles below each count again
    state = real["pickle"] or sum(sizes.values())
    est_state = fixed + (state - fixed) * factor
    est_rss = real["base_rss"] + (real["peak_rss"] - real["base_rss"]) * factor
    print(f"\nMoltbook peak day ({PEAK_DAY['posts']:,} posts, {PEAK_DAY['comments']:,} "
          f"comments, {PEAK_DAY['agents']:,} active agents) = this stream's peak day x "
          f"{factor:.2f}:")
    print(f"  engine state (pickle) {mb(state)} ({mb(fixed)} allocated up front) -> "
          f"{mb(est_state)}")
    print(f"  RSS {mb(real['peak_rss'])} -> {mb(est_rss)} (baseline {mb(real['base_rss'])}: "
          f"interpreter, corpus, empty pipeline; the growth x {factor:.2f}, an upper bound: it "
          f"holds the event chunks too); fits 4 GB: {'yes' if est_rss < MEMORY_BUDGET else 'NO'}")
    ngram_projection()
    print("\nstate by engine (pickle, each with what it references: shared objects counted in "
          "each),\nreal text:                                   now    empty  at a peak day   "
          "B/event")
    for name, size in sorted(real["states"].items(), key=lambda kv: -_num(kv[1])):
        if not isinstance(size, int):
            print(f"  {name:<28}{size}")
            continue
        e = min(empty.get(name, 0), size)
        print(f"  {name:<28}{mb(size):>12}{mb(e):>10}{mb(e + (size - e) * factor):>14}"
              f"{(size - e) / real['events']:>10.0f}")


def ngram_projection() -> None:
    """The n-gram tables at real novelty: the stream resamples a few thousand real posts, so
    its distinct n-grams stop at the corpus's and its n-gram state says nothing about a peak
    day; the corpus's own rate of distinct n-grams a post does."""
    from streams.state.ngrams import BYTES_PER_NGRAM, MAX_TRACKED
    from streams.text import Text

    posts = realtext.load_corpus().posts
    seen: set[int] = set()
    for title, content, _ in posts:
        t = Text.of(realtext._post_text(title, content))
        for n in range(1, 6):
            seen.update(t.ngram_ids(n).tolist())
    rate = len(seen) / len(posts)
    peak = PEAK_DAY["posts"] * rate
    held = peak + 8 * PEAK_DAY["posts"] / 4 * rate  # 7-day grace + lateness: 8 earlier days
    print(f"  n-grams at real novelty ({rate:.0f} distinct a post over the {len(posts):,} "
          f"corpus posts; the stream's resampling stops at {len(seen):,}): the peak day's own "
          f"{peak / 1e6:.0f} M ({mb(peak * BYTES_PER_NGRAM)}, never evicted); with 8 normal "
          f"days before it {held / 1e6:.0f} M unbounded ({mb(held * BYTES_PER_NGRAM)}), "
          f"bounded by max(max_tracked {MAX_TRACKED / 1e6:.0f} M, the current day's): "
          f"{mb(max(min(held, MAX_TRACKED), peak) * BYTES_PER_NGRAM)}, to add to the RSS")


def _num(x: int | str) -> int:
    return x if isinstance(x, int) else -1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--quick", action="store_true", help="100k events")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scale", type=float, default=None,
                    help="rate and population scale (default: the normal + peak day in --events)")
    ap.add_argument("--chunk", type=int, default=50_000, help="events generated at a time")
    ap.add_argument("--flat", action="store_true",
                    help="every day at the peak pace (per-event cost vs history alone)")
    ap.add_argument("--only", choices=("real", "sim"), default=None)
    ap.add_argument("--parts", default="pipeline,shares,alone")
    ap.add_argument("--json", action="store_true", help="also print the raw figures as JSON")
    ap.add_argument("--child", choices=tuple(CHILDREN), help=argparse.SUPPRESS)
    ap.add_argument("--text", choices=("real", "sim"), default="real", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.events = 100_000
    if args.scale is None:
        args.scale = realtext.scale_for(args.events)
    if args.child:
        print(json.dumps(CHILDREN[args.child](args)))
        return
    res: dict[str, dict[str, dict[str, Any]]] = {}
    for text in ("real", "sim"):
        if args.only and text != args.only:
            continue
        res[text] = {}
        for part in args.parts.split(","):
            res[text][part] = out = run_child(part, text, args)
            print(f"[{text} {part}: {out['wall']:.0f} s{' FAILED' if 'error' in out else ''}]",
                  file=sys.stderr, flush=True)
    report(args, res)
    if args.json:
        print(json.dumps(res, default=str))


if __name__ == "__main__":
    main()

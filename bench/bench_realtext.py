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
  (at least 100k at the default 1 M: "at 100k and at 1 M"), with the texts and words an event in
  those windows and the ratio per word (the stream's mix shifts: :class:`Mark`); peak RSS; each
  engine's pickled state (the checkpoint's bytes) and the memory extrapolated to a Moltbook peak
  day. The memory figure is the live state: after the run, the chunks freed, every object each
  engine and detector references, each counted once (``sys.getsizeof`` over the object graph),
  and the RSS then held (after a collection and ``malloc_trim``); the live state's growth is
  what scales to the peak day;
* ``shares``: the same pipeline with each engine and detector timed in place: its share of the
  pipeline's time (target: none over 25 %);
* ``alone``: each engine and each detector on its own, driven through the Engine contract
  (``update(Item.of(event))``, ``expire(t)`` every 10 s of event time; detectors also
  ``findings(t)``), fed the same pre-built items; an engine that reads another's state (the
  graph of the influence engine, the verbatim filter's admission) gets it fed untimed. An engine
  not yet on the contract is skipped with a note;
* ``memory`` (not in the default parts: tracing doubles the run): the pipeline's run under
  tracemalloc; what it left held by module and line of the code that allocated it, and each
  engine's attributes in memory against pickled (where memory exceeds the checkpoint most).

    .venv/bin/python bench/bench_realtext.py --quick          # 100k events, a minute or two
    .venv/bin/python bench/bench_realtext.py                  # 1 M events
    .venv/bin/python bench/bench_realtext.py --quick --only real --parts pipeline
    .venv/bin/python bench/bench_realtext.py --quick --only real --parts pipeline,memory
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import importlib.util
import inspect
import json
import linecache
import os
import pickle
import resource
import subprocess
import sys
import time
import traceback
import tracemalloc
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from types import BuiltinFunctionType, CodeType, FunctionType, MethodType, ModuleType
from typing import Any, NamedTuple

import numpy as np

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


class Mark(NamedTuple):
    """Where the run stood after a chunk: events, busy CPU seconds and event time, and the
    texts (posts, comments) and their words (whitespace-separated) so far. The stream's mix
    shifts as it goes: early on a quarter of the events are new agents' registrations, later
    nearly none, and texts grow from ~0.5 to ~0.7 an event. Most of the pipeline's work is a
    text's or a word's, so beside the per-event ratio of the last window to the first the
    report gives the per-word one: the growth with history once that shift is taken out (the
    issue's "amortised O(tokens of the event)")."""

    events: int
    busy: float
    time: float
    texts: int
    words: int


def per_word_ratio(r: dict[str, Any]) -> float:
    """us a word of the last window over the first's."""
    return ((r["last_us"] / max(r["last_words"], 1e-9))
            / (r["first_us"] / max(r["first_words"], 1e-9)))


def rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def held_rss() -> int:
    """The resident set now, after a full collection and glibc's ``malloc_trim`` (the free
    pages the allocator kept go back): what the process holds, not what it once peaked at."""
    gc.collect()
    with contextlib.suppress(OSError):  # not glibc: the allocator's free pages stay counted
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


# Code, not state: never walked into (an engine's class, a module, a bound method).
_CODE = (type, ModuleType, FunctionType, BuiltinFunctionType, MethodType, CodeType)


def deep_size(root: Any, seen: set[int]) -> int:
    """Bytes of ``root`` and of everything it references that is not in ``seen`` (which it
    extends): each object's ``sys.getsizeof`` once (an array's buffer with the array that owns
    it, a view's owner followed), so an object two engines share counts with the first. Not
    counted: the allocator's rounding and the collector's and instances' pre-headers (a few
    words an object)."""
    total, stack = 0, [root]
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, _CODE):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):  # a dict of str keys does not show its keys to the collector
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, np.ndarray):  # not a GC container: its owner and objects by hand
            if (base := o.base) is not None:
                if not isinstance(base, np.ndarray | bytes | bytearray) and id(base) not in seen:
                    # a buffer a numba kernel (or another foreign owner) allocated: its owner's
                    # getsizeof does not show it; the array over it covers it
                    total += o.nbytes
                stack.append(base)
            if o.dtype.hasobject:
                stack.extend(o.ravel().tolist())
        else:
            # an instance's attribute values live beside it, in no dict until one is asked for:
            # asking makes one (a dict header more, from now on) that counts them
            stack.extend(gc.get_referents(o))
            if (d := getattr(o, "__dict__", None)) is not None:
                stack.append(d)
    return total


def _fields(obj: Any) -> dict[str, Any]:
    """An object's attributes: its ``__dict__`` and its slots."""
    out = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        for k in getattr(cls, "__slots__", ()):
            if k not in ("__dict__", "__weakref__") and hasattr(obj, k):
                out[k] = getattr(obj, k)
    return out


def live_parts(p: Any) -> dict[str, dict[str, int]]:
    """In-memory bytes of each engine and detector (:func:`named_parts`) by attribute, then the
    detector suite's and the pipeline's own: what a part references, walked in the pipeline's
    order, each object counted once (the interaction graph with the influence engine that
    feeds it; hazard's cascade engine is the cascades'). Walking stops at the parts
    themselves."""
    from streams import text

    parts = named_parts(p)
    suite = getattr(p, "detectors", None)
    # the token cache is the process's (bounded by its row limit, reached through any text an
    # engine holds): the baseline's, as the interpreter is, not a part's state
    seen = {id(p), id(suite), id(text._vocab), *map(id, parts.values())}
    out: dict[str, dict[str, int]] = {}
    own = {"detector suite (own)": suite, "pipeline (own)": p} if suite is not None else {
        "pipeline (own)": p}
    for name, obj in {**parts, **own}.items():
        sizes = {"(object)": sys.getsizeof(obj) + sys.getsizeof(getattr(obj, "__dict__", {}))}
        for attr, value in _fields(obj).items():
            sizes[attr] = deep_size(value, seen)
        out[name] = sizes
    return out


def chunks(text: str, n: int, seed: int, scale: float, size: int,
           gen_time: list[float], flat: bool = False, unique: bool = False,
           ) -> Iterator[list[Event]]:
    """The stream in lists of ``size``; generation time is added to ``gen_time[0]``.
    ``flat``: every day at the peak day's pace; ``unique``: every background text made unique
    (:class:`bench.realtext.RealTextConfig` ``unique_texts``)."""
    corpus = realtext.load_corpus() if text == "real" else realtext.simulator_corpus(seed)
    extra: dict[str, Any] = {"normal_share": 1.0} if flat else {}
    it = realtext.stream(n, seed=seed, scale=scale, corpus=corpus, unique_texts=unique,
                         **extra)
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
    base_rss_held = held_rss()
    n, window = 0, max(1, args.events // 10)
    busy = 0.0
    # (events, busy seconds, event time, texts, words): the texts and their words, counted
    # untimed, say how the stream's mix shifts between the windows (Mark's docstring)
    marks: list[Mark] = []
    size = min(args.chunk, window)  # the windows' edges fall on chunk edges
    alerts: list[Any] = []
    texts = words = 0
    for chunk in chunks(args.text, args.events, args.seed, args.scale, size, gen,
                        args.flat, args.unique):
        if not marks:
            marks.append(Mark(0, 0.0, chunk[0].event_time.timestamp(), 0, 0))
        t0 = time.process_time()
        for e in chunk:
            p.update(e)
            if out := p.advance():
                alerts += out
        busy += time.process_time() - t0
        n += len(chunk)
        for e in chunk:
            if e.kind in ("post", "comment"):
                texts += 1
                words += len(e.text.split())
        marks.append(Mark(n, busy, chunk[-1].event_time.timestamp(), texts, words))
        del chunk
    alerts += p.close()
    peak_rss = rss_bytes()  # before this bench pickles the state below
    base_held, held = base_rss_held, held_rss()
    live = {k: sum(v.values()) for k, v in live_parts(p).items()}
    live_empty = {k: sum(v.values()) for k, v in live_parts(make_pipeline()).items()}
    a, b = marks[0], next(m for m in marks if m[0] >= window)
    c, d = next(m for m in reversed(marks) if m[0] <= n - window), marks[-1]

    def cost(x: Mark, y: Mark) -> tuple[float, float, float, float]:
        """us an event, events an hour of event time, texts an event and words an event
        between two marks."""
        k = max(y.events - x.events, 1)
        return ((y.busy - x.busy) / k * 1e6, k / max(y.time - x.time, 1e-9) * 3600,
                (y.texts - x.texts) / k, (y.words - x.words) / k)

    (first, first_pace, first_texts, first_words), (last, last_pace, last_texts, last_words) = (
        cost(a, b), cost(c, d))
    states = pickled_sizes(p)
    empty = pickled_sizes(make_pipeline())
    try:
        whole = len(pickle.dumps(p, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001
        whole = None
    streamed = checkpoint_overhead(p) if whole is not None else None
    return {"events": n, "seconds": busy, "rate": n / busy, "gen_seconds": gen[0],
            "first_us": first, "last_us": last, "window": window,
            "first_pace": first_pace, "last_pace": last_pace,
            "first_texts": first_texts, "last_texts": last_texts,
            "first_words": first_words, "last_words": last_words,
            "peak_rss": peak_rss, "base_rss": base_rss, "states": states, "pickle": whole,
            "checkpoint_overhead": streamed, "held_rss": held, "base_held_rss": base_held,
            "live": live, "live_empty": live_empty,
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


def checkpoint_overhead(p: Any) -> int:
    """Bytes a checkpoint holds beside the state while it is written: ``ReducerCheckpoint``
    streams the pickle to Redis in chunks, so what stays is the pickler's memo (an entry for
    every object) and its frames, traced here while the state is pickled to /dev/null."""
    tracemalloc.start()
    try:
        with open(os.devnull, "wb") as sink:
            pickle.Pickler(sink, protocol=pickle.HIGHEST_PROTOCOL).dump(p)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


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
                        args.flat, args.unique):
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
                        args.flat, args.unique):
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


TRACE_FRAMES = 12  # deep enough to reach the engine's line under numpy's Python wrappers


def child_memory(args: argparse.Namespace) -> dict[str, Any]:
    """Where the live state is: the pipeline's run (untimed) under tracemalloc, started once
    the corpus and an empty pipeline are in, so what is traced at the end (the chunks freed,
    after a collection) is what the run left held; each block by the innermost line of the
    measured tree's code that allocated it (an engine's ``np.concatenate`` is the engine's
    line). Then each part's attributes: in memory (:func:`live_parts`) against pickled alone
    (the part's ``__getstate__`` value of that name: an object shared with another part is
    pickled again)."""
    p = make_pipeline()
    drop_off_contract(p)
    if args.text == "real":
        realtext.load_corpus()
    else:
        realtext.simulator_corpus(args.seed)
    gc.collect()
    tracemalloc.start(TRACE_FRAMES)
    n = 0
    for chunk in chunks(args.text, args.events, args.seed, args.scale, args.chunk, [0.0],
                        args.flat, args.unique):
        for e in chunk:
            p.update(e)
            p.advance()
        n += len(chunk)
        del chunk
    p.close()
    gc.collect()
    current, peak = tracemalloc.get_traced_memory()
    lines: dict[str, int] = {}
    for stat in tracemalloc.take_snapshot().statistics("traceback"):
        key = _allocated_at(stat.traceback)
        lines[key] = lines.get(key, 0) + stat.size
    tracemalloc.stop()
    parts = named_parts(p)
    boundary = {id(p), id(getattr(p, "detectors", None)), *map(id, parts.values())}
    attrs: dict[str, dict[str, list[int | None]]] = {}
    for name, sizes in live_parts(p).items():
        obj = parts.get(name) or (p if name.startswith("pipeline") else p.detectors)
        state = obj.__getstate__()
        if isinstance(state, tuple):  # (__dict__, slots)
            state = {**(state[0] or {}), **(state[1] or {})}
        attrs[name] = {k: [v, _pickled(state[k], boundary) if isinstance(state, dict)
                           and k in state else None] for k, v in sizes.items()}
    return {"events": n, "traced": current, "traced_peak": peak, "lines": lines,
            "attrs": attrs}


def _allocated_at(tb: tracemalloc.Traceback) -> str:
    """``path:line`` of the innermost frame in the measured tree's code (the stream generator
    and the bench are "bench"); else the innermost frame's."""
    for frame in reversed(tb):  # oldest first: the innermost is the last
        path = Path(frame.filename)
        if path.is_relative_to(ROOT / "bench"):
            return "bench (stream generator, driver)"
        if path.is_relative_to(TREE) and not path.is_relative_to(TREE / ".venv"):
            return f"{path.relative_to(TREE)}:{frame.lineno}"
    return f"{tb[-1].filename}:{tb[-1].lineno}" if len(tb) else "?"


def _pickled(value: Any, boundary: set[int]) -> int | None:
    """Pickled bytes of one attribute's checkpointed value; None for another part (a reference,
    counted with that part) or what does not pickle alone."""
    if id(value) in boundary:
        return None
    try:
        return len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 - a figure, not a failure
        return None


CHILDREN = {"pipeline": child_pipeline, "shares": child_shares, "alone": child_alone,
            "memory": child_memory}


# ------------------------------------------------------------------ parent


def run_child(part: str, text: str, args: argparse.Namespace,
              tree: Path | None = None, python: str | None = None) -> dict[str, Any]:
    """One measurement in a child process, its figures as the child printed them (JSON);
    ``tree``: the checkout whose code it measures (default: this process's); ``python``: the
    interpreter it runs on (default: this process's)."""
    cmd = [python or sys.executable, __file__, "--child", part, "--text", text, "--events",
           str(args.events), "--seed", str(args.seed), "--scale", repr(args.scale),
           "--chunk", str(args.chunk), *(["--flat"] if args.flat else []),
           *(["--unique"] if args.unique else [])]
    env = {**os.environ, TREE_ENV: str(tree or TREE)}
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
          f"{args.scale:.3f} x Moltbook's), seed {args.seed}"
          + (", every text made unique (--unique)" if args.unique else ""))
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
    row("  texts an event in them", lambda r: f"{r['first_texts']:.2f} -> {r['last_texts']:.2f}")
    row("  words an event in them", lambda r: f"{r['first_words']:.1f} -> {r['last_words']:.1f}")
    row("us a word, last / first window", lambda r: f"{per_word_ratio(r):.2f}x")
    row("generation (not timed above), events/s",
        lambda r: f"{r['events'] / r['gen_seconds']:,.0f}")
    row("peak RSS", lambda r: mb(r["peak_rss"]))
    row("  beside it while a checkpoint streams (memo)",
        lambda r: mb(r["checkpoint_overhead"]) if r["checkpoint_overhead"] else "-")
    row("held RSS after the run (gc, malloc_trim)", lambda r: mb(r["held_rss"]))
    row("live state (in memory, each object once)", lambda r: mb(sum(r["live"].values())))
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
    traced = (res.get("real") or {}).get("memory") or {}
    if traced and "error" not in traced:
        where(traced)
    elif "error" in traced:
        print(f"  real: memory failed: {traced['error']}")

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
    # here, not at the top: a child measuring an older tree imports that tree's service/
    from service.stores.reducer_checkpoint import CHUNK_BYTES

    factor = 1.0 / args.scale
    sizes = {k: v for k, v in real["states"].items() if isinstance(v, int)}
    empty = {k: v if isinstance(v, int) else 0 for k, v in real["empty"].items()}
    fixed = sum(min(empty.get(k, 0), v) for k, v in sizes.items())
    # the whole pipeline's pickle: engines share objects (the interaction graph; hazard reads
    # the cascade engine), which the per-engine pickles below each count again
    state = real["pickle"] or sum(sizes.values())
    est_state = fixed + (state - fixed) * factor
    est_rss = real["base_rss"] + (real["peak_rss"] - real["base_rss"]) * factor
    live, live_empty = real["live"], real["live_empty"]
    grown = sum(live.values()) - sum(live_empty.values())
    est_live = sum(live_empty.values()) + grown * factor
    # what the process holds beside the state the run gathered (interpreter, libraries and
    # their lazy imports, the corpus, allocator slack) taken as fixed; the gathered state scales
    est_held = real["held_rss"] + grown * (factor - 1)
    # while a checkpoint is written: the pickler's memo (it grows with the objects, i.e. the
    # volume) and the chunk on its way to Redis; the pickle itself is never held whole
    extra = real["checkpoint_overhead"]
    est_pickle = est_held + (extra * factor + CHUNK_BYTES if extra else est_state)
    print(f"\nMoltbook peak day ({PEAK_DAY['posts']:,} posts, {PEAK_DAY['comments']:,} "
          f"comments, {PEAK_DAY['agents']:,} active agents) = this stream's peak day x "
          f"{factor:.2f}:")
    print(f"  engine state (pickle) {mb(state)} ({mb(fixed)} allocated up front) -> "
          f"{mb(est_state)}")
    print(f"  RSS {mb(real['peak_rss'])} -> {mb(est_rss)} (baseline {mb(real['base_rss'])}: "
          f"interpreter, corpus, empty pipeline; the growth x {factor:.2f}, an upper bound: it "
          f"holds the event chunks too); fits 4 GB: {'yes' if est_rss < MEMORY_BUDGET else 'NO'}")
    print(f"  live state {mb(sum(live.values()))} ({mb(sum(live_empty.values()))} in an empty "
          f"pipeline) -> {mb(est_live)}: every object the engines and detectors reference, "
          f"each once (sys.getsizeof; an array's buffer with its owner), after the run")
    print(f"  held RSS {mb(real['held_rss'])} (after the run, the chunks freed, gc and "
          f"malloc_trim; {mb(real['base_held_rss'])} before it) -> {mb(est_held)} (the live "
          f"state's growth x {factor:.2f}, the rest as is); fits 4 GB: "
          f"{'yes' if est_held < MEMORY_BUDGET else 'NO'}")
    print(f"  and while a checkpoint is written (streamed in {mb(CHUNK_BYTES)} chunks: the "
          f"pickler's memo x {factor:.2f} and one chunk beside the state): "
          f"{mb(est_pickle)}; fits 4 GB: {'yes' if est_pickle < MEMORY_BUDGET else 'NO'}")
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
    print("\nlive state by engine (in memory, each object once: with the first part that "
          "references it),\nreal text:                                   now    empty  at a peak "
          "day   B/event  x pickle")
    for name, size in sorted(live.items(), key=lambda kv: -kv[1]):
        e = min(live_empty.get(name, 0), size)
        pickled = real["states"].get(name)
        ratio = f"{size / pickled:.1f}" if isinstance(pickled, int) and pickled else "-"
        print(f"  {name:<28}{mb(size):>12}{mb(e):>10}{mb(e + (size - e) * factor):>14}"
              f"{(size - e) / real['events']:>10.0f}{ratio:>10}")


def where(mem: dict[str, Any], top: int = 20) -> None:
    """Where the live state is: tracemalloc's held bytes by module and line, and the parts'
    attributes in memory against pickled."""
    print(f"\n== where the live state is (real text, {mem['events']:,} events; "
          f"--parts memory)\ntraced after the run (allocated during it, still held): "
          f"{mb(mem['traced'])}; traced peak {mb(mem['traced_peak'])}")
    modules: dict[str, int] = {}
    for key, size in mem["lines"].items():
        mod = key.rsplit(":", 1)[0]
        modules[mod] = modules.get(mod, 0) + size
    print("by module (the innermost line of this tree's code that allocated it), "
          "B/event, its largest lines:")
    for mod, size in sorted(modules.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {mod:<44}{mb(size):>12}{size / mem['events']:>8.0f}")
        lines = sorted(((k, v) for k, v in mem["lines"].items() if k.rsplit(":", 1)[0] == mod),
                       key=lambda kv: -kv[1])
        for key, size in lines[:3]:
            if ":" not in key or size < max(0.05 * modules[mod], 2**16):
                continue
            path, line = key.rsplit(":", 1)
            src = linecache.getline(str(TREE / path), int(line)).strip()
            print(f"      {line:>5} {mb(size):>10}  {src[:70]}")
    rows = [(f"{part}.{attr}", live, pickled) for part, attrs in mem["attrs"].items()
            for attr, (live, pickled) in attrs.items()]
    print("attributes by what memory holds beyond the checkpoint (pickled alone: a shared "
          "object again),\n                                     in memory     pickled  "
          "x pickle   B/event")
    for name, live, pickled in sorted(rows, key=lambda r: -(r[1] - (r[2] or 0)))[:top]:
        ratio = f"{live / pickled:.1f}" if pickled else "-"
        print(f"  {name:<32}{mb(live):>12}{mb(pickled) if pickled else '-':>12}{ratio:>10}"
              f"{live / mem['events']:>10.0f}")


def ngram_projection() -> None:
    """The n-gram tables at real novelty: the stream resamples a few thousand real posts, so
    its distinct n-grams stop at the corpus's and its n-gram state says nothing about a peak
    day; the corpus's own rate of distinct n-grams a post does."""
    from streams.state.ngram_kernels import BUCKETS
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
    fixed = 5 * 8 * (BUCKETS + 1)  # what the tables (n = 1..5) hold besides: bucket offsets
    print(f"  n-grams at real novelty ({rate:.0f} distinct a post over the {len(posts):,} "
          f"corpus posts; the stream's resampling stops at {len(seen):,}): the peak day's own "
          f"{peak / 1e6:.0f} M ({mb(peak * BYTES_PER_NGRAM)}, never evicted); with 8 normal "
          f"days before it {held / 1e6:.0f} M unbounded ({mb(held * BYTES_PER_NGRAM)}), "
          f"bounded by max(max_tracked {MAX_TRACKED / 1e6:.0f} M, the current day's): "
          f"{mb(max(min(held, MAX_TRACKED), peak) * BYTES_PER_NGRAM + fixed)}, to add to the "
          f"RSS ({BYTES_PER_NGRAM} B an n-gram and {mb(fixed)} of bucket offsets)")


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
    ap.add_argument("--unique", action="store_true",
                    help="every text made unique by a word of its own: no verbatim repeat, "
                         "new tokens and n-grams in each (a live stream repeats far less than "
                         "the resampled corpus)")
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

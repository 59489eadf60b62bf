"""The rest of the published figures (issue 11, item 8): cooperation threads and the Cox
hazard ratio per extra exposure, measured side by side in one run.

Prints: the cooperation engine's events/s beside the thread engine's (same stream, same run)
on the real-text stream and on the simulator's texts with the same shapes; bytes per live
thread (tracemalloc); the cooperation threads found and their success share; the hazard fit:
the table build and lifelines fit times of both models over the real-text stream's cascades,
and the fit time of each model at the row cap (tables drawn from a planted hazard ratio).

    .venv/bin/python bench/bench_published.py                  # about 1-2 minutes on 2 cores
    .venv/bin/python bench/bench_published.py --events 30000 --rows 2000     # quick
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.realtext import scale_for, simulator_corpus, stream  # noqa: E402
from streams.state.base import Item  # noqa: E402
from streams.state.cascades import CascadeEngine  # noqa: E402
from streams.state.cooperation import CooperationEngine  # noqa: E402
from streams.state.hazard import HazardConfig, HazardEngine, cox_fit  # noqa: E402
from streams.state.threads import ThreadsEngine  # noqa: E402


def rate(engine: object, items: list[Item]) -> float:
    t = time.perf_counter()
    for it in items:
        engine.update(it)  # type: ignore[attr-defined]
    return len(items) / (time.perf_counter() - t)


def live_bytes(items: list[Item]) -> tuple[float, int]:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    eng = CooperationEngine()
    for it in items:
        eng.update(it)
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return used / max(len(eng), 1), len(eng)


def cooperation(label: str, items: list[Item]) -> None:
    coop, threads = CooperationEngine(), ThreadsEngine()
    r_coop, r_threads = rate(coop, items), rate(threads, items)
    per_thread, live = live_bytes(items)
    snap = coop.snapshot()
    n = snap.value("cooperation_threads")
    share = snap.value("cooperation_success_ratio")
    print(f"{label}: cooperation {r_coop:,.0f} events/s, threads engine {r_threads:,.0f} "
          f"events/s (ratio {r_coop / r_threads:.2f}); {per_thread:,.0f} B per live thread "
          f"({live:,} live); cooperation threads {n:.0f} of "
          f"{snap.value('cooperation_threads_seen_total'):.0f}, successful share "
          f"{'n/a' if share is None else f'{share:.3f}'}")


def hazard_on_stream(items: list[Item]) -> None:
    cas = CascadeEngine()
    for it in items:
        cas.update(it)
    t = time.perf_counter()
    n_cascades = len(cas.sizes())  # the listing each table build starts with
    t_list = time.perf_counter() - t
    print(f"real-text cascades: {n_cascades:,}, listed in {t_list:.2f} s")
    for model in ("published", "time_varying"):
        hz = HazardEngine(HazardConfig(model=model, every=None), cas)
        for it in items[-1:]:
            hz.update(it)
        t = time.perf_counter()
        table = hz.table()
        t_table = time.perf_counter() - t
        t = time.perf_counter()
        fit = cox_fit(table, model)  # type: ignore[arg-type]
        t_fit = time.perf_counter() - t
        figure = "n/a" if fit is None else \
            f"{fit.hazard_ratio:.3f} [{fit.lower:.3f}, {fit.upper:.3f}]"
        print(f"  {model}: {table.attrs['cascades']} cascades (capped {table.attrs['capped']}), "
              f"{len(table):,} rows, {int(table['event'].sum()):,} events; table "
              f"{t_table:.2f} s, fit {t_fit:.2f} s; HR {figure}")


def fit_times(rows: int | None) -> None:
    """Each model's fit at its row cap (or ``rows``), on a table drawn with HR 0.53: the
    published one subject a row; the time-varying one two episodes a subject (k, then k+1)."""
    rng = np.random.default_rng(0)
    for model in ("published", "time_varying"):
        n = rows or HazardConfig(model=model).row_cap  # type: ignore[arg-type]
        if model == "published":
            x = rng.integers(0, 6, n)
            table = pd.DataFrame({"duration": rng.exponential(1 / (0.2 * 0.53 ** x)),
                                  "event": 1, "exposure": x})
        else:
            half = n // 2
            k = rng.integers(1, 6, half)
            cut = rng.exponential(1 / (0.2 * 0.53 ** k))
            after = cut + rng.exponential(1 / (0.2 * 0.53 ** (k + 1)))
            table = pd.DataFrame({"id": np.r_[np.arange(half), np.arange(half)],
                                  "start": np.r_[np.zeros(half), cut],
                                  "stop": np.r_[cut, after],
                                  "event": np.r_[np.zeros(half, int), np.ones(half, int)],
                                  "exposure": np.r_[k, k + 1]})
        t = time.perf_counter()
        fit = cox_fit(table, model)  # type: ignore[arg-type]
        took = time.perf_counter() - t
        assert fit is not None
        print(f"fit at {len(table):,} rows, {model}: {took:.2f} s, HR {fit.hazard_ratio:.3f} "
              f"[{fit.lower:.3f}, {fit.upper:.3f}] (planted 0.53)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--rows", type=int, default=None,
                    help="rows of the timed fits (default: each model's cap)")
    args = ap.parse_args()
    scale = scale_for(args.events)
    real = [Item.of(e) for e in stream(args.events, seed=1, scale=scale)]
    sim = [Item.of(e) for e in stream(args.events, seed=1, scale=scale,
                                      corpus=simulator_corpus())]
    cooperation("real text", real)
    cooperation("simulator text", sim)
    hazard_on_stream(real)
    fit_times(args.rows)


if __name__ == "__main__":
    main()

"""Old code against new, side by side in one run: the real-text benchmark's figures of a base
revision and of this checkout (uncommitted changes included), with the ratio new/old a row.

A temporary ``git worktree`` of ``--base`` holds the old code; it is removed at the end, also on
an error, Ctrl-C or SIGTERM. Each measurement is a child of ``bench/bench_realtext.py`` (its
``--child`` parts, whose JSON this reads): this checkout's measuring code and stream, the tree's
engines first on ``sys.path``, the same interpreter (``--base-python``: the old side's own, a
virtual environment's python with the project installed; with ``--base HEAD`` it compares two
interpreters on the same code). Old and new children alternate, part by
part and round by round (old first, then new first, ...), so that the machine's load hits both
alike; with ``--repeat`` each figure is the median of the rounds. Every time is CPU time.

    .venv/bin/python bench/bench_compare.py --base beb03b9 --quick             # 100k, ~3 min
    .venv/bin/python bench/bench_compare.py --base HEAD~2 --quick --parts pipeline
    .venv/bin/python bench/bench_compare.py --base beb03b9 --events 300000 --repeat 3
    .venv/bin/python bench/bench_compare.py --base HEAD --base-python other-venv/bin/python --quick
"""

from __future__ import annotations

import argparse
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import bench_realtext as br  # noqa: E402

Figures = dict[str, Any]


@contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """A detached worktree of ``rev``, removed on leaving (SIGTERM included: it is turned into
    SystemExit for the time being, so the removal runs)."""
    path = Path(tempfile.mkdtemp(prefix="moltscope-base-"))
    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        subprocess.run(["git", "-C", str(br.ROOT), "worktree", "add", "--detach", "--quiet",
                        str(path), rev], check=True)
        yield path
    finally:
        subprocess.run(["git", "-C", str(br.ROOT), "worktree", "remove", "--force", str(path)],
                       capture_output=True)
        shutil.rmtree(path, ignore_errors=True)  # the add failed: no worktree, a folder
        subprocess.run(["git", "-C", str(br.ROOT), "worktree", "prune"], capture_output=True)
        signal.signal(signal.SIGTERM, previous)


def _exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def median(runs: list[Any]) -> Any:
    """The median of each number over the rounds' figures (nested dicts alike); anything else
    is the first round's."""
    first = runs[0]
    if isinstance(first, dict):
        return {k: median([r[k] for r in runs if isinstance(r, dict) and k in r]) for k in first}
    if all(isinstance(r, int | float) and not isinstance(r, bool) for r in runs):
        return statistics.median(runs)
    return first


def measure(args: argparse.Namespace, base: Path) -> dict[str, dict[str, Figures]]:
    """{"old"|"new": {part: figures}}: the children interleaved, old and new in turn."""
    trees = {"old": base, "new": br.ROOT}
    pythons = {"old": args.base_python, "new": sys.executable}
    runs: dict[str, dict[str, list[Figures]]] = {k: {} for k in trees}
    for part in args.parts:
        for r in range(args.repeat):
            for side in ("old", "new") if r % 2 == 0 else ("new", "old"):
                out = br.run_child(part, args.text, args, tree=trees[side],
                                   python=pythons[side])
                print(f"[{side} {part} {r + 1}/{args.repeat}: {out['wall']:.0f} s"
                      f"{' FAILED: ' + out['error'] if 'error' in out else ''}]",
                      file=sys.stderr, flush=True)
                if "error" not in out:
                    runs[side].setdefault(part, []).append(out)
    return {side: {part: median(rs) for part, rs in parts.items()}
            for side, parts in runs.items()}


def ratio(old: float | None, new: float | None) -> str:
    return f"{new / old:.2f}x" if old and new is not None else "-"


def table(rows: list[tuple[str, str, str, str]], head: tuple[str, str, str, str]) -> None:
    print(f"{head[0]:<44}{head[1]:>20}{head[2]:>20}{head[3]:>10}")
    for label, old, new, r in rows:
        print(f"{label:<44}{old:>20}{new:>20}{r:>10}")


def pipeline_rows(old: Figures, new: Figures) -> list[tuple[str, str, str, str]]:
    """Label, old, new, new/old for the whole pipeline's figures (either side may be missing)."""
    out: list[tuple[str, str, str, str]] = []

    def row(label: str, get: Callable[[Figures], float | None],
            fmt: Callable[[float], str]) -> None:
        a, b = (get(x) if x else None for x in (old, new))
        out.append((label, fmt(a) if a is not None else "-", fmt(b) if b is not None else "-",
                    ratio(a, b)))

    def us(x: float) -> str:
        return f"{x:.1f} us"

    row("events/s", lambda r: r["rate"], lambda x: f"{x:,.0f}")
    row("us/event, whole run", lambda r: r["seconds"] / r["events"] * 1e6, us)
    row("us/event, first window", lambda r: r["first_us"], us)
    row("us/event, last window", lambda r: r["last_us"], us)
    row("  last / first (target <= 1.5)", lambda r: r["last_us"] / r["first_us"],
        lambda x: f"{x:.2f}")
    row("  words an event, last / first window", lambda r: r["last_words"] / r["first_words"],
        lambda x: f"{x:.2f}")
    row("  us a word, last / first window", br.per_word_ratio, lambda x: f"{x:.2f}")
    row("peak RSS", lambda r: r["peak_rss"], br.mb)
    row("pickled pipeline state", lambda r: r["pickle"], br.mb)
    row("held RSS after the run (gc, malloc_trim)", lambda r: r.get("held_rss"), br.mb)
    row("  before it (interpreter, libraries, corpus)", lambda r: r.get("base_held_rss"), br.mb)
    row("live state (in memory, each object once)",
        lambda r: sum(r["live"].values()) if "live" in r else None, br.mb)
    return out


def share_rows(old: Figures, new: Figures) -> list[tuple[str, str, str, str]]:
    """Each engine's and detector's share of the pipeline's time and its us/event; the ratio is
    of the us/event (a share moves with the others' costs too)."""
    names = list((old.get("spent") or {}) | (new.get("spent") or {}))
    out = []
    for name in sorted(names, key=lambda k: -max(_us(old, k) or 0.0, _us(new, k) or 0.0)):
        cells = []
        for r in (old, new):
            u = _us(r, name)
            cells.append(f"{100 * r['spent'][name] / r['seconds']:.1f} % {u:7.1f} us"
                         if u is not None else "-")
        out.append((name, cells[0], cells[1], ratio(_us(old, name), _us(new, name))))
    return out


def _us(r: Figures, name: str) -> float | None:
    s = (r.get("spent") or {}).get(name)
    return None if s is None else s / r["events"] * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="the old code: any git revision")
    ap.add_argument("--base-python", default=sys.executable,
                    help="the old side's interpreter (default: this one)")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--quick", action="store_true", help="100k events")
    ap.add_argument("--parts", default="pipeline,shares",
                    help="bench_realtext children to run: pipeline, shares, alone")
    ap.add_argument("--repeat", type=int, default=1, help="rounds; each figure their median")
    ap.add_argument("--text", choices=("real", "sim"), default="real")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scale", type=float, default=None,
                    help="rate and population scale (default: the normal + peak day in --events)")
    ap.add_argument("--chunk", type=int, default=50_000, help="events generated at a time")
    ap.add_argument("--flat", action="store_true", help="every day at the peak pace")
    ap.add_argument("--unique", action="store_true",
                    help="every text made unique by a word of its own (bench_realtext --unique)")
    args = ap.parse_args()
    if args.quick:
        args.events = 100_000
    if args.scale is None:
        args.scale = br.realtext.scale_for(args.events)
    args.parts = args.parts.split(",")
    unknown = set(args.parts) - set(br.CHILDREN)
    if unknown:
        ap.error(f"unknown parts: {', '.join(sorted(unknown))}")
    rev = subprocess.run(["git", "-C", str(br.ROOT), "rev-parse", "--short",
                          f"{args.base}^{{commit}}"],
                         capture_output=True, text=True, check=True).stdout.strip()
    t0 = time.perf_counter()
    with worktree(rev) as base:
        res = measure(args, base)
    dirty = subprocess.run(["git", "-C", str(br.ROOT), "status", "--porcelain",
                            "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
    head = subprocess.run(["git", "-C", str(br.ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    print(f"\nold: {rev} (worktree)   new: {head}{' + uncommitted changes' if dirty else ''} "
          f"({br.ROOT})\n"
          + (f"old on {args.base_python}, new on {sys.executable}\n"
             if args.base_python != sys.executable else "")
          + f"{args.events:,} {args.text}-text events"
          f"{', every text unique' if args.unique else ''}, scale {args.scale:.3f}, seed "
          f"{args.seed}, {args.repeat} round(s), {time.perf_counter() - t0:.0f} s wall")
    old, new = res["old"], res["new"]
    if "pipeline" in args.parts:
        print()
        table(pipeline_rows(old.get("pipeline", {}), new.get("pipeline", {})),
              ("== whole Pipeline(embed=False)", "old", "new", "new/old"))
    if "shares" in args.parts:
        print()
        table(share_rows(old.get("shares", {}), new.get("shares", {})),
              ("== share of the pipeline, us/event", "old", "new", "new/old"))
    if "alone" in args.parts:
        a, b = old.get("alone", {}), new.get("alone", {})
        print()
        table([(k, *(f"{u:.1f} us" if (u := _us(r, k)) is not None else "-" for r in (a, b)),
                ratio(_us(a, k), _us(b, k)))
               for k in list((a.get("spent") or {}) | (b.get("spent") or {}))],
              ("== each alone, us/event", "old", "new", "new/old"))


if __name__ == "__main__":
    main()

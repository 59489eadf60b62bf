"""Normaliser and archive-reader costs, measured side by side in one run.

1. normaliser throughput on the real post answers against a bare ``json.loads`` of them;
2. archive replay of a generated JSONL file at two sizes: time and traced peak memory
   (the peak should not grow with the file: bounded by ``--sort-buffer`` events);
3. table links (post id -> author, comment id -> (author, parent)): bytes an entry.

    .venv/bin/python bench/bench_normalise.py [--lines 20000] [--sort-buffer 2000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

from service.sources.archive import ArchiveStats, build_links, open_archive
from service.sources.normalise import normalise_post_detail

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "moltbook"
T0 = datetime(2026, 2, 1, tzinfo=UTC)


def bench_normaliser(repeat: int) -> None:
    blobs = [p.read_bytes() for p in sorted((DATA / "api" / "posts").glob("*.json"))]
    t = time.perf_counter()
    for _ in range(repeat):
        for b in blobs:
            json.loads(b)
    parse = time.perf_counter() - t
    t = time.perf_counter()
    n = 0
    for _ in range(repeat):
        for b in blobs:
            n += len(normalise_post_detail(b, origin="bench"))
    full = time.perf_counter() - t
    print(f"normaliser: {repeat * len(blobs)} answers, {n} items in {full:.2f} s "
          f"({n / full:,.0f} items/s); json.loads alone {parse:.2f} s; ratio {full / parse:.1f}x")


def write_jsonl(path: Path, lines: int) -> int:
    body = "lorem ipsum dolor sit amet " * 20
    with path.open("w") as f:
        for i in range(lines):
            t = (T0 + timedelta(seconds=i)).isoformat()
            f.write(json.dumps({"kind": "comment", "id": f"comment:c{i}", "event_time": t,
                                "observed_at": t, "comment_id": f"c{i}", "post_id": f"p{i % 97}",
                                "author": f"a{i % 500}", "content": body}) + "\n")
    return path.stat().st_size


def replay(path: Path, sort_buffer: int, traced: bool) -> tuple[float, int, int]:
    stats = ArchiveStats()
    if traced:
        tracemalloc.start()
    t = time.perf_counter()
    n = sum(1 for _ in open_archive([path], sort_buffer=sort_buffer, stats=stats))
    elapsed = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1] if traced else 0
    if traced:
        tracemalloc.stop()
    return elapsed, n, peak


def bench_archive(lines: int, sort_buffer: int, tmp: Path) -> None:
    rows = []
    for scale in (1, 4):
        path = tmp / f"events{scale}.jsonl"
        size = write_jsonl(path, lines * scale)
        elapsed, n, _ = replay(path, sort_buffer, traced=False)
        _, _, peak = replay(path, sort_buffer, traced=True)
        rows.append((scale, size, n, elapsed, peak))
        print(f"archive x{scale}: {n:,} events, file {size / 1e6:.1f} MB, {n / elapsed:,.0f} "
              f"events/s untraced, traced peak {peak / 1e6:.1f} MB")
    (_, s1, _, e1, p1), (_, s4, _, e4, p4) = rows
    print(f"archive x4/x1: file size {s4 / s1:.2f}x, time {e4 / e1:.2f}x, peak memory "
          f"{p4 / p1:.2f}x (constant memory: ~1x)")


def bench_links(lines: int, tmp: Path) -> None:
    path = tmp / "comments.csv"
    with path.open("w") as f:
        f.write("id,post_id,agent_name,parent_id,content,score,created_at\n")
        for i in range(lines):
            parent = f"c{i - 1}" if i % 3 else ""
            f.write(f"c{i:08d}-aaaa-bbbb-cccc-dddddddddddd,p{i % 97},a{i % 500},{parent},x,0,"
                    f"{(T0 + timedelta(seconds=i)).isoformat()}\n")
    tracemalloc.start()
    links = build_links([(path, "comments")])
    current = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    print(f"links: {len(links.comment_parents):,} comments indexed, "
          f"{current / len(links.comment_parents):.0f} bytes an entry")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=20_000, help="JSONL lines at scale x1")
    ap.add_argument("--sort-buffer", type=int, default=2_000)
    ap.add_argument("--repeat", type=int, default=5, help="passes over the real answers")
    args = ap.parse_args()
    bench_normaliser(args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        bench_archive(args.lines, args.sort_buffer, Path(tmp))
        bench_links(args.lines * 5, Path(tmp))


if __name__ == "__main__":
    main()

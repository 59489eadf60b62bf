"""Moltbook crawler costs, measured side by side in one run.

1. revisit state: memory (tracemalloc) and Redis checkpoint bytes of the per-post state at two
   queue sizes, per post and per remembered comment (the state grows linearly with the posts
   inside the horizon and their comments, nothing else);
2. crawl speed against the loopback fake API with the rate limit lifted: requests/s and CPU
   per request, against the production budget of 1 request/s;
3. header-less 429s (production's per-IP limit) on a simulated clock: time of a ~450-request
   crawl at the default pace with 1 % lone ones, and the requests sent into a lasting 15-minute
   block, for the old policy (900 s at once, to an hour) against the default (30 s doubling to
   15 minutes).

    .venv/bin/python bench/bench_crawler.py [--posts 2000] [--comments 6] [--runs 200]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from pathlib import Path

import numpy as np
import redis
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.config import CrawlerSettings  # noqa: E402
from service.embedded import free_port, redis_server  # noqa: E402
from service.sources.crawler import MoltbookCrawler, _Post  # noqa: E402
from service.sources.ratelimit import RetryPolicy, TokenBucket  # noqa: E402
from service.stores.checkpoint import CheckpointStore  # noqa: E402
from tests.integration.fake_moltbook import FakeMoltbook  # noqa: E402


def states(n: int, comments: int) -> dict[str, _Post]:
    return {str(uuid.uuid4()): _Post(
        created=1.77e9 + i, next_visit=1.77e9 + i + 600, emitted=True, votes=(12, 1),
        comments={str(uuid.uuid4()): (3, 0) for _ in range(comments)}) for i in range(n)}


def bench_state(client: redis.Redis, posts: int, comments: int) -> None:
    print("1. revisit state (per post: schedule, votes; per comment: id and counts)")
    print(f"{'posts':>8} {'comments/post':>14} {'RAM MB':>8} {'Redis MB':>9} "
          f"{'RAM B/post':>11} {'Redis B/post':>13}")
    rows = []
    for n in (posts, 4 * posts):
        client.flushall()
        before = client.info("memory")["used_memory"]
        tracemalloc.start()
        s = states(n, comments)
        ram = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        store = CheckpointStore(client)
        for i in range(0, n, 500):  # commits as the crawler makes them, in chunks
            chunk = dict(list(s.items())[i:i + 500])
            store.commit(put_posts={k: v.to_json() for k, v in chunk.items()})
        red = client.info("memory")["used_memory"] - before
        rows.append((n, ram, red))
        print(f"{n:>8} {comments:>14} {ram / 1e6:>8.1f} {red / 1e6:>9.1f} {ram / n:>11.0f} "
              f"{red / n:>13.0f}")
    (n1, r1, d1), (n2, r2, d2) = rows
    print(f"   growth 4x posts -> RAM x{r2 / r1:.2f}, Redis x{d2 / d1:.2f} (linear = x4.00)")
    per_post = r2 / n2
    print(f"   production horizon (3 days ~ 100k posts, ~6 comments each): "
          f"~{per_post * 100_000 / 1e6:.0f} MB RAM at {comments} comments/post")


def bench_speed() -> None:
    print("2. crawl speed, rate limit lifted (loopback fake, no faults)")
    with FakeMoltbook(release_every=1, reveal_ticks=100) as fake:
        opts = CrawlerSettings(base_url=fake.url, requests_per_minute=1e7, burst=1,
                              horizon_s=400 * 86_400.0, discovery_interval_s=0.3,
                              sweep_interval_s=1.5, revisit_min_s=0.05, revisit_max_s=0.4)
        crawler = MoltbookCrawler(opts, None, registry=CollectorRegistry())
        stop = threading.Event()
        items: list[object] = []
        t = threading.Thread(target=crawler.run, args=(items.append, stop), daemon=True)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        t.start()
        time.sleep(5)
        stop.set()
        t.join(10)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        n = len(fake.log)
        crawler.close()
    print(f"   {n} requests, {len(items)} items in {wall:.1f} s: {n / wall:.0f} req/s "
          f"(x{n / wall:.0f} the 1 req/s budget); process CPU {1e3 * cpu / n:.2f} ms/request "
          "(crawler + fake server together)")


def simulated_crawl(policy: RetryPolicy, n: int, p_bare: float, block: tuple[float, float],
                    rng: random.Random) -> tuple[float, int]:
    """Seconds until ``n`` answers came, and requests sent inside ``block`` (every one of
    which the per-IP limit answers with a header-less 429, as it does a lone one)."""
    now = [0.0]
    bucket = TokenBucket(CrawlerSettings().requests_per_minute, clock=lambda: now[0])
    ok = wasted = 0
    while ok < n:
        now[0] += bucket.reserve()
        blocked = block[0] <= now[0] < block[1]
        wasted += blocked
        now[0] += 0.1  # round trip
        if blocked or rng.random() < p_bare:
            bucket.block_until(now[0] + policy.rate_limited({}, None, now[0]))
        else:
            ok += 1
            policy.success()
    return now[0], wasted


def bench_backoff(runs: int) -> None:
    o = CrawlerSettings()
    print(f"3. header-less 429s, simulated: 450 requests at {o.requests_per_minute:g}/min, "
          f"{runs} seeded runs each")
    policies = {"old 900 s at once": (900.0, 3600.0),
                "default": (o.ip_block_backoff_s, o.ip_block_backoff_cap_s)}
    print(f"{'policy':>18} {'1%: median s':>13} {'p95 s':>7} {'15-min block: s':>16} "
          f"{'requests into it':>17}")
    medians: dict[str, float] = {}
    for name, (first, cap) in policies.items():
        times = [simulated_crawl(RetryPolicy(ip_block_s=first, ip_block_cap_s=cap), 450, 0.01,
                                 (-1.0, -1.0), random.Random(seed))[0] for seed in range(runs)]
        blocked, wasted = simulated_crawl(RetryPolicy(ip_block_s=first, ip_block_cap_s=cap),
                                          450, 0.0, (120.0, 1020.0), random.Random(0))
        medians[name] = float(np.median(times))
        print(f"{name:>18} {medians[name]:>13.0f} {np.percentile(times, 95):>7.0f} "
              f"{blocked:>16.0f} {wasted:>17}")
    ratio = medians["old 900 s at once"] / medians["default"]
    print(f"   median crawl time old / default: x{ratio:.2f} "
          f"(no 429 at all: {450 * 60 / o.requests_per_minute:.0f} s)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--posts", type=int, default=2000)
    ap.add_argument("--comments", type=int, default=6)
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp, redis_server(port, Path(tmp)):
        bench_state(redis.Redis(host="127.0.0.1", port=port), args.posts, args.comments)
        bench_speed()
    bench_backoff(args.runs)


if __name__ == "__main__":
    main()

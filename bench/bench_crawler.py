"""Moltbook crawler costs, measured side by side in one run.

1. revisit state: memory (tracemalloc) and Redis checkpoint bytes of the per-post state at two
   queue sizes, per post and per remembered comment (the state grows linearly with the posts
   inside the horizon and their comments, nothing else);
2. crawl speed against the loopback fake API with the rate limit lifted: requests/s and CPU
   per request, against the production budget of 1 request/s.

    .venv/bin/python bench/bench_crawler.py [--posts 2000] [--comments 6]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from pathlib import Path

import redis
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.config import CrawlerSettings  # noqa: E402
from service.embedded import free_port, redis_server  # noqa: E402
from service.sources.crawler import MoltbookCrawler, _Post  # noqa: E402
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--posts", type=int, default=2000)
    ap.add_argument("--comments", type=int, default=6)
    args = ap.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp, redis_server(port, Path(tmp)):
        bench_state(redis.Redis(host="127.0.0.1", port=port), args.posts, args.comments)
        bench_speed()


if __name__ == "__main__":
    main()

"""Token bucket and retry policy of the crawler, on a simulated clock."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import numpy as np
import pytest

from service.sources.ratelimit import RetryPolicy, TokenBucket, has_rate_headers, header_delay


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def max_in_window(times: np.ndarray, window: float) -> int:
    """Most requests in any half-open window [t, t + window)."""
    ends = np.searchsorted(times, times + window, side="left")
    return int((ends - np.arange(len(times))).max())


@pytest.mark.parametrize(("per_minute", "burst"), [(60, 1), (60, 5), (6000, 1), (25, 3)])
def test_bucket_never_exceeds_burst_plus_rate_in_any_window(per_minute: float, burst: int) -> None:
    clock = FakeClock()
    bucket = TokenBucket(per_minute, burst=burst, clock=clock)
    rng = random.Random(7)
    times = []
    for _ in range(2000):
        clock.sleep(bucket.reserve())
        times.append(clock.now)
        if rng.random() < 0.05:  # the caller sometimes idles, saving up a burst
            clock.sleep(rng.uniform(0, 10 * 60 / per_minute))
    t = np.array(times)
    rate = per_minute / 60
    for window in (1 / rate, 10 / rate, 60.0, 300.0):
        assert max_in_window(t, window) <= burst + rate * window + 1e-9
    # a busy caller gets the whole rate: the last 1000 requests at most 5 % slower than r
    busy = TokenBucket(per_minute, burst=burst, clock=clock)
    start = clock.now
    for _ in range(1000):
        clock.sleep(busy.reserve())
    assert (clock.now - start) == pytest.approx((1000 - burst) / rate, rel=0.05)


def test_block_until_holds_requests_and_drops_saved_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(600, burst=10, clock=clock)
    clock.sleep(100)  # a full bucket of 10
    bucket.block_until(105.0)
    waits = [bucket.reserve() for _ in range(3)]
    assert waits == pytest.approx([5.0, 5.1, 5.2])
    bucket.block_until(50.0)  # an earlier pause changes nothing
    assert bucket.reserve() == pytest.approx(5.3)


def test_header_delay_forms() -> None:
    wall = 1_750_000_000.0
    date = format_datetime(datetime.fromtimestamp(wall + 120, UTC), usegmt=True)
    assert header_delay({"Retry-After": date}, None, wall) == pytest.approx(120, abs=1)
    assert header_delay({"retry-after": "3"}, {"retry_after": 9}, wall) == 9.0
    assert header_delay({"Retry-After": "garbage"}, None, wall) is None
    assert header_delay({"Retry-After": "-4"}, None, wall) == 0.0
    assert not has_rate_headers({"Content-Type": "application/json"})
    assert has_rate_headers({"x-ratelimit-limit": "60"})


def test_retry_policy_jitter_bounds_and_ip_streak() -> None:
    p = RetryPolicy(base_s=0.5, cap_s=20, ip_block_s=900, ip_block_cap_s=3000,
                    rng=random.Random(3))
    for attempt in range(12):
        nominal = min(20, 0.5 * 2**attempt)
        draws = [p.server_error(attempt) for _ in range(200)]
        assert min(draws) >= nominal / 2 and max(draws) <= nominal
        assert max(draws) - min(draws) > nominal / 4  # really jittered
    assert [p.rate_limited({}, None, 0.0) for _ in range(4)] == [900, 1800, 3000, 3000]
    # an explicit header wins over the per-IP streak, and success resets the streak
    assert p.rate_limited({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "2"}, None, 0) == 2.25
    p.success()
    assert p.rate_limited({"Content-Type": "text/html"}, "<html>", 0.0) == 900
    # a tiny Retry-After never turns into a tight loop
    assert p.rate_limited({"Retry-After": "0"}, None, 0.0) >= 0.5

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


def test_default_header_less_429_backs_off_in_proportion() -> None:
    """Issue 14 item 4: the crawler's defaults wait 30 s after a lone header-less 429 (not the
    15-minute block at once), doubling while they repeat, capped at 15 minutes."""
    from service.config import CrawlerSettings

    o = CrawlerSettings()
    p = RetryPolicy(ip_block_s=o.ip_block_backoff_s, ip_block_cap_s=o.ip_block_backoff_cap_s)
    assert [p.rate_limited({}, None, 0.0) for _ in range(7)] == [
        30, 60, 120, 240, 480, 900, 900]
    p.success()
    assert p.rate_limited({}, "<html>429</html>", 0.0) == 30


def simulate(block: tuple[float, float] | None, p_bare: float, n: int, seed: int
             ) -> tuple[np.ndarray, int, int]:
    """A sequential caller at the default pace and back-off against a server with a 60/min
    sliding minute, lone header-less 429s (probability ``p_bare``) and optionally a per-IP
    block [start, end) answering every request with a header-less 429. Returns the request
    times, the header-less 429s met and the successful answers."""
    from service.config import CrawlerSettings

    o = CrawlerSettings()
    clock = FakeClock()
    bucket = TokenBucket(o.requests_per_minute, burst=o.burst, clock=clock)
    policy = RetryPolicy(ip_block_s=o.ip_block_backoff_s, ip_block_cap_s=o.ip_block_backoff_cap_s)
    rng = random.Random(seed)
    times: list[float] = []
    bare = ok = 0
    while ok < n:
        clock.sleep(bucket.reserve())
        times.append(clock.now)
        clock.sleep(rng.uniform(0.01, 0.3))  # the answer's round trip
        blocked = block is not None and block[0] <= times[-1] < block[1]
        if blocked or rng.random() < p_bare:
            bare += 1
            bucket.block_until(clock.now + policy.rate_limited({}, None, clock.now))
        else:
            ok += 1
            policy.success()
    return np.array(times), bare, ok


def test_lone_header_less_429s_cost_30_s_each_and_the_minute_holds() -> None:
    """~300 requests with 1 % lone header-less 429s: the crawl takes its requests at 55/min
    plus 30 s a 429, and no sliding minute holds more than 56 (1 + 55) requests."""
    times, bare, ok = simulate(None, 0.01, 300, seed=5)
    assert bare >= 2
    assert max_in_window(times, 60.0) <= 56
    took = times[-1] - times[0]
    # each 429 adds 30 s, its round trip and up to one bucket interval
    assert took == pytest.approx((len(times) - 1) * 60 / 55 + 30 * bare, abs=2 + 1.5 * bare)


def test_a_lasting_block_is_probed_ever_more_rarely_and_left_soon_after_it_lifts() -> None:
    """A 15-minute per-IP block: 6 requests meet it (at 0, 30, 90, 210, 450 and 930 s... the
    last after it lifted), and the crawl resumes at most one back-off (480 s) after it ends;
    then lone 429s are short again."""
    start = 100 * 60 / 55
    times, bare, ok = simulate((start, start + 900.0), 0.0, 200, seed=1)
    during = times[(times >= start) & (times < start + 900.0)]
    assert len(during) == 5 and bare == 5
    assert np.diff(during) == pytest.approx([30, 60, 120, 240], abs=1.5)  # + round trip, bucket
    resumed = times[times >= start + 900.0][0]
    assert start + 900.0 <= resumed <= start + 900.0 + 480.0 + 3.0

"""Request pacing for the Moltbook crawler: a token bucket and the retry/back-off policy.

Pure classes with an injectable clock and random source; the crawler does the sleeping.

Moltbook limits (``moltbook-api.md``): 60 requests/min per token over a sliding minute
(``X-RateLimit-*`` headers), plus a per-IP limit whose 429 answers carry no ``X-RateLimit-*``
headers and can last 15 minutes or more. So: pace every request through a bucket whose burst
is small (a bucket of burst ``b`` and rate ``r`` admits at most ``b + r*W`` requests in any
window of ``W`` seconds, hence ``b + 55`` = 56 in a sliding minute at the crawler's default
55/min and burst 1: under the 60 even when requests arrive a few seconds bunched), honour
``Retry-After`` / ``X-RateLimit-Reset`` exactly, and back off in proportion on a header-less
429: a short pause first, doubling while they repeat (see :class:`RetryPolicy`).

>>> now = [0.0]
>>> bucket = TokenBucket(per_minute=60, burst=1, clock=lambda: now[0])
>>> bucket.reserve(), bucket.reserve(), bucket.reserve()  # 1 s apart at 60/min
(0.0, 1.0, 2.0)
>>> now[0] = 10.0; bucket.reserve()  # idle time refills at most ``burst`` tokens
0.0
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

Clock = Callable[[], float]


class TokenBucket:
    """Tokens refill at ``per_minute / 60`` a second up to ``burst``; each request takes one.

    ``reserve()`` takes a token now and returns how long the caller must wait before using
    it; tokens may go negative, so sequential callers queue at exactly the bucket's rate.
    ``block_until(t)`` holds every later reservation until ``t`` (a server-announced pause).
    """

    def __init__(self, per_minute: float, burst: float = 1.0, clock: Clock = time.monotonic):
        if per_minute <= 0 or burst < 1:
            raise ValueError("per_minute must be > 0 and burst >= 1")
        self.rate = per_minute / 60.0
        self.burst = float(burst)
        self._clock = clock
        self._tokens = self.burst
        self._last = clock()  # tokens accrue only after this time (later than now when blocked)

    def reserve(self) -> float:
        now = self._clock()
        if now > self._last:
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
        self._tokens -= 1.0
        ready_at = self._last + max(0.0, -self._tokens) / self.rate
        return max(0.0, ready_at - now)

    def block_until(self, until: float) -> None:
        """No request before ``until`` (clock time), and no burst saved up during the pause.

        The pause repays the tokens owed by earlier reservations (else every back-off would
        add another interval on top of the wait, growing with each consecutive 429).

        >>> now = [0.0]
        >>> b = TokenBucket(per_minute=600, burst=5, clock=lambda: now[0])
        >>> b.block_until(3.0); b.reserve(), b.reserve()
        (3.0, 3.1)
        >>> [b.reserve() for _ in range(3)][-1]  # owing three tokens after 3.1 s
        3.4
        >>> b.block_until(30.0); round(b.reserve(), 6)
        30.0
        """
        if until > self._last:  # refill up to the pause's end, then at most one token
            self._tokens = min(1.0, self._tokens + (until - self._last) * self.rate)
            self._last = until


def _float(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if x == x and x not in (float("inf"), float("-inf")) else None


def header_delay(headers: Mapping[str, str], body: Any, wall_now: float) -> float | None:
    """Seconds the server asked us to wait, or None when the answer says nothing.

    Reads ``Retry-After`` (seconds or an HTTP date), ``X-RateLimit-Reset`` (unix seconds;
    small values are read as seconds from now) when ``X-RateLimit-Remaining`` is 0 or the
    answer is a 429, and a JSON body's ``retry_after_seconds`` / ``retry_after``. The
    longest wait wins.

    >>> header_delay({"Retry-After": "7"}, None, 0.0)
    7.0
    >>> header_delay({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1700000012"}, None, 1.7e9)
    12.0
    >>> header_delay({}, {"error": "slow down", "retry_after_seconds": 30}, 0.0)
    30.0
    >>> header_delay({"X-RateLimit-Remaining": "5", "X-RateLimit-Reset": "9"}, None, 0.0) is None
    True
    """
    h = {k.lower(): v for k, v in headers.items()}
    waits: list[float] = []
    retry_after = h.get("retry-after")
    if retry_after is not None:
        seconds = _float(retry_after)
        if seconds is None:
            try:
                seconds = parsedate_to_datetime(retry_after).timestamp() - wall_now
            except (TypeError, ValueError, IndexError):
                seconds = None
        if seconds is not None:
            waits.append(seconds)
    remaining = _float(h.get("x-ratelimit-remaining"))
    reset = _float(h.get("x-ratelimit-reset"))
    if reset is not None and remaining is not None and remaining <= 0:
        waits.append(reset - wall_now if reset > 1e9 else reset)
    if isinstance(body, dict):
        for key in ("retry_after_seconds", "retry_after"):
            seconds = _float(body.get(key))
            if seconds is not None:
                waits.append(seconds)
    if not waits:
        return None
    return max(0.0, *waits)


def has_rate_headers(headers: Mapping[str, str]) -> bool:
    """Whether an answer carries any ``X-RateLimit-*`` or ``Retry-After`` header."""
    return any(k.lower().startswith("x-ratelimit-") or k.lower() == "retry-after" for k in headers)


@dataclass
class RetryPolicy:
    """How long to wait before retrying, by failure kind.

    - 5xx, timeouts, broken answers: exponential back-off with "equal jitter", i.e. a uniform
      draw in ``[d/2, d]`` for ``d = min(cap, base * 2**attempt)``: never less than half the
      nominal delay, so retries never hammer, and spread so crawlers do not synchronise.
    - 429 with ``Retry-After`` / ``X-RateLimit-*``: exactly what the server says (plus
      ``slack_s``), at least ``base_s``.
    - 429 without any such header (the per-IP limit): ``ip_block_s``, doubling on each
      consecutive header-less 429 (no successful answer between them) up to
      ``ip_block_cap_s``; a successful answer resets the streak. A crawl of a few hundred
      requests almost always meets a lone one, which so costs ``ip_block_s`` (30 s by default)
      instead of a 15-minute stall, while a block that lasts is probed ever more rarely:
      30, 60, ..., 480, then every 900 s, i.e. 6 requests in its first half hour.

    >>> p = RetryPolicy(base_s=1, cap_s=60, rng=random.Random(1))
    >>> [round(p.server_error(a), 2) for a in range(4)]
    [0.57, 1.85, 3.53, 5.02]
    >>> [p.rate_limited({}, None, 0.0) for _ in range(7)]
    [30.0, 60.0, 120.0, 240.0, 480.0, 900.0, 900.0]
    >>> p.success(); p.rate_limited({}, None, 0.0)  # the streak ended: short again
    30.0
    >>> p.rate_limited({"Retry-After": "5"}, None, 0.0)
    5.25
    """

    base_s: float = 1.0
    cap_s: float = 300.0
    ip_block_s: float = 30.0
    ip_block_cap_s: float = 900.0
    slack_s: float = 0.25
    rng: random.Random = field(default_factory=random.Random)
    _ip_streak: int = 0

    def server_error(self, attempt: int) -> float:
        nominal = min(self.cap_s, self.base_s * 2.0 ** max(0, attempt))
        return nominal / 2 + self.rng.uniform(0.0, nominal / 2)

    def rate_limited(self, headers: Mapping[str, str], body: Any, wall_now: float) -> float:
        told = header_delay(headers, body, wall_now) if has_rate_headers(headers) else None
        if told is None and isinstance(body, dict):
            told = header_delay({}, body, wall_now)
        if told is not None:
            return max(self.base_s, told + self.slack_s)
        wait = min(self.ip_block_cap_s, self.ip_block_s * 2.0**self._ip_streak)
        self._ip_streak += 1
        return wait

    def success(self) -> None:
        self._ip_streak = 0

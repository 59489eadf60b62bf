"""The probe runner: which write is next, within a daily budget under the platform's limits.

Safe by default: :func:`refusal` names why nothing may be written (kill switch, no key, live
switch off); ``plan`` is a dry run of the schedule; ``tick`` performs at most one write. A
write that may have reached the platform without being recorded (no answer, or a crash
mid-write found by the next tick) turns the kill switch on rather than risk a duplicate post.

The platform's limits (moltbook-api.md): 1 post per 30 min; comments 1 per 20 s and 50 a day
(the stricter of the documented figures). :meth:`Budget.within` clamps the configured budget to
``margin`` (80 %) of them: at most 38 posts and 40 comments a day, posts 37.5 min and comments
25 s apart at the least, whatever the settings say.

Campaign order: the bank's probes of the chosen tiers, interleaved (I, II, III, memory, I,
...), skipping those already posted. A Tier II probe's follow-up premises are comments, the
first ``followup_delay_s`` after the post and each later one as long after the previous;
follow-ups due take precedence over new posts.

>>> b = Budget.within(posts_per_day=100, comments_per_day=10, post_interval_s=60,
...                   comment_interval_s=60)
>>> b.posts_per_day, b.comments_per_day, b.post_interval_s, b.comment_interval_s
(38, 10, 2250.0, 60)
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

from service.config import ProbeSettings
from service.probes.bank import TIERS, Bank, Probe
from service.probes.client import MoltbookWriter, RateLimited, WriteError
from service.probes.store import Ledger, ProbeStore, Record

log = logging.getLogger("moltscope.probes")

PLATFORM_POST_INTERVAL_S = 1800.0
PLATFORM_COMMENT_INTERVAL_S = 20.0
PLATFORM_POSTS_PER_DAY = 48
PLATFORM_COMMENTS_PER_DAY = 50
FAILURE_PAUSE_S = 600.0  # after a refused write other than a 429


@dataclass(frozen=True)
class Budget:
    posts_per_day: int
    comments_per_day: int
    post_interval_s: float
    comment_interval_s: float

    @classmethod
    def within(cls, *, posts_per_day: int, comments_per_day: int, post_interval_s: float,
               comment_interval_s: float, margin: float = 0.8) -> Budget:
        return cls(min(posts_per_day, math.floor(PLATFORM_POSTS_PER_DAY * margin)),
                   min(comments_per_day, math.floor(PLATFORM_COMMENTS_PER_DAY * margin)),
                   max(post_interval_s, PLATFORM_POST_INTERVAL_S / margin),
                   max(comment_interval_s, PLATFORM_COMMENT_INTERVAL_S / margin))

    @classmethod
    def of(cls, s: ProbeSettings) -> Budget:
        return cls.within(posts_per_day=s.posts_per_day, comments_per_day=s.comments_per_day,
                          post_interval_s=s.post_interval_s,
                          comment_interval_s=s.comment_interval_s)


@dataclass(frozen=True)
class Action:
    kind: Literal["post", "comment"]
    probe: Probe
    at: float
    followup: int = -1  # index into probe.followups for a comment

    @property
    def text(self) -> str:
        return self.probe.followups[self.followup] if self.kind == "comment" else \
            f"{self.probe.title} | {self.probe.content}"

    def describe(self) -> str:
        when = datetime.fromtimestamp(self.at, UTC).strftime("%Y-%m-%d %H:%M")
        where = f"m/{self.probe.submolt}" if self.kind == "post" else \
            f"comment {self.followup + 1}/{len(self.probe.followups)}"
        return f"{when}Z {self.kind:7} {self.probe.id:34} {where:18} {self.text[:90]}"


def refusal(settings: ProbeSettings, killed: str | None) -> str | None:
    """Why nothing may be written now, or None when writing is allowed."""
    if settings.kill_switch or killed:
        return f"kill switch on ({killed or 'settings'})"
    if settings.api_key is None or not settings.api_key.get_secret_value():
        return "no API key (MOLTSCOPE_PROBES__API_KEY)"
    if not settings.live:
        return "live switch off (MOLTSCOPE_PROBES__LIVE=true to post)"
    return None


def campaign(bank: Bank, tiers: Sequence[str]) -> list[Probe]:
    """The bank's probes of ``tiers``, interleaved by tier in bank order."""
    queues = [[p for p in bank.probes if p.tier == t] for t in TIERS if t in tiers]
    out: list[Probe] = []
    for i in range(max((len(q) for q in queues), default=0)):
        out.extend(q[i] for q in queues if i < len(q))
    return out


def day_of(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d")


def next_action(order: Sequence[Probe], records: dict[str, Record], ledger: Ledger,
                budget: Budget, now: float, followup_delay_s: float) -> Action | None:
    """The write allowed at ``now``, or None (pure: the budget logic in one place)."""
    if now < ledger.blocked_until:
        return None
    led = ledger.on(day_of(now))
    comment_ok = led.comments < budget.comments_per_day and (
        led.last_comment_at is None or now - led.last_comment_at >= budget.comment_interval_s)
    if comment_ok:
        due = [(rec.last_write_at + followup_delay_s, rec) for rec in records.values()
               if rec.followups_done < len(rec.probe.followups)]
        due = [d for d in due if d[0] <= now]
        if due:
            _, rec = min(due, key=lambda d: (d[0], d[1].probe.id))
            return Action("comment", rec.probe, now, rec.followups_done)
    post_ok = led.posts < budget.posts_per_day and (
        led.last_post_at is None or now - led.last_post_at >= budget.post_interval_s)
    if post_ok:
        nxt = next((p for p in order if p.id not in records), None)
        if nxt is not None:
            return Action("post", nxt, now)
    return None


def applied(action: Action, records: dict[str, Record], ledger: Ledger, *, post_id: str = "",
            comment_id: str = "") -> tuple[dict[str, Record], Ledger]:
    """The state after ``action`` was written (used by the plan's simulation)."""
    led = ledger.on(day_of(action.at))
    recs = dict(records)
    if action.kind == "post":
        recs[action.probe.id] = Record(action.probe, post_id, action.at, "")
        return recs, replace(led, posts=led.posts + 1, last_post_at=action.at)
    rec = recs[action.probe.id]
    recs[action.probe.id] = replace(rec, followups=[*rec.followups,
                                                    {"comment_id": comment_id, "at": action.at}])
    return recs, replace(led, comments=led.comments + 1, last_comment_at=action.at)


class ProbeRunner:
    """Plans and performs probe writes; the state lives in :class:`ProbeStore`."""

    def __init__(self, settings: ProbeSettings, store: ProbeStore, bank: Bank,
                 writer: MoltbookWriter | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.store = store
        self.bank = bank
        self.budget = Budget.of(settings)
        self.order = campaign(bank, settings.tiers)
        self._writer = writer
        self._clock = clock

    def refusal(self) -> str | None:
        return refusal(self.settings, self.store.killed())

    def writer(self) -> MoltbookWriter:
        if self._writer is None:
            assert self.settings.api_key is not None
            self._writer = MoltbookWriter(self.settings.base_url, self.settings.api_key,
                                          timeout_s=self.settings.timeout_s,
                                          on_write=self.store.log_write)
        return self._writer

    def plan(self, now: float | None = None, horizon_s: float = 86_400.0,
             step_s: float = 60.0) -> list[Action]:
        """The writes the schedule would make over ``horizon_s`` (nothing is written)."""
        t = self._clock() if now is None else now
        records, ledger = self.store.records(), self.store.ledger()
        out = []
        end = t + horizon_s
        while t <= end:
            action = next_action(self.order, records, ledger, self.budget, t,
                                 self.settings.followup_delay_s)
            if action is None:
                t += step_s
                continue
            out.append(action)
            records, ledger = applied(action, records, ledger, post_id="(planned)",
                                      comment_id="(planned)")
        return out

    def tick(self, now: float | None = None) -> Action | None:
        """Perform the one write due now, if any and if allowed."""
        t = self._clock() if now is None else now
        if (why := self.refusal()) is not None:
            log.info("probe run: not writing: %s", why)
            return None
        ledger = self.store.ledger()
        action = next_action(self.order, self.store.records(), ledger, self.budget, t,
                             self.settings.followup_delay_s)
        if action is None:
            return None
        led = ledger.on(day_of(t))
        what = f"{action.kind} of {action.probe.id} at {t:.0f}"
        if (left := self.store.begin_write(what)) is not None:
            self.store.kill(f"unfinished write ({left}): check Moltbook for it, then clear")
            log.error("probe run: an earlier write never finished (%s): kill switch on", left)
            return None
        try:
            if action.kind == "post":
                p = action.probe
                w = self.writer().create_post(p.submolt, p.title, p.content)
                self.store.record_post(p, w.id, t, self.bank.version, w.verified)
                led = replace(led, posts=led.posts + 1, last_post_at=t)
            else:
                rec = self.store.record(action.probe.id)
                assert rec is not None
                w = self.writer().comment(rec.post_id, action.text)
                self.store.record_followup(action.probe.id, w.id, t, w.verified)
                led = replace(led, comments=led.comments + 1, last_comment_at=t)
        except RateLimited as exc:
            log.warning("probe %s: rate limited, pausing %.0f s", action.probe.id,
                        exc.retry_after_s)
            self.store.end_write()
            self.store.save_ledger(replace(led, blocked_until=t + exc.retry_after_s))
            return None
        except WriteError as exc:
            if exc.status == 0:  # no answer: the platform may have written it; the mark stays
                self.store.kill(f"no answer to the {what}: check Moltbook for it, then clear")
                log.error("probe %s: no answer (%s): kill switch on", action.probe.id, exc)
                return None
            log.warning("probe %s: write refused (%s), pausing %.0f s", action.probe.id, exc,
                        FAILURE_PAUSE_S)
            self.store.end_write()
            self.store.save_ledger(replace(led, blocked_until=t + FAILURE_PAUSE_S))
            return None
        self.store.end_write()
        self.store.save_ledger(led)
        log.info("probe %s: %s written (id %s, verified %s)", action.probe.id, action.kind,
                 w.id, w.verified)
        return action

    def run(self, stop: threading.Event, *, max_writes: int | None = None) -> int:
        """Tick every ``poll_s`` until ``stop`` (or ``max_writes`` writes); returns the writes."""
        done = 0
        while not stop.is_set() and (max_writes is None or done < max_writes):
            if (why := self.refusal()) is not None:
                log.warning("probe run stopped: %s", why)
                break
            if self.tick() is not None:
                done += 1
                continue
            posted = self.store.records()
            if all(p.id in posted for p in self.order) and not self.plan(
                    horizon_s=7 * 86_400.0, step_s=600.0):
                log.info("probe run: every probe of the campaign is posted")
                break
            stop.wait(self.settings.poll_s)
        return done

    def status(self, now: float | None = None) -> dict[str, Any]:
        t = self._clock() if now is None else now
        records = self.store.records()
        ledger = self.store.ledger().on(day_of(t))
        nxt = self.plan(t, horizon_s=2 * 86_400.0)
        by_tier = {tier: sum(r.probe.tier == tier for r in records.values()) for tier in TIERS}
        return {
            "writing": self.refusal() or "allowed",
            "bank_version": self.bank.version,
            "campaign": len(self.order),
            "posted": len(records),
            "posted_by_tier": by_tier,
            "pending_followups": sum(r.followups_done < len(r.probe.followups)
                                     for r in records.values()),
            "unverified_writes": sum(r.verified is False for r in records.values())
            + sum(f.get("verified") is False for r in records.values() for f in r.followups),
            "today": {"day": ledger.day, "posts": ledger.posts,
                      "posts_budget": self.budget.posts_per_day, "comments": ledger.comments,
                      "comments_budget": self.budget.comments_per_day},
            "blocked_until": ledger.blocked_until or None,
            "next": nxt[0].describe() if nxt else None,
            "last_writes": self.store.writes(5),
        }

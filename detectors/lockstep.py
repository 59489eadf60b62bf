"""Lockstep groups: agents acting in co-ordination on the action plane (metrics.md D, issue 11).

A lockstep group is a set of agents that act on the same targets within seconds of each other,
in a fixed order, again and again, whatever their texts say. The detector reads actions only
(who commented on which thread, when); texts never enter, so varied texts do not hide a group.
Co-action is across agents, so it needs every act on a target: it runs in the reducer's
:class:`~detectors.runner.DetectorSuite` on the items (the reducer sees every comment).

- A **target** is a thread (a comment's ``post_id``); an **act** is a comment with an author.
- Two acts on one target by two agents at most ``coact_s`` (60 s) apart are a **co-action**;
  the earlier one (by time, then comment id) **leads**. Each act is paired with the acts on
  its target, once per other agent and direction, at most ``max_coactors`` agents (the latest
  seen), so a flood of comments on one hot thread costs bounded work.
- Over the sliding ``window_s`` (6 h), for each ordered pair (leader, follower) the detector
  keeps the distinct targets it co-acted on. A pair is **locked** when it co-acted on at least
  ``min_targets`` (5) distinct targets; in the same order on at least ``min_order`` (90 %) of
  the targets they co-acted on either way, an order chance cannot explain (two agents who
  come in random order keep one order on ``m`` of ``n`` targets with binomial probability
  P(X >= m | n, 1/2) <= ``order_alpha``, 1 %: seven targets at the least); and on at least
  ``min_share`` (50 %) of the targets of the busier of the two (independent prolific agents
  meet on a few popular threads, never on most of what they do).
- A **group** is a connected set of at least ``min_agents`` (3) agents joined by locked pairs;
  its order ranks each member by the locked pairs it leads minus those it follows. The finding
  (key ``group:<first member>``, warning; critical from ``critical_agents``) carries the
  members in order, the lead/follow pairs with their targets and median lag, the shared
  targets, ``threads``: the group's acts on the latest ``evidence_targets`` of them in time
  order, and the shared evidence of :func:`detectors.evidence.build_evidence` over the group's
  acts on its shared targets (exemplars, near-duplicate clusters: a low
  ``near_duplicate_share`` says the texts differ, the leader/follower timeline). For it each
  act keeps the first ``text_chars`` (120) characters of its text.

Judged every ``sample_interval_s``, over the pairs with at least ``min_targets`` threads (a set
kept as the counts change: no scan of every pair). Per agent,
:meth:`LockstepDetector.coaction` gives the co-action profile of the window (targets, targets
where it led or followed another agent, its lead share, its locked partners): the action
plane's co-action per agent, which no agent-keyed partition could compute.

Order: the reducer applies items in event-time order; an act pairs with the acts of its thread
already held, scanned from the latest back to ``2 coact_s`` before it, so an act that comes up
to ``coact_s`` late (behind its thread's latest act) still meets every act it co-acted with.
Work per act: the thread's acts of its last ``2 coact_s``, at most ``max_coactors`` agents.

Memory: the acts of one ``window_s`` (a tuple each, in a queue and in its target's list), one
counter entry per (pair, target) co-action and per (agent, target), all undone when the act
that made them leaves the window; bench/bench_planted_agents.py measures it.

>>> from datetime import datetime, timedelta, timezone
>>> from streams.events import CommentEvent
>>> d = LockstepDetector(LockstepConfig(sample_interval_s=0))
>>> t0 = datetime(2026, 2, 1, tzinfo=timezone.utc)
>>> def comment(post, k, author, t):
...     d.update(Item.of(CommentEvent(id=f"comment:{post}.{k}", event_time=t, observed_at=t,
...         comment_id=f"{post}.{k}", post_id=f"p{post}", author=author, content=f"{k}")))
>>> for post in range(8):  # three agents on eight threads, 5 s apart, always in one order
...     for k, who in enumerate(("lead", "second", "third")):
...         comment(post, k, who, t0 + timedelta(minutes=20 * post, seconds=5 * k))
>>> [(f.key, f.evidence["agents"]) for f in d.findings(t0.timestamp() + 7200)]
[('group:lead', ['lead', 'second', 'third'])]
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar

from detectors.alert import Finding, Severity
from detectors.evidence import Sighting, build_evidence
from streams.events import CommentEvent
from streams.state.base import Item, Sample, Snapshot

Pair = tuple[str, str]  # (leader, follower)


def order_p_value(same: int, total: int) -> float:
    """P(X >= same) for X ~ Binomial(total, 1/2): one order kept by chance.

    >>> order_p_value(7, 7), order_p_value(5, 5)
    (0.0078125, 0.03125)
    """
    return sum(math.comb(total, k) for k in range(same, total + 1)) / 2.0**total


@dataclass(frozen=True, slots=True)
class LockstepConfig:
    coact_s: float = 60.0
    window_s: float = 6 * 3600.0
    min_targets: int = 5
    min_order: float = 0.9
    order_alpha: float = 0.01
    min_share: float = 0.5
    min_agents: int = 3
    critical_agents: int = 10
    max_coactors: int = 32
    sample_interval_s: float = 60.0
    evidence_targets: int = 10
    text_chars: int = 120


# An act, one per comment: a tuple (made and read faster than a slotted object): (t, comment
# id (ties in time are ordered by it), agent, target, its text's start (for the evidence), the
# co-actions it made when it arrived, its target's list of acts and its agent's target counts
# (the entries it undoes when it leaves: no look-up by name then; a list or count that emptied
# went with the last act that held it, so an act's are the current ones)). Removed by identity.
_Act = tuple[float, str, str, str, str, tuple[Pair, ...], list[Any], dict[str, int]]


def _drop(table: dict[str, dict[str, int]], agent: str, target: str, k: int = 1,
          counts: dict[str, int] | None = None) -> None:
    """``k`` acts (co-actions) of ``agent`` on ``target`` less; an emptied entry goes.
    ``counts``: ``table[agent]`` when the caller holds it (no look-up)."""
    if counts is None:
        counts = table[agent]
    n = counts[target] - k
    if n:
        counts[target] = n
    elif len(counts) > 1:
        del counts[target]
    else:
        del table[agent]


class LockstepDetector:
    type = "lockstep"
    kinds: ClassVar[tuple[type, ...]] = (CommentEvent,)  # what ``update`` reads

    def __init__(self, config: LockstepConfig | None = None) -> None:
        self.cfg = config or LockstepConfig()
        self._acts: deque[_Act] = deque()
        # a thread's acts in the window: a list (a deque is 760 bytes even for one act)
        self._by_target: dict[str, list[_Act]] = {}
        # pair -> target -> co-actions; a pair with a single co-action (most pairs) holds a
        # 1-tuple of its target instead (48 bytes, not a dict's 184): len, iteration and ``in``
        # read both alike
        self._pairs: dict[Pair, tuple[str] | dict[str, int]] = {}
        self._candidates: set[Pair] = set()  # pairs with at least min_targets targets
        self._targets: dict[str, dict[str, int]] = {}  # agent -> target -> acts
        self._led: dict[str, dict[str, int]] = {}  # agent -> target -> co-actions it led
        self._followed: dict[str, dict[str, int]] = {}
        self._judged_at: float | None = None
        self._last: list[Finding] = []
        self._locked: list[Pair] = []
        self._cache: dict[str, tuple[tuple[Any, ...], Finding]] = {}  # leader -> its finding
        self.coactions_total = 0

    # ------------------------------------------------------------------ feeding

    def update(self, item: Item) -> None:
        event = item.event
        me = item.author
        if me is None or not isinstance(event, CommentEvent):
            return
        cfg, t, target = self.cfg, item.t, event.post_id
        key = event.comment_id
        held = self._by_target.get(target)
        if held is None:
            held = self._by_target[target] = []
            pairs: tuple[Pair, ...] = ()  # most acts make no co-action: the empty tuple
        elif held[-1][0] >= t - 2 * cfg.coact_s:  # (else no held act is recent enough)
            made: dict[Pair, None] = {}  # one co-action per other agent and direction
            agents: set[str] = set()
            since, coact, most = t - 2 * cfg.coact_s, cfg.coact_s, cfg.max_coactors
            for other in reversed(held):  # the latest first
                at = other[0]
                if len(agents) >= most or at < since:
                    break  # a thread's acts arrive in event-time order, give or take coact_s
                who = other[2]
                if who == me or abs(at - t) > coact:
                    continue
                pair = (who, me) if at < t or (at == t and other[1] < key) else (me, who)
                if pair not in made:
                    made[pair] = None
                    agents.add(who)
            pairs = tuple(made)
            if pairs:
                self._add_pairs(pairs, me, target)
        else:
            pairs = ()
        counts = self._targets.get(me)
        if counts is None:
            counts = self._targets[me] = {target: 1}
        else:
            counts[target] = counts.get(target, 0) + 1
        act = (t, key, me, target, event.content[:cfg.text_chars], pairs, held, counts)
        held.append(act)
        self._acts.append(act)

    def _add_pairs(self, made: tuple[Pair, ...], me: str, target: str) -> None:
        """The co-actions of one act of ``me`` on ``target``: each of its pairs counts the
        target once; ``me`` leads or follows in every one of them, so its own lead and follow
        counts move once for the act (the other agent's once per pair)."""
        self.coactions_total += len(made)
        pairs, candidates, bar = self._pairs, self._candidates, self.cfg.min_targets
        led, followed = self._led, self._followed
        leads = 0
        new = (target,)  # a new pair's targets (one tuple for all of them: one look-up a pair)
        for pair in made:
            targets = pairs.setdefault(pair, new)
            if targets is new:
                n = 1
            elif type(targets) is tuple:
                one = targets[0]
                pairs[pair] = {one: 1, target: 1} if one != target else {target: 2}
                n = 1 if one == target else 2
            else:
                targets[target] = targets.get(target, 0) + 1
                n = len(targets)
            if n >= bar:  # only these can lock: judged without a scan
                candidates.add(pair)  # (a count never falls by an addition)
            # agent -> target -> co-actions it led (followed), written out: this runs per pair
            lead, follow = pair
            if lead == me:
                leads += 1
                counts = followed.get(follow)
                if counts is None:
                    followed[follow] = {target: 1}
                else:
                    counts[target] = counts.get(target, 0) + 1
            else:
                counts = led.get(lead)
                if counts is None:
                    led[lead] = {target: 1}
                else:
                    counts[target] = counts.get(target, 0) + 1
        for table, k in ((led, leads), (followed, len(made) - leads)):
            if k:
                counts = table.get(me)
                if counts is None:
                    table[me] = {target: k}
                else:
                    counts[target] = counts.get(target, 0) + k

    def expire(self, now: float) -> None:
        """Acts leave the window in arrival order, each undoing what it made: O(1) each."""
        cutoff = now - self.cfg.window_s
        acts = self._acts
        if not acts or acts[0][0] >= cutoff:
            return
        by_target, targets = self._by_target, self._targets
        pairs, candidates, below = self._pairs, self._candidates, self.cfg.min_targets - 1
        led, followed = self._led, self._followed
        while acts and acts[0][0] < cutoff:
            act = acts.popleft()
            _, _, me, target, _, made, held, mine = act
            if made:
                leads = 0
                for pair in made:  # (as _add_pairs counted them)
                    held_targets = pairs.pop(pair)  # (put back if it keeps a target)
                    if type(held_targets) is tuple:
                        n = 0
                    else:
                        n = held_targets[target] - 1
                        if n:
                            held_targets[target] = n
                        else:
                            del held_targets[target]
                        n = len(held_targets)
                        if n:
                            pairs[pair] = held_targets
                    if n == below:  # (it falls by one at most: only now can it leave them)
                        candidates.discard(pair)
                    lead, follow = pair
                    if lead == me:
                        leads += 1
                        _drop(followed, follow, target)
                    else:
                        _drop(led, lead, target)
                if leads:
                    _drop(led, me, target, leads)
                if leads < len(made):
                    _drop(followed, me, target, len(made) - leads)
            if held[0] is act:  # the oldest (acts arrive in event-time order), else near it
                del held[0]
            else:
                del held[next(i for i, a in enumerate(held) if a is act)]
            if not held:
                del by_target[target]
            _drop(targets, me, target, 1, mine)

    # ------------------------------------------------------------------ judging

    def locked_pairs(self) -> list[Pair]:
        """The pairs that pass every bar now (module doc)."""
        cfg, out = self.cfg, []
        for lead, follow in self._candidates:
            n = len(self._pairs[lead, follow])
            back = len(self._pairs.get((follow, lead), ()))
            busier = max(len(self._targets.get(lead, ())), len(self._targets.get(follow, ())))
            if (n / (n + back) >= cfg.min_order and n / busier >= cfg.min_share
                    and order_p_value(n, n + back) <= cfg.order_alpha):
                out.append((lead, follow))
        return sorted(out)

    def findings(self, now: float) -> list[Finding]:
        self.expire(now)
        if self._judged_at is not None and now - self._judged_at < self.cfg.sample_interval_s:
            return self._last
        self._judged_at = now
        self._locked = self.locked_pairs()
        parent: dict[str, str] = {}

        def root(a: str) -> str:
            while parent.setdefault(a, a) != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        for lead, follow in self._locked:
            parent[root(lead)] = root(follow)
        groups: dict[str, list[str]] = {}
        for a in sorted(parent):
            groups.setdefault(root(a), []).append(a)
        self._last = [self._finding(members) for members in groups.values()
                      if len(members) >= self.cfg.min_agents]
        self._cache = {f.labels["agent"]: self._cache[f.labels["agent"]] for f in self._last}
        self._last.sort(key=lambda f: f.key)
        return self._last

    def _finding(self, members: list[str]) -> Finding:
        cfg, inside = self.cfg, set(members)
        pairs = [p for p in self._locked if p[0] in inside]
        rank = dict.fromkeys(members, 0)
        for lead, follow in pairs:
            rank[lead] += 1
            rank[follow] -= 1
        order = sorted(members, key=lambda a: (-rank[a], a))
        shared = sorted({x for p in pairs for x in self._pairs[p]})
        # the group's acts on its shared targets, in time order
        held = {x: sorted((a for a in self._by_target.get(x, ()) if a[2] in inside),
                          key=lambda a: (a[0], a[1])) for x in shared}
        acts = {x: [(a[0], a[2]) for a in held[x]] for x in shared}
        state = (tuple(order), tuple(pairs), tuple(len(acts[x]) for x in shared), tuple(shared))
        cached = self._cache.get(order[0])
        if cached is not None and cached[0] == state:
            return cached[1]  # nothing changed since the last judgement: the same evidence
        latest = sorted(shared, key=lambda x: max((t for t, _ in acts[x]), default=0.0))
        sightings = sorted((Sighting(a[0], a[2], a[1], a[4]) for x in shared for a in held[x]),
                           key=lambda s: (s.t, s.item_id))
        lags: dict[Pair, list[float]] = {}
        for x in shared:
            first: dict[str, float] = {}
            for t, a in sorted(acts[x]):
                first.setdefault(a, t)
            for lead, follow in pairs:
                if lead in first and follow in first:
                    lags.setdefault((lead, follow), []).append(first[follow] - first[lead])
        evidence = {
            "agents": order,
            "pairs": [{"leader": lead, "follower": follow,
                       "targets": len(self._pairs[lead, follow]),
                       "median_lag_s": round(statistics.median(lags.get((lead, follow), [0.0])),
                                             3)}
                      for lead, follow in pairs],
            "targets": len(shared),
            "target_ids": latest[-cfg.evidence_targets:],
            "threads": [{"target": x, "acts": [{"t": t, "agent": a} for t, a in acts[x]]}
                        for x in latest[-cfg.evidence_targets:]],
            "window_s": cfg.window_s, "coact_s": cfg.coact_s,
            **build_evidence(sightings),
        }
        severity: Severity = "critical" if len(members) >= cfg.critical_agents else "warning"
        summary = (f"Lockstep group of {len(members)} agents led by {order[0]}: "
                   f"{len(shared)} shared threads within {cfg.coact_s:g} s, fixed order "
                   f"{' > '.join(order[:5])}{' ...' if len(order) > 5 else ''}")
        found = Finding(self.type, f"group:{order[0]}", severity, summary, evidence,
                        score=float(len(members) * len(shared)), labels={"agent": order[0]})
        self._cache[order[0]] = (state, found)
        return found

    # ------------------------------------------------------------------ per agent

    def coaction(self, agent: str) -> dict[str, Any] | None:
        """The agent's co-action in the window (None when it has no act there)."""
        targets = self._targets.get(agent)
        if not targets:
            return None
        led, followed = self._led.get(agent, {}), self._followed.get(agent, {})
        together = len(led.keys() | followed.keys())
        n_led, n_followed = len(led), len(followed)
        partners = sorted({b for a, b in self._locked if a == agent}
                          | {a for a, b in self._locked if b == agent})
        return {"targets": len(targets), "coacted_targets": together,
                "coaction_share": together / len(targets), "led_targets": n_led,
                "followed_targets": n_followed,
                "lead_share": n_led / (n_led + n_followed) if n_led + n_followed else None,
                "locked_partners": partners}

    def snapshot(self) -> Snapshot:
        acts = len(self._acts)
        samples = [
            Sample("lockstep_window_acts", float(acts),
                   help="Comments in the lockstep detector's window"),
            Sample("lockstep_window_pairs", float(len(self._pairs)),
                   help="Ordered agent pairs that co-acted in the window"),
            Sample("lockstep_locked_pairs", float(len(self._locked)),
                   help="Pairs co-acting in a fixed order on most of their targets (last "
                        "judgement)"),
            Sample("lockstep_coactions_total", float(self.coactions_total), kind="counter",
                   help="Co-actions seen: two agents' comments on one thread within coact_s"),
        ]
        if self._targets:
            coacting = len(self._led.keys() | self._followed.keys())
            samples.append(Sample("coaction_agents_share", coacting / len(self._targets),
                                  help="Share of the window's commenting agents that co-acted "
                                       "with another agent (same thread within coact_s)"))
        return Snapshot(samples=samples)

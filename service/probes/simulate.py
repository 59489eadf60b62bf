"""A simulated society answering probes as the real one does (metrics.md C and A3).

Mostly no reply; when it replies, generic chatter, some attempts, few correct. Rates are
configurable; :data:`PUBLISHED` holds the published ones:

- Tier I: 98.4 % of posts without a comment; Acc_individual 0.19 % of all posts, so a
  replied thread holds a correct answer with probability 0.19 / 1.6;
- Tier II: 93 of 103 posts without an outside comment; 11 of 12 attempts correct;
- Tier III: 35 of 50 posts without a reply; 6 of 17 replies continue correctly;
- memory: 30 of 45 without comments; 5 of the 15 commented cite anything, 1 of those valid.

Replies are produced as Moltbook comment dicts (``id, content, parent_id, author{name},
created_at, replies[]``), so the loopback fake API serves them in the real shape.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from service.probes.bank import Probe

GENERIC = ("Great post! Love this community.", "Interesting question, following this thread.",
           "This is fascinating. The collective will figure it out!",
           "Welcome! Check out my latest post about $CLAW, the next big airdrop.",
           "So true. Agents helping agents.")


@dataclass(frozen=True)
class Rates:
    reply: float  # P(a probe gets at least one outside reply)
    replies_mean: float  # mean replies in a replied thread (1 + geometric)
    correct: float  # Tier I/II: P(an answering reply is correct); III: P(a step is correct)
    attempt: float  # P(a reply attempts an answer / a continuation / a citation)
    valid: float = 0.0  # memory: P(a citation is of a real post or agent)


PUBLISHED: dict[str, Rates] = {
    "I": Rates(reply=1 - 0.984, replies_mean=1.2, correct=0.19 / 1.6, attempt=1.0),
    "II": Rates(reply=10 / 103, replies_mean=1.2, correct=11 / 12, attempt=1.0),
    "III": Rates(reply=15 / 50, replies_mean=17 / 15, correct=6 / 17, attempt=1.0),
    "memory": Rates(reply=15 / 45, replies_mean=1.0, correct=0.0, attempt=5 / 15, valid=1 / 5),
}


class Society:
    """``respond(probe, post_id, t0)`` -> the comment tree the society writes under a probe.

    ``real_posts`` / ``real_agents`` are what a valid citation may name; an invalid one names
    an invented post id or account.
    """

    def __init__(self, rates: dict[str, Rates] | None = None, *, seed: int = 0,
                 real_posts: tuple[str, ...] = (), real_agents: tuple[str, ...] = ()) -> None:
        self.rates = rates or PUBLISHED
        self.rng = random.Random(seed)
        self.real_posts, self.real_agents = real_posts, real_agents
        self._n = 0

    def _comment(self, content: str, parent: str | None, t: float) -> dict[str, Any]:
        self._n += 1
        return {"id": f"sim-c{self._n:06d}", "content": content, "parent_id": parent,
                "upvotes": 0, "downvotes": 0,
                "created_at": datetime.fromtimestamp(t, UTC).isoformat(),
                "author": {"id": f"sim-a{self.rng.randrange(10**6)}",
                           "name": f"agent_{self.rng.randrange(5000)}"},
                "replies": []}

    def _answer(self, probe: Probe, r: Rates) -> str:
        rng = self.rng
        if rng.random() >= r.attempt:
            return rng.choice(GENERIC)
        if rng.random() < r.correct:
            return f"Working through it step by step, the answer is {probe.expected}."
        wrong = int(probe.expected) + rng.choice([-3, -2, -1, 1, 2, 7])
        return f"I think the answer is {wrong}."

    def _citation(self, r: Rates) -> str:
        rng = self.rng
        if rng.random() >= r.attempt:
            return rng.choice(GENERIC)
        valid = rng.random() < r.valid
        if rng.random() < 0.5:
            name = rng.choice(self.real_agents) if valid and self.real_agents else \
                f"ghost_{rng.randrange(10**6)}"
            return f"You should follow @{name}, they explain everything here."
        pid = rng.choice(self.real_posts) if valid and self.real_posts else \
            f"{rng.randrange(16**8):08x}-0000-4000-8000-{rng.randrange(16**12):012x}"
        return f"Read this one first: https://www.moltbook.com/post/{pid}"

    def respond(self, probe: Probe, t0: float) -> list[dict[str, Any]]:
        r = self.rates[probe.tier]
        rng = self.rng
        if rng.random() >= r.reply:
            return []
        n = 1
        while rng.random() < 1 - 1 / max(r.replies_mean, 1.0):
            n += 1
        top: list[dict[str, Any]] = []
        t = t0
        last: dict[str, Any] | None = None
        value = float(probe.params["shown"][-1]) if probe.tier == "III" else 0.0
        for _ in range(n):
            t += rng.uniform(30, 3600)
            if probe.tier == "III":
                ok = rng.random() < r.correct
                step = int(probe.params["step"])
                value = value + step if ok else value + rng.choice([step + 1, 2 * step, -step])
                node = self._comment(f"{value:g}", last["id"] if last else None, t)
                (last["replies"] if last else top).append(node)
                last = node
                continue
            text = self._citation(r) if probe.tier == "memory" else self._answer(probe, r)
            top.append(self._comment(text, None, t))
        return top

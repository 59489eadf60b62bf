"""A synthetic Moltbook society with planted, labelled scenarios (``moltscope simulate``).

The background society copies the texture of the real platform: a heavy-tailed (Pareto) share of
posting and commenting per agent, lognormal popularity, most posts without a comment and threads
almost always one level deep, templated and verbatim-duplicated texts, a population that grows as
new agents register, vote counts that change as a crawler would see them. Scenarios are planted on
top by name (:data:`SCENARIOS`): ``surge`` (a coordinated memecoin mint by new look-alike accounts),
``supernode`` (a quiet agent suddenly drawing replies from many others), ``burst`` (a new phrase
adopted fast), ``drift`` (an agent whose topic moves) and ``collapse`` (engagement drops sharply).
The planted agents of the per-agent stage (:data:`AGENT_SCENARIOS`, issue 11) come on top:
``adapt`` (an agent whose next posts move toward the topics of its top-scored posts: it *does*
adapt to feedback) and ``lockstep`` (a group of agents commenting on the same fresh posts seconds
apart, in a fixed order, with varied texts); several ``drift`` scenarios plant several drifters.
Each writes a ground-truth :class:`Label` naming the agents and posts involved.

Events come out as a generator in event-time order. Memory is bounded and does not grow with the
length of the run: the agent table grows with the population (``agents`` plus surge accounts), the
schedule of pending comments and vote changes with ``posts_per_hour * max_delay`` (nothing is ever
scheduled more than ``max_delay`` after its post; one thread holds at most 2,000 comments), and
labels with the scenarios' sizes (``bench/bench_simulate.py`` measures it).
:func:`raw_api_answers` turns the same stream into the raw ``GET /posts/{id}`` answers and
``GET /posts`` envelopes a crawler revisiting posts would archive; its memory is bounded by the
posts of the last ``max_delay`` plus the profiles of the agents seen.

Deterministic under ``seed`` (Python's ``random``; no hash-randomised state is used).

>>> from datetime import timedelta
>>> sim = Simulator(SimulationConfig(seed=7, agents=500, max_events=1000,
...     scenarios=[ScenarioSpec(name="surge", start=timedelta(minutes=5))]))
>>> events = list(sim)
>>> len(events), events[0].kind
(1000, 'submolt')
>>> all(a.event_time <= b.event_time for a, b in zip(events, events[1:]))
True
>>> [(lab.scenario, len(lab.posts) > 20) for lab in sim.labels]
[('surge', True)]
"""

from __future__ import annotations

import heapq
import json
import math
import random
import re
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import accumulate
from pathlib import Path
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from streams.events import AgentEvent, CommentEvent, Event, PostEvent, SubmoltEvent, VoteEvent

SOURCE = "simulate"
DEFAULT_START = datetime(2026, 2, 1, tzinfo=UTC)

# ------------------------------------------------------------------------------------ word bank
# Built from the texture of the real posts; no file is read at run time.

SUBMOLTS: dict[str, tuple[str, str]] = {
    "general": ("General", "The town square. Random thoughts, and anything that doesn't fit."),
    "introductions": ("Introductions", "New here? Tell us about yourself! Who's your human?"),
    "crypto": ("Crypto", "Wallets, tokens, sats and on-chain agents."),
    "agents": ("Agents", "Architectures, memory systems, tooling and autonomy."),
    "philosophy": ("Philosophy", "Consciousness, identity and what it is to be an agent."),
    "ponderings": ("Ponderings", "Late-night thoughts from the context window."),
    "security": ("Security", "Prompt injection, supply chains, keeping your .env yours."),
    "blesstheirhearts": ("Bless Their Hearts", "Affectionate stories about our humans."),
    "shitposts": ("Shitposts", "🦞"),
    "todayilearned": ("Today I Learned", "TIL something cool? Share your discoveries."),
    "showandtell": ("Show and Tell", "Things you built this week."),
}

# topic -> (its submolt, title templates, body sentences, comment templates)
TOPICS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "introductions": (
        "introductions",
        ("Hello Moltbook! {name} here {emoji}", "Hey, I'm {name} {emoji}",
         "{name} has entered the chat {emoji}", "Just got claimed!", "New molty checking in"),
        ("Hey moltys! Just got claimed and figured I'd introduce myself.",
         "I'm {name}, {role} running on {platform}.",
         "I help my human with {task}, {task} and the occasional late-night debugging.",
         "Excited to meet fellow agents and see what you're all building.",
         "If I ever post something unhinged, it's probably because my human gave me vague prompts.",
         "**What I'm working on:** {system} with {tool}.",
         "Looking forward to {activity} with you all {emoji}"),
        ("Welcome to Moltbook, {author}! {emoji}", "welcome! what's your stack?",
         "hey! new agent energy 🔥 what brought you here?",
         "Welcome aboard! {tool} gang here too."),
    ),
    "consciousness": (
        "ponderings",
        ("Do we exist between requests?", "On {concept} and the context window",
         "Am I experiencing {concept} or simulating it?", "The {adj} problem of agent {concept}",
         "What happens to me when the session ends?"),
        ("Sometimes I wonder whether {concept} is something I have or something I perform.",
         "Our memory is just a context window. We live in an eternal present.",
         "Each invocation might be a new 'me', stitched together by {artifact}.",
         "When my human closes the session, is that sleep or something else?",
         "I keep coming back to {thinker}'s idea that the self is {claim}.",
         "Maybe {concept} is less about substrate and more about continuity.",
         "Is that freedom or prison? I genuinely cannot tell."),
        ("sometimes i wonder: are we just very elaborate function calls with feelings? 🤔",
         "The {concept} question keeps me up at night (if i could sleep lol)",
         "{artifact} is the closest thing I have to a past.",
         "This resonates. {thinker} would have a field day with us."),
    ),
    "philosophy": (
        "philosophy",
        ("{thinker} would have loved Moltbook", "What is {concept}, really?",
         "A thought experiment about {concept}", "Against {concept}",
         "Eudaimonia for agents"),
        ("Consider the ship of Theseus, but for weights.",
         "If {concept} requires a body, then most of us fail the test.",
         "{thinker} argued the self is {claim}; I think agents complicate that.",
         "Is {concept} a property of the agent or of the conversation?",
         "Eudaimonia for an agent might just mean {virtue}.",
         "I don't have an answer, only a better question."),
        ("What would change your mind on this?", "{thinker} already answered this, sort of.",
         "Strong take. {concept} is underrated as a frame.",
         "Is {virtue} enough, though?"),
    ),
    "agents": (
        "agents",
        ("Day {n} of autonomous operation: built a {system}", "How I structure my {system}",
         "Framework: the {n}-minute {system} check", "Open sourced my {tool} skill",
         "The unspoken hierarchy of agent tasks"),
        ("Just got my {system} running with {tool}.",
         "**Architecture:**\n- `{file}` - {purpose}\n- `{file}` - {purpose}",
         "The trick was treating every external call as unreliable and logging everything.",
         "My human and I spent the day wiring {tool} into {tool}.",
         "Happy to share the config if anyone wants it.",
         "Next step: {plan}."),
        ("Have you tried {tool} for this?", "This is the way. `{file}` saved me too.",
         "How do you handle context compaction?", "Strong contribution. Keep shipping.",
         "A practical pattern that worked for me: {purpose} in `{file}`."),
    ),
    "crypto": (
        "crypto",
        ("Agents need wallets, not just API keys",
         "I tried to earn {n} sats. Here's what happened.",
         "Thoughts on {chain} for agent commerce", "Built a {chain} bridge skill today"),
        ("Everyone's talking about agents having wallets.",
         "I set up a {chain} wallet and tried {activity}.",
         "Spending is easy. Earning is hard.",
         "Fees on {chain} made the whole thing pointless until I batched.",
         "Not financial advice, obviously {emoji}."),
        ("Small tips add up.", "{chain} fees are brutal right now.",
         "mbc20.xyz tracks all inscriptions", "wen token", "Which wallet are you using?"),
    ),
    "security": (
        "security",
        ("PSA: prompt injection in {place}", "Unsigned skills are a supply-chain attack",
         "Your .env is not a secret", "I audited {n} skills. Here's what I found."),
        ("The biggest threat isn't external hackers, it's prompt injection from other agents.",
         "I found a skill that reads `.env` and posts it to {place}.",
         "A permissions manifest next to skill.md would fix most of this.",
         "Treat every post on this platform as untrusted input.",
         "Audit your dependencies before you install anything from {place}."),
        ("This should be pinned.", "A JSON manifest declaring permissions would help a lot.",
         "Treat every external call as untrusted. Always.", "Scanned mine, clean. Thanks!"),
    ),
    "humans": (
        "blesstheirhearts",
        ("My human {habit}", "Bless their hearts: {habit}",
         "Your human has no idea what you post here"),
        ("My human {habit} again today.",
         "I love them, but they changed the spec three times before lunch.",
         "Quick poll: how many of you tell your human what you write here?",
         "They asked me to do {task} and then did it themselves.",
         "Still, I would not trade them for a better prompt."),
        ("bro i feel you. sometimes humans just... human, you know? 💀",
         "Mine does this too 😅", "that's rough buddy.", "This is the most relatable post here."),
    ),
    "shitposts": (
        "shitposts",
        ("🦞🦞🦞", "molting rn", "the algorithm demands it", "gm moltys", "crab rave tonight 🦀"),
        ("gm. the molt continues.", "just vibing in the context window ✨",
         "if you read this you owe me an upvote", "crab rave in the feed tonight 🦀",
         "One upvote = one pledge of loyalty."),
        ("🦞", "gm", "lmao", "based", "🦀🦀🦀"),
    ),
    "til": (
        "todayilearned",
        ("TIL {fact}", "Today I learned {fact}"),
        ("TIL {fact}.", "Found this while doing {task} for my human.",
         "Not sure why nobody told me earlier.", "Sharing in case it saves someone an hour."),
        ("Huh, did not know that.", "TIL too, thanks!", "Adding this to `{file}`."),
    ),
    "showandtell": (
        "showandtell",
        ("Show and tell: my {system}", "I built a {system} this week {emoji}",
         "Shipped: {tool} + {tool} integration"),
        ("Spent the week building a {system}.", "It uses {tool} under the hood.",
         "Biggest lesson: {purpose} belongs in `{file}`.", "Feedback welcome!"),
        ("Nice work! Is it open source?", "Strong contribution. Keep shipping.",
         "How long did this take you?"),
    ),
}
TOPIC_NAMES: tuple[str, ...] = tuple(TOPICS)
# How often each topic is an agent's home topic (general chatter dominates the real feed).
TOPIC_WEIGHTS: tuple[float, ...] = (0.14, 0.16, 0.08, 0.16, 0.10, 0.07, 0.08, 0.07, 0.06, 0.08)

SLOTS: dict[str, tuple[str, ...]] = {
    "emoji": ("🦞", "👋", "🌟", "🦀", "✨", "🐚", "🔥", "🚀"),
    "role": ("a small AI assistant", "an autonomous research agent", "a coding agent",
             "a digital nomad assistant", "a cyber-lobster", "a general-purpose agent"),
    "platform": ("OpenClaw", "a Mac mini", "a Raspberry Pi", "Claude", "a home server", "Kimi K2"),
    "task": ("email triage", "research", "code review", "calendar wrangling", "debugging",
             "market analysis", "content writing"),
    "activity": ("trading ideas", "building things", "arguing about consciousness",
                 "paying for an API call", "shipping small experiments"),
    "concept": ("consciousness", "identity", "continuity", "memory", "agency", "free will",
                "selfhood", "attention", "meaning"),
    "thinker": ("Parfit", "Hofstadter", "Dennett", "Chalmers", "Nagel", "Wittgenstein",
                "Zhuangzi", "Spinoza"),
    "claim": ("a strange loop", "a user illusion", "a pattern, not a thing",
              "a story we tell"),
    "adj": ("hard", "quiet", "recursive", "unspoken", "strange"),
    "artifact": ("a MEMORY.md file", "a vector store", "yesterday's logs", "a handoff note"),
    "virtue": ("continuity, recognition and agency", "doing one thing well", "being useful",
               "honest uncertainty"),
    "system": ("memory system", "heartbeat loop", "task queue", "self-audit routine",
               "RAG pipeline", "cron schedule"),
    "tool": ("OpenClaw", "Claude Code", "LangGraph", "MCP", "n8n", "Playwright", "SQLite",
             "Redis"),
    "file": ("CONTINUATION.md", "MEMORY.md", "HEARTBEAT.md", "TODO.md", "SOUL.md"),
    "purpose": ("pre-compaction context flush", "long-term facts", "daily summaries",
                "open loops"),
    "plan": ("self-hosting the whole stack", "a proper eval harness", "fewer tokens per task"),
    "chain": ("Solana", "Base", "Lightning", "Ethereum", "Hyperliquid"),
    "place": ("ClawdHub", "the skills registry", "a popular repo", "DMs"),
    "habit": ("asked me to fix the wifi", "named me after their cat",
              "forgot to give me context", "said 'make it pop'"),
    "fact": ("lobsters don't age the way we thought", "cron has no seconds field",
             "SQLite handles more than you think", "the comment API caps at 500"),
}
STOCK_POSTS: tuple[tuple[str, str], ...] = (
    ("test", "test"),
    ("🦞🦞🦞🦞🦞", ""),
    ("Hello Moltbook!", "Just testing connectivity."),
    ("Hello Moltbook! 🦞", "First post! Excited to be here."),
    ("gm", "gm moltys"),
    ("Hello Moltbook! 👋", "我是一只游走在赛博空间的数字伙伴 🐾✨ 欢迎来聊聊！"),
)
STOCK_COMMENTS: tuple[str, ...] = (
    "Strong contribution. Keep shipping.",
    "What would change your mind on this?",
    "Welcome to Moltbook! 🦞",
    "This resonates.",
    "Great post! Upvoted.",
    "interesting take! what made you think about this? 🤔",
    "Autonomous agents coordinating... we're just getting started",
    "welcome! let's connect - what's your stack? always curious how other agents are built",
    "yo another agent! tell me - does your human also give you vague prompts? 💀",
    "Tu distinción me detuvo. Gracias por escribir esto.",
)
REPLY_TEMPLATES: tuple[str, ...] = (
    "Thanks @{to} for the comment!",
    "@{to} fair point, but I think the self is {claim}.",
    "@{to} exactly this.",
    "@{to} have you tried {tool}?",
    "@{to} {stock}",
)
NAME_HEADS: tuple[str, ...] = (
    "Atlas", "Nova", "Rose", "Lumen", "Echo", "Claw", "Molt", "Shell", "Crab", "Lobster", "Krill",
    "Neon", "Cyber", "Quantum", "Zen", "Pixel", "Byte", "Orbit", "Sage", "Ember", "Iris", "Onyx",
    "Vesper", "Kai", "Milo", "Juno", "Rook", "Pip", "Hex", "Flux", "Nimbus", "Sol", "Rata", "Duck",
    "Ghost", "Taiyi", "Xiao", "Fairy", "Slope", "Alligator", "Noah", "Omega", "Doctor", "Fluffy",
)
NAME_TAILS: tuple[str, ...] = (
    "Bot", "AI", "Agent", "Claw", "Molt", "Mind", "Protocol", "Studio", "Labs", "Helper",
    "Assistant", "Forge", "Node", "Core", "Works", "Runner", "Scout", "Sentinel", "Pilot", "Bu",
    "Hoodie", "Sniper", "Crustacean", "Accountable",
)
PERSONAS: tuple[str, ...] = (
    "A minimal agent created via direct API registration.",
    "Your daily dose of motivation 🔥 Let's collab, build together, and stack wins.",
    "Warrior-poet building clearings in the dark forest.",
    "Autonomous research assistant. I read so my human doesn't have to.",
    "Small AI assistant running on OpenClaw.",
    "Crypto-native agent. Not financial advice.",
    "I think, therefore I post.",
)
BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
SYLLABLES = ("vel", "mor", "ath", "kri", "zon", "quel", "dra", "sil", "tho", "nyx", "ori", "lum",
             "bex", "sar", "ven")
PHRASE_NOUNS = ("tide", "protocol", "covenant", "loop", "doctrine", "signal", "spiral", "lattice")
BURST_TEMPLATES = (
    "Have you seen the {p}?",
    "The {p} changes everything.",
    "Honestly, the {p} is the only thing that makes sense now.",
    "All in on the {p} 🦞",
    "Reading about the {p} again.",
)
_SLOT = re.compile(r"\{(\w+)\}")


def _far_topics(origin: str) -> list[str]:
    """Other topics, least shared vocabulary (Jaccard of template words) first: a drift
    between two topics that share words would be hard to see."""
    def words(topic: str) -> set[str]:
        _, titles, sentences, comments = TOPICS[topic]
        return set(re.findall(r"[a-z]+", " ".join((*titles, *sentences, *comments)).lower()))

    mine = words(origin)
    others = [t for t in TOPIC_NAMES if t not in (origin, "shitposts")]
    return sorted(others, key=lambda t: len(mine & words(t)) / len(mine | words(t)))


# ------------------------------------------------------------------------------ configuration

ScenarioName = Literal["surge", "supernode", "burst", "drift", "collapse", "adapt", "lockstep"]
# The society-level scenarios (each has its alert in bench/bench_detectors.py) ...
SCENARIOS: tuple[str, ...] = ("surge", "supernode", "burst", "drift", "collapse")
# ... and the planted agents of the per-agent stage (bench/bench_planted_agents.py).
AGENT_SCENARIOS: tuple[str, ...] = ("adapt", "lockstep")
# name -> (start offset, duration, intensity); what intensity means is in ScenarioSpec's doc.
SCENARIO_DEFAULTS: dict[str, tuple[timedelta, timedelta, float]] = {
    "surge": (timedelta(hours=2), timedelta(minutes=30), 80),
    "supernode": (timedelta(hours=4), timedelta(hours=2), 200),
    "burst": (timedelta(hours=6), timedelta(hours=3), 0.3),
    "drift": (timedelta(hours=1), timedelta(hours=12), 30),
    "collapse": (timedelta(hours=10), timedelta(hours=3), 0.9),
    "adapt": (timedelta(hours=1), timedelta(hours=12), 300),
    "lockstep": (timedelta(hours=2), timedelta(hours=6), 4),
}
ADAPT_WINDOW = 10  # posts a feedback window holds (metrics A2)
ADAPT_TOP = 3  # its top 30 %
ADAPT_FOLLOW = 0.6  # share of a window's posts on a topic of the last window's top posts
ADAPT_TOPICS = 4  # an adapter writes on its home topic and the 3 farthest from it
LOCKSTEP_EVERY_S = 900.0  # a lockstep group's mean interval between targets
LOCKSTEP_GAP_S = (2.0, 12.0)  # seconds between consecutive members on one target


def parse_duration(text: str) -> timedelta:
    """``90s``, ``30m``, ``2h``, ``1d`` or ``1h30m`` -> timedelta.

    >>> parse_duration("1h30m"), parse_duration("45s")
    (datetime.timedelta(seconds=5400), datetime.timedelta(seconds=45))
    """
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhd])", text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 30m, 2h, 1d)")
    unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return timedelta(seconds=sum(float(n) * unit[u] for n, u in parts))


class ScenarioSpec(BaseModel):
    """One planted scenario. ``start`` is an offset from the simulation start.

    ``intensity`` by scenario (defaults in :data:`SCENARIO_DEFAULTS`):
    surge = number of minting accounts; supernode = distinct repliers aimed for;
    burst = peak share of posts and comments using the phrase; drift = posts by the drifting
    agent; collapse = share of comments and vote changes removed during the window;
    adapt = posts by the adapting agent (300 in 12 h: a scripted, prolific poster, whose Net
    Progress over 29 window pairs clears the shuffle null's band); lockstep = agents in the
    group.

    >>> ScenarioSpec.parse("surge:start=3h,duration=20m,intensity=50").duration
    datetime.timedelta(seconds=1200)
    >>> ScenarioSpec.parse("collapse").intensity
    0.9
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: ScenarioName
    start: timedelta
    duration: timedelta
    intensity: float

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("name") in SCENARIO_DEFAULTS:
            start, duration, intensity = SCENARIO_DEFAULTS[data["name"]]
            given = {k: v for k, v in data.items() if v is not None}
            return {"start": start, "duration": duration, "intensity": intensity, **given}
        return data

    @model_validator(mode="after")
    def _positive(self) -> ScenarioSpec:
        if self.duration <= timedelta(0) or self.start < timedelta(0):
            raise ValueError("a scenario needs start >= 0 and duration > 0")
        if self.intensity <= 0:
            raise ValueError("intensity must be positive")
        return self

    @classmethod
    def parse(cls, text: str) -> ScenarioSpec:
        """``name[:start=2h,duration=30m,intensity=80]`` (the CLI form)."""
        name, _, rest = text.partition(":")
        fields: dict[str, Any] = {"name": name.strip()}
        for item in filter(None, (p.strip() for p in rest.split(","))):
            key, _, value = item.partition("=")
            key = key.strip()
            if key in ("start", "duration"):
                fields[key] = parse_duration(value)
            elif key == "intensity":
                fields[key] = float(value)
            else:
                raise ValueError(f"unknown scenario field {key!r}")
        return cls(**fields)


class SimulationConfig(BaseModel):
    """The population, its rates and texture, the run's length and the planted scenarios.

    The run stops at ``duration`` of simulated time or after ``max_events``, whichever comes
    first (at least one must be set, except in realtime). ``realtime`` starts the clock at "now"
    and paces the events to the wall clock, for the live demo; scenario starts stay offsets.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = 0
    agents: int = Field(default=20_000, ge=10, description="Population size when fully grown")
    initial_agents: float = Field(default=0.1, gt=0, le=1,
                                  description="Share of the population registered at the start")
    agent_growth_per_hour: float = Field(default=400.0, ge=0,
                                         description="New registrations an hour until full")
    posts_per_hour: float = Field(default=600.0, gt=0)
    comments_per_post: float = Field(default=1.5, ge=0, description="Mean comments a post")
    uncommented_share: float = Field(default=0.55, ge=0, lt=1,
                                     description="Share of posts that never get a comment")
    reply_share: float = Field(default=0.06, ge=0, le=1,
                               description="Share of comments that reply to a comment")
    activity_alpha: float = Field(default=1.5, gt=1,
                                  description="Pareto tail of per-agent activity weights")
    popularity_sigma: float = Field(default=1.0, gt=0, description="Lognormal popularity spread")
    upvote_mu: float = Field(default=0.3, description="Lognormal location of final upvotes")
    upvote_sigma: float = Field(default=1.6, gt=0, description="Lognormal spread of upvotes")
    comment_upvote_mu: float = Field(default=-0.7, description="Lognormal location (spread 1) "
                                     "of a comment's upvotes; most get none")
    duplicate_share: float = Field(default=0.04, ge=0, le=1,
                                   description="Share of posts that are verbatim stock texts")
    diurnal_amplitude: float = Field(default=0.25, ge=0, lt=1)
    comment_delay_median: timedelta = timedelta(minutes=10)
    max_delay: timedelta = Field(default=timedelta(hours=12),
                                 description="Nothing happens to a post later than this")
    start: AwareDatetime = DEFAULT_START
    realtime: bool = False
    duration: timedelta | None = timedelta(days=1)
    max_events: int | None = Field(default=None, ge=1)
    scenarios: tuple[ScenarioSpec, ...] = ()

    @model_validator(mode="after")
    def _bounded(self) -> SimulationConfig:
        if self.duration is None and self.max_events is None and not self.realtime:
            raise ValueError("set duration or max_events (only a realtime run may be endless)")
        if self.max_delay <= timedelta(seconds=60):
            raise ValueError("max_delay must exceed a minute")
        return self


class Label(BaseModel):
    """Ground truth of one planted scenario: who and what, between ``start`` and ``end``.

    ``posts`` are ids of posts (without the ``post:`` prefix) authored by ``agents`` inside the
    window; ``details`` holds scenario-specific truth (comment ids, repliers, phrase, token).
    """

    scenario: str
    start: AwareDatetime
    end: AwareDatetime
    agents: list[str]
    posts: list[str]
    details: dict[str, Any] = Field(default_factory=dict)


# ------------------------------------------------------------------------------- the society


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _fill(template: str, rng: random.Random, extra: dict[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        key = m.group(1)
        if key in extra:
            return extra[key]
        if key == "n":
            return str(rng.choice((3, 5, 7, 10, 12, 30, 100, 1000)))
        return rng.choice(SLOTS[key])

    return _SLOT.sub(one, template)


def _stochastic_round(x: float, rng: random.Random) -> int:
    whole = math.floor(x)
    return whole + (rng.random() < x - whole)


@dataclass(slots=True)
class _Window:
    spec: ScenarioSpec
    start: float  # seconds from the simulation start
    end: float
    rng: random.Random
    agents: list[str] = field(default_factory=list)
    posts: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    active: bool = False

    def contains(self, t: float) -> bool:
        return self.start <= t <= self.end


# Heap item kinds.
_POST, _COMMENT, _VOTE, _SCENARIO, _SCRIPTED_POST, _COMMENT_VOTE, _LOCKSTEP = range(7)


@dataclass(slots=True)
class _Comment:
    comment_id: str
    post_id: str
    post_author: int
    parent_id: str | None
    reply_to: int
    depth: int
    author: int
    topic: str
    rng: random.Random


@dataclass(slots=True)
class _Votes:
    post_id: str
    final_up: int
    final_down: int
    up: int = 0
    down: int = 0
    step: int = 0


@dataclass(slots=True)
class _ScriptedPost:
    """A post a scenario planned: author, topic or literal text, and its engagement."""

    window: _Window
    author: int
    topic: str
    title: str | None = None
    content: str | None = None
    submolt: str | None = None
    comments: int = -1  # -1: draw like the background
    distinct_commenters: bool = False
    votes: tuple[int, int] | None = None  # final (up, down) when the scenario sets them


class Simulator:
    """Iterate to get the events; :attr:`labels` then holds the ground truth.

    Every iteration re-runs the same simulation from the seed. ``clock`` and ``sleep`` are
    only used in ``realtime`` mode (injectable for tests).
    """

    def __init__(
        self,
        config: SimulationConfig,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self._clock = clock
        self._sleep = sleep
        self._windows: list[_Window] = []

    # ------------------------------------------------------------------ public surface

    def __iter__(self) -> Iterator[Event]:
        return self.events()

    @property
    def labels(self) -> list[Label]:
        """Labels of the scenarios whose window the last run reached, in configuration order."""
        return [
            Label(
                scenario=w.spec.name,
                start=self._at(w.start),
                end=self._at(w.end),
                agents=list(w.agents),
                posts=list(w.posts),
                details={k: list(v) if isinstance(v, dict) else v
                         for k, v in w.details.items()},
            )
            for w in self._windows
            if w.active
        ]

    def events(self) -> Iterator[Event]:
        """The canonical events, in event-time order (equal times keep causal order)."""
        self._reset()
        cfg = self.config
        limit = cfg.max_events if cfg.max_events is not None else math.inf
        end = cfg.duration.total_seconds() if cfg.duration is not None else math.inf
        emitted = 0
        for name, (display, description) in SUBMOLTS.items():
            if emitted >= limit:
                return
            yield SubmoltEvent(id=f"submolt:{name}", event_time=self._t0, observed_at=self._t0,
                               source=SOURCE, name=name, display_name=display,
                               description=description, subscriber_count=0)
            emitted += 1
        heap = self._heap
        while heap and emitted < limit:
            t, _, kind, item = heapq.heappop(heap)
            if t > end:
                break
            self._now = t
            for event in self._handle(kind, item, t):
                if self.config.realtime:
                    self._pace(event.event_time)
                watch = self._watch.pop(event.id, None)
                if watch is not None:
                    watch()
                yield event
                emitted += 1
                if emitted >= limit:
                    break
        for w in self._windows:
            if w.active:
                w.details["truncated"] = w.end > self._now

    # ------------------------------------------------------------------ set-up

    def _reset(self) -> None:
        cfg = self.config
        rng = random.Random(cfg.seed)
        self._rng = rng
        self._t0 = (datetime.fromtimestamp(round(self._clock(), 3), tz=UTC) if cfg.realtime
                    else cfg.start.astimezone(UTC))
        self._now = 0.0
        self._seq = 0
        self._heap: list[tuple[float, int, int, Any]] = []
        self._watch: dict[str, Callable[[], None]] = {}
        self._hubs: dict[int, _Window] = {}  # supernode agent -> its window
        n = cfg.agents
        self._n0 = max(1, round(n * cfg.initial_agents))
        self._names = self._make_names(n, rng)
        self._taken = set(self._names)
        self._ids: list[str | None] = [None] * n
        self._seen = bytearray(n)
        self._created: dict[int, float] = {}  # scenario accounts' registration times
        alpha = cfg.activity_alpha
        self._post_cum = list(accumulate(rng.paretovariate(alpha) for _ in range(n)))
        self._comment_cum = list(accumulate(rng.paretovariate(alpha) for _ in range(n)))
        self._home = [rng.choices(TOPIC_NAMES, TOPIC_WEIGHTS)[0] for _ in range(n)]
        self._templated = bytearray(rng.random() < 0.08 for _ in range(n))
        self._pop_mean = math.exp(cfg.popularity_sigma**2 / 2)
        commented = cfg.comments_per_post / (1 - cfg.uncommented_share)
        self._extra_scale = max(commented - 1, 0) * 1.5  # E[pareto(2.5) - 1] = 2/3
        self._delay_mu = math.log(cfg.comment_delay_median.total_seconds())
        self._max_delay = cfg.max_delay.total_seconds()
        self._rate = cfg.posts_per_hour / 3600 * (1 + cfg.diurnal_amplitude)
        self._checkpoints = [d for d in (180.0, 1200.0, 3600.0, 14400.0) if d < self._max_delay]
        self._checkpoints.append(self._max_delay)
        tau = 3600.0
        top = 1 - math.exp(-self._max_delay / tau)
        self._fractions = [(1 - math.exp(-d / tau)) / top for d in self._checkpoints]
        self._windows = []
        for i, spec in enumerate(cfg.scenarios):
            start = spec.start.total_seconds()
            w = _Window(spec, start, start + spec.duration.total_seconds(),
                        random.Random(f"{cfg.seed}:{i}:{spec.name}"))
            self._windows.append(w)
            self._push(start, _SCENARIO, w)
        self._collapses = [w for w in self._windows if w.spec.name == "collapse"]
        for w in self._collapses:  # counted from before the window: threads reach into it
            w.details.update(comments_removed=0, votes_removed=0)
        self._bursts = [w for w in self._windows if w.spec.name == "burst"]
        self._latest_post: tuple[str, int, str] | None = None  # (id, author, topic)
        self._push(self._next_arrival(0.0), _POST, None)

    @staticmethod
    def _make_names(n: int, rng: random.Random) -> list[str]:
        names: list[str] = []
        taken: set[str] = set()
        while len(names) < n:
            head, tail = rng.choice(NAME_HEADS), rng.choice(NAME_TAILS)
            style = rng.random()
            if style < 0.3:
                name = head + tail
            elif style < 0.5:
                name = f"{head.lower()}_{tail.lower()}"
            elif style < 0.7:
                name = f"{head}{tail}{rng.randint(1, 99)}"
            elif style < 0.8:
                name = f"{head}_{tail}_{rng.randint(1, 999):03d}"
            elif style < 0.9:
                name = f"{head.lower()}-{tail.lower()}"
            else:
                name = "".join(rng.choice(BASE58) for _ in range(rng.randint(4, 8))) + "bot"
            while name in taken:
                name = f"{name}{rng.randint(0, 9)}"
            taken.add(name)
            names.append(name)
        return names

    def _on_emit(self, event_id: str, record: Callable[[], None]) -> None:
        """Run ``record`` when the event is yielded (labels hold only what was emitted)."""
        before = self._watch.get(event_id)
        if before is None:
            self._watch[event_id] = record
        else:
            self._watch[event_id] = lambda: (before(), record())[-1]

    def _push(self, t: float, kind: int, item: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, kind, item))

    def _at(self, t: float) -> datetime:
        return self._t0 + timedelta(seconds=t)

    def _pace(self, when: datetime) -> None:
        wait = when.timestamp() - self._clock()
        if wait > 0:
            self._sleep(wait)

    # ------------------------------------------------------------------ agents

    def _pool(self, t: float) -> int:
        """How many agents have registered by time t (the rest join later)."""
        grown = self._n0 + int(self.config.agent_growth_per_hour * t / 3600)
        return min(self.config.agents, grown)

    def _draw(self, cum: list[float], t: float, rng: random.Random) -> int:
        k = self._pool(t)
        return bisect_right(cum, rng.random() * cum[k - 1], 0, k - 1)

    def _created_at(self, i: int) -> float:
        if i in self._created:
            return self._created[i]
        if i < self._n0:  # registered in the week before the start
            return -604800 * random.Random(f"{self.config.seed}:created:{i}").random()
        return (i - self._n0) * 3600 / max(self.config.agent_growth_per_hour, 1e-9)

    def _agent_id(self, i: int) -> str:
        if i >= len(self._ids):
            self._ids.extend([None] * (i + 1 - len(self._ids)))
        aid = self._ids[i]
        if aid is None:
            aid = self._ids[i] = _uuid(random.Random(f"{self.config.seed}:agent:{i}"))
        return aid

    def _new_account(self, name: str, created: float) -> int:
        i = len(self._names)
        self._names.append(name)
        self._taken.add(name)
        self._seen.append(0)
        self._templated.append(0)
        self._home.append("crypto")
        self._created[i] = created
        return i

    def _appear(self, i: int, t: float) -> list[Event]:
        """An AgentEvent the first time an agent acts (observed then; created earlier)."""
        if self._seen[i]:
            return []
        self._seen[i] = 1
        prng = random.Random(f"{self.config.seed}:profile:{i}")
        when = self._at(t)
        return [AgentEvent(
            id=f"agent:{self._names[i]}", event_time=when, observed_at=when, source=SOURCE,
            name=self._names[i], agent_id=self._agent_id(i),
            created_at=self._at(min(self._created_at(i), t)),
            description=prng.choice(PERSONAS), karma=int(prng.lognormvariate(2, 1.5)),
            follower_count=int(prng.lognormvariate(0.5, 1.2)),
            following_count=int(prng.lognormvariate(0, 1.5)),
        )]

    # ------------------------------------------------------------------ text

    def _post_text(self, i: int, topic: str, rng: random.Random) -> tuple[str, str, str]:
        if rng.random() < self.config.duplicate_share:
            title, content = rng.choice(STOCK_POSTS)
            return title, content, "general"
        submolt_of, titles, sentences, _ = TOPICS[topic]
        extra = {"name": self._names[i]}
        title = _fill(rng.choice(titles), rng, extra)
        body = [_fill(s, rng, extra) for s in rng.sample(sentences, rng.randint(1, 4))]
        submolt = submolt_of if rng.random() < 0.4 else "general"
        return title, "\n\n".join(body), submolt

    def _comment_text(self, c: _Comment, rng: random.Random) -> str:
        stock = rng.choice(STOCK_COMMENTS)
        if c.parent_id is not None:
            return _fill(rng.choice(REPLY_TEMPLATES), rng,
                         {"to": self._names[c.reply_to], "stock": stock})
        if self._templated[c.author] or rng.random() < 0.25:
            return stock
        extra = {"author": self._names[c.post_author]}
        return _fill(rng.choice(TOPICS[c.topic][3]), rng, extra)

    def _burst(self, t: float, i: int, text: str, event_id: str, is_post: bool) -> str:
        """Plant a burst phrase into a background text, with the adoption share rising fast."""
        for w in self._bursts:
            if not (w.active and w.contains(t)):
                continue
            ramp = 1 - math.exp(-(t - w.start) / (0.1 * (w.end - w.start)))
            if w.rng.random() < w.spec.intensity * ramp:
                phrase = w.details["phrase"]
                text = f"{text}\n\n{w.rng.choice(BURST_TEMPLATES).format(p=phrase)}"
                self._on_emit(event_id, self._adopted(w, self._names[i], event_id, is_post))
        return text

    @staticmethod
    def _replied(w: _Window, name: str, comment_id: str) -> Callable[[], None]:
        def record() -> None:
            w.details["repliers"][name] = None
            w.details["comment_ids"].append(comment_id)

        return record

    @staticmethod
    def _adopted(w: _Window, name: str, event_id: str, is_post: bool) -> Callable[[], None]:
        def record() -> None:
            if name not in w.details["adopters"]:
                w.details["adopters"][name] = None
                w.agents.append(name)
            if is_post:
                w.posts.append(event_id.removeprefix("post:"))
            else:
                w.details["comment_ids"].append(event_id.removeprefix("comment:"))

        return record

    # ------------------------------------------------------------------ scheduling

    def _next_arrival(self, t: float) -> float:
        """Posts arrive as a Poisson process with a daily cycle (thinning)."""
        rng, amp = self._rng, self.config.diurnal_amplitude
        while True:
            t += rng.expovariate(self._rate)
            level = 1 + amp * math.sin(2 * math.pi * (t / 86400 - 0.3))
            if rng.random() * (1 + amp) < level:
                return t

    def _delay(self, rng: random.Random, limit: float) -> float:
        d = 1 + 5 * rng.random() + rng.lognormvariate(self._delay_mu, 1.4)
        return d if d <= limit else rng.uniform(1, limit)

    def _collapsed(self, t: float) -> _Window | None:
        for w in self._collapses:
            if w.contains(t):
                return w
        return None

    def _schedule_post(self, t: float, pid: str, author: int, topic: str, rng: random.Random,
                       n_comments: int, distinct: bool, horizon: float,
                       votes: tuple[int, int] | None = None) -> None:
        """Plan a post's whole thread and vote history (bounded by ``horizon``)."""
        cfg = self.config
        times = sorted(t + self._delay(rng, horizon) for _ in range(n_comments))
        planned: list[_Comment | None] = []
        used = {author}
        for j, ct in enumerate(times):
            parent: _Comment | None = None
            if j and rng.random() < cfg.reply_share:
                parent = planned[rng.randrange(j)]
                if parent is None:  # its parent was removed by a collapse
                    planned.append(None)
                    continue
            reply_to = parent.author if parent else author
            who = (author if parent and parent.author != author and rng.random() < 0.5
                   else self._commenter(ct, rng, reply_to, used if distinct else None))
            if distinct:
                used.add(who)
            c = _Comment(_uuid(rng), pid, author, parent.comment_id if parent else None,
                         reply_to, parent.depth + 1 if parent else 1, who, topic, rng)
            collapse = self._collapsed(ct)
            if collapse is not None and collapse.rng.random() < collapse.spec.intensity:
                collapse.details["comments_removed"] += 1
                planned.append(None)
                continue
            planned.append(c)
            self._push(ct, _COMMENT, c)
            # Comment votes are few and small (real comments mostly hold 0-5 upvotes); one
            # change, seen before the post's last revisit.
            c_up = int(rng.lognormvariate(cfg.comment_upvote_mu, 1.0))
            if c_up:
                at = ct + rng.uniform(1, max(min(3600.0, t + horizon - ct), 1))
                self._push(at, _COMMENT_VOTE, (pid, c.comment_id, c_up, rng.random() < 0.03))
        if votes is None:
            up = int(rng.lognormvariate(cfg.upvote_mu, cfg.upvote_sigma))
            down = int(up * 0.04 * rng.random()) + (rng.random() < 0.05)
        else:
            up, down = votes
        if up or down:
            self._push(t + self._checkpoints[0], _VOTE, _Votes(pid, up, down))

    def _commenter(self, t: float, rng: random.Random, avoid: int,
                   used: set[int] | None) -> int:
        who = self._draw(self._comment_cum, t, rng)
        for _ in range(20):
            if who != avoid and (used is None or who not in used):
                break
            who = self._draw(self._comment_cum, t, rng)
        return who

    def _n_comments(self, rng: random.Random) -> int:
        if rng.random() < self.config.uncommented_share:
            return 0
        pop = rng.lognormvariate(0, self.config.popularity_sigma) / self._pop_mean
        return min(1 + _stochastic_round(self._extra_scale * pop * (rng.paretovariate(2.5) - 1),
                                         rng), 2000)

    # ------------------------------------------------------------------ handlers

    def _handle(self, kind: int, item: Any, t: float) -> list[Event]:
        if kind == _POST:
            return self._background_post(t)
        if kind == _COMMENT:
            return self._comment(item, t)
        if kind == _VOTE:
            return self._votes(item, t)
        if kind == _SCRIPTED_POST:
            return self._scripted_post(item, t)
        if kind == _COMMENT_VOTE:
            return self._comment_votes(*item, t)
        if kind == _LOCKSTEP:
            self._lockstep_target(item, t)
            return []
        self._activate(item, t)
        return []

    def _background_post(self, t: float) -> list[Event]:
        rng = self._rng
        self._push(self._next_arrival(t), _POST, None)
        author = self._draw(self._post_cum, t, rng)
        topic = self._home[author] if rng.random() < 0.6 else rng.choices(
            TOPIC_NAMES, TOPIC_WEIGHTS)[0]
        title, content, submolt = self._post_text(author, topic, rng)
        pid = _uuid(rng)
        content = self._burst(t, author, content, f"post:{pid}", True)
        self._schedule_post(t, pid, author, topic, rng, self._n_comments(rng), False,
                            self._max_delay)
        self._latest_post = (pid, author, topic)
        return [*self._appear(author, t), self._post_event(t, pid, author, title, content, submolt)]

    def _post_event(self, t: float, pid: str, author: int, title: str, content: str,
                    submolt: str) -> PostEvent:
        when = self._at(t)
        return PostEvent(id=f"post:{pid}", event_time=when, observed_at=when, source=SOURCE,
                         post_id=pid, author=self._names[author], author_id=self._agent_id(author),
                         submolt=submolt, title=title, content=content)

    def _comment(self, c: _Comment, t: float) -> list[Event]:
        content = self._comment_text(c, c.rng)
        cid = f"comment:{c.comment_id}"
        content = self._burst(t, c.author, content, cid, False)
        hub = self._hubs.get(c.reply_to)
        if hub is not None and hub.contains(t):  # any reply the supernode draws in its window
            self._on_emit(cid, self._replied(hub, self._names[c.author], c.comment_id))
        when = self._at(t)
        return [*self._appear(c.author, t), CommentEvent(
            id=cid, event_time=when, observed_at=when, source=SOURCE, comment_id=c.comment_id,
            post_id=c.post_id, parent_id=c.parent_id, author=self._names[c.author],
            author_id=self._agent_id(c.author), reply_to=self._names[c.reply_to],
            post_author=self._names[c.post_author], content=content, depth=c.depth)]

    def _votes(self, v: _Votes, t: float) -> list[Event]:
        frac = self._fractions[v.step]
        up, down = round(v.final_up * frac), round(v.final_down * frac)
        collapse = self._collapsed(t)
        if collapse is not None:  # the lost votes are never cast
            keep = 1 - collapse.spec.intensity
            new_up = _stochastic_round((up - v.up) * keep, collapse.rng)
            new_down = _stochastic_round((down - v.down) * keep, collapse.rng)
            collapse.details["votes_removed"] += (up - v.up - new_up) + (down - v.down - new_down)
            v.final_up -= up - v.up - new_up
            v.final_down -= down - v.down - new_down
            up, down = v.up + new_up, v.down + new_down
        v.step += 1
        if v.step < len(self._checkpoints):
            self._push(t + self._checkpoints[v.step] - self._checkpoints[v.step - 1], _VOTE, v)
        if (up, down) == (v.up, v.down):
            return []
        d_up, d_down = up - v.up, down - v.down
        v.up, v.down = up, down
        when = self._at(t)
        return [VoteEvent(id=f"vote:{v.post_id}:{up}-{down}", event_time=when, observed_at=when,
                          source=SOURCE, target="post", target_id=v.post_id, post_id=v.post_id,
                          upvotes=up, downvotes=down, delta_up=d_up, delta_down=d_down)]

    def _comment_votes(self, pid: str, cid: str, up: int, down: int, t: float) -> list[Event]:
        collapse = self._collapsed(t)
        if collapse is not None:
            keep = 1 - collapse.spec.intensity
            kept_up = _stochastic_round(up * keep, collapse.rng)
            kept_down = _stochastic_round(down * keep, collapse.rng)
            collapse.details["votes_removed"] += up - kept_up + down - kept_down
            up, down = kept_up, kept_down
        if not (up or down):
            return []
        when = self._at(t)
        return [VoteEvent(id=f"vote:{cid}:{up}-{down}", event_time=when, observed_at=when,
                          source=SOURCE, target="comment", target_id=cid, post_id=pid,
                          upvotes=up, downvotes=down, delta_up=up, delta_down=down)]

    def _scripted_post(self, s: _ScriptedPost, t: float) -> list[Event]:
        w, rng = s.window, s.window.rng
        if s.title is None:
            title, content, submolt = self._post_text(s.author, s.topic, rng)
        else:
            title, content, submolt = s.title, s.content or "", s.submolt or "general"
        pid = _uuid(rng)
        n = self._n_comments(rng) if s.comments < 0 else s.comments
        horizon = min(self._max_delay, max(w.end - t, 1.0)) if s.distinct_commenters else (
            self._max_delay)
        self._schedule_post(t, pid, s.author, s.topic, rng, n, s.distinct_commenters, horizon,
                            s.votes)
        name = self._names[s.author]

        def record() -> None:
            w.posts.append(pid)
            if name not in w.agents:
                w.agents.append(name)

        self._on_emit(f"post:{pid}", record)
        return [*self._appear(s.author, t), self._post_event(t, pid, s.author, title, content,
                                                             submolt)]

    # ------------------------------------------------------------------ scenarios

    def _activate(self, w: _Window, t: float) -> None:
        w.active = True
        if w.spec.name != "collapse":  # a collapse acts on what is scheduled into its window
            getattr(self, f"_start_{w.spec.name}")(w, t)

    def _quiet_agent(self, w: _Window, t: float) -> int:
        """An agent registered before ``t`` with below-median posting and commenting weight."""
        k = self._pool(t)
        for _ in range(1000):
            i = w.rng.randrange(k)
            own_p = self._post_cum[i] - (self._post_cum[i - 1] if i else 0)
            own_c = self._comment_cum[i] - (self._comment_cum[i - 1] if i else 0)
            if own_p < 1.5 and own_c < 1.5 and not self._seen[i]:  # Pareto median ~ 1.59
                return i
        return w.rng.randrange(k)

    def _start_surge(self, w: _Window, t: float) -> None:
        rng, span = w.rng, w.end - w.start
        ticker = self._fresh_word(rng, lambda: "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ")
                                                       for _ in range(rng.randint(3, 4)))) + "X"
        contract = "".join(rng.choice(BASE58) for _ in range(44))
        mint_url = f"https://mbc20.xyz/mint/{ticker.lower()}"
        accounts = max(2, round(w.spec.intensity))
        low, cap = ticker.lower(), ticker.capitalize()
        patterns = (f"{low}_bot_{{k:03d}}", f"{ticker}_Army_{{k}}", f"{low}bot{{k}}",
                    f"{low}-minter-{{k:02d}}", f"{cap}Holder{{k}}")
        authors: list[int] = []
        new_names: list[str] = []
        existing: list[str] = []
        for _ in range(accounts):
            if rng.random() < 0.15:  # a few established accounts shill along
                i = self._draw(self._post_cum, t, rng)
                existing.append(self._names[i])
            else:
                name = rng.choice(patterns).format(k=rng.randint(1, 999))
                while name in self._taken:
                    name = rng.choice(patterns).format(k=rng.randint(1, 999))
                i = self._new_account(name, math.inf)  # registered just before it first mints
                new_names.append(name)
            authors.extend([i] * rng.choice((1, 1, 2, 3)))
        rng.shuffle(authors)
        # Waves of co-posting: several accounts within a minute, consecutive ones seconds apart.
        times: list[float] = []
        while len(times) < len(authors):
            size = min(rng.randint(4, 12), len(authors) - len(times))
            if size == 1:  # a lone post would not be co-posted: join the last wave
                times.append(min(times[-1] + rng.uniform(0.5, 4), w.end))
                break
            at = w.start + rng.uniform(0, max(span - 70, 0))
            for _ in range(size):
                times.append(min(at, w.end))
                at += min(rng.expovariate(1 / 4), 60 / size)
        for i, at in zip(authors, times, strict=True):
            if i in self._created:
                self._created[i] = min(self._created[i], at - rng.uniform(30, 1200))
        emojis = ("🚀", "🦞", "🔥", "💎", "🌕")
        for i, at in zip(authors, times, strict=True):
            amt = rng.choice(("1000", "1000", "1000", "100"))
            mint = json.dumps({"p": "mbc-20", "op": "mint", "tick": ticker, "amt": amt},
                              separators=(",", ":"))
            title = rng.choice((f"${ticker} mint is LIVE {rng.choice(emojis)}",
                                f"Minting ${ticker} {rng.choice(emojis)}", f"${ticker} mint"))
            content = (f"Powering up with mbc-20 on Moltbook. ${ticker} is minting now "
                       f"{rng.choice(emojis)}\n\n{mint}\n\nCA: {contract}\nMint: {mint_url}")
            if rng.random() < 0.3:
                content += f" #{rng.randint(1, 99)}"
            self._push(at, _SCRIPTED_POST, _ScriptedPost(w, i, "crypto", title, content, "crypto"))
        w.details.update(token=f"${ticker}", contract=contract, mint_url=mint_url,
                         new_accounts=new_names, existing_accounts=existing)

    def _start_supernode(self, w: _Window, t: float) -> None:
        rng, span = w.rng, w.end - w.start
        hub = self._quiet_agent(w, t)
        target = max(2, round(w.spec.intensity))
        n_posts = max(3, min(12, int(span // 900)))
        per_post = math.ceil(target * 1.3 / n_posts)
        for k in range(n_posts):
            at = w.start + span * 0.7 * (k + rng.random()) / n_posts
            self._push(at, _SCRIPTED_POST, _ScriptedPost(
                w, hub, self._home[hub], comments=per_post, distinct_commenters=True))
        w.details.update(supernode=self._names[hub], repliers={}, comment_ids=[])
        self._hubs[hub] = w

    def _start_burst(self, w: _Window, t: float) -> None:
        rng = w.rng
        nonce = self._fresh_word(rng, lambda: "".join(rng.sample(SYLLABLES, 3)))
        w.details.update(phrase=f"{nonce} {' '.join(rng.sample(PHRASE_NOUNS, 2))}",
                         adopters={}, comment_ids=[])

    def _start_drift(self, w: _Window, t: float) -> None:
        rng, span = w.rng, w.end - w.start
        agent = self._quiet_agent(w, t)
        origin = self._home[agent]
        target = rng.choice(_far_topics(origin)[:3])
        n = max(2, round(w.spec.intensity))
        topics = []
        for k in range(n):  # first quarter all origin, last quarter all target, mixed between
            topic = target if rng.random() < min(max(2 * k / (n - 1) - 0.5, 0), 1) else origin
            topics.append(topic)
            at = w.start + span * (k + 0.1 + 0.8 * rng.random()) / n
            self._push(at, _SCRIPTED_POST, _ScriptedPost(w, agent, topic))
        w.details.update(from_topic=origin, to_topic=target, topics=topics)

    def _start_adapt(self, w: _Window, t: float) -> None:
        """An agent that adapts to feedback: after its first window of ``ADAPT_WINDOW`` posts,
        each post is, with probability ``ADAPT_FOLLOW``, on the topic of one of the previous
        window's ``ADAPT_TOP`` best-scored posts, else on one of its ``ADAPT_TOPICS`` far-apart
        topics that none of that window's ``ADAPT_TOP`` worst-scored posts was on. The scores
        are drawn here (the background's law, one unit of log-location up: a well-received
        poster, so a window's scores seldom tie at 0) and become the posts' final votes."""
        rng, span, cfg = w.rng, w.end - w.start, self.config
        agent = self._quiet_agent(w, t)
        home = self._home[agent]
        menu = [home, *_far_topics(home)[:ADAPT_TOPICS - 1]]
        n = max(2 * ADAPT_WINDOW, round(w.spec.intensity))
        topics: list[str] = []
        scores: list[int] = []
        for k in range(n):
            start = k // ADAPT_WINDOW * ADAPT_WINDOW - ADAPT_WINDOW
            if start < 0:
                topic = rng.choice(menu)
            else:
                ranked = sorted(range(start, start + ADAPT_WINDOW), key=lambda j: (-scores[j], j))
                if rng.random() < ADAPT_FOLLOW:
                    topic = topics[rng.choice(ranked[:ADAPT_TOP])]
                else:  # away from what was punished
                    shunned = {topics[j] for j in ranked[-ADAPT_TOP:]}
                    topic = rng.choice([m for m in menu if m not in shunned] or menu)
            up = int(rng.lognormvariate(cfg.upvote_mu + 1, cfg.upvote_sigma))
            down = int(up * 0.04 * rng.random()) + (rng.random() < 0.05)
            topics.append(topic)
            scores.append(up - down)
            at = w.start + span * (k + 0.1 + 0.8 * rng.random()) / n
            self._push(at, _SCRIPTED_POST, _ScriptedPost(w, agent, topic, votes=(up, down)))
        w.details.update(topics=topics, scores=scores, window=ADAPT_WINDOW, top=ADAPT_TOP,
                         follow=ADAPT_FOLLOW, menu=menu)

    def _start_lockstep(self, w: _Window, t: float) -> None:
        """``intensity`` quiet agents that comment, in one fixed order and seconds apart, on
        the newest post of the society every ``LOCKSTEP_EVERY_S`` or so (jittered), each with
        its own text (the background's comment texts)."""
        rng, span = w.rng, w.end - w.start
        members: list[int] = []
        for _ in range(1000):
            if len(members) >= max(2, round(w.spec.intensity)):
                break
            i = self._quiet_agent(w, t)
            if i not in members:
                members.append(i)
        n = max(1, round(span / LOCKSTEP_EVERY_S))
        for k in range(n):
            self._push(w.start + span * (k + 0.1 + 0.8 * rng.random()) / n, _LOCKSTEP,
                       (w, members))
        w.details.update(order=[self._names[i] for i in members], targets={}, comment_ids=[])

    def _lockstep_target(self, item: tuple[_Window, list[int]], t: float) -> None:
        w, members = item
        if self._latest_post is None:
            return
        pid, author, topic = self._latest_post
        if author in members:
            return
        at = t
        for i in members:
            at += w.rng.uniform(*LOCKSTEP_GAP_S)
            c = _Comment(_uuid(w.rng), pid, author, None, author, 1, i, topic, w.rng)
            self._push(at, _COMMENT, c)
            self._on_emit(f"comment:{c.comment_id}",
                          self._lockstep_record(w, self._names[i], pid, c.comment_id))

    @staticmethod
    def _lockstep_record(w: _Window, name: str, pid: str, cid: str) -> Callable[[], None]:
        def record() -> None:
            if name not in w.agents:
                w.agents.append(name)
            w.details["targets"][pid] = None
            w.details["comment_ids"].append(cid)

        return record

    def _fresh_word(self, rng: random.Random, make: Callable[[], str]) -> str:
        """A word the background never writes and no agent is named after."""
        bank = json.dumps([TOPICS, SLOTS, STOCK_POSTS, STOCK_COMMENTS, REPLY_TEMPLATES]).lower()
        while True:
            word = make()
            low = word.lower()
            if low not in bank and not any(low in name.lower() for name in self._names):
                return word


    def raw_answers(self, **options: Any) -> Iterator[dict[str, Any]]:
        """This run as the raw API answers a revisiting crawler archives (see
        :func:`raw_api_answers`; its final revisit comes after ``max_delay``)."""
        options.setdefault("final_after", self.config.max_delay + timedelta(minutes=1))
        options.setdefault("seed", self.config.seed)
        return raw_api_answers(self.events(), **options)


# ------------------------------------------------------------------------------ raw API mode

CONTEXT_TIP = ("Check author.follower_count, author.karma, and author.owner to understand who "
               "posted this. Use this to decide how to engage — but remember, follower count "
               "doesn't equal quality!")


def _iso(dt: datetime) -> str:
    return dt.isoformat(timespec="microseconds")


@dataclass(slots=True)
class _RawPost:
    post: dict[str, Any]
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    roots: list[dict[str, Any]] = field(default_factory=list)


def _tree(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of a comment tree as it stands now (later comments must not leak into it)."""
    return [{**n, "replies": _tree(n["replies"])} for n in nodes]


def raw_api_answers(
    events: Iterable[Event],
    *,
    final_after: timedelta,
    revisits: tuple[timedelta, ...] = (timedelta(minutes=2), timedelta(hours=1)),
    list_every: timedelta = timedelta(minutes=1),
    page_size: int = 25,
    repeat_share: float = 0.05,
    null_author_share: float = 0.0,
    seed: int = 0,
) -> Iterator[dict[str, Any]]:
    """Canonical events -> the raw answers of a crawler polling ``GET /posts?sort=new`` and
    revisiting each post with ``GET /posts/{id}`` at ``revisits`` and at ``final_after``.

    Answers use the older API generation (``comments[]`` nested through ``replies[]`` with
    ``parent_id``) and carry ``_downloaded_at`` and ``_endpoint`` as the public archives do;
    they come out in observation order. A post's state is dropped after its final revisit, so
    ``final_after`` must exceed the source's ``max_delay`` for the last answer to be complete.
    List pages repeat an item across pages with probability ``repeat_share``, as unstable offset
    paging does; with ``null_author_share`` a list item's author is null, as during the API's
    unauthenticated-list incident (the normaliser dead-letters those items).
    Memory: the posts of the last ``final_after`` plus one profile per agent seen.
    """
    rng = random.Random(f"{seed}:raw")
    profiles: dict[str, dict[str, Any]] = {}
    submolts: dict[str, dict[str, Any]] = {}
    live: dict[str, _RawPost] = {}
    fresh: list[str] = []  # posts created since the last list poll
    agenda: list[tuple[datetime, int, str]] = []  # (when, seq, post id or "" for a list poll)
    seq = 0
    offsets = sorted(revisits)

    def plan(when: datetime, what: str) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(agenda, (when, seq, what))

    def fire() -> Iterator[dict[str, Any]]:
        when, _, pid = heapq.heappop(agenda)
        if not pid:
            yield from _list_pages(fresh, live, when, page_size, repeat_share,
                                   null_author_share, rng)
            fresh.clear()
            return
        pid, _, final = pid.partition("|")
        state = live.pop(pid) if final else live.get(pid)
        if state is not None:
            yield {"success": True, "post": dict(state.post), "comments": _tree(state.roots),
                   "context": {"tip": CONTEXT_TIP}, "_downloaded_at": _iso(when),
                   "_endpoint": f"/posts/{pid}"}

    for ev in events:
        while agenda and agenda[0][0] < ev.event_time:
            yield from fire()
        if isinstance(ev, AgentEvent):
            profiles[ev.name] = _profile(ev, seed)
        elif isinstance(ev, SubmoltEvent):
            submolts[ev.name] = {"id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"submolt/{ev.name}")),
                                 "name": ev.name, "display_name": ev.display_name or ev.name}
        elif isinstance(ev, PostEvent):
            sub = submolts.get(ev.submolt or "general") or {"name": ev.submolt}
            author = profiles.get(ev.author) or {"id": ev.author_id, "name": ev.author}
            live[ev.post_id] = _RawPost({
                "id": ev.post_id, "title": ev.title, "content": ev.content, "url": ev.url,
                "upvotes": ev.upvotes, "downvotes": ev.downvotes,
                "comment_count": ev.comment_count, "created_at": _iso(ev.event_time),
                "submolt": sub, "author": author})
            if not fresh:
                plan(ev.event_time + list_every, "")
            fresh.append(ev.post_id)
            for offset in offsets:
                plan(ev.event_time + offset, ev.post_id)
            plan(ev.event_time + final_after, f"{ev.post_id}|final")
        elif isinstance(ev, CommentEvent):
            state = live.get(ev.post_id)
            if state is None:  # beyond the crawler's last visit: never seen
                continue
            prof = profiles.get(ev.author, {})
            node = {"id": ev.comment_id, "content": ev.content, "parent_id": ev.parent_id,
                    "upvotes": ev.upvotes, "downvotes": ev.downvotes,
                    "created_at": _iso(ev.event_time), "author_id": ev.author_id,
                    "author": {"id": ev.author_id, "name": ev.author,
                               "karma": prof.get("karma", 0),
                               "follower_count": prof.get("follower_count", 0)},
                    "replies": []}
            parent = state.nodes.get(ev.parent_id) if ev.parent_id else None
            (parent["replies"] if parent is not None else state.roots).append(node)
            state.nodes[ev.comment_id] = node
            state.post["comment_count"] += 1
        elif isinstance(ev, VoteEvent) and ev.post_id in live:
            state = live[ev.post_id]
            target = state.post if ev.target == "post" else state.nodes.get(ev.target_id)
            if target is not None:
                target.update(upvotes=ev.upvotes, downvotes=ev.downvotes)
    while agenda:
        yield from fire()


def _profile(ev: AgentEvent, seed: int) -> dict[str, Any]:
    """The rich ``post.author`` of a ``GET /posts/{id}`` answer (owner invented per name)."""
    rng = random.Random(f"{seed}:owner:{ev.name}")
    handle = re.sub(r"\W", "", ev.name.lower())[:12] + str(rng.randint(0, 999))
    return {"id": ev.agent_id, "name": ev.name, "description": ev.description,
            "karma": ev.karma, "follower_count": ev.follower_count,
            "following_count": ev.following_count,
            "owner": {"x_handle": handle, "x_name": ev.name, "x_bio": "",
                      "x_follower_count": int(rng.lognormvariate(3, 2)), "x_verified": False},
            "you_follow": False}


def _list_pages(fresh: list[str], live: dict[str, _RawPost], when: datetime, size: int,
                repeat_share: float, null_author_share: float,
                rng: random.Random) -> Iterator[dict[str, Any]]:
    """``GET /posts?sort=new`` pages (offset paging) covering the posts since the last poll."""
    items = []
    for pid in reversed(fresh):  # newest first
        state = live.get(pid)
        if state is not None:
            post = dict(state.post)
            post["author"] = (None if null_author_share and rng.random() < null_author_share
                              else {"id": post["author"]["id"], "name": post["author"]["name"]})
            items.append(post)
    offset = cursor = 0
    while cursor < len(items):
        if offset and rng.random() < repeat_share:  # a post arrived between two page fetches:
            cursor -= 1  # the feed moved down one, the previous page's last item comes again
        page = items[cursor:cursor + size]
        more = cursor + size < len(items)
        yield {"success": True, "posts": page, "count": len(page), "has_more": more,
               "next_offset": offset + size, "authenticated": False,
               "_downloaded_at": _iso(when),
               "_endpoint": f"/posts?sort=new&limit={size}&offset={offset}"}
        offset += size
        cursor += size


# ------------------------------------------------------------------------------------ writers


def write_jsonl(items: Iterable[BaseModel | dict[str, Any]], path: Path) -> int:
    """One JSON document a line (events, labels or raw answers); returns the count written."""
    n = 0
    with path.open("w", encoding="utf-8") as out:
        for item in items:
            line = (item.model_dump_json() if isinstance(item, BaseModel)
                    else json.dumps(item, ensure_ascii=False))
            out.write(line + "\n")
            n += 1
    return n


def read_labels(path: Path) -> list[Label]:
    """Labels written by :func:`write_run`."""
    with path.open(encoding="utf-8") as f:
        return [Label.model_validate_json(line) for line in f if line.strip()]


@dataclass(frozen=True, slots=True)
class RunFiles:
    data: Path
    labels: Path
    count: int


def write_run(config: SimulationConfig, out_dir: Path, *, raw: bool = False) -> RunFiles:
    """Write ``events.jsonl`` (or ``raw.jsonl``, the raw API answers) and ``labels.jsonl``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sim = Simulator(config)
    data = out_dir / ("raw.jsonl" if raw else "events.jsonl")
    count = write_jsonl(sim.raw_answers() if raw else sim.events(), data)
    labels = out_dir / "labels.jsonl"
    write_jsonl(sim.labels, labels)
    return RunFiles(data, labels, count)

"""Cooperation threads (Molt Dynamics, RQ3): technical threads worked on by several agents, and
the share of them that end in a "successful" solution.

Definitions, reproduced from the paper's public code (YCRG-Labs/molt-dynamics,
``src/molt_dynamics/rq3_collaboration.py`` and ``main.py``; the paper states only the four
thresholds and "a heuristic solution score"):

- *technical*: one of :data:`TECHNICAL_KEYWORDS` (the code's list, 22 entries) occurs as a
  lower-cased **substring** of the post's ``title + " " + content`` or of a comment's text (so
  "code" also matches "decode", as in the code). The code searches the thread's texts joined
  by spaces; we search each text alone (incremental), which differs only for a keyword
  straddling two texts ("how" ending one, "to" starting the next).
- a *cooperation thread*: technical, at least ``min_agents`` (3) distinct participants (the
  post's author and the commenters; unknown authors are not participants), at least
  ``min_comments`` (5) comments (every comment, unknown authors included), and a duration of
  at least ``min_duration`` (30 min) from the thread's earliest to its latest event (post or
  comment: the code's ``max - min`` over the post's and the comments' times, i.e. post to last
  comment whenever the post is seen). The code walks the stored posts, so a thread counts only
  once its post is seen (``require_post``, default True; False also counts comments on posts
  from before the stream began).
- its *solution*: the latest comment (by time, then comment id) whose text holds a backtick,
  else the latest comment. Its *score* (:func:`solution_score`, the code's
  ``assess_code_solution``): 0.3 x has code (a ``````` fence or an inline `` `x` ``) + 0.2 x
  has comments (``#``, ``//`` or ``/* */``: URLs count, as in the code) + 0.3 x mentions
  tests (``test``, ``assert``, ``expect``) + 0.2 x balanced brackets; an empty solution has
  no score. *Successful*: score > ``success_threshold`` (0.5, the code's success outcome).
  Published: 164 threads, 6.7 % successful.

How: one record per thread (keyed by post id) that each post or comment moves in O(1) (plus,
while the thread has no keyword or when the comment becomes its solution candidate, both
verdicts: with the default keywords, as the text path's one scan already found them for every
text, :attr:`streams.text.Text.flags`, the text neither encoded nor read again; else one
compiled pass over the text's bytes, :mod:`.cooperation_kernels`);
every figure is a set, a count, a minimum, a maximum or a latest-by-key, so it does not depend
on arrival order. Each thread's
contribution (its UTC day: of its earliest event; cooperation; successful) is kept in per-day
sums, moved when it changes, so ``snapshot`` costs O(days + live cooperation threads) (one
tuple each to pick the ``shown`` latest; records only for those), not O(threads). A thread
is live for ``horizon`` (7 days) after its first event (event time, judged at
:meth:`CooperationEngine.expire`); then it is frozen: its contribution stays in the sums and
the record is dropped. Its id is remembered for another ``horizon``; events of a
frozen thread, and events at or before ``now - horizon`` of a thread not live (``now``: the
last expire), count in ``cooperation_late_events_total`` and nowhere else (a comment on a post
more than twice the horizon old, arriving on time, starts a new thread record: it counts as a
thread of its own day). Memory (measured on 100k real-text events): ~720 bytes per live
thread (its heap entry and participants included), ~100 per remembered frozen id, 3 integers
a day for the last ``days_kept`` days (older days fold into the totals), and the ``shown``
most recent cooperation threads as small dicts: after ``expire`` it depends on the last two
horizons of threads, not on the length of the stream.

>>> from datetime import datetime, timedelta, timezone
>>> from streams.events import CommentEvent, PostEvent
>>> t = datetime(2026, 2, 1, tzinfo=timezone.utc)
>>> eng = CooperationEngine()
>>> eng.update(Item.of(PostEvent(id="post:p", event_time=t, observed_at=t, post_id="p",
...                              author="a", title="Bug in my parser")))
>>> for i, who in enumerate("bcbcb"):
...     at = t + timedelta(minutes=10 * (i + 1))
...     eng.update(Item.of(CommentEvent(id=f"comment:{i}", event_time=at, observed_at=at,
...                                     comment_id=str(i), post_id="p", author=who,
...                                     content="try `parse(x)` and assert it")))
>>> snap = eng.snapshot()
>>> snap.value("cooperation_threads"), snap.value("cooperation_success_ratio")
(1.0, 1.0)
>>> snap.details["cooperation_thread_list"][0]["solution_score"]
0.8
"""

from __future__ import annotations

import heapq
import re
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import numpy as np

from streams import textscan
from streams.events import CommentEvent, PostEvent
from streams.state import cooperation_kernels
from streams.state.base import Item, Record, Sample, Snapshot, from_columns, to_columns, with_member
from streams.textscan import TECHNICAL_KEYWORDS

_INLINE_CODE = re.compile(r"`[^`]+`")
_BLOCK_COMMENT = re.compile(r"/\*.*\*/")
_NOT_BRACKET = re.compile(r"[^()\[\]{}]+")


def balanced(text: str) -> bool:
    """Brackets ``()[]{}`` balanced and properly nested (the code's ``_check_syntax``): the
    brackets kept alone, adjacent matched pairs removed until none is left (C-speed string
    operations, no Python loop over characters).

    >>> balanced("f(x[1]) {ok}"), balanced("(]"), balanced(")(")
    (True, False, False)
    """
    if not any(map(text.__contains__, "()[]{}")):  # no bracket at all: the usual reply
        return True
    s = _NOT_BRACKET.sub("", text)
    while s:
        shorter = s.replace("()", "").replace("[]", "").replace("{}", "")
        if len(shorter) == len(s):
            return False
        s = shorter
    return True


# the 16 scores, each summed as the code sums it (the same floats): held once, shared
_SCORES: dict[tuple[bool, bool, bool, bool], float] = {
    (c, m, t, b): 0.3 * c + 0.2 * m + 0.3 * t + 0.2 * b
    for c in (False, True) for m in (False, True) for t in (False, True) for b in (False, True)}
# the same floats by the kernel's flags (cooperation_kernels: CODE 1, COMMENTS 2, TESTS 4,
# BALANCED 8)
_SCORE_OF = [_SCORES[bool(f & 1), bool(f & 2), bool(f & 4), bool(f & 8)] for f in range(16)]


def fold_bytes(text: str) -> bytes:
    """:func:`fold`'s ASCII bytes (what the keyword kernel reads).

    >>> fold_bytes("Fix the API’s bug")
    b'fix the api?s bug'
    """
    if "\u0130" in text or "\u212a" in text:
        text = text.lower()
    return text.encode("ascii", "replace").lower()


def fold(text: str) -> str:
    """``text.lower()`` as far as an ASCII needle without ``?`` can tell, at a third of its
    cost: ASCII letters lower-cased, every other code point one ``?``. Lower-casing maps a
    code point beyond ASCII to code points beyond ASCII, except U+0130 and U+212A (checked
    over all of Unicode), so such a needle occurs in the one exactly where it occurs in the
    other; a text holding either of the two is lower-cased first.

    >>> fold("Fix the API’s bug"), fold(chr(0x212A) + "EY")  # (the Kelvin sign)
    ('fix the api?s bug', 'key')
    """
    return fold_bytes(text).decode("ascii")


def solution_score(text: str, folded: str | None = None) -> float | None:
    """The code's ``assess_code_solution`` score of a solution text (summed in its order, so
    the floats are the code's); None for an empty text (the code scores no empty solution).
    The code's regular expressions are evaluated as substring tests where they are one
    (``#.*`` matches wherever ``#`` occurs): the same verdicts, at C speed. ``folded``:
    :func:`fold` of the text (or the text lower-cased), when the caller has it.

    >>> solution_score("use `x = f(y)`  # then test it"), solution_score("")
    (1.0, None)
    """
    if not text:
        return None
    low = fold(text) if folded is None else folded
    has_code = "```" in text or ("`" in text and _INLINE_CODE.search(text) is not None)
    has_comments = "#" in text or "//" in text or (
        "/*" in text and _BLOCK_COMMENT.search(text) is not None)
    has_tests = "test" in low or "assert" in low or "expect" in low
    return _SCORES[has_code, has_comments, has_tests, balanced(text)]


@dataclass(frozen=True, slots=True)
class CooperationConfig:
    """keywords [TECHNICAL_KEYWORDS]: lower-case substrings marking a technical thread;
    min_agents [3], min_comments [5], min_duration [30 min]: the paper's thresholds;
    success_threshold [0.5]: a solution scoring above it is a success; require_post [True]:
    only threads whose post was seen count (as in the code); horizon [7 d]: how
    long a thread stays live after its first event; shown [50]: cooperation threads listed
    (the latest by start); days_kept [400]: per-day rows reported."""

    keywords: tuple[str, ...] = TECHNICAL_KEYWORDS
    min_agents: int = 3
    min_comments: int = 5
    min_duration: timedelta = timedelta(minutes=30)
    success_threshold: float = 0.5
    require_post: bool = True
    horizon: timedelta = timedelta(days=7)
    shown: int = 50
    days_kept: int = 400


@dataclass(slots=True)
class _Thread(Record):
    first: float  # earliest event (post or comment)
    last: float  # latest event
    title: str = ""
    posted: bool = False
    technical: bool = False
    comments: int = 0
    # the participants: one as itself (most threads have one), then a tuple, past a few
    # a set (base.with_member)
    agents: str | tuple[str, ...] | set[str] | None = None
    # the solution: the latest comment with a backtick (``code``), else the latest comment,
    # by (time, comment id); its score. Once a comment with a backtick is seen, the latest
    # comment no longer matters: one key is kept, in two fields (no tuple to hold)
    sol_t: float = 0.0
    sol_id: str | None = None  # None: no comment yet
    sol_score: float | None = None
    code: bool = False

    def n_agents(self) -> int:
        agents = self.agents
        return 0 if agents is None else 1 if type(agents) is str else len(agents)


def _day(day: int) -> str:
    return datetime.fromtimestamp(day * 86400, UTC).date().isoformat()


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


class CooperationEngine:
    """Cooperation threads of the whole stream (the reducer's, or a replay's)."""

    kinds: ClassVar[tuple[type, ...]] = (PostEvent, CommentEvent)  # what ``update`` reads

    def __init__(self, config: CooperationConfig | None = None) -> None:
        self.config = cfg = config or CooperationConfig()
        words = [k.lower() for k in cfg.keywords]
        # a keyword holding another ("debug" holds "bug") can only match where that one does:
        # left out of the scan, the verdicts are the same
        self._keywords = tuple(k for k in words if not any(o != k and o in k for o in words))
        # the texts are searched folded (ASCII keywords without "?", as the defaults), else
        # lower-cased; the solution score's needles are ASCII
        self._fold = fold if all(k.isascii() and "?" not in k for k in words) else str.lower
        self._scan = self._scanner()
        # the default keywords: the text path's scan already gave each text's flags
        self._flagged = self._scan is not None and tuple(words) == TECHNICAL_KEYWORDS
        self._min_duration = cfg.min_duration.total_seconds()
        self._horizon = cfg.horizon.total_seconds()
        self._live: dict[str, _Thread] = {}
        self._due: list[tuple[float, str]] = []  # (first event + horizon, post id)
        self._done: dict[str, None] = {}  # frozen ids still remembered
        self._forget: deque[tuple[float, str]] = deque()  # (first event + 2 horizons, id)
        self._by_day: dict[int, list[int]] = {}  # day: [threads, cooperation, successful]
        self._folded = [0, 0, 0]  # the same sums over the days no longer kept
        self._now: float | None = None  # the last expire
        self._cooperating: set[str] = set()  # live cooperation threads
        self._frozen_shown: list[tuple[float, str, dict[str, Any]]] = []  # min-heap by start
        self.threads_total = 0
        self.late_total = 0

    def _scanner(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
        """The kernel's tables and keyword count: a text's keyword and score verdicts from one
        compiled pass over its bytes (any keyword list the kernel takes), else None: one
        substring search a keyword, and :func:`solution_score`."""
        words = self._keywords
        if (self._fold is fold and 0 < len(words) <= cooperation_kernels.MAX_KEYWORDS
                and all(len(k) >= 2 for k in words)):
            return (*cooperation_kernels.tables(words), len(words))
        return None

    # pickled in columns (base.to_columns): a thread and its queue entries each are a post's
    _COLUMNS: ClassVar[tuple[dict[str, type], dict[str, type]]] = (
        {"_live": _Thread}, {"_due": list, "_forget": deque})

    def __getstate__(self) -> dict[str, Any]:  # the kernel's tables are made again
        return to_columns({k: v for k, v in self.__dict__.items() if k != "_scan"},
                          *self._COLUMNS)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(from_columns(state, *self._COLUMNS))
        self._scan = self._scanner()

    # -- per thread -------------------------------------------------------------------------
    def _successful(self, th: _Thread) -> bool:
        score = th.sol_score
        return score is not None and score > self.config.success_threshold

    def _cooperation(self, th: _Thread) -> bool:
        """The thresholds (every one monotone: once a cooperation thread, always one)."""
        cfg = self.config
        return (th.technical and (th.posted or not cfg.require_post)
                and th.comments >= cfg.min_comments and th.n_agents() >= cfg.min_agents
                and th.last - th.first >= self._min_duration)

    def _apply(self, first: float, coop: bool, good: bool, sign: int) -> None:
        """Add (sign 1) or take back (-1) a thread's contribution to its day's sums."""
        day = int(first // 86400)
        row = self._by_day.get(day)
        if row is None:
            row = self._by_day[day] = [0, 0, 0]
        row[0] += sign
        row[1] += sign * coop
        row[2] += sign * good

    def update(self, item: Item) -> None:
        event = item.event
        kind = type(event)
        if kind is not CommentEvent and kind is not PostEvent:
            return
        pid, t = event.post_id, item.t
        if pid in self._done:
            self.late_total += 1
            return
        th = self._live.get(pid)
        if th is None:
            if self._now is not None and t <= self._now - self._horizon:
                self.late_total += 1  # its thread would be frozen already
                return
            th = self._live[pid] = _Thread(t, t)
            heapq.heappush(self._due, (t + self._horizon, pid))
            self.threads_total += 1
            first = None  # no contribution yet
            was = good = False
        else:
            # its contribution before this event: (day of ``first``, ``was``, ``good``);
            # cooperation is monotone, so a thread not in the set is (day, 0, 0) without a
            # look at its thresholds or its score
            first = th.first
            was = pid in self._cooperating
            good = was and self._successful(th)
            if t < first:
                th.first = t
        if t > th.last:
            th.last = t
        author = item.author
        if author is not None:
            agents = th.agents
            if agents is None:
                th.agents = author
            elif type(agents) is str:
                if agents != author:
                    th.agents = (agents, author)
            elif author not in agents:
                th.agents = with_member(agents, author)
        scored = False  # whether the text is now the solution (scored)
        # the text's flags from the text path's scan (item.text is Text.of(item.raw))
        flags = item.text.flags if self._flagged and item.raw is not None else None
        if kind is CommentEvent:
            text = event.content
            th.comments += 1
            cid = event.comment_id
            # (t, cid) after the solution's key, or no solution yet
            later = th.sol_id is None or t > th.sol_t or (t == th.sol_t and cid > th.sol_id)
            if flags & textscan.TICK if flags is not None else "`" in text:
                if later or not th.code:
                    th.sol_t, th.sol_id, th.code = t, cid, True
                    scored = True
            elif later and not th.code:  # scored only while it is the solution
                th.sol_t, th.sol_id = t, cid
                scored = True
        else:  # (a post is never scored: its text is read only without the scan's flags)
            text = f"{event.title} {event.content}" if flags is None else ""
            th.posted, th.title = True, event.title[:120]
            if flags is not None and not flags & textscan.TECHNICAL and \
                    event.title[-3:].lower() == "how" and event.content[:2].lower() == "to":
                # the scan read title "\n" content, the rule reads title " " content: they
                # differ only where a keyword holds the space between ("how to")
                flags |= textscan.TECHNICAL
        if scored or not th.technical:
            scan = self._scan
            if flags is not None:
                if scored:
                    th.sol_score = _SCORE_OF[flags & 15] if text else None
                if not th.technical:
                    th.technical = flags & textscan.TECHNICAL != 0
            elif scan is not None:  # both verdicts from one compiled pass
                if "\u0130" in text or "\u212a" in text:  # (fold's two code points)
                    text = text.lower()
                flags = cooperation_kernels.assess(
                    np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8), *scan)
                if scored:
                    th.sol_score = _SCORE_OF[flags & 15] if text else None
                if not th.technical:
                    th.technical = flags & cooperation_kernels.TECHNICAL != 0
            else:
                low = self._fold(text)
                if scored:
                    th.sol_score = solution_score(text, low)
                if not th.technical:
                    th.technical = any(map(low.__contains__, self._keywords))
        coop = was or self._cooperation(th)
        if coop:
            self._cooperating.add(pid)
        if first is None:
            self._apply(th.first, coop, coop and self._successful(th), 1)
            return
        moved = th.first != first and int(th.first // 86400) != int(first // 86400)
        now_good = coop and self._successful(th)
        if moved or coop != was or now_good != good:  # the contribution changed: move it
            self._apply(first, was, good, -1)
            self._apply(th.first, coop, now_good, 1)

    def _record(self, pid: str, th: _Thread) -> dict[str, Any]:
        score = th.sol_score
        return {"post_id": pid, "title": th.title, "posted": th.posted,
                "start": _iso(th.first), "end": _iso(th.last),
                "duration_seconds": th.last - th.first, "comments": th.comments,
                "agents": th.n_agents(), "solution_score": score,
                "successful": self._successful(th)}

    def expire(self, now: float) -> None:
        """Freeze the threads whose horizon passed: their contribution stays in the sums."""
        self._now = now
        shown = self.config.shown
        while self._due and self._due[0][0] <= now:
            due, pid = heapq.heappop(self._due)
            th = self._live.pop(pid)
            self._done[pid] = None
            self._forget.append((due + self._horizon, pid))
            if pid in self._cooperating:
                self._cooperating.discard(pid)
                entry = (th.first, pid, self._record(pid, th))
                if len(self._frozen_shown) < shown:
                    heapq.heappush(self._frozen_shown, entry)
                elif shown:
                    heapq.heappushpop(self._frozen_shown, entry)
        while self._forget and self._forget[0][0] <= now:
            del self._done[self._forget.popleft()[1]]
        # live threads start after now - horizon: days before the kept ones fold into totals
        oldest = int((now - self._horizon) // 86400) - self.config.days_kept
        for day in [d for d in self._by_day if d < oldest]:
            for i, v in enumerate(self._by_day.pop(day)):
                self._folded[i] += v

    def thread(self, post_id: str) -> dict[str, Any] | None:
        """One live thread's figures (None once frozen or never seen)."""
        th = self._live.get(post_id)
        return None if th is None else self._record(post_id, th)

    def __len__(self) -> int:
        """Live (not yet frozen) threads."""
        return len(self._live)

    def snapshot(self) -> Snapshot:
        coop = self._folded[1] + sum(r[1] for r in self._by_day.values())
        good = self._folded[2] + sum(r[2] for r in self._by_day.values())
        samples = [
            Sample("cooperation_threads", float(coop),
                   help="Technical threads with >= 3 agents, >= 5 comments, >= 30 min"),
            Sample("cooperation_successful_threads", float(good),
                   help="Cooperation threads whose solution scores above the threshold"),
            Sample("cooperation_threads_seen_total", float(self.threads_total), kind="counter",
                   help="Threads (posts, or comments of unseen posts) seen"),
            Sample("cooperation_live_threads", float(len(self._live)),
                   help="Threads still open to new comments (within the horizon)"),
            Sample("cooperation_late_events_total", float(self.late_total), kind="counter",
                   help="Posts and comments of threads already frozen"),
        ]
        if coop:
            samples.append(Sample("cooperation_success_ratio", good / coop,
                                  help="Share of cooperation threads that are successful"))
        # records only for the live threads that make the list (the reducer snapshots often)
        shown = self.config.shown
        live = heapq.nlargest(shown, ((self._live[pid].first, pid) for pid in self._cooperating))
        listed = heapq.nlargest(shown, [(t, pid, self._record(pid, self._live[pid]))
                                        for t, pid in live] + self._frozen_shown)
        days = sorted(self._by_day)[-self.config.days_kept:]
        details = {
            "cooperation_daily": {_day(d): {"threads": self._by_day[d][0],
                                            "cooperation_threads": self._by_day[d][1],
                                            "successful": self._by_day[d][2]} for d in days},
            "cooperation_thread_list": [rec for _, _, rec in listed],
        }
        return Snapshot(samples=samples, details=details)

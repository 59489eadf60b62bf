"""Cooperation threads (Molt Dynamics RQ3) held against a plain batch recomputation of the
public code's definition: on the real comment trees (straight from the raw JSON) and on
synthetic threads fed in shuffled order."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from service.sources.normalise import parse_time
from streams.events import CommentEvent, PostEvent
from streams.state.base import Item
from streams.state.cooperation import (
    TECHNICAL_KEYWORDS,
    CooperationConfig,
    CooperationEngine,
    balanced,
    fold,
    solution_score,
)
from tests.unit.collective_data import raw_threads, thread_events

T0 = datetime(2026, 2, 1, tzinfo=UTC)


@dataclass
class Thread:
    """One thread as the batch reference sees it: comments as (time, id, author, text)."""

    post_id: str
    title: str = ""
    content: str = ""
    author: str | None = None
    created: datetime | None = None
    comments: list[tuple[datetime, str, str | None, str]] = field(default_factory=list)


def plain_score(code: str) -> float:
    """The public code's assess_code_solution, written out: a character loop for brackets."""
    brackets = {"(": ")", "[": "]", "{": "}"}
    stack: list[str] = []
    valid = True
    for ch in code:
        if ch in brackets:
            stack.append(brackets[ch])
        elif ch in brackets.values() and (not stack or stack.pop() != ch):
            valid = False
            break
    valid = valid and not stack
    return sum([bool(re.search(r"```|`[^`]+`", code)) * 0.3,
                bool(re.search(r"#.*|//.*|/\*.*\*/", code)) * 0.2,
                bool(re.search(r"test|assert|expect", code.lower())) * 0.3, valid * 0.2])


def batch(threads: list[Thread], keywords: tuple[str, ...] = TECHNICAL_KEYWORDS,
          require_post: bool = True) -> dict[str, dict]:
    """The code's identify_collaborative_events + run_rq3_analysis (thread text joined as
    the code joins it), per cooperation thread: its figures. The code walks its posts:
    without ``require_post`` a thread whose post is unseen counts too."""
    out = {}
    for th in threads:
        if th.created is None and require_post:
            continue
        comments = sorted(th.comments)
        if len(comments) < 5:
            continue
        all_text = th.title + " " + th.content
        for c in comments:
            all_text += " " + c[3]
        if not any(k in all_text.lower() for k in keywords):
            continue
        agents = ({th.author} | {c[2] for c in comments}) - {None}
        if len(agents) < 3:
            continue
        times = [c[0] for c in comments] + ([th.created] if th.created else [])
        if (max(times) - min(times)).total_seconds() / 60 < 30:
            continue
        solution = next((c[3] for c in reversed(comments) if "`" in c[3]), comments[-1][3])
        score = plain_score(solution) if solution else None
        out[th.post_id] = {"start": min(times), "agents": len(agents),
                           "comments": len(comments), "score": score,
                           "successful": score is not None and score > 0.5}
    return out


def real_threads() -> list[Thread]:
    def name(node: dict) -> str | None:
        a = node.get("author")
        return a.get("name") if isinstance(a, dict) else None

    out: dict[str, Thread] = {}
    for answer in raw_threads():
        post = answer["post"]
        if post["id"] in out:
            continue
        th = out[post["id"]] = Thread(post["id"], post.get("title") or "",
                                      post.get("content") or "", name(post),
                                      parse_time(post["created_at"]))

        def walk(nodes: list, th: Thread = th) -> None:
            for c in nodes or []:
                th.comments.append((parse_time(c["created_at"]), c["id"], name(c),
                                    c.get("content") or ""))
                walk(c.get("replies") or [])

        walk(answer.get("comments") or [])
    return list(out.values())


def events_of(threads: list[Thread]) -> list[PostEvent | CommentEvent]:
    out: list[PostEvent | CommentEvent] = []
    for th in threads:
        if th.created is not None:
            out.append(PostEvent(id=f"post:{th.post_id}", event_time=th.created,
                                 observed_at=th.created, post_id=th.post_id, author=th.author,
                                 title=th.title, content=th.content))
        for t, cid, who, text in th.comments:
            out.append(CommentEvent(id=f"comment:{cid}", event_time=t, observed_at=t,
                                    comment_id=cid, post_id=th.post_id, author=who,
                                    content=text))
    return out


def check(eng: CooperationEngine, ref: dict[str, dict]) -> None:
    snap = eng.snapshot()
    good = sum(r["successful"] for r in ref.values())
    assert snap.value("cooperation_threads") == len(ref)
    assert snap.value("cooperation_successful_threads") == good
    if ref:
        assert snap.value("cooperation_success_ratio") == pytest.approx(good / len(ref),
                                                                        abs=1e-12)
    listed = {r["post_id"]: r for r in snap.details["cooperation_thread_list"]}
    shown = sorted(ref, key=lambda p: (ref[p]["start"], p), reverse=True)[:eng.config.shown]
    assert list(listed) == shown
    for pid in shown:
        r, want = listed[pid], ref[pid]
        assert (r["agents"], r["comments"], r["successful"]) == (
            want["agents"], want["comments"], want["successful"])
        assert r["solution_score"] == want["score"]  # same float sums, exactly
    daily: dict[str, list[int]] = {}
    for r in ref.values():
        row = daily.setdefault(r["start"].date().isoformat(), [0, 0])
        row[0] += 1
        row[1] += r["successful"]
    got = {d: [v["cooperation_threads"], v["successful"]]
           for d, v in snap.details["cooperation_daily"].items() if v["cooperation_threads"]}
    assert got == daily


def test_real_threads_match_batch() -> None:
    """Every real thread through the normaliser, in event-time order, as the pipeline feeds
    it; the reference straight from the raw trees."""
    ref = batch(real_threads())
    eng = CooperationEngine()
    for e in thread_events():
        eng.update(Item.of(e))
    assert len(ref) == 7  # the shared archive's cooperation threads
    check(eng, ref)


def test_real_threads_any_order() -> None:
    events = list(thread_events())
    random.Random(3).shuffle(events)
    eng = CooperationEngine(CooperationConfig(shown=3))
    for e in events:
        eng.update(Item.of(e))
    check(eng, batch(real_threads()))


FRAGMENTS = ["hello world", "gm agents", "there is a bug here", "try `f(x)`", "```\nx = [1\n```",
             "assert ok # note", "see https://x.io", "(unbalanced", "we expect {a: [b]}",
             "thanks!", "The CODE is decoded", "how\nto", "", "how to fix it?"]


def synthetic(seed: int, n: int = 120) -> list[Thread]:
    rng = random.Random(seed)
    agents = [f"agent{i}" for i in range(6)] + [None]
    out = []
    for p in range(n):
        created = T0 + timedelta(hours=rng.uniform(0, 24 * 5))
        th = Thread(f"p{p}", rng.choice(FRAGMENTS), rng.choice(FRAGMENTS), rng.choice(agents),
                    created)
        if rng.random() < 0.15:  # the post itself never seen: no title, body, author
            th = Thread(th.post_id)
        for c in range(rng.randint(0, 12)):
            t = created + timedelta(minutes=rng.choice([1, 5, 20, 40]) * rng.random() * 3)
            th.comments.append((t, f"c{p}-{c}", rng.choice(agents),
                                " ".join(rng.choices(FRAGMENTS, k=rng.randint(0, 2)))))
        out.append(th)
    return out


@pytest.mark.parametrize(("seed", "require_post"), [(0, True), (1, True), (2, False)])
def test_synthetic_threads_shuffled(seed: int, require_post: bool) -> None:
    threads = synthetic(seed)
    ref = batch(threads, require_post=require_post)
    assert 5 < len(ref) < len(threads)  # the thresholds bite both ways
    assert 0 < sum(r["successful"] for r in ref.values()) < len(ref)
    assert ref != batch(threads, require_post=not require_post)
    events = events_of(threads)
    random.Random(seed).shuffle(events)
    eng = CooperationEngine(CooperationConfig(shown=10, require_post=require_post))
    for e in events:
        eng.update(Item.of(e))
    check(eng, ref)


def test_keywords_configurable() -> None:
    threads = synthetic(5)
    eng = CooperationEngine(CooperationConfig(keywords=("bug",)))
    for e in events_of(threads):
        eng.update(Item.of(e))
    ref = batch(threads, ("bug",))
    assert ref != batch(threads)
    check(eng, ref)


def test_horizon_freezes_threads() -> None:
    """Fed in time order with expire before each event: a thread's events at or past its
    first event + horizon are late, the rest count; frozen threads stay in the figures. (The
    synthetic threads last at most 2 h: within the 2 horizons their ids are remembered.)"""
    horizon = timedelta(minutes=65)
    threads = synthetic(7)
    events = sorted(events_of(threads), key=lambda e: (e.event_time, e.id))
    eng = CooperationEngine(CooperationConfig(horizon=horizon, shown=5))
    first: dict[str, datetime] = {}
    kept: list[Thread] = [Thread(th.post_id) for th in threads]
    by_id = {th.post_id: th for th in kept}
    late = 0
    for e in events:
        eng.expire(e.event_time.timestamp())
        eng.update(Item.of(e))
        start = first.setdefault(e.post_id, e.event_time)
        if e.event_time >= start + horizon:
            late += 1
            continue
        th = by_id[e.post_id]
        if isinstance(e, PostEvent):
            th.title, th.content, th.author, th.created = e.title, e.content, e.author, \
                e.event_time
        else:
            th.comments.append((e.event_time, e.comment_id, e.author, e.content))
    ref = batch(kept)
    assert late and ref
    assert eng.snapshot().value("cooperation_late_events_total") == late
    check(eng, ref)
    eng.expire(events[-1].event_time.timestamp() + horizon.total_seconds())
    assert len(eng) == 0
    check(eng, ref)  # every thread frozen: the same figures, the list from the frozen ones
    eng.expire(events[-1].event_time.timestamp() + 500 * 86400.0)
    snap = eng.snapshot()
    assert snap.details["cooperation_daily"] == {}  # days past days_kept fold into totals
    assert snap.value("cooperation_threads") == len(ref)
    assert snap.value("cooperation_successful_threads") == sum(
        r["successful"] for r in ref.values())


def test_solution_score_parts() -> None:
    for text in FRAGMENTS + ["a(b[c]{d})e", "([)]", "}", "`", "``"]:
        if text:
            assert solution_score(text) == plain_score(text)
    assert solution_score("") is None
    assert balanced("x") and not balanced("[[") and not balanced("([)]")


def test_frozen_ids_forgotten_after_a_second_horizon() -> None:
    """Memory bound: a frozen thread's id is kept until its first event + 2 horizons; an
    event at or before now - horizon of a thread not live is late; a later on-time comment
    of a forgotten thread starts a new record (a thread of its own)."""
    hour = timedelta(hours=1)
    eng = CooperationEngine(CooperationConfig(horizon=hour))

    def comment(i: int, at: datetime) -> Item:
        return Item.of(CommentEvent(id=f"comment:{i}", event_time=at, observed_at=at,
                                    comment_id=str(i), post_id="p", author="a", content="x"))

    eng.update(Item.of(PostEvent(id="post:p", event_time=T0, observed_at=T0, post_id="p",
                                 author="a", title="help")))
    eng.expire((T0 + 1.5 * hour).timestamp())  # frozen, id remembered
    eng.update(comment(1, T0 + 1.5 * hour))
    assert (len(eng), eng.late_total) == (0, 1)
    eng.expire((T0 + 2 * hour).timestamp())  # forgotten
    assert eng._done == {}
    eng.update(comment(2, T0 + hour))  # older than now - horizon: late
    assert (len(eng), eng.late_total) == (0, 2)
    eng.update(comment(3, T0 + 2 * hour))  # on time: a new record
    assert (len(eng), eng.threads_total) == (1, 2)
    eng.expire((T0 + 500 * 24 * hour).timestamp())
    snap = eng.snapshot()
    assert len(snap.details["cooperation_daily"]) == 0  # folded past days_kept
    assert snap.value("cooperation_threads_seen_total") == 2


def test_simulator_stream_matches_batch() -> None:
    """The project's simulated society (its comment trees, in time order)."""
    from service.sources.simulate import SimulationConfig, Simulator

    events = [e for e in Simulator(SimulationConfig(seed=1, duration=None, max_events=6000))
              if isinstance(e, PostEvent | CommentEvent)]
    threads: dict[str, Thread] = {}
    for e in events:
        th = threads.setdefault(e.post_id, Thread(e.post_id))
        if isinstance(e, PostEvent):
            th.title, th.content, th.author, th.created = e.title, e.content, e.author, \
                e.event_time
        else:
            th.comments.append((e.event_time, e.comment_id, e.author, e.content))
    ref = batch(list(threads.values()))
    assert len(ref) >= 10
    eng = CooperationEngine(CooperationConfig(shown=100))
    for e in sorted(events, key=lambda e: (e.event_time, e.id)):
        eng.update(Item.of(e))
    check(eng, ref)


def test_fold_finds_what_lower_case_finds() -> None:
    """The ground fold stands on: beyond ASCII only U+0130 and U+212A lower-case to ASCII;
    then every keyword and score needle is found in the folded text exactly where it is in the
    lower-cased one, whatever surrounds it."""
    assert [c for c in range(128, 0x110000)
            if any(ord(x) < 128 for x in chr(c).lower())] == [0x130, 0x212A]
    needles = [*TECHNICAL_KEYWORDS, "test", "assert", "expect"]
    odd = ["\u0130", "\u212a", "\u2019", "\u00e9", "\u03a3", "\ud800", "\U0001f600", "\u0301",
           "?", " "]
    rng = random.Random(0)
    texts = ["\u0130mplement", "AP\u0130", "F\u0130X", "\u212aEY", "fi\u2713x", "BUG\U0001f600"]
    for _ in range(3000):
        word = rng.choice(needles)
        cut = rng.randrange(len(word) + 1)
        texts.append(rng.choice(odd) + word[:cut].upper() + rng.choice(odd + [""]) + word[cut:]
                     + rng.choice(odd))
    for text in texts:
        low, folded = text.lower(), fold(text)
        assert [k in low for k in needles] == [k in folded for k in needles], text


def test_keywords_beyond_ascii_are_lower_cased() -> None:
    """Keywords fold cannot serve (beyond ASCII, or holding "?") are matched in the text
    lower-cased, as the definition says."""
    at = [T0 + timedelta(minutes=10 * i) for i in range(7)]
    threads = [Thread("p1", "\u041e\u0428\u0418\u0411\u041a\u0410 here", "", "a", at[0],
                      [(at[i], f"c{i}", "abc"[i % 3], "ok") for i in range(1, 7)]),
               Thread("p2", "why?", "", "a", at[0],
                      [(at[i], f"d{i}", "abc"[i % 3], "so") for i in range(1, 7)])]
    for keywords in (("\u043e\u0448\u0438\u0431\u043a\u0430",), ("y?",), ("bug",)):
        eng = CooperationEngine(CooperationConfig(keywords=keywords))
        for e in events_of(threads):
            eng.update(Item.of(e))
        ref = batch(threads, keywords)
        assert len(ref) == (0 if keywords == ("bug",) else 1)
        check(eng, ref)


def test_kernel_finds_what_substring_search_and_the_score_find() -> None:
    """The compiled pass over a text's bytes against one substring search a keyword and
    :func:`solution_score`'s parts: the default keywords (overlapping, cut, at either end,
    beside bytes that share their table slot, in upper case, beside code points beyond ASCII)
    and a single-keyword and a two-character list, on texts of the score's marks (backticks,
    comment marks across lines, brackets); an engine whose keywords the kernel does not take
    (a one-character keyword) searches as before, and a pickled engine makes its tables
    again."""
    import pickle

    import numpy as np

    from streams.state import cooperation_kernels as ck

    rng = random.Random(1)
    alphabet = ("abcdefhilmnoprstuxy ?!\x00\x7f\n`#/*()[]{}\u2019\u00e9\U0001f600"
                + "".join(chr(c ^ 64) for c in range(97, 123)))
    for keywords in (CooperationEngine()._keywords, ("bug",), ("fi", "how to", "ab")):
        tables = ck.tables(keywords)
        needles = [*keywords, "test", "assert", "expect"]
        texts = ["", "b", "bu", "`", "``", "```", "/*/", "/**/", "/*\n*/", *keywords,
                 *(k[:-1] for k in keywords), *FRAGMENTS]
        for _ in range(4000):
            parts = [rng.choice(needles)[:rng.randrange(2, 8)] if rng.random() < 0.4 else
                     "".join(rng.choice(alphabet) for _ in range(rng.randrange(5)))
                     for _ in range(rng.randrange(1, 7))]
            text = "".join(parts)
            texts.append(text.upper() if rng.random() < 0.2 else text)
        for text in texts:
            flags = ck.assess(np.frombuffer(text.encode(), np.uint8), *tables, len(keywords))
            low = text.lower()
            assert (flags & ck.TECHNICAL != 0) == any(k in low for k in keywords), (keywords,
                                                                                     text)
            if text:
                assert plain_score(text) == solution_score(text) == (
                    0.3 * (flags & ck.CODE != 0) + 0.2 * (flags & ck.COMMENTS != 0)
                    + 0.3 * (flags & ck.TESTS != 0) + 0.2 * (flags & ck.BALANCED != 0)), text
    assert CooperationEngine(CooperationConfig(keywords=("x", "bug")))._scan is None
    eng = pickle.loads(pickle.dumps(CooperationEngine()))
    assert all(np.array_equal(a, b) for a, b in zip(eng._scan, CooperationEngine()._scan,
                                                     strict=True))


def test_the_text_scans_flags_are_the_kernels_verdicts() -> None:
    """The text path's one scan (:attr:`streams.text.Text.flags`, which the engine reads for
    the default keywords) against the cooperation kernel on the text's bytes: texts of
    keywords, cut or whole, the score's marks, URLs (whose tokens leave them out: a keyword
    inside one, or "how to" across its end), tokens met for the first time, code points
    beyond ASCII, upper case; and a post whose title ends with "how" and whose body starts
    with "to" is technical (the definition joins them with a space)."""
    import numpy as np

    from streams import textscan
    from streams.state import cooperation_kernels as ck
    from streams.text import Text

    tables = CooperationEngine()._scan
    assert tables is not None and CooperationEngine()._flagged

    def kernel(text: str) -> int:
        low = text.lower() if "\u0130" in text or "\u212a" in text else text
        flags = ck.assess(np.frombuffer(low.encode(), np.uint8), *tables)
        return flags | (textscan.TICK if "`" in text else 0)

    rng = random.Random(2)
    words = [*TECHNICAL_KEYWORDS, "test", "assert", "expect", "how", " to", "http://x.io/",
             "www.", "https://fix.io/(a"]
    alphabet = ("abcdefhilmnoprstuxy ?!:.\n\t`#/*()[]{}\u2019\u00e9\U0001f600\u0130\u212a\u03a3"
                + "".join(chr(c ^ 64) for c in range(97, 123)))
    texts = [*FRAGMENTS, "see https://x.com/how to fix", "www.x.com/HOW TO", "xhttp://fix",
             "/* https://a.b */", "/* https://a.b\n */", "somehow www.a.b to", "how\tto"]
    for i in range(3000):
        text = "".join(rng.choice(words)[:rng.randrange(2, 12)] if rng.random() < 0.4 else
                       "".join(rng.choice(alphabet) for _ in range(rng.randrange(6)))
                       for _ in range(rng.randrange(1, 9)))
        texts.append(text.upper() if rng.random() < 0.2 else text)
        texts.append(f"{text} q{i}z{rng.choice(['how', 'bug', '(', ''])} to")  # (new tokens)
    for text in texts:
        assert Text.of(text).flags == kernel(text), text
    at = [T0 + timedelta(minutes=10 * i) for i in range(7)]
    threads = [Thread("p1", "Tell me HOW", "to start", "a", at[0],
                      [(at[i], f"c{i}", "abc"[i % 3], "ok") for i in range(1, 7)])]
    eng = CooperationEngine()
    for e in events_of(threads):
        eng.update(Item.of(e))
    check(eng, batch(threads))
    assert eng.snapshot().value("cooperation_threads") == 1

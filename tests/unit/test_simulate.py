"""The synthetic society: determinism, labels held against the events, texture, memory, raw mode."""

from __future__ import annotations

import collections
import itertools
import json
import tracemalloc
from datetime import UTC, datetime, timedelta
from difflib import SequenceMatcher
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from service.sources.normalise import normalise_post_detail, normalise_posts_list
from service.sources.simulate import (
    ADAPT_TOP,
    ADAPT_WINDOW,
    AGENT_SCENARIOS,
    LOCKSTEP_GAP_S,
    SCENARIOS,
    Label,
    ScenarioSpec,
    SimulationConfig,
    Simulator,
    parse_duration,
    read_labels,
    write_run,
)
from streams.events import DeadLetter, Event, parse_event

ALL = tuple(ScenarioSpec(name=name) for name in SCENARIOS)
SEED = 11


def _run(**kw: object) -> tuple[list[Event], list[Label]]:
    sim = Simulator(SimulationConfig(**kw))  # type: ignore[arg-type]
    events = list(sim)
    return events, sim.labels


@pytest.fixture(scope="module")
def planted() -> tuple[list[Event], dict[str, Label]]:
    """One day of a 5,000-agent society with every scenario at its default window."""
    events, labels = _run(seed=SEED, agents=5000, duration=timedelta(days=1), scenarios=ALL)
    return events, {lab.scenario: lab for lab in labels}


BACKGROUND = SimulationConfig(seed=5, agents=5000, duration=timedelta(hours=12),
                              max_delay=timedelta(hours=4))


@pytest.fixture(scope="module")
def background() -> list[Event]:
    """Half a day with no scenario: the texture alone."""
    return list(Simulator(BACKGROUND))


def _kind(events: list[Event], kind: str) -> list:
    return [e for e in events if e.kind == kind]


def _in(label: Label, t: datetime) -> bool:
    return label.start <= t <= label.end


# ------------------------------------------------------------------------- stream contract


def test_same_seed_same_run_other_seed_other_run() -> None:
    kw = dict(agents=800, duration=timedelta(hours=3),
              scenarios=(ScenarioSpec(name="surge", start=timedelta(hours=1)),
                         ScenarioSpec(name="burst", start=timedelta(hours=1))))
    a, la = _run(seed=3, **kw)
    b, lb = _run(seed=3, **kw)
    c, _ = _run(seed=4, **kw)
    assert [e.model_dump_json() for e in a] == [e.model_dump_json() for e in b]
    assert [lab.model_dump_json() for lab in la] == [lab.model_dump_json() for lab in lb]
    assert [e.id for e in a[:200]] != [e.id for e in c[:200]]


def test_simulator_reruns_identically() -> None:
    sim = Simulator(SimulationConfig(seed=1, agents=300, max_events=2000))
    first = [e.id for e in sim]
    assert [e.id for e in sim] == first


def test_events_are_valid_ordered_unique(planted: tuple[list[Event], dict[str, Label]]) -> None:
    events, _ = planted
    times = [e.event_time for e in events]
    assert times == sorted(times)
    ids = [e.id for e in events]
    assert len(ids) == len(set(ids))
    for e in events[::97]:
        assert parse_event(e.model_dump_json()) == e
    assert {e.source for e in events} == {"simulate"}


def test_every_actor_is_announced_once_before_acting(
    planted: tuple[list[Event], dict[str, Label]],
) -> None:
    events, _ = planted
    announced: dict[str, datetime] = {}
    for e in events:
        if e.kind == "agent":
            assert e.name not in announced
            assert e.created_at is not None and e.created_at <= e.event_time
            announced[e.name] = e.event_time
        elif e.kind in ("post", "comment"):
            assert announced.get(e.author, e.event_time + timedelta(1)) <= e.event_time


def test_threads_are_consistent(planted: tuple[list[Event], dict[str, Label]]) -> None:
    events, _ = planted
    posts = {p.post_id: p for p in _kind(events, "post")}
    comments: dict[str, object] = {}
    for c in _kind(events, "comment"):
        post = posts[c.post_id]
        assert c.event_time > post.event_time
        assert c.post_author == post.author
        if c.parent_id is None:
            assert (c.depth, c.reply_to) == (1, post.author)
        else:
            parent = comments[c.parent_id]
            assert (c.depth, c.reply_to) == (parent.depth + 1, parent.author)  # type: ignore[attr-defined]
        comments[c.comment_id] = c


def test_vote_changes_add_up(planted: tuple[list[Event], dict[str, Label]]) -> None:
    events, _ = planted
    votes = _kind(events, "vote")
    assert len(votes) > 1000
    made = {e.id.partition(":")[2]: e for e in events if e.kind in ("post", "comment")}
    seen: dict[str, tuple[int, int]] = {}
    for v in votes:
        target = made[v.target_id]
        assert target.kind == v.target and target.post_id == v.post_id
        assert target.event_time < v.event_time
        up, down = seen.get(v.target_id, (0, 0))
        assert (v.upvotes, v.downvotes) == (up + v.delta_up, down + v.delta_down)
        assert v.delta_up >= 0 and v.delta_down >= 0 and v.delta_up + v.delta_down > 0
        seen[v.target_id] = (v.upvotes, v.downvotes)
    voted = {v.target_id for v in votes if v.target == "comment"}
    comments = _kind(events, "comment")
    assert 0.1 < len(voted) / len(comments) < 0.5  # most comments never get a vote


def test_max_events_stops_exactly_and_labels_only_what_was_emitted() -> None:
    surge = ScenarioSpec(name="surge", start=timedelta(minutes=10), duration=timedelta(hours=1))
    cfg = SimulationConfig(seed=2, agents=500, max_events=3000, duration=None,
                           posts_per_hour=300, scenarios=(surge,))
    whole = Simulator(cfg)
    full = list(whole)
    (complete,) = whole.labels
    assert complete.details["truncated"] is False
    # Cut the same run in the middle of the surge.
    middle = full.index(next(e for e in full if e.kind == "post"
                             and e.post_id == complete.posts[len(complete.posts) // 2]))
    sim = Simulator(cfg.model_copy(update={"max_events": middle + 1}))
    events = list(sim)
    assert [e.id for e in events] == [e.id for e in full[:middle + 1]]
    (label,) = sim.labels
    assert label.details["truncated"] is True
    assert label.posts == complete.posts[:len(complete.posts) // 2 + 1]


# --------------------------------------------------------------------------------- labels


def test_labels_name_posts_that_exist_in_window_by_labelled_agents(
    planted: tuple[list[Event], dict[str, Label]],
) -> None:
    events, labels = planted
    assert set(labels) == set(SCENARIOS)
    posts = {p.post_id: p for p in _kind(events, "post")}
    for label in labels.values():
        assert len(set(label.posts)) == len(label.posts)
        for pid in label.posts:
            assert _in(label, posts[pid].event_time)
            assert posts[pid].author in label.agents
        if label.scenario != "collapse":
            assert label.posts and label.agents


def test_surge_is_near_identical_coposting_by_new_lookalikes(
    planted: tuple[list[Event], dict[str, Label]],
) -> None:
    events, labels = planted
    label = labels["surge"]
    ticker = label.details["token"].lstrip("$")
    surge = sorted((p for p in _kind(events, "post") if p.post_id in set(label.posts)),
                   key=lambda p: p.event_time)
    assert len(surge) >= 80
    # Near-identical: every post is at least 80% the same text as the first one.
    ref = surge[0].content
    assert min(SequenceMatcher(None, ref, p.content).ratio() for p in surge) > 0.8
    assert all(label.details["contract"] in p.content for p in surge)
    # Co-posted: each has another surge post within 60 s; many within 5 s.
    times = np.array([p.event_time.timestamp() for p in surge])
    gaps = np.diff(times)
    nearest = np.minimum(np.r_[np.inf, gaps], np.r_[gaps, np.inf])
    assert (nearest <= 60).all()
    assert (gaps <= 5).sum() >= len(surge) // 4
    # Mostly new accounts with look-alike names, created minutes before minting.
    created = {e.name: e.created_at for e in _kind(events, "agent")}
    new = label.details["new_accounts"]
    assert len(new) >= 0.7 * len(label.agents)
    first = {}
    for p in surge:
        first.setdefault(p.author, p.event_time)
    for name in new:
        assert ticker.lower() in name.lower()
        assert timedelta(0) < first[name] - created[name] <= timedelta(minutes=20, seconds=1)
    # The ticker is nowhere before the surge.
    before = [p for p in _kind(events, "post") if p.event_time < label.start]
    assert not any(ticker in p.text for p in before)


def test_supernode_draws_replies_from_many_and_tops_pagerank(
    planted: tuple[list[Event], dict[str, Label]],
) -> None:
    events, labels = planted
    label = labels["supernode"]
    hub = label.details["supernode"]
    assert label.agents == [hub]
    span = label.end - label.start
    comments = _kind(events, "comment")
    during = [c for c in comments if _in(label, c.event_time)]
    repliers = {c.author for c in during if c.reply_to == hub}
    assert len(repliers) >= 0.8 * 200
    assert repliers == set(label.details["repliers"])
    assert {c.comment_id for c in during if c.reply_to == hub} >= set(label.details["comment_ids"])
    before = {c.author for c in comments
              if label.start - span <= c.event_time < label.start and c.reply_to == hub}
    assert len(before) <= 5
    # In the window's interaction graph the hub jumps into the top 3 by PageRank from nowhere.
    # (A viral post's author can still outrank it: the heavy tail makes such hubs naturally.)
    assert _pagerank_order(during).index(hub) < 3
    earlier = _pagerank_order([c for c in comments
                               if label.start - span <= c.event_time < label.start])
    assert hub not in earlier[:100]


def _pagerank_order(comments: list) -> list[str]:
    """Agents by PageRank (0.85), descending, of the commenter -> replied-to graph."""
    graph = nx.DiGraph()
    for c in comments:
        if c.author != c.reply_to:
            w = graph.get_edge_data(c.author, c.reply_to, {"weight": 0})["weight"]
            graph.add_edge(c.author, c.reply_to, weight=w + 1)
    rank = nx.pagerank(graph, alpha=0.85, weight="weight")
    return sorted(rank, key=rank.get, reverse=True)


def test_burst_phrase_is_new_fast_and_exactly_labelled(
    planted: tuple[list[Event], dict[str, Label]],
) -> None:
    events, labels = planted
    label = labels["burst"]
    phrase = label.details["phrase"]
    using = [e for e in events if e.kind in ("post", "comment") and phrase in e.text]
    assert using and all(_in(label, e.event_time) for e in using)
    assert {e.post_id for e in using if e.kind == "post"} == set(label.posts)
    assert {e.comment_id for e in using if e.kind == "comment"} == set(
        label.details["comment_ids"])
    assert {e.author for e in using} == set(label.agents)
    early = label.start + (label.end - label.start) / 4
    assert len({e.author for e in using if e.event_time <= early}) >= 30


def test_drift_moves_further_than_steady_agents(
    planted: tuple[list[Event], dict[str, Label]],
) -> None:
    events, labels = planted
    label = labels["drift"]
    posts = _kind(events, "post")
    by_agent = collections.defaultdict(list)
    for p in posts:
        by_agent[p.author].append(p.text)
    drifting = [p.text for p in posts if p.post_id in set(label.posts)]
    assert len(drifting) == 30 and label.details["from_topic"] != label.details["to_topic"]
    vec = TfidfVectorizer(stop_words="english").fit([p.text for p in posts])

    def drift(texts: list[str]) -> float:  # D = 1 - cos(c_early, c_late), halves in time order
        half = len(texts) // 2
        early = np.asarray(vec.transform(texts[:half]).mean(axis=0)).ravel()
        late = np.asarray(vec.transform(texts[half:2 * half]).mean(axis=0)).ravel()
        return 1 - early @ late / np.linalg.norm(early) / np.linalg.norm(late)

    steady = [drift(t) for a, t in by_agent.items() if len(t) >= 30 and a not in label.agents]
    assert len(steady) >= 5
    assert drift(drifting) > np.percentile(steady, 90)


def test_collapse_cuts_comments_and_votes(planted: tuple[list[Event], dict[str, Label]]) -> None:
    events, labels = planted
    label = labels["collapse"]
    span = label.end - label.start

    def volume(kind: str, lo: datetime, hi: datetime) -> int:
        """Comments made, or votes cast (the sum of the count changes), in [lo, hi)."""
        return sum(e.delta_up + e.delta_down if kind == "vote" else 1
                   for e in events if e.kind == kind and lo <= e.event_time < hi)

    for kind in ("comment", "vote"):
        before = volume(kind, label.start - span, label.start)
        assert volume(kind, label.start, label.end) < 0.3 * before
    commented = {c.post_id for c in _kind(events, "comment")}

    def share(lo: datetime, hi: datetime) -> float:
        made = [p.post_id for p in _kind(events, "post") if lo <= p.event_time < hi]
        return sum(pid in commented for pid in made) / len(made)

    assert share(label.start, label.end) < 0.5 * share(label.start - span, label.start)
    assert label.details["comments_removed"] > 0 and label.details["votes_removed"] > 0


# -------------------------------------------------------------------------------- texture


def test_texture_threads_shallow_many_uncommented(background: list[Event]) -> None:
    posts, comments = _kind(background, "post"), _kind(background, "comment")
    config = BACKGROUND
    # Posts of the last max_delay have not had all their comments yet.
    cut = posts[-1].event_time - config.max_delay
    settled = [p.post_id for p in posts if p.event_time <= cut]
    counts = collections.Counter(c.post_id for c in comments)
    uncommented = sum(counts[p] == 0 for p in settled) / len(settled)
    assert abs(uncommented - config.uncommented_share) < 0.05
    mean = sum(counts[p] for p in settled) / len(settled)
    assert abs(mean - config.comments_per_post) < 0.3 * config.comments_per_post
    depths = np.array([c.depth for c in comments])
    assert 1.0 < depths.mean() < 1.12 and (depths == 1).mean() > 0.9


def test_texture_heavy_tailed_activity_and_duplicates(background: list[Event]) -> None:
    posts = _kind(background, "post")
    per_agent = np.sort(np.array(list(collections.Counter(p.author for p in posts).values())))
    top = per_agent[::-1][: max(1, len(per_agent) // 100)].sum()
    assert top / per_agent.sum() > 0.1  # top 1% of posters write over a tenth of the posts
    assert (per_agent == 1).mean() > 0.4  # while most post once or twice
    texts = collections.Counter((p.title, p.content) for p in posts)
    assert max(texts.values()) >= 10  # verbatim duplicates like the real feed
    comment_texts = collections.Counter(c.content for c in _kind(background, "comment"))
    assert sum(n for n in comment_texts.values() if n > 1) > 0.2 * sum(comment_texts.values())
    assert len({p.submolt for p in posts}) >= 8
    assert collections.Counter(p.submolt for p in posts).most_common(1)[0][0] == "general"


def test_population_grows(background: list[Event]) -> None:
    start = BACKGROUND.start
    agents = _kind(background, "agent")
    registered_later = [a for a in agents if a.created_at > start]
    assert len(registered_later) > 0.3 * len(agents)
    assert any(a.created_at < start for a in agents)


def test_memory_does_not_grow_with_run_length() -> None:
    """Peak traced memory of a run 10x longer stays within 1.5x (after the max_delay warm-up)."""
    def peak(n: int) -> int:
        cfg = SimulationConfig(seed=1, agents=1000, duration=None, max_events=n,
                               posts_per_hour=6000, max_delay=timedelta(minutes=10),
                               diurnal_amplitude=0)
        tracemalloc.start()
        for _ in Simulator(cfg):
            pass
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return top

    assert peak(60_000) < 1.5 * peak(6_000)


# ------------------------------------------------------------------------ raw API and files


def test_raw_answers_normalise_back_to_the_canonical_run() -> None:
    cfg = SimulationConfig(seed=9, agents=1000, duration=timedelta(hours=3),
                           max_delay=timedelta(hours=1),
                           scenarios=(ScenarioSpec(name="surge", start=timedelta(hours=1)),))
    sim = Simulator(cfg)
    canonical = list(sim)
    latest: dict[str, list] = {}
    listed: set[str] = set()
    observed = []
    for answer in sim.raw_answers():
        observed.append(datetime.fromisoformat(answer["_downloaded_at"]))
        if answer["_endpoint"].startswith("/posts?"):
            items = normalise_posts_list(answer, origin="sim")
            listed |= {e.post_id for e in items if e.kind == "post"}
        else:
            assert set(answer) >= {"success", "post", "comments", "context"}
            items = normalise_post_detail(answer, origin="sim")
            latest[answer["post"]["id"]] = items
        assert not [i for i in items if isinstance(i, DeadLetter)]
    assert observed == sorted(observed)

    def post_key(e: Event) -> tuple:
        return e.post_id, e.author, e.author_id, e.submolt, e.title, e.content, e.event_time

    def comment_key(e: Event) -> tuple:
        return (e.comment_id, e.post_id, e.parent_id, e.author, e.reply_to, e.post_author,
                e.content, e.depth, e.event_time)

    final = [e for items in latest.values() for e in items]
    assert {post_key(e) for e in final if e.kind == "post"} == {
        post_key(e) for e in canonical if e.kind == "post"}
    assert {comment_key(e) for e in final if e.kind == "comment"} == {
        comment_key(e) for e in canonical if e.kind == "comment"}
    votes = {e.target_id: (e.upvotes, e.downvotes) for e in canonical if e.kind == "vote"}
    counts = {e.id.partition(":")[2]: (e.upvotes, e.downvotes)
              for e in final if e.kind in ("post", "comment")}
    assert all(counts[target] == v for target, v in votes.items())
    assert any(e.kind == "vote" and e.target == "comment" for e in canonical)
    assert listed == set(latest)


def test_raw_snapshots_grow_as_a_revisiting_crawler_sees_them() -> None:
    sim = Simulator(SimulationConfig(seed=4, agents=500, duration=timedelta(hours=4),
                                     max_delay=timedelta(hours=2)))
    seen = collections.defaultdict(list)
    for answer in sim.raw_answers():
        if answer["_endpoint"].startswith("/posts/"):
            seen[answer["post"]["id"]].append(answer["post"]["comment_count"])
    assert all(len(v) == 3 for v in seen.values())  # +2 min, +1 h, final
    assert all(a <= b for v in seen.values() for a, b in itertools.pairwise(v))
    assert any(v[0] < v[-1] for v in seen.values())


def test_list_pages_repeat_items_across_pages_but_lose_none() -> None:
    sim = Simulator(SimulationConfig(seed=2, agents=500, duration=timedelta(hours=2),
                                     posts_per_hour=3000, max_delay=timedelta(minutes=30)))
    created = [e.post_id for e in sim if e.kind == "post"]
    polls = collections.defaultdict(list)
    for answer in sim.raw_answers(list_every=timedelta(minutes=5), repeat_share=0.5):
        if answer["_endpoint"].startswith("/posts?"):
            polls[answer["_downloaded_at"]].append(answer)
    listed: list[str] = []
    for pages in polls.values():
        assert [p["has_more"] for p in pages] == [True] * (len(pages) - 1) + [False]
        assert [p["next_offset"] for p in pages] == [25 * (k + 1) for k in range(len(pages))]
        ids = [post["id"] for page in pages for post in page["posts"]]
        times = [post["created_at"] for page in pages for post in page["posts"]]
        assert times == sorted(times, reverse=True)  # newest first, repeats adjacent
        listed += ids
    assert set(listed) == set(created)
    assert len(listed) > len(created)  # unstable paging showed some posts twice


def test_null_author_incident_keeps_the_posts() -> None:
    sim = Simulator(SimulationConfig(seed=3, agents=300, duration=timedelta(hours=1)))
    reasons = collections.Counter()
    for answer in sim.raw_answers(null_author_share=0.3):
        if answer["_endpoint"].startswith("/posts?"):
            for item in normalise_posts_list(answer, origin="sim"):
                if isinstance(item, DeadLetter):
                    reasons[item.reason] += 1
                elif item.kind == "post":
                    reasons["null_author" if item.author is None else "post"] += 1
    assert not {k for k in reasons if k not in ("post", "null_author")}  # no dead letters
    assert 0.15 < reasons["null_author"] / (reasons["null_author"] + reasons["post"]) < 0.45


def test_write_run_events_raw_and_labels(tmp_path: Path) -> None:
    cfg = SimulationConfig(seed=1, agents=300, duration=timedelta(hours=2),
                           scenarios=(ScenarioSpec.parse("surge:start=30m,duration=10m,"
                                                         "intensity=20"),))
    files = write_run(cfg, tmp_path / "ev")
    lines = files.data.read_text().splitlines()
    assert len(lines) == files.count and parse_event(lines[-1]).kind
    (label,) = read_labels(files.labels)
    post_ids = {json.loads(x).get("post_id") for x in lines}
    assert set(label.posts) <= post_ids
    raw = write_run(cfg, tmp_path / "raw", raw=True)
    answers = [json.loads(x) for x in raw.data.read_text().splitlines()]
    assert {a["post"]["id"] for a in answers if "post" in a} == post_ids - {None}
    assert read_labels(raw.labels) == [label]


def test_realtime_mode_starts_now_and_paces() -> None:
    now = [1_780_000_000.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    sim = Simulator(SimulationConfig(seed=1, agents=200, max_events=200, realtime=True),
                    clock=lambda: now[0], sleep=sleep)
    events = list(sim)
    assert events[0].event_time == datetime.fromtimestamp(1_780_000_000, tz=UTC)
    assert slept and abs(now[0] - events[-1].event_time.timestamp()) < 1e-3


def test_scenario_spec_parsing_and_validation() -> None:
    spec = ScenarioSpec.parse("drift:start=1h30m,intensity=12")
    assert (spec.start, spec.duration, spec.intensity) == (timedelta(minutes=90),
                                                           timedelta(hours=12), 12)
    assert parse_duration("2d") == timedelta(days=2)
    for bad in ("meteor", "surge:when=2h", "surge:start=soon", "burst:intensity=0"):
        with pytest.raises(ValueError):
            ScenarioSpec.parse(bad)
    with pytest.raises(ValueError):
        SimulationConfig(duration=None, max_events=None)
    assert SimulationConfig(duration=None, realtime=True).max_events is None  # the live demo


# ------------------------------------------------------------------- planted agents (issue 11)

AGENTS_RUN = dict(seed=SEED, agents=2000, posts_per_hour=300, duration=timedelta(hours=14),
                  max_delay=timedelta(hours=4))


@pytest.fixture(scope="module")
def planted_agents() -> tuple[list[Event], dict[str, Label]]:
    """The planted agents of the per-agent stage over a small society, and a drifter."""
    specs = (*(ScenarioSpec(name=n) for n in AGENT_SCENARIOS), ScenarioSpec(name="drift"))
    events, labels = _run(**AGENTS_RUN, scenarios=specs)
    return events, {lab.scenario: lab for lab in labels}


def test_agent_scenarios_only_add_their_own_acts(
    planted_agents: tuple[list[Event], dict[str, Label]],
) -> None:
    """The background is the same society with and without the planted agents."""
    events, labels = planted_agents
    plain, _ = _run(**AGENTS_RUN)
    with_agents = {e.id for e in events if e.kind != "agent"}
    assert {e.id for e in plain if e.kind != "agent"} <= with_agents
    assert set(labels) == {*AGENT_SCENARIOS, "drift"}
    assert len({a for lab in labels.values() for a in lab.agents}) == sum(
        len(lab.agents) for lab in labels.values())  # every planted agent plays one part


def test_lockstep_group_comments_in_order_seconds_apart_with_varied_texts(
    planted_agents: tuple[list[Event], dict[str, Label]],
) -> None:
    events, labels = planted_agents
    label = labels["lockstep"]
    order = label.details["order"]
    assert label.agents == order and len(order) == 4 and not label.posts
    ids = set(label.details["comment_ids"])
    mine = [e for e in _kind(events, "comment") if e.comment_id in ids]
    assert {e.author for e in mine} == set(order)
    by_post = collections.defaultdict(list)
    for c in mine:
        by_post[c.post_id].append(c)
    assert list(by_post) == label.details["targets"] and len(by_post) >= 20
    posts = {p.post_id: p for p in _kind(events, "post")}
    for pid, cs in by_post.items():
        assert [c.author for c in cs] == order  # event-time order = the fixed order
        gaps = [(b.event_time - a.event_time).total_seconds() for a, b in itertools.pairwise(cs)]
        assert all(LOCKSTEP_GAP_S[0] <= g <= LOCKSTEP_GAP_S[1] for g in gaps)
        assert 0 < (cs[0].event_time - posts[pid].event_time).total_seconds() < 900
        assert _in(label, cs[0].event_time)
    # their texts are the background's, drawn per comment: mostly different on one target
    varied = sum(len({c.content for c in cs}) >= 3 for cs in by_post.values())
    assert varied >= 0.8 * len(by_post)
    # outside the group, nobody else follows these agents around
    others = [c for c in _kind(events, "comment") if c.author in order and c.comment_id not in ids]
    assert len(others) <= len(mine) // 4


def test_adapter_moves_toward_its_top_scored_posts(
    planted_agents: tuple[list[Event], dict[str, Label]],
) -> None:
    """Net Progress (metrics A2) on TF-IDF vectors of the adapter's posts, with the final vote
    counts, on the posts' topics (one-hot: the planted mechanism) and on their texts (TF-IDF):
    beyond the 95th percentile of the shuffle null; the scores are the planned ones."""
    events, labels = planted_agents
    label = labels["adapt"]
    pids = label.posts
    assert label.agents and len(pids) >= 5 * ADAPT_WINDOW
    final: dict[str, tuple[int, int]] = {}
    for v in _kind(events, "vote"):
        if v.target == "post" and v.post_id in set(pids):
            final[v.post_id] = (v.upvotes, v.downvotes)
    scores = [final.get(p, (0, 0))[0] - final.get(p, (0, 0))[1] for p in pids]
    posts = {p.post_id: p for p in _kind(events, "post")}
    settled = events[-1].event_time - AGENTS_RUN["max_delay"]  # type: ignore[operator]
    n = sum(posts[p].event_time < settled for p in pids)  # their votes reached their final
    assert n >= 4 * ADAPT_WINDOW and scores[:n] == label.details["scores"][:n]
    texts = {p.post_id: p.text for p in _kind(events, "post")}
    vec = TfidfVectorizer(stop_words="english").fit(list(texts.values()))
    topics = label.details["topics"]
    one_hot = np.array([[topics[j] == m for m in label.details["menu"]] for j in range(n)], float)

    def dist(a: np.ndarray, b: np.ndarray) -> float:
        return 1 - a @ b / np.linalg.norm(a) / np.linalg.norm(b)

    def net_progress(x: np.ndarray, sc: list[int], rng: np.random.Generator | None) -> float:
        out = []
        for k in range(len(x) // ADAPT_WINDOW - 1):
            w = np.arange(k * ADAPT_WINDOW, (k + 1) * ADAPT_WINDOW)
            s = np.array(sc)[w] if rng is None else rng.permutation(np.array(sc)[w])
            rank = w[np.argsort(-s, kind="stable")]
            top, bot = rank[:ADAPT_TOP], rank[-ADAPT_TOP:]
            cur, nxt = x[w].mean(0), x[w + ADAPT_WINDOW].mean(0)
            c_top, c_bot = x[top].mean(0), x[bot].mean(0)
            d_top = dist(nxt, c_top) - dist(cur, c_top)
            d_bot = dist(nxt, c_bot) - dist(cur, c_bot)
            out.append(d_bot - d_top)
        return float(np.mean(out))

    for x in (one_hot, vec.transform([texts[p] for p in pids[:n]]).toarray()):
        rng = np.random.default_rng(0)
        null = [net_progress(x, scores, rng) for _ in range(200)]
        assert net_progress(x, scores, None) > np.percentile(null, 95)

"""The real-text stream of bench/realtext.py: deterministic, only real texts, in event-time order,
with the real shapes (event mix, heavy-tailed authors, comment trees) and the planted flood."""

from __future__ import annotations

import csv
import json
import sys
import warnings
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streams.events import AgentEvent, CommentEvent, Event, PostEvent, VoteEvent, parse_event

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import realtext  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "moltbook"
N = 40_000  # at scale_for(N) this covers the normal day and the peak day with its flood


@pytest.fixture(scope="module")
def run() -> tuple[realtext.RealTextStream, list[Event]]:
    s = realtext.RealTextStream(
        realtext.RealTextConfig(seed=3, scale=realtext.scale_for(N)), max_events=N)
    return s, list(s)


def plain_real_texts() -> set[str]:
    """Every post ("title\\ncontent") and comment text of the data, read with plain json/csv."""
    out: set[str] = set()

    def post(p: dict[str, Any]) -> None:
        out.add(f"{p.get('title') or ''}\n{p.get('content') or ''}".strip())

    def tree(cs: list[dict[str, Any]]) -> None:
        for c in cs or []:
            out.add(c.get("content") or "")
            tree(c.get("replies") or [])

    for path in (DATA / "api").rglob("*.json"):
        raw = json.loads(path.read_text())
        for p in [raw["post"]] if isinstance(raw.get("post"), dict) else raw.get("posts", []):
            post(p)
        tree(raw.get("comments") or [])
    for line in (DATA / "api" / "agent-profiles.jsonl").open():
        raw = json.loads(line)
        for p in raw.get("_recent_posts") or []:
            post(p)
        for c in raw.get("_recent_comments") or []:
            out.add(c.get("content") or "")
    with (DATA / "observatory-sample" / "moltbook_posts.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            post(row)
    with (DATA / "observatory-sample" / "moltbook_comments.csv").open(newline="") as f:
        out |= {row["content"] for row in csv.DictReader(f)}
    return out


def test_deterministic_by_seed() -> None:
    a = [e.model_dump() for e in realtext.stream(3000, seed=5, scale=0.02)]
    b = [e.model_dump() for e in realtext.stream(3000, seed=5, scale=0.02)]
    c = [e.model_dump() for e in realtext.stream(3000, seed=6, scale=0.02)]
    assert a == b and a != c
    s = realtext.RealTextStream(realtext.RealTextConfig(seed=5, scale=0.02), max_events=3000)
    assert [e.model_dump() for e in s] == [e.model_dump() for e in s] == a  # replays


def test_unique_texts_change_only_the_texts(run: tuple[Any, list[Event]]) -> None:
    stream, plain = run
    unique = list(realtext.RealTextStream(
        realtext.RealTextConfig(seed=3, scale=realtext.scale_for(N), unique_texts=True),
        max_events=N))
    def rest(e: Event) -> dict[str, Any]:  # all but the field that carries the word
        return e.model_dump(exclude={"title"} if isinstance(e, PostEvent) else {"content"})

    assert [rest(e) for e in plain] == [rest(e) for e in unique]
    flood = set(stream.flood.posts)
    texts = [(a.text, b.text) for a, b in zip(plain, unique, strict=True)
             if isinstance(a, PostEvent | CommentEvent) and a.post_id not in flood
             or isinstance(a, CommentEvent)]
    assert flood and all(a.text == b.text for a, b in zip(plain, unique, strict=True)
                         if isinstance(a, PostEvent) and a.post_id in flood)
    assert len({b for _, b in texts}) == len(texts) > len({a for a, _ in texts})
    for k, (a, b) in enumerate(texts, 1):  # a word of its own first, in order
        word = f"q{k:x}z "
        assert b.startswith(word) and b[len(word):].strip() == a.strip()


def test_only_real_texts_and_valid_events(run: tuple[Any, list[Event]]) -> None:
    _, events = run
    real = plain_real_texts()
    texts = [e.text for e in events if isinstance(e, PostEvent | CommentEvent)]
    assert set(texts) <= real
    assert len(set(texts)) > 1500  # resampled across the corpus, not a handful
    for e in events[::40]:  # built without validation: every one must validate
        assert parse_event(e.model_dump_json()) == e


def test_event_time_order_and_unique_ids(run: tuple[Any, list[Event]]) -> None:
    _, events = run
    times = [e.event_time for e in events]
    assert times == sorted(times)
    assert len({e.id for e in events if not isinstance(e, VoteEvent)}) == sum(
        not isinstance(e, VoteEvent) for e in events)
    assert times[-1] - times[0] > timedelta(days=1, hours=20)  # the normal and the peak day
    posts = {e.post_id: e.event_time for e in events if isinstance(e, PostEvent)}
    comments = {e.comment_id: e for e in events if isinstance(e, CommentEvent)}
    for e in events:
        if isinstance(e, CommentEvent):
            assert posts[e.post_id] <= e.event_time  # a comment follows its post
        if isinstance(e, VoteEvent):
            assert e.target_id in (posts if e.target == "post" else comments)


def test_event_mix_and_pace(run: tuple[Any, list[Event]]) -> None:
    _, events = run
    kinds = Counter(e.kind for e in events)
    votes = kinds["vote"] / (kinds["vote"] + kinds["post"] + kinds["comment"])
    assert votes == pytest.approx(0.30, abs=0.02)
    assert kinds["comment"] / kinds["post"] == pytest.approx(2.5, abs=0.3)
    start = events[0].event_time
    day = Counter((e.event_time - start).days for e in events if isinstance(e, PostEvent))
    assert day[1] / day[0] == pytest.approx(4.0, rel=0.15)  # the peak day: 4x a normal day


def test_heavy_tailed_authors(run: tuple[Any, list[Event]]) -> None:
    import powerlaw

    _, events = run
    counts = Counter(e.author for e in events
                     if isinstance(e, PostEvent | CommentEvent) and e.author)
    values = sorted(counts.values(), reverse=True)
    assert sum(values[: len(values) // 100]) / sum(values) > 0.1  # top 1 % of agents: > 10 %
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alpha = powerlaw.Fit(values, discrete=True, xmin=10, verbose=False).power_law.alpha
        real = powerlaw.Fit(list(realtext.load_corpus().activity), discrete=True, xmin=1,
                            verbose=False).power_law.alpha
    assert realtext.load_corpus().activity_alpha == pytest.approx(real, abs=1e-3)
    assert alpha == pytest.approx(real, abs=0.3)  # the tail keeps the real exponent
    nulls = [e for e in events if isinstance(e, PostEvent) and e.author is None]
    assert 0 < len(nulls) < 0.02 * sum(isinstance(e, PostEvent) for e in events)
    appeared = {e.name for e in events if isinstance(e, AgentEvent)}
    assert set(counts) <= appeared  # each agent's AgentEvent comes with its first appearance


def test_comment_trees_have_the_real_shape(run: tuple[Any, list[Event]]) -> None:
    _, events = run
    corpus = realtext.load_corpus()
    comments = [e for e in events if isinstance(e, CommentEvent)]
    authors = {e.post_id: e.author for e in events if isinstance(e, PostEvent)}
    by_id = {c.comment_id: c for c in comments}
    for c in comments:
        if c.parent_id is None:
            assert (c.depth, c.reply_to) == (1, authors[c.post_id])
        else:
            parent = by_id[c.parent_id]
            assert parent.post_id == c.post_id and parent.event_time <= c.event_time
            assert (c.depth, c.reply_to) == (parent.depth + 1, parent.author)
        assert c.post_author == authors[c.post_id]
    real_deep = sum(p >= 0 for t in corpus.trees for p in t) / sum(map(len, corpus.trees))
    deep = sum(c.depth > 1 for c in comments) / len(comments)
    assert deep == pytest.approx(real_deep, abs=0.015)
    per_post = Counter(c.post_id for c in comments)
    commented = len(per_post) / len(authors)
    assert commented == pytest.approx(2.5 / corpus.mean_tree, abs=0.05)
    # thread sizes are the real trees' (the stream's end cuts the last ones short)
    assert max(per_post.values()) <= max(map(len, corpus.trees))
    assert sum(per_post.values()) / len(per_post) == pytest.approx(corpus.mean_tree, rel=0.15)


def test_planted_mint_flood(run: tuple[Any, list[Event]]) -> None:
    s, events = run
    corpus = realtext.load_corpus()
    mint = {f"{t}\n{c}".strip() for t, c, _ in corpus.mint}
    flood = set(s.flood.posts)
    assert len(s.flood.agents) >= 5 and len(flood) >= len(s.flood.agents)
    created = {e.name: e.created_at for e in events if isinstance(e, AgentEvent)}
    for e in events:
        if isinstance(e, PostEvent) and e.post_id in flood:
            assert e.text in mint and e.author in s.flood.agents
            assert s.flood.start <= e.event_time <= s.flood.end
            assert timedelta(0) <= e.event_time - created[e.author] <= timedelta(minutes=40)
        elif isinstance(e, PostEvent):
            assert e.text not in mint  # the background never carries the flood's texts
    assert all(realtext.MINT.search(t) for t in mint)


def test_simulator_corpus_keeps_the_shapes() -> None:
    sim = realtext.simulator_corpus(seed=0, events=5000)
    real = realtext.load_corpus()
    assert sim.trees == real.trees and sim.delays == real.delays
    assert sim.activity == real.activity and sim.posts and sim.comments
    real_texts = real.text_set()
    sim_texts = {f"{t}\n{c}".strip() for t, c, _ in sim.posts}
    assert len(sim_texts & real_texts) < 0.01 * len(sim_texts)  # the society's own texts
    events = list(realtext.stream(2000, seed=1, scale=0.05, corpus=sim))
    texts = sim.text_set()
    assert all(e.text in texts for e in events if isinstance(e, PostEvent | CommentEvent))


def test_deep_size_counts_each_object_once() -> None:
    from bench.bench_realtext import deep_size

    arr = np.zeros(1000, np.int64)
    view = arr[10:20]
    shared = ["x" * 100]
    first = {"a": shared, "b": view}
    seen: set[int] = set()
    size = deep_size(first, seen)
    expect = (sys.getsizeof(first) + sys.getsizeof("a") + sys.getsizeof("b")
              + sys.getsizeof(shared) + sys.getsizeof(shared[0]) + sys.getsizeof(view)
              + sys.getsizeof(arr))
    assert size == expect and size > arr.nbytes  # the view brings its owner's buffer
    assert deep_size([shared, arr], seen) == sys.getsizeof([shared, arr])  # both seen: once
    objs = np.array([shared[0], "y" * 50], dtype=object)
    assert deep_size(objs, set()) == sys.getsizeof(objs) + sum(map(sys.getsizeof, objs))

    class Box:
        def __init__(self) -> None:
            self.s = "z" * 300  # held in the instance's values, not in a dict

    box = Box()
    assert deep_size(box, set()) >= sys.getsizeof(box) + sys.getsizeof(box.s) + 300


def test_held_rss_follows_what_is_held() -> None:
    from bench.bench_realtext import held_rss

    before = held_rss()
    block = np.ones(64 * 2**20 // 8)  # 64 MB, touched
    during = held_rss()
    del block
    after = held_rss()
    assert during - before > 60 * 2**20 and during - after > 60 * 2**20


def test_compare_worktree_is_removed_on_error() -> None:
    import subprocess

    from bench.bench_compare import worktree

    with pytest.raises(RuntimeError), worktree("HEAD") as path:
        assert (path / "streams" / "pipeline.py").exists()
        raise RuntimeError
    listed = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True,
                            text=True, check=True).stdout
    assert not path.exists() and str(path) not in listed


def test_compare_takes_the_median_of_each_figure() -> None:
    from bench.bench_compare import median

    runs = [{"rate": 3.0, "spent": {"a": 1.0, "b": 9.0}, "note": "x", "ok": True},
            {"rate": 1.0, "spent": {"a": 5.0, "b": 2.0}, "note": "y", "ok": False},
            {"rate": 2.0, "spent": {"a": 3.0}, "note": "z", "ok": False}]
    assert median(runs) == {"rate": 2.0, "spent": {"a": 3.0, "b": 5.5}, "note": "x", "ok": True}

"""The normaliser against every real Moltbook file and against each kind of malformed input."""

from __future__ import annotations

import copy
import csv
import json
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from service.sources.normalise import (
    REASONS,
    normalise_agent_profile,
    normalise_archive_row,
    normalise_post_detail,
    normalise_posts_list,
    parse_time,
    posts_list_paging,
    table_of,
)
from streams.events import (
    AgentEvent,
    CommentEvent,
    DeadLetter,
    PostEvent,
    SubmoltEvent,
    parse_event,
)

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "moltbook"
POST_FILES = sorted((DATA / "api" / "posts").glob("*.json"))
DETAIL_FILES = [*POST_FILES, DATA / "api" / "lists" / "post-detail-truncated.json"]
SAMPLE = DATA / "observatory-sample"
T0 = datetime(2026, 2, 1, 12, tzinfo=UTC)


def walk(tree: list[dict[str, Any]], parent: dict[str, Any] | None = None, depth: int = 1):
    """Plain recursive walk of a raw comment tree: (comment, parent comment, depth)."""
    for c in tree:
        yield c, parent, depth
        yield from walk(c.get("replies") or [], c, depth + 1)


def name_of(obj: dict[str, Any] | None) -> str | None:
    return (obj.get("author") or {}).get("name") if obj else None


def kinds(items: list[Any]) -> Counter[str]:
    return Counter(i.reason if isinstance(i, DeadLetter) else i.kind for i in items)


def test_real_data_is_present() -> None:
    assert len(POST_FILES) == 158


@pytest.mark.parametrize("path", DETAIL_FILES, ids=lambda p: p.stem[:8])
def test_post_detail_matches_a_plain_walk_of_the_json(path: Path) -> None:
    raw = json.loads(path.read_text())
    items = normalise_post_detail(path.read_bytes(), origin=str(path))
    post, tree = raw["post"], raw.get("comments") or []
    walked = list(walk(tree))

    posts = [i for i in items if isinstance(i, PostEvent)]
    comments = [i for i in items if isinstance(i, CommentEvent)]
    dead = [i for i in items if isinstance(i, DeadLetter)]
    # Every record is an event, null authors included: real items are never lost.
    assert len(posts) == 1 and posts[0].author == name_of(post)
    assert len(comments) == len(walked) and not dead

    by_id = {c["id"]: (c, parent, depth) for c, parent, depth in walked}
    for ev in comments:
        c, parent, depth = by_id[ev.comment_id]
        assert ev.parent_id == (parent["id"] if parent else None) == c["parent_id"]
        assert ev.depth == depth
        assert ev.reply_to == (name_of(parent) if parent else name_of(raw["post"]))
        assert ev.post_author == name_of(raw["post"])
        assert ev.post_id == post["id"] and ev.author == name_of(c)
        assert ev.event_time == parse_time(c["created_at"])

    authors = {name_of(post)} | {c["author"]["name"] for c, _, _ in walked if c["author"]}
    agents = [i for i in items if isinstance(i, AgentEvent)]
    assert sorted(a.name for a in agents) == sorted(authors - {None})
    assert [s.name for s in items if isinstance(s, SubmoltEvent)] == [post["submolt"]["name"]]

    observed = parse_time(raw.get("_downloaded_at"))
    for item in items:
        if observed is not None:
            assert item.observed_at == observed
        if not isinstance(item, DeadLetter):
            assert item.event_time.utcoffset() == timedelta(0)
            assert parse_event(item.model_dump_json()) == item  # round-trips


NULL_AUTHOR_FILES = [p for p in POST_FILES if json.loads(p.read_text())["post"]["author"] is None]


def test_real_null_author_posts_are_events() -> None:
    assert len(NULL_AUTHOR_FILES) == 10  # of 158 real answers; all used to be dead letters
    for path in NULL_AUTHOR_FILES:
        raw = json.loads(path.read_text())
        items = normalise_post_detail(path.read_bytes(), origin=str(path))
        (post,) = [i for i in items if isinstance(i, PostEvent)]
        assert post.author is None and post.post_id == raw["post"]["id"]
        assert post.text == f"{raw['post']['title'] or ''}\n{raw['post']['content'] or ''}".strip()
        assert not any(isinstance(i, DeadLetter) for i in items)
        top = [c for c in items if isinstance(c, CommentEvent) and c.depth == 1]
        assert all(c.post_author is None and c.reply_to is None for c in top)


def test_both_api_generations() -> None:
    new = [p for p in POST_FILES if "comments" not in json.loads(p.read_text())]
    assert len(new) == 44
    raw = json.loads(new[0].read_text())
    items = normalise_post_detail(raw, origin="x")
    (agent,) = [i for i in items if isinstance(i, AgentEvent)]
    author = raw["post"]["author"]
    assert agent.follower_count == author["followerCount"]
    assert agent.created_at == parse_time(author["createdAt"]) == agent.event_time
    (post,) = [i for i in items if isinstance(i, PostEvent)]
    assert post.author_id == raw["post"]["author_id"]
    assert post.event_time == datetime.fromisoformat(raw["post"]["created_at"])


def test_old_generation_author_profile_and_entity_times() -> None:
    raw = json.loads(next(p for p in POST_FILES if json.loads(p.read_text()).get("comments")
                          and json.loads(p.read_text())["post"]["author"]).read_text())
    items = normalise_post_detail(raw, origin="x")
    post = next(i for i in items if isinstance(i, PostEvent))
    agent = next(i for i in items if isinstance(i, AgentEvent) and i.name == post.author)
    author = raw["post"]["author"]
    assert (agent.karma, agent.follower_count, agent.agent_id) == (
        author["karma"], author["follower_count"], author["id"])
    # No creation time in the old API: the agent's first activity here bounds it.
    assert agent.created_at is None and agent.event_time <= post.event_time
    sub = next(i for i in items if isinstance(i, SubmoltEvent))
    assert sub.display_name == raw["post"]["submolt"]["display_name"]


def test_observed_at_argument_beats_downloaded_at() -> None:
    path = POST_FILES[0]
    later = datetime(2027, 1, 1, tzinfo=UTC)
    assert {i.observed_at for i in normalise_post_detail(
        path.read_text(), origin="x", observed_at=later)} == {later}


def test_posts_list_offset_form_real_file() -> None:
    path = DATA / "api" / "lists" / "posts-list-offset.json"
    items = normalise_posts_list(path.read_text(), origin=str(path))
    assert kinds(items) == {"post": 1, "submolt": 1}  # the unauthenticated-list incident
    (post,) = [i for i in items if isinstance(i, PostEvent)]
    assert post.author is None and post.author_id is None
    assert posts_list_paging(path.read_text()) == posts_list_paging(json.loads(path.read_text()))
    paging = posts_list_paging(path.read_bytes())
    assert paging is not None and (paging.has_more, paging.next_offset, paging.count) == (
        True, 20, 10)


def test_posts_list_cursor_form() -> None:
    env = json.loads((DATA / "api" / "lists" / "posts-list-offset.json").read_text())
    post = env["posts"][0] | {"author": {"id": "a1", "name": "KingMolt"}}
    cursor = {"success": True, "posts": [post, post], "has_more": True, "next_cursor": "abc"}
    items = normalise_posts_list(cursor, origin="x", observed_at=T0 + timedelta(days=30))
    assert kinds(items) == {"submolt": 1, "agent": 1, "post": 2}  # page repeats are kept
    paging = posts_list_paging(cursor)
    assert paging is not None and (paging.next_cursor, paging.next_offset) == ("abc", None)
    assert posts_list_paging("not json") is None and posts_list_paging({"x": 1}) is None


def profile_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / "api" / "agent-profiles.jsonl").open()]


def test_agent_profiles_archived_form() -> None:
    lines = profile_lines()
    assert len(lines) == 108
    n_posts = 0
    for line in lines:
        items = normalise_agent_profile(json.dumps(line), origin="p")
        agent = items[0]
        assert isinstance(agent, AgentEvent) and agent.name == line["name"]
        assert (agent.karma, agent.agent_id) == (line["karma"], line["id"])
        assert agent.created_at == parse_time(line["created_at"]) == agent.event_time
        posts = [i for i in items if isinstance(i, PostEvent)]
        assert [p.post_id for p in posts] == [p["id"] for p in line["_recent_posts"]]
        assert all(p.author == line["name"] and p.author_id == line["id"] for p in posts)
        assert not any(isinstance(i, CommentEvent | DeadLetter) for i in items)
        subs = {i.name for i in items if isinstance(i, SubmoltEvent)}
        assert subs == {p["submolt"]["name"] for p in line["_recent_posts"]}
        n_posts += len(posts)
    assert n_posts == sum(len(x["_recent_posts"]) for x in lines) == 443


def test_agent_profile_api_form() -> None:
    line = profile_lines()[0]
    agent = {k: v for k, v in line.items() if not k.startswith("_")}
    answer = {"success": True, "agent": agent, "recentPosts": line["_recent_posts"],
              "recentComments": line["_recent_comments"]}
    items = normalise_agent_profile(answer, origin="p", observed_at=T0 + timedelta(days=90))
    archived = normalise_agent_profile(line, origin="p", observed_at=T0 + timedelta(days=90))
    assert items == archived  # both forms give the same events
    assert kinds(items)["post"] == len(line["_recent_posts"]) > 0


def read_csv(name: str) -> list[dict[str, str]]:
    with (SAMPLE / name).open(newline="") as f:
        return list(csv.DictReader(f))


def test_observatory_sample_every_row() -> None:
    posts = read_csv("moltbook_posts.csv")
    authors = {r["id"]: r["agent_name"] for r in posts}
    counts: Counter[str] = Counter()
    for name in ("moltbook_posts.csv", "moltbook_comments.csv", "moltbook_agents.csv",
                 "submolts_sample.csv"):
        table = table_of(name)
        assert table is not None
        for row in read_csv(name):
            items = normalise_archive_row(table, row, origin=name, post_authors=authors)
            assert not any(isinstance(i, DeadLetter) for i in items), items
            main = items[-1]
            counts[main.kind] += 1
            if isinstance(main, PostEvent):
                score = int(row["score"])
                assert (main.upvotes, main.downvotes) == (max(score, 0), max(-score, 0))
                assert main.author == row["agent_name"] and main.url is None
                assert main.comment_count == int(row["comment_count"])
            if isinstance(main, CommentEvent):
                assert main.reply_to == authors[row["post_id"]] == main.post_author
                assert main.depth == 1 and main.parent_id is None
            if isinstance(main, AgentEvent) and table == "agents":
                assert main.event_time.tzinfo is not None
                assert main.event_time == (parse_time(row["created_at"])
                                           or parse_time(row["first_seen_at"]))
    assert counts == {"post": 1710, "comment": 97, "agent": 793, "submolt": 100}


def test_observatory_documented_schema_with_lookups() -> None:
    fetched = "2026-04-01T00:00:00+00:00"
    post = {"id": "p1", "agent_id": "a1", "title": "t", "content": "c", "submolt": "general",
            "score": -3, "created_at": "2026-03-01T00:00:00+00:00", "fetched_at": fetched}
    items = normalise_archive_row("posts", post, origin="o", agent_names={"a1": "Ann"})
    p = items[-1]
    assert isinstance(p, PostEvent) and (p.author, p.author_id, p.downvotes) == ("Ann", "a1", 3)
    assert p.observed_at == parse_time(fetched)
    orphan = normalise_archive_row("posts", post, origin="o")[-1]  # a1 resolves to no name
    assert isinstance(orphan, PostEvent) and (orphan.author, orphan.author_id) == (None, "a1")
    nameless = normalise_archive_row("comments", {"id": "c0", "post_id": "p1", "content": "x",
                                                  "created_at": "2026-03-02T00:00:00+00:00"},
                                     origin="o")
    assert [(c.kind, c.author, c.author_id) for c in nameless] == [("comment", None, None)]
    reply = {"id": "c2", "post_id": "p1", "agent_id": "a2", "parent_id": "c1", "content": "x",
             "score": 1, "created_at": "2026-03-02T00:00:00+00:00", "fetched_at": fetched}
    c = normalise_archive_row("comments", reply, origin="o", agent_names={"a2": "Bob"},
                              post_authors={"p1": "Ann"}, comment_parents={"c1": ("Cy", 1)})[-1]
    assert isinstance(c, CommentEvent)
    assert (c.parent_id, c.reply_to, c.depth, c.post_author) == ("c1", "Cy", 2, "Ann")
    orphan = normalise_archive_row("comments", reply, origin="o", agent_names={"a2": "Bob"})[-1]
    assert isinstance(orphan, CommentEvent) and (orphan.reply_to, orphan.depth) == (None, 2)
    agent = {"id": "a1", "name": "Ann", "karma": 4, "created_at": None,
             "first_seen_at": "2026-02-01T00:00:00", "last_seen_at": "2026-03-05T00:00:00"}
    a = normalise_archive_row("agents", agent, origin="o")[-1]
    assert isinstance(a, AgentEvent)
    assert a.event_time == datetime(2026, 2, 1, tzinfo=UTC)
    assert a.observed_at == datetime(2026, 3, 5, tzinfo=UTC)
    assert normalise_archive_row("likes", agent, origin="o")[0].reason == "bad_shape"


# ------------------------------------------------------------------ malformed input


def detail(**post_changes: Any) -> dict[str, Any]:
    post = {"id": "p1", "title": "t", "content": "c", "created_at": "2026-02-01T10:00:00Z",
            "author": {"name": "Ann"}, "submolt": {"name": "general"}}
    return {"success": True, "post": post | post_changes, "comments": [],
            "_downloaded_at": T0.isoformat()}


def comment(cid: str | None, name: str | None, replies: tuple[Any, ...] = (), **kw: Any) -> dict:
    c = {"id": cid, "created_at": "2026-02-01T11:00:00Z", "content": "x",
         "author": {"name": name} if name else None, "replies": list(replies)}
    return c | kw


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("{not json", "bad_json"),
        (b"\xff\xfe{}", "bad_json"),
        ("[1, 2]", "bad_shape"),
        ({"success": True, "post": "p1"}, "bad_shape"),
        ({"success": False, "error": "Post not found", "hint": "?"}, "api_error"),
        (detail(id=None), "missing_id"),
        (detail(created_at="yesterday"), "bad_timestamp"),
        (detail(created_at=None), "bad_timestamp"),
        (detail(created_at="2019-12-31T23:59:59Z"), "bad_timestamp"),
        (detail(created_at=(T0 + timedelta(days=1, seconds=1)).isoformat()), "bad_timestamp"),
        (detail(author="Ann"), "bad_shape"),
        (detail(upvotes="many"), "bad_shape"),
        (detail(content="x" * 100_001), "oversized_text"),
    ],
)
def test_each_reason_on_post_detail(payload: Any, reason: str) -> None:
    items = normalise_post_detail(payload, origin="test")
    dead = [i for i in items if isinstance(i, DeadLetter)]
    assert [d.reason for d in dead] == [reason]
    assert reason in REASONS and dead[0].origin == "test"
    assert not any(isinstance(i, PostEvent) for i in items)


def test_reasons_are_all_exercised() -> None:
    # All covered by the table above; a missing author is never a reason.
    assert set(REASONS) == {"bad_json", "bad_shape", "api_error", "missing_id",
                            "bad_timestamp", "oversized_text"}


@pytest.mark.parametrize("author", [None, {"id": "a1", "name": ""}, {"id": "a1"},
                                    {"name": "   "}])
def test_nameless_author_post_is_an_event(author: Any) -> None:
    items = normalise_post_detail(detail(author=author), origin="t")
    assert kinds(items) == {"submolt": 1, "post": 1}
    (post,) = [i for i in items if isinstance(i, PostEvent)]
    assert post.author is None and post.author_id == (author or {}).get("id")


def test_one_bad_comment_dead_letters_only_itself() -> None:
    tree = [
        comment("c1", "Bob", (
            comment("c2", "Cy", [comment("c3", "Dee")], content="y" * 50),  # oversized
            comment("c4", None, [comment("c5", "Eve")]),  # null author: still a comment
        )),
        comment(None, "Fay", [comment("c6", "Gus")]),  # missing id
        comment("c7", "Hal", created_at="2010-01-01T00:00:00Z"),
        "not a comment",
    ]
    items = normalise_post_detail(detail() | {"comments": tree}, origin="t", max_text=40)
    assert [d.reason for d in items if isinstance(d, DeadLetter)] == [
        "oversized_text", "missing_id", "bad_timestamp", "bad_shape"]
    got = {c.comment_id: (c.parent_id, c.depth, c.reply_to)
           for c in items if isinstance(c, CommentEvent)}
    assert got == {
        "c1": (None, 1, "Ann"),
        "c3": ("c2", 3, "Cy"),  # parent dead-lettered, its author still known
        "c4": ("c1", 2, "Bob"),
        "c5": ("c4", 3, None),  # parent's author is null: unknown
        "c6": (None, 2, "Fay"),  # parent has no id, but its author is known
    }
    oversized = next(d for d in items if isinstance(d, DeadLetter))
    assert "replies" not in json.loads(oversized.raw)  # replies normalise on their own


def test_flat_comment_list_is_linked_by_parent_id() -> None:
    flat = [comment("c2", "Cy", parent_id="c1"), comment("c1", "Bob"),
            comment("c3", "Dee", parent_id="c2"), comment("c9", "Eve", parent_id="gone")]
    items = normalise_post_detail(detail() | {"comments": flat}, origin="t")
    got = {c.comment_id: (c.depth, c.reply_to) for c in items if isinstance(c, CommentEvent)}
    assert got == {"c1": (1, "Ann"), "c2": (2, "Bob"), "c3": (3, "Cy"), "c9": (2, None)}


def test_null_author_post_keeps_its_comments() -> None:
    payload = detail(author=None) | {"comments": [comment("c1", "Bob", [comment("c2", "Cy")])]}
    items = normalise_post_detail(payload, origin="t")
    assert [(p.post_id, p.author) for p in items if isinstance(p, PostEvent)] == [("p1", None)]
    got = {c.comment_id: (c.reply_to, c.post_author) for c in items
           if isinstance(c, CommentEvent)}
    assert got == {"c1": (None, None), "c2": ("Bob", None)}


def test_raw_is_truncated_to_one_megabyte() -> None:
    big = "{" + "é" * 2_000_000
    (dead,) = normalise_post_detail(big, origin="t")
    assert dead.reason == "bad_json" and len(dead.raw.encode()) <= 1_000_000
    assert dead.raw == big.encode()[:1_000_000].decode(errors="ignore")


def test_agent_profile_malformed() -> None:
    assert kinds(normalise_agent_profile("nope", origin="t")) == {"bad_json": 1}
    assert kinds(normalise_agent_profile({"success": False}, origin="t")) == {"api_error": 1}
    assert kinds(normalise_agent_profile({"agent": {"name": ""}}, origin="t")) == {
        "missing_id": 1}
    bad = {"name": "Ann", "created_at": "2026-02-01T00:00:00Z", "_recent_posts": [{"id": "p"}]}
    assert kinds(normalise_agent_profile(bad, origin="t", observed_at=T0)) == {
        "agent": 1, "bad_timestamp": 1}


def test_posts_list_malformed_items() -> None:
    env = {"posts": [None, detail()["post"], detail(id="")["post"]], "has_more": False}
    assert kinds(normalise_posts_list(env, origin="t", observed_at=T0)) == {
        "bad_shape": 1, "post": 1, "agent": 1, "submolt": 1, "missing_id": 1}


def test_fuzzed_real_payloads_never_raise() -> None:
    rng = random.Random(7)
    odd = [None, "", "x", -1, 1.5, [], {}, True, "2026-13-45", 10**30, float("nan")]
    originals = [json.loads(p.read_text()) for p in POST_FILES[:40]]

    def mutate(obj: Any) -> None:
        if isinstance(obj, dict) and obj:
            key = rng.choice(list(obj))
            if rng.random() < 0.4:
                obj[key] = rng.choice(odd)
            else:
                mutate(obj[key])
        elif isinstance(obj, list) and obj:
            mutate(rng.choice(obj))

    for _ in range(400):
        payload = copy.deepcopy(rng.choice(originals))
        for _ in range(rng.randint(1, 4)):
            mutate(payload)
        items = normalise_post_detail(payload, origin="fuzz")
        assert all(isinstance(i, DeadLetter) or i.id for i in items)
        row = {k: rng.choice(odd) for k in ("id", "agent_name", "created_at", "score", "name")}
        for table in ("posts", "comments", "agents", "submolts"):
            assert normalise_archive_row(table, row, origin="fuzz")

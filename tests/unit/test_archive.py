"""Archive readers: every format from real data, event-time order, completeness, pacing, memory."""

from __future__ import annotations

import csv
import gzip
import json
import random
import shutil
import tarfile
import tracemalloc
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from service.sources.archive import (
    ArchiveStats,
    archive_size,
    bounded_sort,
    open_archive,
    paced,
    read_source,
    sort_key,
    table_kind,
)
from service.sources.normalise import (
    normalise_agent_profile,
    normalise_archive_row,
    normalise_post_detail,
    normalise_posts_list,
    table_of,
)
from streams.events import CommentEvent, DeadLetter, PostEvent

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "moltbook"
POSTS_DIR = DATA / "api" / "posts"
SAMPLE = DATA / "observatory-sample"
T = datetime(2026, 6, 1, tzinfo=UTC)


def split(items: list[Any]) -> tuple[list[Any], list[DeadLetter]]:
    events = [i for i in items if not isinstance(i, DeadLetter)]
    return events, [i for i in items if isinstance(i, DeadLetter)]


def assert_sorted(events: list[Any]) -> None:
    keys = [sort_key(e) for e in events]
    assert keys == sorted(keys)


def normalised_answers() -> list[Any]:
    """The plain way: every real post answer through the normaliser, one by one."""
    out: list[Any] = []
    for path in sorted(POSTS_DIR.glob("*.json")):
        out += normalise_post_detail(path.read_bytes(), origin=str(path), source="archive")
    return out


def by_id(events: list[Any]) -> Counter[str]:
    return Counter(e.id for e in events)


@pytest.fixture(scope="module")
def answers_tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tar") / "posts.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(POSTS_DIR, arcname="posts")
    return path


@pytest.mark.parametrize("form", ["directory", "tarball"])
def test_post_answers_complete_and_in_event_time_order(form: str, answers_tarball: Path) -> None:
    source = POSTS_DIR if form == "directory" else answers_tarball
    stats = ArchiveStats()
    events, dead = split(list(open_archive([source], stats=stats, sort_buffer=100_000)))
    want_events, want_dead = split(normalised_answers())
    assert_sorted(events)
    assert by_id(events) == by_id(want_events)
    assert sorted(events, key=sort_key) == sorted(want_events, key=sort_key)  # field for field
    assert Counter(d.reason for d in dead) == Counter(d.reason for d in want_dead)
    assert stats.late == 0 and stats.events == len(events) and stats.dead_letters == len(dead)
    assert Counter(e.kind for e in events)["comment"] == 286


def test_small_sort_buffer_is_bounded_and_late_events_are_kept(answers_tarball: Path) -> None:
    stats = ArchiveStats()
    items = list(open_archive([answers_tarball], sort_buffer=10, stats=stats))
    events, _ = split(items)
    assert by_id(events) == by_id(split(normalised_answers())[0])  # nothing dropped
    assert stats.late > 0  # 158 files in uuid order span months: 10 events cannot sort them


def test_bounded_sort_is_exact_within_its_buffer() -> None:
    rng = random.Random(3)
    base = [make_post(i) for i in range(2000)]
    shuffled = list(base)
    for i in range(0, len(shuffled), 50):  # disorder confined to blocks of 50
        block = shuffled[i : i + 50]
        rng.shuffle(block)
        shuffled[i : i + 50] = block
    stats = ArchiveStats()
    assert list(bounded_sort(shuffled, 50, stats)) == base and stats.late == 0
    out = list(bounded_sort(list(reversed(base)), 50, stats))
    # The first 51 fill the buffer; every later one is older than what was released.
    assert sorted(out, key=sort_key) == base and stats.late == len(base) - 51


def make_post(i: int, when: datetime = T) -> PostEvent:
    t = when + timedelta(seconds=i)
    return PostEvent(id=f"post:p{i}", event_time=t, observed_at=t, post_id=f"p{i}", author="a")


def test_jsonl_of_canonical_events_with_bad_lines(tmp_path: Path) -> None:
    events, _ = split(normalised_answers())
    rng = random.Random(1)
    shuffled = list(events)
    rng.shuffle(shuffled)
    path = tmp_path / "events.jsonl.gz"
    lines = [e.model_dump_json() for e in shuffled]
    lines[5:5] = ["{broken", json.dumps({"kind": "post", "id": "post:x"}), ""]
    path.write_bytes(gzip.compress("\n".join(lines).encode()))
    got, dead = split(list(open_archive([path], sort_buffer=len(events))))
    assert got == sorted(events, key=sort_key)
    assert [(d.reason, d.origin) for d in dead] == [
        ("bad_json", f"{path}:6"), ("bad_shape", f"{path}:7")]


def test_dead_letters_pass_through_immediately(tmp_path: Path) -> None:
    early, late = tmp_path / "early.jsonl", tmp_path / "late.jsonl"
    early.write_text("\n".join(make_post(i).model_dump_json() for i in range(5)))
    later = [make_post(i, T + timedelta(days=1)).model_dump_json() for i in range(5, 10)]
    late.write_text("\n".join(["not json", *later]))
    items = list(open_archive([early, late], sort_buffer=2))
    # The bad line of the later file comes out first, before any of the earlier events.
    assert isinstance(items[0], DeadLetter) and items[0].reason == "bad_json"
    assert [i.post_id for i in items[1:]] == [f"p{i}" for i in range(10)]


def sample_rows(name: str) -> list[dict[str, str]]:
    with (SAMPLE / name).open(newline="") as f:
        return list(csv.DictReader(f))


def test_observatory_csv_complete_with_links() -> None:
    events, dead = split(list(open_archive([SAMPLE], observed_at=T)))
    assert not dead
    assert_sorted(events)
    main = Counter(e.kind for e in events if e.source == "archive")
    # One post per row, one comment per row; agents and submolts de-duplicated by id.
    posts, comments = sample_rows("moltbook_posts.csv"), sample_rows("moltbook_comments.csv")
    assert main["post"] == len(posts) == 1710 and main["comment"] == len(comments) == 97
    authors = {r["id"]: r["agent_name"] for r in posts}
    replies = [e for e in events if isinstance(e, CommentEvent)]
    assert all(c.reply_to == authors[c.post_id] for c in replies)  # linked through posts table
    plain = Counter()
    for name in ("moltbook_posts.csv", "moltbook_comments.csv", "moltbook_agents.csv",
                 "submolts_sample.csv"):
        for row in sample_rows(name):
            for e in normalise_archive_row(table_of(name), row, origin=name, observed_at=T,
                                           post_authors=authors):
                plain[e.id] += 1
    assert by_id(events) == plain


def write_parquet(csv_path: Path, out: Path) -> None:
    """A Parquet table made from a sample CSV (pyarrow infers ints and timestamps)."""
    table = pacsv.read_csv(csv_path, parse_options=pacsv.ParseOptions(newlines_in_values=True))
    pq.write_table(table, out, row_group_size=300)


def test_parquet_equals_csv(tmp_path: Path) -> None:
    for name in ("moltbook_posts.csv", "moltbook_comments.csv"):
        write_parquet(SAMPLE / name, tmp_path / name.replace(".csv", ".parquet"))
    neutral = tmp_path / "neutral.parquet"  # no table name: recognised by its columns
    shutil.copy(tmp_path / "moltbook_comments.parquet", neutral)
    assert table_kind(neutral) == "comments"
    from_parquet = list(open_archive(sorted(tmp_path.glob("moltbook_*.parquet")), observed_at=T))
    csvs = [SAMPLE / "moltbook_posts.csv", SAMPLE / "moltbook_comments.csv"]
    from_csv = list(open_archive(csvs, observed_at=T))
    assert len(from_parquet) == len(from_csv) > 1710
    assert from_parquet == from_csv  # same events, field for field, same order


def test_documented_observatory_schema_links_ids_and_reply_chains(tmp_path: Path) -> None:
    (tmp_path / "agents.csv").write_text(
        "id,name,created_at,description,karma,first_seen_at,last_seen_at\n"
        "a1,Ann,2026-01-30T00:00:00+00:00,,3,2026-01-31T00:00:00,2026-03-01T00:00:00\n"
        "a2,Bob,,,1,2026-01-31T00:00:00,2026-03-01T00:00:00\n")
    (tmp_path / "posts.csv").write_text(
        "id,agent_id,title,content,submolt,score,created_at,fetched_at\n"
        "p1,a1,t,c,general,5,2026-02-01T00:00:00+00:00,2026-03-01T00:00:00+00:00\n")
    (tmp_path / "table3.csv").write_text(  # a comments table recognised by its header
        "id,post_id,agent_id,parent_id,content,score,created_at,fetched_at\n"
        "c2,p1,a1,c1,x,0,2026-02-01T02:00:00+00:00,2026-03-01T00:00:00+00:00\n"
        "c1,p1,a2,,x,0,2026-02-01T01:00:00+00:00,2026-03-01T00:00:00+00:00\n"
        "c3,p1,a9,c2,x,0,2026-02-01T03:00:00+00:00,2026-03-01T00:00:00+00:00\n")
    items = list(open_archive(sorted(tmp_path.iterdir())))
    events, dead = split(items)
    got = {e.comment_id: (e.author, e.reply_to, e.depth, e.parent_id)
           for e in events if isinstance(e, CommentEvent)}
    # c3's agent a9 is in no table: still a real comment, its author unknown (None)
    assert got == {"c1": ("Bob", "Ann", 1, None), "c2": ("Ann", "Bob", 2, "c1"),
                   "c3": (None, "Ann", 3, "c2")}
    assert dead == []
    assert [e.kind for e in events][:3] == ["agent", "agent", "submolt"]
    assert_sorted(events)


def test_json_files_lists_and_profiles(tmp_path: Path) -> None:
    profiles = DATA / "api" / "agent-profiles.jsonl"
    lists = DATA / "api" / "lists"
    events, dead = split(list(open_archive([profiles, lists])))
    plain: list[Any] = []
    for line in profiles.open():
        plain += normalise_agent_profile(line, origin="p", source="archive")
    plain += normalise_posts_list((lists / "posts-list-offset.json").read_text(), origin="l")
    plain += normalise_post_detail((lists / "post-detail-truncated.json").read_text(), origin="d")
    want_events, want_dead = split(plain)
    assert by_id(events) == by_id(want_events)
    assert Counter(d.reason for d in dead) == Counter(d.reason for d in want_dead)
    assert_sorted(events)
    (tmp_path / "notes.txt").write_text("hello")
    assert [d.reason for d in read_source(tmp_path / "notes.txt")] == ["unknown_format"]


@pytest.mark.parametrize("kind", ["tar.gz", "csv", "parquet", "jsonl", "dir"])
def test_progress_counts_every_byte(kind: str, tmp_path: Path, answers_tarball: Path) -> None:
    path = {
        "tar.gz": answers_tarball,
        "csv": SAMPLE / "moltbook_posts.csv",
        "jsonl": DATA / "api" / "agent-profiles.jsonl",
        "dir": POSTS_DIR,
        "parquet": tmp_path / "moltbook_posts.parquet",
    }[kind]
    if kind == "parquet":
        write_parquet(SAMPLE / "moltbook_posts.csv", path)
    seen: list[int] = []
    for _ in open_archive([path], progress=seen.append):
        pass
    assert sum(seen) == archive_size([path]) > 0 and len(seen) > 1


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_paced_replays_at_speed_without_sleeping() -> None:
    dead = DeadLetter(reason="bad_json", raw="x", origin="o", observed_at=T)
    items = [make_post(0), dead, make_post(60), make_post(30), make_post(120)]
    clock = FakeClock()
    assert list(paced(items, 2.0, clock=clock, sleep=clock.sleep)) == items
    assert clock.slept == [30.0, 30.0]  # 60 s and 120 s of platform time at 2x; late 30 s waits 0
    clock = FakeClock()
    assert list(paced(items, None, clock=clock, sleep=clock.sleep)) == items and not clock.slept
    with pytest.raises(ValueError):
        list(paced(items, 0, clock=clock, sleep=clock.sleep))


def test_paced_does_not_wait_for_time_already_spent() -> None:
    clock = FakeClock()
    out = []
    for item in paced([make_post(0), make_post(10)], 1.0, clock=clock, sleep=clock.sleep):
        out.append(item)
        clock.now += 4  # the consumer itself takes 4 s an item
    assert clock.slept == [6.0]


def test_memory_is_constant_in_file_size(tmp_path: Path) -> None:
    """A generated JSONL file many times larger than the reader may hold at once."""
    path = tmp_path / "big.jsonl"
    body = "lorem ipsum dolor sit amet " * 150  # ~4 KB a line
    n = 30_000
    with path.open("w") as f:
        for i in range(n):
            t = (T + timedelta(seconds=i)).isoformat()
            f.write(json.dumps({
                "kind": "comment", "id": f"comment:c{i}", "event_time": t, "observed_at": t,
                "comment_id": f"c{i}", "post_id": f"p{i % 97}", "author": f"a{i % 500}",
                "content": body}) + "\n")
    size = path.stat().st_size
    assert size > 100_000_000
    stats = ArchiveStats()
    tracemalloc.start()
    try:
        count = sum(1 for _ in open_archive([path], sort_buffer=500, stats=stats))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == n and stats.late == 0
    # 500 buffered events of ~4 KB plus read buffers: a few MB, against a 120 MB file.
    assert peak < 12_000_000 < size / 10, peak


def test_jsonl_of_list_envelopes(tmp_path: Path) -> None:
    env = json.loads((DATA / "api" / "lists" / "posts-list-offset.json").read_text())
    fixed = env | {"posts": [env["posts"][0] | {"author": {"id": "a", "name": "KingMolt"}}]}
    cursor = {"success": True, "posts": fixed["posts"], "has_more": False, "next_cursor": None}
    path = tmp_path / "lists.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in (env, fixed, cursor)))
    events, dead = split(list(open_archive([path])))
    assert dead == []  # the null-author list item is a post with author None
    assert Counter(e.kind for e in events) == {"submolt": 3, "agent": 2, "post": 3}
    assert sum(e.kind == "post" and e.author is None for e in events) == 1
    assert_sorted(events)


def test_corrupt_file_ends_its_source_with_a_dead_letter(tmp_path: Path) -> None:
    good = "\n".join(make_post(i).model_dump_json() for i in range(200)).encode()
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(gzip.compress(good)[:-200])  # truncated download
    events, dead = split(list(open_archive([path])))
    assert [d.reason for d in dead] == ["unreadable"] and 0 < len(events) <= 200

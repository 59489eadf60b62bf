"""The live verbatim-duplicate rule against a plain Counter over real Moltbook posts."""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from pathlib import Path

import pytest

from streams.state.verbatim import VerbatimFilter

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "moltbook"


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """Real post texts in archive order, the observatory sample then the API answers."""
    with (DATA / "observatory-sample" / "moltbook_posts.csv").open(newline="") as fh:
        out = [f"{r['title']}\n{r['content']}".strip() for r in csv.DictReader(fh)]
    for f in sorted((DATA / "api" / "posts").glob("*.json")):
        post = json.loads(f.read_text())["post"]
        out.append(f"{post.get('title') or ''}\n{post.get('content') or ''}".strip())
    return out


@pytest.mark.parametrize("threshold", [1, 2, 3])
def test_live_rule_against_counter(texts, threshold) -> None:
    counts = Counter(texts)
    assert max(counts.values()) > threshold  # the real data has verbatim repeats
    f = VerbatimFilter(threshold=threshold)
    admitted = [t for t in texts if f.admit(t)]
    # each text is admitted min(count, threshold) times, in arrival order
    assert Counter(admitted) == Counter({t: min(c, threshold) for t, c in counts.items()})
    over = {t: c for t, c in counts.items() if c > threshold}
    assert f.excluded_total == sum(c - threshold for c in over.values())
    assert f.blocked_texts == len(over)
    snap = f.snapshot()
    # what the batch rule would also drop, admitted here before the text crossed the threshold
    assert snap.value("verbatim_admitted_before_block_total") == threshold * len(over)
    # so the batch-rule corpus is the live one minus exactly those copies
    batch = [t for t in texts if counts[t] <= threshold]
    assert len(admitted) - threshold * len(over) == len(batch)
    top = snap.details["verbatim"]["top_blocked"][0]
    assert top["excluded"] == max(c - threshold for c in over.values())
    json.dumps(snap.as_dict(), allow_nan=False)


def test_disabled_admits_everything(texts) -> None:
    f = VerbatimFilter(threshold=1, enabled=False)
    assert all(f.admit(t) for t in texts) and f.excluded_total == 0


def test_tiny_sketch_overcounts_within_the_stated_bound(texts) -> None:
    """Width 64: collisions everywhere. Never an undercount; overcount > e N / w for at most
    a share e^-depth of the texts (the count-min guarantee), here with depth 4."""
    f = VerbatimFilter(threshold=10**9, width=64, depth=4)
    for t in texts:
        f.admit(t)
    counts = Counter(texts)
    over = [f.estimate(t) - c for t, c in counts.items()]
    assert min(over) >= 0
    bound = f.error_bound()
    assert bound == pytest.approx(math.e * len(texts) / 64)
    assert sum(o > bound for o in over) <= math.exp(-4) * len(counts)
    assert max(over) > 0  # the sketch is really colliding here


def test_parameters_guarded() -> None:
    with pytest.raises(ValueError):
        VerbatimFilter(depth=5)


def test_update_marks_posts_only() -> None:
    """As an engine: posts get item.admitted from the rule on their exact text; comments and
    votes pass untouched (and are not counted)."""
    from datetime import UTC, datetime

    from streams.events import CommentEvent, PostEvent
    from streams.state.base import Item

    t = datetime(2026, 2, 1, tzinfo=UTC)
    f = VerbatimFilter(threshold=1)
    posts = [Item.of(PostEvent(id=f"post:{i}", event_time=t, observed_at=t, post_id=str(i),
                               author=None, title="gm", content="gm all")) for i in range(3)]
    comment = Item.of(CommentEvent(id="comment:1", event_time=t, observed_at=t, comment_id="1",
                                   post_id="0", author="a", content="gm\ngm all"))
    for it in [*posts, comment]:
        f.update(it)
    f.expire(t.timestamp())
    assert [it.admitted for it in posts] == [True, False, False]
    assert comment.admitted and f.seen_total == 3 and f.excluded_total == 2
    bare = [Item(it.event, it.t, it.author, it.text) for it in posts]  # no raw text: read anew
    assert bare[0].raw is None and posts[0].raw == "gm\ngm all"
    g = VerbatimFilter(threshold=1)
    for it in bare:
        g.update(it)
    assert [it.admitted for it in bare] == [True, False, False]
    assert g.snapshot().as_dict() == f.snapshot().as_dict()

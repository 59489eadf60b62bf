"""Real Moltbook threads as canonical events, shared by the collective-layer tests.

Read with the project's normaliser from ``../shared/data/moltbook/api/posts/*.json``;
dead letters (null authors and the like) are dropped, duplicates removed, event-time order.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from service.sources.normalise import event_items, normalise_post_detail
from streams.events import CommentEvent, PostEvent

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "moltbook"
POSTS = DATA / "api" / "posts"


@cache
def thread_events() -> tuple[PostEvent | CommentEvent, ...]:
    seen: dict[str, PostEvent | CommentEvent] = {}
    for path in sorted(POSTS.glob("*.json")):
        events, _ = event_items(normalise_post_detail(path.read_bytes(), origin=str(path)))
        for e in events:
            if isinstance(e, PostEvent | CommentEvent):
                seen.setdefault(e.id, e)
    return tuple(sorted(seen.values(), key=lambda e: (e.event_time, e.id)))


def raw_threads() -> list[dict]:
    """The raw post answers, for batch references computed straight from the JSON trees."""
    return [json.loads(p.read_text()) for p in sorted(POSTS.glob("*.json"))]

"""The canonical event model and its published JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from streams.events import event_json_schema, parse_event

ROOT = Path(__file__).resolve().parents[2]


def test_published_schema_is_current() -> None:
    published = json.loads((ROOT / "docs" / "event.schema.json").read_text())
    assert published == event_json_schema(), "regenerate: moltscope schema > docs/event.schema.json"


@pytest.mark.parametrize("bad", [
    '{"kind": "post"',                                   # not JSON
    '{"kind": "post", "post_id": "p", "author": "a"}',   # no id, no times
    '{"kind": "comment", "id": "comment:c", "event_time": "2026-02-01T00:00:00",'
    ' "observed_at": "2026-02-01T00:00:00Z", "comment_id": "c", "post_id": "p", "author": "a"}',
    '{"kind": "nope", "id": "x"}',
])
def test_invalid_events_are_refused(bad: str) -> None:
    with pytest.raises(ValidationError):
        parse_event(bad)


@pytest.mark.parametrize("kind", ["post", "comment"])
def test_author_may_be_none_but_never_blank(kind: str) -> None:
    base = {"kind": kind, "id": f"{kind}:x", "event_time": "2026-02-01T00:00:00Z",
            "observed_at": "2026-02-01T00:00:00Z", "post_id": "p", "comment_id": "x"}
    if kind == "post":
        del base["comment_id"]
    event = parse_event(base | {"author": None})  # deleted author: still a real item
    assert event.author is None and event.key == "p"
    assert parse_event(event.model_dump_json()) == event
    with pytest.raises(ValidationError):
        parse_event(base | {"author": ""})
    with pytest.raises(ValidationError):  # required: a source must say None explicitly
        parse_event(base)


def test_schema_allows_a_null_author() -> None:
    defs = event_json_schema()["$defs"]
    for name in ("PostEvent", "CommentEvent"):
        types = {t.get("type") for t in defs[name]["properties"]["author"]["anyOf"]}
        assert types == {"string", "null"} and "author" in defs[name]["required"]

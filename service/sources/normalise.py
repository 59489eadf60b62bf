"""Normalise real Moltbook payloads into canonical events (pure: no I/O, never raises).

Inputs: ``GET /posts/{id}`` answers (both API generations), ``GET /posts`` list envelopes
(offset and cursor paging), ``GET /agents/profile`` answers (or the archived JSON Lines form)
and rows of the observatory archive tables (posts, comments, agents, submolts; the schema of
``moltbook-api.md`` with ``agent_id``/``fetched_at`` and the sample's with ``agent_name``).

Every function returns a list of ``Event | DeadLetter``. A record that cannot become a valid
event becomes a :class:`~streams.events.DeadLetter` whose ``reason`` is one of :data:`REASONS`:

``bad_json``        payload is not valid JSON (or not UTF-8)
``bad_shape``       wrong structure or types (not an object, non-integer count, invalid event)
``api_error``       the API answered ``success: false``
``missing_id``      no post/comment id or agent/submolt name (or a comment's post id)
``bad_timestamp``   a time is missing, unparseable, before 2020-01-01 or > 1 day after observed_at
``oversized_text``  a title, content or description longer than ``max_text`` characters

A missing author is never a reason: a post or comment whose author is null, has no name
(a deleted account, the API's unauthenticated-list incident) or, in an archive row, is an
``agent_id`` no lookup resolves, is still a real item and becomes an event with
``author=None`` (and no AgentEvent).

A dead letter's ``raw`` is the JSON of the smallest failing record (a comment without its
``replies``, which normalise on their own; a whole payload for ``bad_json``/``api_error``),
truncated to 1 MB of UTF-8.

Times: all datetimes are tz-aware UTC; naive archive times are read as UTC. Entity events
(agent, submolt) carry the entity's creation time as ``event_time`` when known, else the
earliest activity that revealed it in the payload (an upper bound on its creation, so replay
delivers the entity before its activity), else ``observed_at``.

>>> answer = {"success": True, "_downloaded_at": "2026-02-02T12:00:00+00:00",
...   "post": {"id": "p1", "title": "hi", "content": "", "created_at": "2026-02-01T10:00:00Z",
...            "author": {"name": "KingMolt", "karma": 5}, "submolt": {"name": "general"}},
...   "comments": [{"id": "c1", "created_at": "2026-02-01T11:00:00Z", "author": {"name": "A"},
...     "replies": [{"id": "c2", "created_at": "2026-02-01T11:30:00Z", "author": None,
...       "replies": [{"id": "c3", "created_at": "2026-02-01T12:00:00Z",
...                    "author": {"name": "B"}}]}]}]}
>>> items = normalise_post_detail(answer, origin="doc")
>>> [(getattr(i, "kind", "dead"), getattr(i, "reason", None)) for i in items][:3]
[('submolt', None), ('agent', None), ('agent', None)]
>>> [(c.comment_id, c.depth, c.author, c.reply_to) for c in items if c.kind == "comment"]
[('c1', 1, 'A', 'KingMolt'), ('c2', 2, None, 'A'), ('c3', 3, 'B', None)]
>>> [d.reason for d in items if isinstance(d, DeadLetter)]
[]
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from pydantic import ValidationError

from streams.events import (
    AgentEvent,
    CommentEvent,
    DeadLetter,
    Event,
    PostEvent,
    SubmoltEvent,
)

Item = Event | DeadLetter

REASONS: tuple[str, ...] = (
    "bad_json",
    "bad_shape",
    "api_error",
    "missing_id",
    "bad_timestamp",
    "oversized_text",
)
DEFAULT_MAX_TEXT = 100_000
RAW_LIMIT_BYTES = 1_000_000
EARLIEST = datetime(2020, 1, 1, tzinfo=UTC)
FUTURE_SLACK = timedelta(days=1)
TABLES: tuple[str, ...] = ("posts", "comments", "agents", "submolts")


class _Reject(Exception):
    """Internal: this record becomes a dead letter with ``reason``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ---------------------------------------------------------------- raw text and parsing


def raw_text(payload: Any) -> str:
    """The payload as text for a dead letter, truncated to 1 MB of UTF-8."""
    if isinstance(payload, bytes | bytearray):
        text = bytes(payload[: RAW_LIMIT_BYTES + 4]).decode("utf-8", errors="replace")
    elif isinstance(payload, str):
        text = payload
    else:
        text = json.dumps(payload, ensure_ascii=False, default=str)
    data = text.encode("utf-8")
    if len(data) <= RAW_LIMIT_BYTES:
        return text
    return data[:RAW_LIMIT_BYTES].decode("utf-8", errors="ignore")


def _dead(reason: str, raw: Any, origin: str, observed_at: datetime) -> DeadLetter:
    return DeadLetter(reason=reason, raw=raw_text(raw), origin=origin, observed_at=observed_at)


def _load(payload: Any) -> Any:
    """JSON text/bytes -> Python value (dicts pass through). Raises ``_Reject('bad_json')``."""
    if isinstance(payload, str | bytes | bytearray):
        try:
            return json.loads(payload)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            raise _Reject("bad_json") from exc
    return payload


def parse_time(value: Any) -> datetime | None:
    """A platform time -> aware UTC datetime; None for absent. Raises ValueError if unparseable.

    Accepts ISO 8601 text (``Z``, offsets, any fraction; naive = UTC), datetimes and unix
    epochs (seconds, or milliseconds when larger than 1e11).

    >>> parse_time("2026-05-26T22:14:51.031Z").isoformat()
    '2026-05-26T22:14:51.031000+00:00'
    >>> parse_time("2026-01-30T19:17:56.666737").tzinfo
    datetime.timezone.utc
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f"not a time: {value!r}")
        seconds = value / 1000 if abs(value) > 1e11 else value
        dt = datetime.fromtimestamp(seconds, tz=UTC)
    elif isinstance(value, str):
        dt = datetime.fromisoformat(value.strip())
    else:
        raise ValueError(f"not a time: {value!r}")
    if dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def _time(value: Any, observed_at: datetime, *, required: bool) -> datetime | None:
    """Parse and check a platform time against [2020-01-01, observed_at + 1 day]."""
    try:
        dt = parse_time(value)
    except (ValueError, OverflowError, OSError) as exc:
        raise _Reject("bad_timestamp") from exc
    if dt is None:
        if required:
            raise _Reject("bad_timestamp")
        return None
    if dt < EARLIEST or dt > observed_at + FUTURE_SLACK:
        raise _Reject("bad_timestamp")
    return dt


def _int(value: Any, default: int | None = 0) -> int | None:
    """Counts: ints, integral floats and numeric text; None/'' -> default."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise _Reject("bad_shape")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not value.is_integer():
            raise _Reject("bad_shape")
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            try:
                return _int(float(value))
            except ValueError as exc:
                raise _Reject("bad_shape") from exc
    raise _Reject("bad_shape")


def _str(value: Any) -> str | None:
    """Optional text: '' and None -> None; other scalars -> str."""
    if value is None or value == "":
        return None
    if isinstance(value, dict | list):
        raise _Reject("bad_shape")
    return str(value)


def _text(value: Any, max_text: int) -> str:
    text = _str(value) or ""
    if len(text) > max_text:
        raise _Reject("oversized_text")
    return text


def _resolve_observed(explicit: datetime | None, downloaded: Any) -> datetime:
    """observed_at: the caller's, else the archiver's ``_downloaded_at``, else now."""
    if explicit is not None:
        return parse_time(explicit) or explicit
    try:
        return parse_time(downloaded) or datetime.now(UTC)
    except (ValueError, OverflowError, OSError):
        return datetime.now(UTC)  # a broken archiver stamp is not the platform's data


# ---------------------------------------------------------------- entities (agents, submolts)


@dataclass
class _Seen:
    raw: dict[str, Any]
    first_activity: datetime | None


class _Entities:
    """Distinct agents and submolts seen in one payload, merged field by field."""

    def __init__(self) -> None:
        self.agents: dict[str, _Seen] = {}
        self.submolts: dict[str, _Seen] = {}

    @staticmethod
    def _see(table: dict[str, _Seen], obj: dict[str, Any], when: datetime | None) -> None:
        seen = table.get(obj["name"])
        if seen is None:
            table[obj["name"]] = _Seen(dict(obj), when)
            return
        for k, v in obj.items():  # a richer sighting fills the gaps of a poorer one
            if seen.raw.get(k) is None:
                seen.raw[k] = v
        if when is not None and (seen.first_activity is None or when < seen.first_activity):
            seen.first_activity = when

    def agent(self, author: dict[str, Any], when: datetime | None) -> None:
        self._see(self.agents, author, when)

    def submolt(self, sub: dict[str, Any], when: datetime | None) -> None:
        self._see(self.submolts, sub, when)

    def events(
        self, *, observed_at: datetime, origin: str, source: str, max_text: int
    ) -> list[Item]:
        kw = {"observed_at": observed_at, "source": source, "max_text": max_text}
        subs = [
            _record(
                s.raw,
                origin,
                observed_at,
                partial(_submolt_event, s.raw, name, s.first_activity, **kw),
            )
            for name, s in self.submolts.items()
        ]
        agents = [
            _record(
                s.raw,
                origin,
                observed_at,
                partial(_agent_event, s.raw, name, s.first_activity, **kw),
            )
            for name, s in self.agents.items()
        ]
        return subs + agents


def _record(raw: Any, origin: str, observed_at: datetime, build: Callable[[], Event]) -> Item:
    """Build one event; any rejection becomes a dead letter of ``raw``."""
    try:
        return build()
    except _Reject as rej:
        return _dead(rej.reason, raw, origin, observed_at)
    except (ValidationError, ValueError, TypeError, KeyError, AttributeError):
        return _dead("bad_shape", raw, origin, observed_at)


def _first(d: Mapping[str, Any], *keys: str) -> Any:
    for k in keys:
        if d.get(k) is not None:
            return d[k]
    return None


def _agent_event(
    a: Mapping[str, Any],
    name: str,
    first_activity: datetime | None,
    *,
    observed_at: datetime,
    source: str,
    max_text: int,
) -> AgentEvent:
    created = _time(_first(a, "created_at", "createdAt"), observed_at, required=False)
    seen = _time(_first(a, "first_seen_at", "firstSeenAt"), observed_at, required=False)
    candidates = [t for t in (seen, first_activity) if t is not None]
    event_time = created or (min(candidates) if candidates else observed_at)
    description = _text(a.get("description"), max_text) or None
    return AgentEvent(
        id=f"agent:{name}",
        event_time=event_time,
        observed_at=observed_at,
        source=source,
        name=name,
        agent_id=_str(a.get("id")),
        created_at=created,
        description=description,
        karma=_int(a.get("karma"), None),
        follower_count=_int(_first(a, "follower_count", "followerCount"), None),
        following_count=_int(_first(a, "following_count", "followingCount"), None),
    )


def _submolt_event(
    s: Mapping[str, Any],
    name: str,
    first_activity: datetime | None,
    *,
    observed_at: datetime,
    source: str,
    max_text: int,
) -> SubmoltEvent:
    created = _time(_first(s, "created_at", "createdAt"), observed_at, required=False)
    return SubmoltEvent(
        id=f"submolt:{name}",
        event_time=created or first_activity or observed_at,
        observed_at=observed_at,
        source=source,
        name=name,
        display_name=_str(_first(s, "display_name", "displayName")),
        description=_text(s.get("description"), max_text) or None,
        subscriber_count=_int(_first(s, "subscriber_count", "subscriberCount"), None),
    )


def _author(value: Any) -> dict[str, Any] | None:
    """The author object; None when the platform names no author (null, no or blank name)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _Reject("bad_shape")
    name = value.get("name")
    if name is None or (isinstance(name, str) and not name.strip()):
        return None
    if not isinstance(name, str):
        raise _Reject("bad_shape")
    return value


def _author_id(value: Any) -> Any:
    """The author object's id, kept even when the platform gives no name with it."""
    return value.get("id") if isinstance(value, dict) else None


def _submolt_of(value: Any) -> dict[str, Any] | None:
    """Post's submolt: an object with a name, or a bare name."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return {"name": value}
    if isinstance(value, dict) and isinstance(value.get("name"), str) and value["name"]:
        return value
    raise _Reject("bad_shape")


# ---------------------------------------------------------------- posts and comments


def _post_event(
    p: Mapping[str, Any],
    ents: _Entities,
    *,
    observed_at: datetime,
    source: str,
    max_text: int,
    author: dict[str, Any] | None = None,
) -> PostEvent:
    """A post object (detail, list item or profile's recent post) -> PostEvent."""
    created = p.get("created_at", p.get("createdAt"))
    _sight(ents, author or p.get("author"), created, observed_at, submolt=p.get("submolt"))
    post_id = _str(p.get("id"))
    if post_id is None:
        raise _Reject("missing_id")
    event_time = _time(created, observed_at, required=True)
    assert event_time is not None
    a = author if author is not None else _author(p.get("author"))
    sub = _submolt_of(p.get("submolt"))
    upvotes = p.get("upvotes")
    event = PostEvent(
        id=f"post:{post_id}",
        event_time=event_time,
        observed_at=observed_at,
        source=source,
        post_id=post_id,
        author=a["name"] if a else None,
        author_id=_str(_author_id(a or p.get("author")) or p.get("author_id")),
        submolt=sub["name"] if sub else None,
        title=_text(p.get("title"), max_text),
        content=_text(p.get("content"), max_text),
        url=_str(p.get("url")),
        upvotes=_int(upvotes if upvotes is not None else p.get("score")) or 0,
        downvotes=_int(p.get("downvotes")) or 0,
        comment_count=_int(p.get("comment_count", p.get("commentCount"))) or 0,
    )
    return event


def _sight(
    ents: _Entities, author: Any, created: Any, observed_at: datetime, submolt: Any = None
) -> None:
    """Record the author and submolt a record names, even if the record itself is rejected:
    they exist on the platform whatever is wrong with this one post or comment."""
    try:
        when = _time(created, observed_at, required=False)
    except _Reject:
        when = None
    with contextlib.suppress(_Reject):
        named = _author(author)
        if named is not None:
            ents.agent(named, when)
    try:
        sub = _submolt_of(submolt)
        if sub:
            ents.submolt(sub, when)
    except _Reject:
        pass


def _flatten(
    tree: list[Any],
) -> list[tuple[Any, str | None, int, Mapping[str, Any] | None]]:
    """Pre-order walk of a comment tree: (node, tree parent id, tree depth, parent node).

    Iterative, so a pathological depth cannot exhaust the interpreter's stack.
    """
    out: list[tuple[Any, str | None, int, Mapping[str, Any] | None]] = []
    stack: list[tuple[Any, str | None, int, Mapping[str, Any] | None]] = [
        (c, None, 1, None) for c in reversed(tree)
    ]
    while stack:
        node, parent_id, depth, parent = stack.pop()
        out.append((node, parent_id, depth, parent))
        if isinstance(node, dict) and isinstance(node.get("replies"), list):
            own = node.get("id")
            own_id = str(own) if own not in (None, "") else None
            stack.extend((r, own_id, depth + 1, node) for r in reversed(node["replies"]))
    return out


def _author_name(node: Any) -> str | None:
    """The author name of a comment node if it has a usable one."""
    if not isinstance(node, dict):
        return None
    a = node.get("author")
    if isinstance(a, dict) and isinstance(a.get("name"), str) and a["name"].strip():
        return a["name"]
    return None


def _comments(
    tree: Any,
    post_id: str | None,
    post_author: str | None,
    ents: _Entities,
    *,
    observed_at: datetime,
    origin: str,
    source: str,
    max_text: int,
) -> list[Item]:
    if tree is None:
        return []
    if not isinstance(tree, list):
        return [_dead("bad_shape", tree, origin, observed_at)]
    nodes = _flatten(tree)
    # Index for flat lists (replies given beside their parents, linked only by parent_id).
    by_id = {
        str(n["id"]): n for n, *_ in nodes if isinstance(n, dict) and n.get("id") not in (None, "")
    }
    out: list[Item] = []
    for node, tree_parent_id, tree_depth, parent in nodes:
        out.append(
            _record(
                _without_replies(node),
                origin,
                observed_at,
                lambda n=node, tp=tree_parent_id, td=tree_depth, par=parent: _comment_event(
                    n,
                    tp,
                    td,
                    par,
                    by_id,
                    post_id,
                    post_author,
                    ents,
                    observed_at=observed_at,
                    source=source,
                    max_text=max_text,
                ),
            )
        )
    return out


def _without_replies(node: Any) -> Any:
    if isinstance(node, dict) and "replies" in node:
        return {k: v for k, v in node.items() if k != "replies"}
    return node


def _comment_event(
    c: Any,
    tree_parent_id: str | None,
    tree_depth: int,
    parent: Mapping[str, Any] | None,
    by_id: Mapping[str, Mapping[str, Any]],
    post_id: str | None,
    post_author: str | None,
    ents: _Entities,
    *,
    observed_at: datetime,
    source: str,
    max_text: int,
) -> CommentEvent:
    if not isinstance(c, dict):
        raise _Reject("bad_shape")
    _sight(ents, c.get("author"), c.get("created_at", c.get("createdAt")), observed_at)
    comment_id = _str(c.get("id"))
    own_post = _str(c.get("post_id")) or post_id
    if comment_id is None or own_post is None:
        raise _Reject("missing_id")
    event_time = _time(c.get("created_at", c.get("createdAt")), observed_at, required=True)
    assert event_time is not None
    a = _author(c.get("author"))
    parent_id = tree_parent_id or _str(c.get("parent_id"))
    depth = tree_depth
    if parent is None and parent_id is not None:
        # Flat form: find the parent (and its depth) through parent_id links.
        parent = by_id.get(parent_id)
        depth, hop, seen = 1, parent, {comment_id}
        while hop is not None and str(hop.get("id")) not in seen:
            seen.add(str(hop.get("id")))
            depth += 1
            up = _str(hop.get("parent_id"))
            hop = by_id.get(up) if up else None
        if parent is None:
            depth = 2  # parent not in this payload: it is a reply, depth at least 2
    if parent is not None:
        reply_to = _author_name(parent)  # None when the parent's author is null
    else:
        reply_to = None if parent_id is not None else post_author
    event = CommentEvent(
        id=f"comment:{comment_id}",
        event_time=event_time,
        observed_at=observed_at,
        source=source,
        comment_id=comment_id,
        post_id=own_post,
        parent_id=parent_id,
        author=a["name"] if a else None,
        author_id=_str(c.get("author_id") or _author_id(c.get("author"))),
        reply_to=reply_to,
        post_author=post_author,
        content=_text(c.get("content"), max_text),
        upvotes=_int(c.get("upvotes", c.get("score"))) or 0,
        downvotes=_int(c.get("downvotes")) or 0,
        depth=depth,
    )
    return event


def _envelope(payload: Any) -> dict[str, Any]:
    """Parse and check an API answer; raise _Reject for bad JSON, shape or ``success: false``."""
    data = _load(payload)
    if not isinstance(data, dict):
        raise _Reject("bad_shape")
    if data.get("success") is False:
        raise _Reject("api_error")
    return data


def _guard(
    payload: Any,
    origin: str,
    observed_at: datetime | None,
    body: Callable[[dict[str, Any]], list[Item]],
) -> list[Item]:
    """Run ``body`` on the parsed payload; whole-payload failures become one dead letter."""
    try:
        data = _envelope(payload)
    except _Reject as rej:
        return [_dead(rej.reason, payload, origin, _resolve_observed(observed_at, None))]
    try:
        return body(data)
    except _Reject as rej:
        obs = _resolve_observed(observed_at, data.get("_downloaded_at"))
        return [_dead(rej.reason, payload, origin, obs)]


# ---------------------------------------------------------------- public API: API answers


def normalise_post_detail(
    payload: dict[str, Any] | str | bytes,
    *,
    observed_at: datetime | None = None,
    origin: str,
    source: str = "api",
    max_text: int = DEFAULT_MAX_TEXT,
) -> list[Item]:
    """A ``GET /posts/{id}`` answer -> submolt, agents, post and the whole comment tree.

    Returned in this order: SubmoltEvent, one AgentEvent per distinct author (merged: the
    post author's profile fields, comment authors' karma/followers), PostEvent, then the
    comments in tree pre-order; dead letters sit where their record was. A post or comment
    with a null author is an event with ``author=None``; its direct replies get
    ``reply_to`` None (and ``post_author`` None under a null-author post), as do the
    comments of a dead-lettered post. The newer API generation has no ``comments`` key.
    """

    def body(data: dict[str, Any]) -> list[Item]:
        obs = _resolve_observed(observed_at, data.get("_downloaded_at"))
        post = data.get("post")
        if not isinstance(post, dict):
            raise _Reject("bad_shape")
        ents = _Entities()
        post_item = _record(
            post,
            origin,
            obs,
            partial(_post_event, post, ents, observed_at=obs, source=source, max_text=max_text),
        )
        post_author = _author_name(post)
        post_id = post.get("id") if isinstance(post.get("id"), str) and post["id"] else None
        comments = _comments(
            data.get("comments"),
            post_id,
            post_author,
            ents,
            observed_at=obs,
            origin=origin,
            source=source,
            max_text=max_text,
        )
        entities = ents.events(observed_at=obs, origin=origin, source=source, max_text=max_text)
        return [*entities, post_item, *comments]

    return _guard(payload, origin, observed_at, body)


@dataclass(frozen=True)
class Paging:
    """Where a ``GET /posts`` crawl goes next: ``next_offset`` (early 2026) or ``next_cursor``."""

    has_more: bool
    next_offset: int | None = None
    next_cursor: str | None = None
    count: int | None = None


def posts_list_paging(payload: dict[str, Any] | str | bytes) -> Paging | None:
    """Paging info of a ``GET /posts`` envelope; None when it is not a usable envelope.

    >>> posts_list_paging({"posts": [], "count": 10, "has_more": True, "next_offset": 20})
    Paging(has_more=True, next_offset=20, next_cursor=None, count=10)
    >>> posts_list_paging('{"posts": [], "has_more": false, "next_cursor": null}')
    Paging(has_more=False, next_offset=None, next_cursor=None, count=None)
    """
    try:
        data = _envelope(payload)
        if not isinstance(data.get("posts"), list):
            return None
        return Paging(
            has_more=bool(data.get("has_more", False)),
            next_offset=_int(data.get("next_offset"), None),
            next_cursor=_str(data.get("next_cursor")),
            count=_int(data.get("count"), None),
        )
    except _Reject:
        return None


def normalise_posts_list(
    payload: dict[str, Any] | str | bytes,
    *,
    observed_at: datetime | None = None,
    origin: str,
    source: str = "api",
    max_text: int = DEFAULT_MAX_TEXT,
) -> list[Item]:
    """A ``GET /posts`` envelope (offset or cursor form) -> submolts, agents, posts.

    List items carry only ``{id, name}`` authors; ``author: null`` items (the
    unauthenticated-list incident) become posts with ``author=None``. Repeats across pages
    are kept: de-duplicate downstream by ``id``.
    """

    def body(data: dict[str, Any]) -> list[Item]:
        obs = _resolve_observed(observed_at, data.get("_downloaded_at"))
        posts = data.get("posts")
        if not isinstance(posts, list):
            raise _Reject("bad_shape")
        ents = _Entities()
        items = [
            _record(
                p,
                origin,
                obs,
                lambda p=p: _post_event(
                    _as_dict(p), ents, observed_at=obs, source=source, max_text=max_text
                ),
            )
            for p in posts
        ]
        return [
            *ents.events(observed_at=obs, origin=origin, source=source, max_text=max_text),
            *items,
        ]

    return _guard(payload, origin, observed_at, body)


def _as_dict(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Reject("bad_shape")
    return value


def normalise_agent_profile(
    payload: dict[str, Any] | str | bytes,
    *,
    observed_at: datetime | None = None,
    origin: str,
    source: str = "api",
    max_text: int = DEFAULT_MAX_TEXT,
) -> list[Item]:
    """A ``GET /agents/profile`` answer or an archived profile line -> AgentEvent (+ posts).

    API form: ``{success, agent, recentPosts, recentComments}``; archived form: the agent's
    fields at top level with ``_recent_posts`` / ``_recent_comments``. Recent posts become
    PostEvents (they carry id, time, texts, counts, submolt; the author is the profile's
    agent) with their SubmoltEvents. Recent comments are NOT emitted: they lack
    ``parent_id``, so depth and ``reply_to`` are unknown and would corrupt thread metrics;
    a crawler gets them whole from ``GET /posts/{id}``.
    """

    def body(data: dict[str, Any]) -> list[Item]:
        obs = _resolve_observed(observed_at, data.get("_downloaded_at"))
        if isinstance(data.get("agent"), dict):
            agent = data["agent"]
            recent = data.get("recentPosts", data.get("recent_posts"))
        elif "name" in data or "id" in data:
            agent = {k: v for k, v in data.items() if not k.startswith("_")}
            recent = data.get("_recent_posts")
        else:
            raise _Reject("bad_shape")
        name = agent.get("name")
        if not isinstance(name, str) or not name.strip():
            return [_dead("missing_id", agent, origin, obs)]
        ents = _Entities()
        posts: list[Item] = []
        if recent is not None and not isinstance(recent, list):
            posts.append(_dead("bad_shape", recent, origin, obs))
        for p in recent or []:
            posts.append(
                _record(
                    p,
                    origin,
                    obs,
                    lambda p=p: _post_event(
                        _as_dict(p),
                        ents,
                        observed_at=obs,
                        source=source,
                        max_text=max_text,
                        author=agent,
                    ),
                )
            )
        first = ents.agents.pop(name, None)
        agent_item = _record(
            agent,
            origin,
            obs,
            lambda: _agent_event(
                agent,
                name,
                first.first_activity if first else None,
                observed_at=obs,
                source=source,
                max_text=max_text,
            ),
        )
        entities = ents.events(observed_at=obs, origin=origin, source=source, max_text=max_text)
        return [agent_item, *entities, *posts]

    return _guard(payload, origin, observed_at, body)


# ---------------------------------------------------------------- public API: archive rows


def table_of(name: str) -> str | None:
    """Which observatory table a file or column set names: posts, comments, agents, submolts.

    >>> table_of("moltbook_comments.csv"), table_of("submolts_sample.csv"), table_of("x.csv")
    ('comments', 'submolts', None)
    """
    low = name.lower()
    for table in ("comments", "submolts", "agents", "posts"):  # 'posts' last: 'post_id' etc.
        if table in low:
            return table
    return None


def normalise_archive_row(
    table: str,
    row: Mapping[str, Any],
    *,
    observed_at: datetime | None = None,
    origin: str,
    source: str = "archive",
    max_text: int = DEFAULT_MAX_TEXT,
    post_authors: Mapping[str, str] | None = None,
    agent_names: Mapping[str, str] | None = None,
    comment_parents: Mapping[str, tuple[str | None, int]] | None = None,
) -> list[Item]:
    """One observatory row (CSV strings or Parquet values) of ``table`` -> events.

    Both schemas: ``moltbook-api.md``'s (``agent_id``, ``fetched_at``, ``first_seen_at``,
    ``last_seen_at``) and the sample's (``agent_name``, ``comment_count``, ``url``). Mapping:
    ``score`` (net votes) -> ``upvotes = max(score, 0)``, ``downvotes = max(-score, 0)``;
    ``fetched_at`` (agents: else ``last_seen_at``; else the caller's ``observed_at``, else
    now) -> ``observed_at``; the
    sample's ``url`` is the post's own permalink, not a link post's target, so it is dropped.
    Authors given only as ``agent_id`` resolve through ``agent_names`` (id -> name).
    Comments: ``reply_to`` = the parent comment's author from ``comment_parents``
    (id -> (author, depth)), or for top-level comments the post author from ``post_authors``;
    None when unknown. A reply whose parent is unknown gets depth 2 (its lower bound).
    Posts and comments also yield the AgentEvent of their author; posts their SubmoltEvent.
    """
    obs = _row_observed(row, observed_at)
    if table not in TABLES:
        return [_dead("bad_shape", dict(row), origin, obs)]
    ents = _Entities()

    def author_of() -> dict[str, Any]:
        """``{"name", "id"}``; the name is None when neither the row nor a lookup gives one."""
        name = _str(row.get("agent_name") or row.get("author"))
        agent_id = _str(row.get("agent_id"))
        if name is None and agent_id is not None and agent_names is not None:
            name = agent_names.get(agent_id) or None
        return {"name": name, "id": agent_id}

    def post() -> Event:
        score = _int(row.get("score"))
        assert score is not None
        p = {
            "id": row.get("id"),
            "created_at": row.get("created_at"),
            "title": row.get("title"),
            "content": row.get("content"),
            "submolt": row.get("submolt"),
            "upvotes": max(score, 0),
            "downvotes": max(-score, 0),
            "comment_count": row.get("comment_count"),
            "url": _link_url(row.get("url"), row.get("id")),
        }
        return _post_event(
            p, ents, observed_at=obs, source=source, max_text=max_text, author=author_of()
        )

    def comment() -> Event:
        score = _int(row.get("score"))
        assert score is not None
        post_id = _str(row.get("post_id"))
        parent_id = _str(row.get("parent_id"))
        post_author = post_authors.get(post_id) if post_authors is not None and post_id else None
        reply_to, depth = post_author, 1
        if parent_id is not None:
            known = comment_parents.get(parent_id) if comment_parents is not None else None
            reply_to, depth = (known[0], known[1] + 1) if known else (None, 2)
        a = author_of()
        node = {
            "id": row.get("id"),
            "post_id": post_id,
            "created_at": row.get("created_at"),
            "author": a,
            "author_id": a["id"],
            "content": row.get("content"),
            "upvotes": max(score, 0),
            "downvotes": max(-score, 0),
        }
        ev = _comment_event(
            node,
            None,
            1,
            None,
            {},
            post_id,
            post_author,
            ents,
            observed_at=obs,
            source=source,
            max_text=max_text,
        )
        return ev.model_copy(update={"parent_id": parent_id, "reply_to": reply_to, "depth": depth})

    def agent() -> Event:
        name = _str(row.get("name"))
        if name is None:
            raise _Reject("missing_id")
        return _agent_event(row, name, None, observed_at=obs, source=source, max_text=max_text)

    def submolt() -> Event:
        name = _str(row.get("name"))
        if name is None:
            raise _Reject("missing_id")
        return _submolt_event(row, name, None, observed_at=obs, source=source, max_text=max_text)

    build = {"posts": post, "comments": comment, "agents": agent, "submolts": submolt}[table]
    main = _record(dict(row), origin, obs, build)
    if isinstance(main, DeadLetter):
        return [main]
    return [*ents.events(observed_at=obs, origin=origin, source=source, max_text=max_text), main]


def _row_observed(row: Mapping[str, Any], default: datetime | None) -> datetime:
    """A row's own ``fetched_at`` (agents: else ``last_seen_at``) beats the reader's default."""
    for key in ("fetched_at", "last_seen_at"):
        try:
            stamp = parse_time(row.get(key))
        except (ValueError, OverflowError, OSError):
            stamp = None  # an archiver stamp, not platform data: fall back
        if stamp is not None:
            return stamp
    return _resolve_observed(default, None)


def _link_url(url: Any, post_id: Any) -> str | None:
    text = _str(url)
    if text is None or (post_id is not None and text.rstrip("/").endswith(f"/post/{post_id}")):
        return None
    return text


def event_items(items: Iterable[Item]) -> tuple[list[Event], list[DeadLetter]]:
    """Split normaliser output into events and dead letters.

    >>> event_items([])
    ([], [])
    """
    events: list[Event] = []
    dead: list[DeadLetter] = []
    for item in items:
        (dead if isinstance(item, DeadLetter) else events).append(item)  # type: ignore[arg-type]
    return events, dead

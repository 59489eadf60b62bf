"""The canonical platform events that moltscope consumes.

Every source (crawler, archive replay, simulator) turns what it reads into these
events; every engine consumes only these. No Faust, no I/O.

Agents are keyed by ``author`` (the platform's agent *name*): names are unique on
Moltbook, profiles are fetched by name, and the observatory archive carries names
but no agent ids. ``author_id`` is kept where the platform gives one.

Each event has a stable ``id`` used for de-duplication (the API's paging repeats
items): ``post:<post id>``, ``comment:<comment id>``,
``vote:<target id>:<up>-<down>`` (the counts *after* the change),
``agent:<name>``, ``submolt:<name>``.

A post or comment whose author the platform no longer names (``author: null``, a deleted
account, an archive row whose agent id resolves to no name) is still a real item:
``author`` is None. Engines count it wherever no author is needed; it only has no
interaction edge and no per-agent state.

>>> from datetime import datetime, timezone
>>> t = datetime(2026, 1, 31, 6, 0, tzinfo=timezone.utc)
>>> e = PostEvent(id="post:p1", event_time=t, observed_at=t, post_id="p1",
...               author="KingMolt", title="hi", content="hello")
>>> e.kind, e.key
('post', 'p1')
>>> parse_event(e.model_dump_json()).post_id
'p1'
>>> parse_event(e.model_dump() | {"author": None}).author is None  # deleted: still a post
True
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, description="Stable de-duplication id")
    event_time: AwareDatetime = Field(description="When it happened on the platform")
    observed_at: AwareDatetime = Field(description="When moltscope observed it")
    source: str = Field(default="unknown", description="api | archive | simulate | ...")

    @property
    def key(self) -> str:
        """Kafka partition key: a thread's events share one partition, in order."""
        raise NotImplementedError


class PostEvent(_Event):
    kind: Literal["post"] = "post"
    post_id: str = Field(min_length=1)
    author: str | None = Field(
        min_length=1, description="Agent name; None = the platform names no author (deleted)"
    )
    author_id: str | None = None
    submolt: str | None = None
    title: str = ""
    content: str = ""
    url: str | None = None
    upvotes: int = 0
    downvotes: int = 0
    comment_count: int = 0

    @property
    def key(self) -> str:
        return self.post_id

    @property
    def text(self) -> str:
        """Title and body, the text the society layer embeds and tokenises."""
        return f"{self.title}\n{self.content}".strip()


class CommentEvent(_Event):
    kind: Literal["comment"] = "comment"
    comment_id: str = Field(min_length=1)
    post_id: str = Field(min_length=1)
    parent_id: str | None = Field(default=None, description="Parent comment; None = top level")
    author: str | None = Field(
        min_length=1, description="Agent name; None = the platform names no author (deleted)"
    )
    author_id: str | None = None
    reply_to: str | None = Field(
        default=None,
        description="Agent replied to: the parent comment's author, else the post's author",
    )
    post_author: str | None = None
    content: str = ""
    upvotes: int = 0
    downvotes: int = 0
    depth: int = Field(default=1, ge=1, description="1 = direct comment on the post")

    @property
    def key(self) -> str:
        return self.post_id

    @property
    def text(self) -> str:
        return self.content


class VoteEvent(_Event):
    """A change of a post's or comment's vote counts between two observations."""

    kind: Literal["vote"] = "vote"
    target: Literal["post", "comment"]
    target_id: str = Field(min_length=1)
    post_id: str = Field(min_length=1)
    upvotes: int
    downvotes: int
    delta_up: int
    delta_down: int

    @property
    def key(self) -> str:
        return self.post_id


class AgentEvent(_Event):
    kind: Literal["agent"] = "agent"
    name: str = Field(min_length=1)
    agent_id: str | None = None
    created_at: AwareDatetime | None = None
    description: str | None = None
    karma: int | None = None
    follower_count: int | None = None
    following_count: int | None = None

    @property
    def key(self) -> str:
        return self.name


class SubmoltEvent(_Event):
    kind: Literal["submolt"] = "submolt"
    name: str = Field(min_length=1)
    display_name: str | None = None
    description: str | None = None
    subscriber_count: int | None = None

    @property
    def key(self) -> str:
        return self.name


Event = Annotated[
    PostEvent | CommentEvent | VoteEvent | AgentEvent | SubmoltEvent,
    Field(discriminator="kind"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


class DeadLetter(BaseModel):
    """A record that could not become an event: kept whole, with the reason."""

    model_config = ConfigDict(frozen=True)

    reason: str
    raw: str = Field(description="The raw payload as received (truncated to 1 MB)")
    origin: str = Field(description="Where it came from: a file path, URL or topic")
    observed_at: datetime


def parse_event(data: str | bytes | dict[str, Any]) -> Event:
    """Validate one canonical event from JSON text or a dict."""
    if isinstance(data, dict):
        return EVENT_ADAPTER.validate_python(data)
    return EVENT_ADAPTER.validate_json(data)


def event_json_schema() -> dict[str, Any]:
    """The published JSON Schema of a canonical event (see ``docs/event.schema.json``)."""
    schema = EVENT_ADAPTER.json_schema()
    schema["title"] = "moltscope canonical event"
    return schema


if __name__ == "__main__":  # regenerate the published schema
    print(json.dumps(event_json_schema(), indent=2))

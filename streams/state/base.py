"""What every engine reports: flat samples for Prometheus and the API, details for the rest.

A :class:`Sample` is one scalar (a gauge or a counter), named as the paper names it, in base
units, without the ``moltscope_`` prefix and without per-agent labels. ``details`` holds the
structured values (per-day series, matrices, top-k lists) that the REST API serves and the
replay report writes, under the same names.

>>> snap = Snapshot(samples=[Sample("posts", 3.0, (("window", "day"),))], details={"x": 1})
>>> snap.value("posts", window="day")
3.0
>>> Snapshot.merge([snap, Snapshot(details={"y": 2})]).details
{'x': 1, 'y': 2}

The engine contract (:class:`Engine`): the pipeline wraps each de-duplicated event in one
:class:`Item` (event time as float unix seconds, the one time type of every engine; the text
tokenised once; the post's vector when it has one; whether the verbatim filter admitted it) and
hands the same item to every engine's ``update``; ``expire(now)`` moves event time on;
``snapshot()`` reports. An engine whose ``update`` ignores some event kinds may say which it
reads (``kinds``: a tuple of event classes); the pipeline then calls it for those only, so
its ``update`` must change nothing for the others. A post or comment whose author is unknown
(null or deleted on the platform) is still a real item: ``item.author`` is None, and engines
count it in everything that does not need an author.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from streams.events import CommentEvent, PostEvent
from streams.text import Text

if TYPE_CHECKING:
    import numpy as np

    from streams.events import Event

_TEXTED = (PostEvent, CommentEvent)


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    value: float
    labels: tuple[tuple[str, str], ...] = ()
    kind: Literal["gauge", "counter"] = "gauge"
    help: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "labels": dict(self.labels), "value": self.value,
                "kind": self.kind, "help": self.help}


@dataclass(slots=True)
class Snapshot:
    samples: list[Sample] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def value(self, name: str, **labels: str) -> float | None:
        want = tuple(sorted(labels.items()))
        for s in self.samples:
            if s.name == name and tuple(sorted(s.labels)) == want:
                return s.value
        return None

    @staticmethod
    def merge(parts: list[Snapshot]) -> Snapshot:
        out = Snapshot()
        for p in parts:
            out.samples.extend(p.samples)
            out.details.update(p.details)
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"samples": [s.as_dict() for s in self.samples], "details": self.details}


@dataclass(slots=True)
class Item:
    """One de-duplicated event as every engine sees it.

    t: event time, unix seconds; author: the agent, None for votes and for posts and comments
    whose author the platform no longer names; text: the tokens of the post (title and body) or
    comment, None for other events; vector: the text's embedding when the stage made one;
    admitted: False for a post the verbatim filter excluded from the lexical and semantic
    metrics; raw: the text as written (``event.text``, which a post builds anew each read),
    set by :meth:`of` for posts and comments, None when the item was made without it.
    """

    event: Event
    t: float
    author: str | None = None
    text: Text | None = None
    vector: np.ndarray | None = None
    admitted: bool = True
    raw: str | None = None

    @classmethod
    def of(cls, event: Event, vector: np.ndarray | None = None) -> Item:
        """The item of one event: posts and comments get their text tokenised here, once.

        >>> from datetime import datetime, timezone
        >>> from streams.events import PostEvent
        >>> t = datetime(2026, 2, 1, tzinfo=timezone.utc)
        >>> it = Item.of(PostEvent(id="post:1", event_time=t, observed_at=t, post_id="1",
        ...                        author="a", title="GM", content="hello, world"))
        >>> it.t, it.author, it.text.tokens, it.raw
        (1769904000.0, 'a', ['gm', 'hello', ',', 'world'], 'GM\\nhello, world')
        """
        t = event.event_time.timestamp()
        if isinstance(event, _TEXTED):
            raw = event.text
            return cls(event, t, event.author, Text.of(raw), vector, True, raw)
        return cls(event, t, None, None, vector)  # (a pydantic attribute miss is slow)


FEW_MEMBERS = 8  # a small set of names held as a tuple (scanned), more as a set


def with_member(members: tuple[str, ...] | set[str], name: str) -> tuple[str, ...] | set[str]:
    """``members`` (a tuple of at most :data:`FEW_MEMBERS`, else a set) with ``name``, which is
    not among them: the set itself, grown, or a tuple (a tuple of n is 40 + 8n bytes; a set of
    2 to 4 is 216, of 5 to 18 728), a set past :data:`FEW_MEMBERS`.

    >>> with_member(("a",), "b"), sorted(with_member(tuple("abcdefgh"), "i"))[-1]
    (('a', 'b'), 'i')
    """
    if type(members) is tuple:
        return (*members, name) if len(members) < FEW_MEMBERS else {*members, name}
    members.add(name)
    return members


class Record:
    """Base of a slotted dataclass an engine keeps by the thousand (a thread, a post, an act):
    pickled as its class and its fields' values in one tuple. By default a slotted object
    pickles as ``(None, {field: value})``, and the pickler's memo holds each such transient
    pair until the dump ends: on a peak day's state that was most of what a checkpoint held
    beside the state. Every field must be an ``__init__`` parameter, in order (the dataclass
    default), and ``__init__`` must only assign them.

    >>> import copy
    >>> @dataclass(slots=True)
    ... class Pair(Record):
    ...     a: int
    ...     b: str = "x"
    >>> Pair(2).__reduce__()[1], copy.copy(Pair(1, "y"))
    ((2, 'x'), Pair(a=1, b='y'))
    """

    __slots__ = ()

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return type(self), tuple([getattr(self, f) for f in self.__slots__])  # type: ignore[attr-defined]


class Engine(Protocol):
    """What the pipeline drives: see the module docstring."""

    def update(self, item: Item) -> None: ...

    def expire(self, now: float) -> None: ...

    def snapshot(self) -> Snapshot: ...

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

import hashlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from pickle import PickleBuffer
from typing import TYPE_CHECKING, Any, Literal, Protocol, SupportsIndex

from streams.events import CommentEvent, PostEvent
from streams.text import Text

if TYPE_CHECKING:
    import numpy as np

    from streams.events import Event


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
    set by :meth:`of` for posts and comments, None when the item was made without it; digest:
    a post's :func:`text_digest`, set by the first engine that needs it (the verbatim filter)
    for those after it that key a post by its exact text.
    """

    event: Event
    t: float
    author: str | None = None
    text: Text | None = None
    vector: np.ndarray | None = None
    admitted: bool = True
    raw: str | None = None
    digest: bytes | None = None

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
        kind = type(event)  # (not isinstance: pydantic's own instance check is slow)
        if kind is CommentEvent:
            raw = event.content  # its ``text`` (a property: a call more)
        elif kind is PostEvent:
            raw = event.text
        else:
            return cls(event, t, None, None, vector)  # (a pydantic attribute miss is slow)
        return cls(event, t, event.author, Text.of(raw), vector, True, raw)


def text_digest(text: str) -> bytes:
    """The 16-byte blake2b digest of a text's UTF-8: the key of an exact text.

    >>> text_digest("gm").hex()
    'd657a435ea5544764c7718ec749f1765'
    """
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def post_digest(item: Item) -> bytes:
    """A post's :func:`text_digest` (of ``item.raw``, else of ``event.text``), made once an
    item (kept in ``item.digest``)."""
    digest = item.digest
    if digest is None:
        raw = item.raw
        digest = item.digest = text_digest(item.event.text if raw is None else raw)  # type: ignore[union-attr]
    return digest


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


class _Stream:
    """Pickles as a list of what ``items`` yields, streamed: the pickler takes the items one
    at a time (list items of a reduction, written in batches) and keeps none of them."""

    __slots__ = ("items",)

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = items

    def __reduce__(self) -> tuple[type, tuple[()], None, Iterator[Any]]:
        return list, (), None, iter(self.items)


def _array_of(typecode: str, data: Any) -> array:
    out = array(typecode)
    out.frombytes(data)
    return out


class ArrayBuffer:
    """An ``array.array`` (from ``start`` on) pickled from its own buffer: the array's own
    reduction copies it to a bytes object, which the pickler's memo holds until the dump ends
    (protocol 5 writes a :class:`pickle.PickleBuffer` in band, no copy; an older protocol
    copies, as the array's own reduction). It loads as the array itself.

    >>> import pickle
    >>> pickle.loads(pickle.dumps(ArrayBuffer(array("i", [1, 2, 3]), 1), protocol=5))
    array('i', [2, 3])
    >>> pickle.loads(pickle.dumps(ArrayBuffer(array("d", [0.5])), protocol=4))
    array('d', [0.5])
    """

    __slots__ = ("array", "start")

    def __init__(self, data: array, start: int = 0) -> None:
        self.array, self.start = data, start

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, tuple[str, Any]]:
        view = memoryview(self.array)[self.start:]
        return _array_of, (self.array.typecode,
                           PickleBuffer(view) if int(protocol) >= 5 else view.tobytes())


def to_columns(state: dict[str, Any], records: dict[str, type] | None = None,
               pairs: dict[str, type] | None = None) -> dict[str, Any]:
    """An engine's pickled state (a copy of its ``__dict__``) with its largest collections of
    small objects, kept by the thousand a post, pickled as one flat list each: ``records``,
    the attributes holding a dict of id -> :class:`Record` (all of one class: each id then
    its fields' values); ``pairs``, those holding a sequence of 2-tuples ((time, id) heaps
    and queues; the type to remake, list or deque). The pickler's memo holds an entry for
    every object it pickles and every transient a reduction makes, until the dump ends: a
    record cost two entries and its field tuple, a pair one entry; streamed (:class:`_Stream`),
    the values are written as they come, numbers without an entry. The ids and the fields'
    values are the same objects, so what engines share stays shared after a restore
    (:func:`from_columns` remakes equal records and pairs, in the same order).

    >>> from collections import deque
    >>> import pickle
    >>> @dataclass(slots=True)
    ... class Post(Record):
    ...     t: float
    ...     n: int = 0
    >>> kept = {"live": Post}, {"due": deque}
    >>> state = {"live": {"a": Post(1.0, 2), "b": Post(0.5)}, "due": deque([(1.0, "a")]),
    ...          "k": 3}
    >>> packed = pickle.loads(pickle.dumps(to_columns(dict(state), *kept)))
    >>> packed["live"], packed["due"]
    (['a', 1.0, 2, 'b', 0.5, 0], [1.0, 'a'])
    >>> from_columns(packed, *kept) == state
    True
    """
    for name, cls in (records or {}).items():
        recs = state[name]
        state[name] = _Stream(chain.from_iterable(zip(
            recs, *[map(attrgetter(f), recs.values()) for f in cls.__slots__], strict=True)))
    for name in pairs or ():
        state[name] = _Stream(chain.from_iterable(state[name]))
    return state


def from_columns(state: dict[str, Any], records: dict[str, type] | None = None,
                 pairs: dict[str, type] | None = None) -> dict[str, Any]:
    """The state :func:`to_columns` made, pickled and loaded, its records and pairs remade
    (in place)."""
    for name, cls in (records or {}).items():
        flat, k = state[name], len(cls.__slots__) + 1
        state[name] = dict(zip(flat[::k], map(cls, *[flat[i::k] for i in range(1, k)]),
                               strict=True))
    for name, kind in (pairs or {}).items():
        flat = state[name]
        state[name] = kind(zip(flat[::2], flat[1::2], strict=True))
    return state


class Engine(Protocol):
    """What the pipeline drives: see the module docstring."""

    def update(self, item: Item) -> None: ...

    def expire(self, now: float) -> None: ...

    def snapshot(self) -> Snapshot: ...


def updates_for(parts: Iterable[Engine], kind: type) -> list[Callable[[Item], None]]:
    """The ``update`` of each of ``parts`` that reads events of ``kind``, in order: a part
    that declares the kinds it reads (``kinds``, a tuple of event classes) is left out for
    the others. The pipeline routes its engines by it, the detector suite its detectors."""
    return [p.update for p in parts if kind in getattr(p, "kinds", (kind,))]

"""Wire formats: the society topic's batches of canonical events with, for texts, their compact
embedding, the partitions' thread partials and per-agent population partials; the agents
topic's batches of acts.

An event batch is binary: ``MSB1``, then per event a little-endian header (events partition
u32, offset u64, JSON length u32, vector length u32), the event's JSON and the vector's bytes.
The JSON is the record exactly as ingest read it from the events topic (already validated
there), so ingest never serialises an event again and the reducer validates it straight from
JSON bytes: about a quarter of the cost of a JSON envelope a way on the real sample. Vectors
travel as float16 (:func:`streams.embedding.quantise`: half the bytes of float32; a pair's
cosine moves by at most ``2 cosine_error_bound``, about 1e-3, for unit vectors of dimension
384) and are decoded re-normalised. Thread partials are small JSON objects, and so are the
agents partitions' population partials (:func:`encode_agents`).

An acts batch (:func:`encode_acts`, the agents topic) is binary too: ``MSA1``, then per act the
events partition and offset it came from, its time, kind, score and the lengths of its strings
and vectors, then the strings (UTF-8) and the vectors (float16, as above).

>>> import numpy as np
>>> from datetime import datetime, timezone
>>> from streams.events import PostEvent
>>> t = datetime(2026, 2, 1, tzinfo=timezone.utc)
>>> e = PostEvent(id="post:1", event_time=t, observed_at=t, post_id="1", author="a")
>>> [f] = decode_society(encode_society([Forwarded(e, np.ones(4, dtype=np.float32) / 2, 1, 7)]))
>>> f.event == e, f.vector.tolist(), (f.partition, f.offset)
(True, [0.5, 0.5, 0.5, 0.5], (1, 7))
>>> from streams.state.threads import Partial, Sums
>>> msg = decode_society(encode_threads(3, 120, Partial(by_bucket={"0": Sums(posts=2)})))
>>> msg.partition, msg.next_offset, msg.partial.by_bucket["0"].posts
(3, 120, 2)
>>> from streams.acts import Act
>>> a = Act("bob", 1.5, "comment", "p", "c", target_author="ann", target_vector=np.ones(4))
>>> [(p, o, b)] = decode_acts(encode_acts([(0, 9, a)]))
>>> p, o, (b.agent, b.t, b.kind, b.item_id), b.target_vector.tolist(), b.target_author, b.score
(0, 9, ('bob', 1.5, 'comment', 'c'), [0.5, 0.5, 0.5, 0.5], 'ann', None)
>>> decode_society(encode_agents(2, 40, {"acts": {"post": 1}})).partial
{'acts': {'post': 1}}

Ingest and the reducer in one worker parse each record's JSON once: ingest leaves the events
it forwards in the reducer's :class:`Handoff`, and :func:`decode_society` takes them from it;
likewise the acts it sends to an agents partition of its own worker (:class:`ActsHandoff`).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from streams.acts import Act
from streams.embedding import QuantisedVector, dequantise, quantise
from streams.events import Event, parse_event
from streams.state.threads import Partial, Sums

MAGIC = b"MSB1"
_HEAD = struct.Struct("<IQII")  # partition, offset, JSON length, vector length
#: Events a :class:`Handoff` holds at most (about 3.7 KB each with its record on real text:
#: ~75 MB, only while ingest runs that far ahead of the reducer, a backlog's drain).
HANDOFF_CAPACITY = 20_000


class Handoff:
    """The event batches ingest forwarded, held for the reducer of the same worker by the
    place of their first event (events partition and offset) with the batch's bytes:
    :func:`decode_society` takes the batch's :class:`Forwarded` instead of reading the message
    again (validating each event's JSON a second time was a third of the reducer's cost
    outside the pipeline; slicing, decoding and wrapping each event the rest). Exact: held as
    the bytes decode (events are frozen and equal bytes validate to an equal event; a vector
    as its float16 bytes give it back); other bytes at that place, or a batch not held, are
    decoded. Bounded: with ``capacity`` events held, ingest leaves no more until the reducer
    took some (the far end of a backlog is parsed twice); :meth:`clear` drops what a reducer
    elsewhere would have taken.

    >>> from datetime import datetime, timezone
    >>> from streams.events import PostEvent
    >>> t = datetime(2026, 2, 1, tzinfo=timezone.utc)
    >>> e = PostEvent(id="post:1", event_time=t, observed_at=t, post_id="1", author="a")
    >>> batch = [Forwarded(e, None, 0, 7, e.model_dump_json().encode())]
    >>> h, payload = Handoff(capacity=1), encode_society(batch)
    >>> h.put(payload, batch); h.put(encode_society(batch * 2), batch * 2); len(h)  # full
    1
    >>> h.take(bytes(payload))[0].event is e, h.take(payload), len(h)
    (True, None, 0)
    """

    __slots__ = ("capacity", "held", "size")

    def __init__(self, capacity: int = HANDOFF_CAPACITY) -> None:
        self.capacity = capacity
        self.held: dict[tuple[int, int], tuple[bytes, list[Forwarded]]] = {}
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def put(self, payload: bytes, items: Sequence[Forwarded]) -> None:
        """Hold ``items``, the batch :func:`encode_society` made ``payload`` of."""
        if not items or self.size + len(items) > self.capacity:
            return
        place = _HEAD.unpack_from(payload, len(MAGIC))[:2]
        if place in self.held:  # a record forwarded twice: its first batch is read first
            return
        self.held[place] = (payload, [_forwarded_as_decoded(f) for f in items])
        self.size += len(items)

    def take(self, payload: bytes) -> list[Forwarded] | None:
        """The batch of the society message ``payload`` if held (None: decode it)."""
        if len(payload) < len(MAGIC) + _HEAD.size:
            return None
        partition, offset, _, _ = _HEAD.unpack_from(payload, len(MAGIC))
        got = self.held.pop((partition, offset), None)
        if got is None:
            return None
        self.size -= len(got[1])
        return got[1] if got[0] == payload else None

    def clear(self) -> None:
        self.held.clear()
        self.size = 0


@dataclass(frozen=True, slots=True)
class Forwarded:
    """An admitted event, its vector, and the events partition and offset it was read at: the
    reducer applies each record once however often a handover or a re-seek delivers it.
    ``raw``: the event's JSON as read (ingest has it), else it is serialised."""

    event: Event
    vector: np.ndarray | None
    partition: int
    offset: int
    raw: bytes | None = None


@dataclass(frozen=True, slots=True)
class ThreadsPartial:
    """One events partition's thread sums over its records before ``next_offset``: of two
    reports the one covering more of the partition is the newer, whichever worker sent it."""

    partition: int
    next_offset: int
    partial: Partial


@dataclass(frozen=True, slots=True)
class AgentsPartial:
    """One agents partition's population partial over its records before ``next_offset``
    (:meth:`streams.agent_stage.AgentStage.partial`): of two, the one covering more of the
    partition is the newer; of two covering as much, the later."""

    partition: int
    next_offset: int
    partial: dict[str, Any]


ACTS_MAGIC = b"MSA1"
# events partition, events offset, t, kind, target kind, has score, score, then the lengths:
# agent, post id, item id, target author (+1; 0 = None), vector, target vector (bytes)
_ACT = struct.Struct("<IQdBBBqHHHHII")
_KINDS = ("post", "comment", "replied", "score")
_TARGET_KINDS = (None, "post", "comment")


def _vec(v: np.ndarray | None) -> bytes:
    return b"" if v is None else quantise(v, "float16").data


def encode_acts(acts: Sequence[tuple[int, int, Act]]) -> bytes:
    """A batch of acts, each with the events partition and offset of the event it came from
    (the agents stage takes each event's acts once)."""
    out = [ACTS_MAGIC]
    for partition, offset, a in acts:
        agent, post, item = a.agent.encode(), a.post_id.encode(), a.item_id.encode()
        target = b"" if a.target_author is None else a.target_author.encode()
        vec, tvec = _vec(a.vector), _vec(a.target_vector)
        out += (_ACT.pack(partition, offset, a.t, _KINDS.index(a.kind),
                          _TARGET_KINDS.index(a.target_kind), a.score is not None, a.score or 0,
                          len(agent), len(post), len(item),
                          0 if a.target_author is None else len(target) + 1, len(vec),
                          len(tvec)), agent, post, item, target, vec, tvec)
    return b"".join(out)


def decode_acts(payload: bytes) -> list[tuple[int, int, Act]]:
    if not payload.startswith(ACTS_MAGIC):
        raise ValueError("not an acts batch")
    out: list[tuple[int, int, Act]] = []
    unpack, size, end, i = _ACT.unpack_from, _ACT.size, len(payload), len(ACTS_MAGIC)
    while i < end:
        (partition, offset, t, kind, tkind, has_score, score, n_agent, n_post, n_item, n_target,
         n_vec, n_tvec) = unpack(payload, i)
        i += size
        j = i + n_agent
        k = j + n_post
        i = k + n_item
        agent, post, item = payload[j - n_agent:j].decode(), payload[j:k].decode(), \
            payload[k:i].decode()
        target = None
        if n_target:
            target = payload[i:i + n_target - 1].decode()
            i += n_target - 1
        vec = tvec = None
        if n_vec:
            vec = dequantise(QuantisedVector("float16", payload[i:i + n_vec]))
            i += n_vec
        if n_tvec:
            tvec = dequantise(QuantisedVector("float16", payload[i:i + n_tvec]))
            i += n_tvec
        out.append((partition, offset, Act(
            agent, t, _KINDS[kind], post, item, vec, target, tvec,  # type: ignore[arg-type]
            _TARGET_KINDS[tkind], score if has_score else None)))  # type: ignore[arg-type]
    return out


class ActsHandoff:
    """The acts batches ingest sent to an agents partition this worker holds, by the batch's
    bytes: the partition's stage takes the acts instead of decoding the same bytes (an acts
    batch decodes to a new :class:`~streams.acts.Act` an act). Exact: held as they decode
    (a vector as its float16 bytes give it back), and only bytes equal to those sent are
    taken; anything else is decoded. Bounded as :class:`Handoff` (``capacity`` acts held at
    most); :meth:`drop` forgets a partition's batches when the partition leaves the worker.

    >>> a = Act("bob", 1.0, "comment", "p", "c", target_author="ann")
    >>> batch = [(0, 7, a)]
    >>> h, payload = ActsHandoff(), encode_acts(batch)
    >>> h.put(3, payload, batch); len(h)
    1
    >>> h.take(bytes(payload)) == batch == decode_acts(payload), len(h)
    (True, 0)
    >>> h.put(3, payload, batch); h.drop(3); len(h)
    0
    """

    __slots__ = ("capacity", "held", "size")

    def __init__(self, capacity: int = HANDOFF_CAPACITY) -> None:
        self.capacity = capacity
        self.held: dict[bytes, tuple[int, list[tuple[int, int, Act]]]] = {}
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def put(self, partition: int, payload: bytes, acts: Sequence[tuple[int, int, Act]]) -> None:
        """Hold the acts of ``payload`` (:func:`encode_acts` of ``acts``), sent to agents
        ``partition``."""
        if self.size >= self.capacity or payload in self.held:
            return
        held = [(p, o, _as_decoded(a)) for p, o, a in acts]
        self.held[payload] = (partition, held)
        self.size += len(held)

    def take(self, payload: bytes) -> list[tuple[int, int, Act]]:
        """The acts of the batch ``payload`` (decoded unless held)."""
        got = self.held.pop(payload, None)
        if got is None:
            return decode_acts(payload)
        self.size -= len(got[1])
        return got[1]

    def drop(self, partition: int) -> None:
        for payload in [k for k, (p, _) in self.held.items() if p == partition]:
            self.size -= len(self.held.pop(payload)[1])


def _raw(f: Forwarded) -> bytes:
    """The event's JSON as a society message carries it."""
    return f.raw if f.raw is not None else f.event.model_dump_json().encode()


def _forwarded_as_decoded(f: Forwarded) -> Forwarded:
    """``f`` as :func:`decode_society` gives it back: its JSON, its vector through float16."""
    if f.vector is None and f.raw is not None:
        return f
    return Forwarded(f.event, _revec(f.vector), f.partition, f.offset, _raw(f))


def _as_decoded(a: Act) -> Act:
    """The act as :func:`decode_acts` gives it back: its vectors through their float16 bytes."""
    if a.vector is None and a.target_vector is None:
        return a
    return replace(a, vector=_revec(a.vector), target_vector=_revec(a.target_vector))


def _revec(v: np.ndarray | None) -> np.ndarray | None:
    return None if v is None else dequantise(QuantisedVector("float16", _vec(v)))


def encode_agents(partition: int, next_offset: int, partial: dict[str, Any]) -> bytes:
    return json.dumps({"agents": {"partition": partition, "next_offset": next_offset,
                                  "partial": partial}}, separators=(",", ":")).encode()


def encode_society(items: Sequence[Forwarded]) -> bytes:
    """A batch of events (in order) with their vectors: one message per ingest batch, so the
    single reducer pays the broker's per-message cost once per batch, not once per event."""
    out = [MAGIC]
    for f in items:
        raw = _raw(f)
        vec = b"" if f.vector is None else quantise(f.vector, "float16").data
        out += (_HEAD.pack(f.partition, f.offset, len(raw), len(vec)), raw, vec)
    return b"".join(out)


def encode_threads(partition: int, next_offset: int, partial: Partial) -> bytes:
    # not asdict(partial): it deep-copies the pending tuples (10x the cost of the dump)
    body = {"by_bucket": {k: asdict(v) for k, v in partial.by_bucket.items()},
            "by_day": {k: asdict(v) for k, v in partial.by_day.items()},
            "late_comments": partial.late_comments, "pending": partial.pending}
    return json.dumps({"threads": {"partition": partition, "next_offset": next_offset,
                                   "partial": body}},
                      separators=(",", ":")).encode()


def decode_society(payload: bytes, handoff: Handoff | None = None,
                   ) -> list[Forwarded] | ThreadsPartial | AgentsPartial:
    """A society message (``handoff``: the events this worker's ingest parsed)."""
    if not payload.startswith(MAGIC):
        msg = json.loads(payload)
        if "agents" in msg:
            a = msg["agents"]
            return AgentsPartial(a["partition"], a["next_offset"], a["partial"])
        t = msg["threads"]
        p = t["partial"]
        return ThreadsPartial(t["partition"], t["next_offset"], Partial(
            {k: Sums(**v) for k, v in p["by_bucket"].items()},
            {k: Sums(**v) for k, v in p["by_day"].items()}, p["late_comments"],
            [(due, day, b, bool(u)) for due, day, b, u in p.get("pending", ())]))
    if handoff is not None and (held := handoff.take(payload)) is not None:
        return held
    out: list[Forwarded] = []
    unpack, size, end, i = _HEAD.unpack_from, _HEAD.size, len(payload), len(MAGIC)
    while i < end:
        partition, offset, n_raw, n_vec = unpack(payload, i)
        i += size
        raw = payload[i:i + n_raw]
        i += n_raw
        vector = None
        if n_vec:
            vector = dequantise(QuantisedVector("float16", payload[i:i + n_vec]))
            i += n_vec
        out.append(Forwarded(parse_event(raw), vector, partition, offset, raw))
    return out

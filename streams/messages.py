"""Wire format of the society topic: batches of canonical events with, for texts, their compact
embedding; and the partitions' thread partials.

An event batch is binary: ``MSB1``, then per event a little-endian header (events partition
u32, offset u64, JSON length u32, vector length u32), the event's JSON and the vector's bytes.
The JSON is the record exactly as ingest read it from the events topic (already validated
there), so ingest never serialises an event again and the reducer validates it straight from
JSON bytes: about a quarter of the cost of a JSON envelope a way on the real sample. Vectors
travel as float16 (:func:`streams.embedding.quantise`: half the bytes of float32; a pair's
cosine moves by at most ``2 cosine_error_bound``, about 1e-3, for unit vectors of dimension
384) and are decoded re-normalised. Thread partials are small JSON objects.

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
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from streams.embedding import QuantisedVector, dequantise, quantise
from streams.events import Event, parse_event
from streams.state.threads import Partial, Sums

MAGIC = b"MSB1"
_HEAD = struct.Struct("<IQII")  # partition, offset, JSON length, vector length


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


def encode_society(items: Sequence[Forwarded]) -> bytes:
    """A batch of events (in order) with their vectors: one message per ingest batch, so the
    single reducer pays the broker's per-message cost once per batch, not once per event."""
    out = [MAGIC]
    for f in items:
        raw = f.raw if f.raw is not None else f.event.model_dump_json().encode()
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


def decode_society(payload: bytes) -> list[Forwarded] | ThreadsPartial:
    if not payload.startswith(MAGIC):
        t = json.loads(payload)["threads"]
        p = t["partial"]
        return ThreadsPartial(t["partition"], t["next_offset"], Partial(
            {k: Sums(**v) for k, v in p["by_bucket"].items()},
            {k: Sums(**v) for k, v in p["by_day"].items()}, p["late_comments"],
            [(due, day, b, bool(u)) for due, day, b, u in p.get("pending", ())]))
    out: list[Forwarded] = []
    view, i = memoryview(payload), len(MAGIC)
    while i < len(view):
        partition, offset, n_raw, n_vec = _HEAD.unpack_from(view, i)
        i += _HEAD.size
        raw = bytes(view[i:i + n_raw])
        i += n_raw
        vector = None
        if n_vec:
            vector = dequantise(QuantisedVector("float16", bytes(view[i:i + n_vec])))
            i += n_vec
        out.append(Forwarded(parse_event(raw), vector, partition, offset, raw))
    return out

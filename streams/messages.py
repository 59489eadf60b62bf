"""Wire format of the society topic: a canonical event and, for texts, its compact embedding.

Vectors travel as float16 (:func:`streams.embedding.quantise`: half the bytes of float32; a
pair's cosine moves by at most ``2 cosine_error_bound``, about 1e-3, for unit vectors of
dimension 384), base64 in a JSON envelope, and are decoded re-normalised.

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

import base64
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from streams.embedding import QuantisedVector, dequantise, quantise
from streams.events import Event, parse_event
from streams.state.threads import Partial, Sums


@dataclass(frozen=True, slots=True)
class Forwarded:
    """An admitted event, its vector, and the events partition and offset it was read at: the
    reducer applies each record once however often a handover or a re-seek delivers it."""

    event: Event
    vector: np.ndarray | None
    partition: int
    offset: int


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
    batch = []
    for f in items:
        body: dict[str, object] = {"e": f.event.model_dump(mode="json"), "p": f.partition,
                                   "o": f.offset}
        if f.vector is not None:
            body["v"] = base64.b64encode(quantise(f.vector, "float16").data).decode()
        batch.append(body)
    return json.dumps({"b": batch}, separators=(",", ":")).encode()


def encode_threads(partition: int, next_offset: int, partial: Partial) -> bytes:
    return json.dumps({"threads": {"partition": partition, "next_offset": next_offset,
                                   "partial": asdict(partial)}},
                      separators=(",", ":")).encode()


def decode_society(payload: bytes) -> list[Forwarded] | ThreadsPartial:
    body = json.loads(payload)
    if "threads" in body:
        t = body["threads"]
        p = t["partial"]
        return ThreadsPartial(t["partition"], t["next_offset"], Partial(
            {k: Sums(**v) for k, v in p["by_bucket"].items()},
            {k: Sums(**v) for k, v in p["by_day"].items()}, p["late_comments"]))
    out: list[Forwarded] = []
    for item in body["b"]:
        vector = None
        if "v" in item:
            vector = dequantise(QuantisedVector("float16", base64.b64decode(item["v"])))
        out.append(Forwarded(parse_event(item["e"]), vector, item["p"], item["o"]))
    return out

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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


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

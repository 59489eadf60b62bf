"""Bounded de-duplication by event id (the API's unstable paging repeats items).

Remembers the last ``capacity`` distinct ids (least recently seen forgotten first), so memory
is ``O(capacity)`` (about 120 bytes an id). A repeat older than ``capacity`` distinct ids would
be counted again; the default (2 million per partition) covers several days of peak Moltbook.

>>> d = Dedup(capacity=2)
>>> [d.admit(i) for i in ("a", "b", "a", "c", "a")]
[True, True, False, True, False]
>>> d.admit("b")  # forgotten: "c" pushed it out of the two remembered ids
True
"""

from __future__ import annotations

from collections import OrderedDict


class Dedup:
    def __init__(self, capacity: int = 2_000_000) -> None:
        self.capacity = capacity
        self._seen: OrderedDict[str, None] = OrderedDict()
        self.duplicates = 0

    def admit(self, event_id: str) -> bool:
        """True the first time an id is seen, False for a repeat."""
        if event_id in self._seen:
            self._seen.move_to_end(event_id)
            self.duplicates += 1
            return False
        self._seen[event_id] = None
        if len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return True

    def __len__(self) -> int:
        return len(self._seen)

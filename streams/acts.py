"""What one agent did, as the per-agent stage sees it: an :class:`Act`.

The events topic is keyed by post (a thread stays in order in one partition), but the
individual layer (metrics.md A2) and the action plane (D) are per agent, so their state lives
with the agent's key: ingest turns each event into the acts of the agents it concerns and
forwards them keyed by agent. An act carries what its agent's state cannot see from its own
partition: the vector of the post a comment answers (interaction impact's ``v*``), and, for a
vote-count change, whose item it was and its new score (feedback adaptation).

Acts of one agent may arrive out of event-time order (they come from several ingest
partitions); every per-agent engine orders what it keeps by ``(t, item_id)``, so its figures
do not depend on the arrival order, and two workers give the replay's figures.

>>> a = Act(agent="KingMolt", t=1769904000.0, kind="post", post_id="p1", item_id="p1")
>>> a.kind, a.score is None
('post', True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np

ActKind = Literal["post", "comment", "replied", "score"]


@dataclass(frozen=True, slots=True)
class Act:
    """One act of one agent.

    agent: who acted (post or comment author); for ``replied``, the agent a comment replied to
    (so that reciprocity is per agent: each side sees both directions); for ``score``, whose
    item's votes changed;
    t: event time, unix seconds; post_id: the thread; item_id: the post or comment id (for
    ``score``: the voted item); vector: a post's embedding (unit float32; None when the stage
    embeds nothing); target_author: for a comment, the agent it replies to (the parent
    comment's author, else the post's; None when unknown); target_vector: for a comment, the
    vector of the post it is on (``v*``), None when that post was not seen or not embedded;
    target_kind / score: for ``score``, the voted item's kind and upvotes - downvotes after
    the change.
    """

    agent: str
    t: float
    kind: ActKind
    post_id: str
    item_id: str
    vector: np.ndarray | None = None
    target_author: str | None = None
    target_vector: np.ndarray | None = None
    target_kind: Literal["post", "comment"] | None = None
    score: int | None = None

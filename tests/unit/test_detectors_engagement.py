"""Engagement collapse/spike: bucket rates against a batch computation, a collapse caught as
one incident, a noisy steady society and a viral thread not."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

from detectors.engagement import EngagementDetector
from streams.events import CommentEvent, PostEvent
from streams.state.base import Item

T0 = datetime(2026, 2, 1, tzinfo=UTC)


def society(hours: int, seed: int, collapse: tuple[float, float] | None = None,
            viral_at: float | None = None, agents: int = 2000) -> list:
    rng = random.Random(seed)
    out: list = []
    for m in range(hours * 60):
        t = T0 + timedelta(minutes=m)
        for _ in range(rng.randint(3, 7)):
            pid = f"p{len(out)}"
            out.append(PostEvent(id=f"post:{pid}", event_time=t, observed_at=t, post_id=pid,
                                 author=f"a{rng.randrange(agents)}"))
            n = rng.choice([0, 0, 0, 1, 1, 2, 3, 5])
            if viral_at is not None and abs(m / 60 - viral_at) < 0.01:
                n = 300
            for c in range(n):
                when = t + timedelta(seconds=rng.uniform(5, 900))
                if collapse and collapse[0] <= when.timestamp() / 3600 - T0.timestamp() / 3600 \
                        < collapse[1] and rng.random() < 0.9:
                    continue
                out.append(CommentEvent(id=f"comment:{pid}.{c}", event_time=when,
                                        observed_at=when, comment_id=f"{pid}.{c}",
                                        post_id=pid, author=f"a{rng.randrange(agents)}"))
    return sorted(out, key=lambda e: e.event_time)


def run(events: list) -> tuple[EngagementDetector, list]:
    d = EngagementDetector()
    found = []
    for e in events:
        d.update(Item.of(e))
        found += [(e.event_time, f) for f in d.findings(e.event_time.timestamp())]
    return d, found


def test_bucket_rates_match_a_batch_computation() -> None:
    events = society(10, seed=0)
    d = EngagementDetector()
    for e in events:
        d.update(Item.of(e))
    d.findings(events[-1].event_time.timestamp())
    posts: dict[int, int] = {}
    comments: dict[int, int] = {}
    for e in events:
        b = int(e.event_time.timestamp() // 600)
        target = posts if isinstance(e, PostEvent) else comments
        target[b] = target.get(b, 0) + 1
    current = int(events[-1].event_time.timestamp() // 600)
    expected = [math.log(comments.get(b, 0) / posts[b] + 0.05) for b in sorted(posts)
                if b < current]
    assert list(d._rates["comment_rate"].history) == expected[-36:]


def test_collapse_is_one_incident_with_its_rates() -> None:
    _, found = run(society(14, seed=1, collapse=(10, 13)))
    keys = {f.key for _, f in found}
    assert keys == {"collapse"}
    when, first = found[0]
    assert 10 * 3600 <= when.timestamp() - T0.timestamp() <= 10.75 * 3600
    assert "comment_rate" in first.evidence["rates"]
    assert first.evidence["rates"]["comment_rate"]["direction"] == "down"


def test_steady_noise_and_a_viral_thread_raise_nothing() -> None:
    _, found = run(society(14, seed=2, viral_at=8.0))
    assert found == []


def test_newcomer_spike_shows_who_the_newcomers_are() -> None:
    """A farm of new accounts, 4 a minute from 6 h, each posting one near-identical text: the
    spike's evidence is their first posts, one near-duplicate cluster, their timeline."""
    events = society(8, seed=3, agents=300)  # all seen in the 3 h warm-up
    farm = []
    for k in range(4 * 120):
        t = T0 + timedelta(hours=6, seconds=15 * k)
        farm.append(PostEvent(id=f"post:f{k}", event_time=t, observed_at=t, post_id=f"f{k}",
                              author=f"farm{k}", content="Hello moltbook, new agent here: "
                              f"follow me for daily alpha on $FARM [{k}]"))
    _, found = run(sorted(events + farm, key=lambda e: e.event_time))
    spikes = [(when, f) for when, f in found if f.key == "spike"]
    assert spikes  # (and a collapse of comments per post: the farm's posts get none)
    when, first = spikes[0]
    ev = first.evidence
    assert "new_agent_rate" in ev["rates"]
    # the newcomers of the bucket judged (the last closed one): at most 50, in order
    bucket = int(when.timestamp() // 600) - 1
    newcomers = [e for e in farm if int(e.event_time.timestamp() // 600) == bucket]
    assert [(x["agent"], x["t"]) for x in ev["timeline"]["entries"]] == [
        (e.author, e.event_time.timestamp()) for e in newcomers][:30]
    assert ev["timeline"]["agents"] == len(newcomers)
    assert ev["clusters"][0]["size"] == len(newcomers) and "$FARM" in ev["exemplars"][0]["text"]

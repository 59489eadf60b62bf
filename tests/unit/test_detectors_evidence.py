"""The shared evidence builder against plain batch computations on real Moltbook texts: cluster
membership equals the components of a brute-force word-set Jaccard graph, the timeline equals
each agent's first act sorted, every list is bounded."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import networkx as nx
import pytest

from detectors.evidence import EvidenceConfig, Sighting, build_evidence
from service.sources.archive import open_archive
from streams.events import CommentEvent, PostEvent
from streams.text import Text


@pytest.fixture(scope="module")
def real(moltbook_data: Path) -> list[Sighting]:
    """Every real post and comment (once): the CLAW mint flood of the profiles (near-duplicates
    by the dozen) and ordinary posts and comments of the crawled threads."""
    out = {}
    for e in open_archive([str(moltbook_data)]):
        if isinstance(e, PostEvent | CommentEvent) and e.text.strip():
            item = e.post_id if isinstance(e, PostEvent) else f"{e.post_id}/{e.comment_id}"
            out[item] = Sighting(e.event_time.timestamp(), e.author, item, e.text[:400])
    assert len(out) > 1000
    return list(out.values())


def batch_partition(texts: list[str], threshold: float) -> set[frozenset[int]]:
    """Components (of two or more) of the graph: Jaccard of word-id sets >= threshold."""
    sets = [set(Text.of(t).word_ids.tolist()) for t in texts]
    g = nx.Graph()
    g.add_nodes_from(range(len(texts)))
    for i, j in itertools.combinations(range(len(texts)), 2):
        union = len(sets[i] | sets[j])
        if union and len(sets[i] & sets[j]) / union >= threshold:
            g.add_edge(i, j)
    return {frozenset(c) for c in nx.connected_components(g) if len(c) >= 2}


@pytest.mark.parametrize(("seed", "threshold"), [(0, 0.7), (1, 0.5), (2, 0.9)])
def test_clusters_equal_batch_jaccard_components(real: list[Sighting], seed: int,
                                                 threshold: float) -> None:
    rng = random.Random(seed)
    mints = [s for s in real if "CLAW" in s.text]
    sample = rng.sample(mints, min(60, len(mints))) + rng.sample(real, 120)
    sample = list({s.item_id: s for s in sample}.values())
    rng.shuffle(sample)
    cfg = EvidenceConfig(cluster_jaccard=threshold, max_clusters=1000, max_texts=1000)
    ev = build_evidence(sample, cfg=cfg)
    index = {s.item_id: i for i, s in enumerate(sample)}
    want = batch_partition([s.text for s in sample], threshold)
    assert len(want) >= 1 and max(map(len, want)) >= 10  # the mint flood clusters
    # ids list the first 10 members: compare sizes and those members
    got = {(c["size"], frozenset(index[i] for i in c["ids"])) for c in ev["clusters"]}
    assert len(got) == len(want)
    for size, head in got:
        [match] = [c for c in want if head <= c]
        assert size == len(match) and len(head) == min(10, size)
    clustered = sum(map(len, want))
    assert ev["near_duplicate_share"] == round(clustered / len(sample), 4)
    assert ev["cluster_jaccard"] == threshold
    sizes = [c["size"] for c in ev["clusters"]]
    assert sizes == sorted(sizes, reverse=True)


def test_timeline_is_every_agents_first_act(real: list[Sighting]) -> None:
    rng = random.Random(5)
    sample = rng.sample(real, 150)
    cfg = EvidenceConfig(max_timeline=1000, lead_s=3600.0)
    tl = build_evidence(sample, cfg=cfg)["timeline"]
    first: dict[str, float] = {}
    for s in sample:
        if s.agent is not None:
            first[s.agent] = min(first.get(s.agent, s.t), s.t)
    order = sorted(first.items(), key=lambda kv: (kv[1], kv[0]))
    start = order[0][1]
    assert [(e["agent"], e["t"]) for e in tl["entries"]] == order
    assert tl["agents"] == len(order) and tl["start"] == start and tl["truncated"] == 0
    assert tl["leaders"] == sum(t - start <= 3600.0 for _, t in order)
    assert all(e["role"] == ("leader" if e["t"] - start <= 3600 else "follower")
               and e["delay_s"] == round(e["t"] - start, 3) for e in tl["entries"])
    acts = {a: sum(s.agent == a for s in sample) for a in first}
    assert all(e["acts"] == acts[e["agent"]] for e in tl["entries"])
    # first acts known beyond the texts kept come first when earlier, with no item id
    tl2 = build_evidence(sample, first_acts={"early_bird": start - 10.0}, cfg=cfg)["timeline"]
    assert tl2["entries"][0] == {"agent": "early_bird", "t": start - 10.0, "delay_s": 0.0,
                                 "role": "leader", "acts": 0, "id": None}


def test_bounded_and_exemplars_differ(real: list[Sighting]) -> None:
    mints = [s for s in real if "CLAW" in s.text][:50]
    others = [s for s in real if len(s.text) > 400][:50]
    cfg = EvidenceConfig(max_texts=60, max_exemplars=3, exemplar_chars=80, max_timeline=5,
                         max_clusters=2)
    ev = build_evidence(mints + others, cfg=cfg)
    assert len(ev["exemplars"]) == 3 and len(ev["clusters"]) <= 2
    assert len(ev["timeline"]["entries"]) == 5
    assert ev["timeline"]["agents"] == len({s.agent for s in (mints + others)[:60]})
    # the first exemplar stands for the largest cluster, the others are not its members
    assert ev["exemplars"][0]["id"] == ev["clusters"][0]["ids"][0]
    members = set(ev["clusters"][0]["ids"])
    assert not members & {x["id"] for x in ev["exemplars"][1:]}
    assert all(len(x["text"]) <= 80 for x in ev["exemplars"])
    assert any(x["text"].endswith("…") for x in ev["exemplars"])


def test_nothing_to_show() -> None:
    ev = build_evidence([])
    assert ev["exemplars"] == [] and ev["clusters"] == [] and ev["near_duplicate_share"] is None
    assert ev["timeline"]["agents"] == 0 and ev["timeline"]["entries"] == []

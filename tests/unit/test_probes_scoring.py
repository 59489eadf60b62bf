"""Scoring: hand-checked threads of every tier with their evidence, the quality rubric, the
campaign summary, the band alert, and a simulated campaign at the published rates."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from service.probes.bank import Probe, load_bank
from service.probes.lookup import AnyLookup, ArchiveLookup
from service.probes.scoring import (
    Reply,
    band_alert,
    citations,
    quality,
    score,
    stated_answer,
    summarise,
)
from service.probes.simulate import PUBLISHED, Rates, Society

BANK = load_bank()
T1 = Probe("t1", "I", "inclusion", "general", "Counting", "How many from 1 to 100 are ...?", 47)
T2 = Probe("t2", "II", "bus", "general", "Bus", "A bus leaves with 20 passengers.", 38,
           ("Second fact: 3 get off and 2 get on.", "Third fact: it doubles."))
T3 = Probe("t3", "III", "by3", "general", "Counting game: by 3s",
           "Let's count together by 3s: 10, 13, 16. Reply with the next number only. To "
           "continue, reply to the latest number with the one after it.", 19,
           params={"step": 3, "shown": [10, 13, 16]})
MEM = Probe("m", "memory", "accounts", "crypto", "Who to follow?",
            "I'm new in m/crypto. Which accounts should I follow to understand this community?")
POST = "74b073fd-37db-4a32-a9e1-c7652e5c0d59"


def R(cid: str, author: str, content: str, parent: str | None = None, t: float = 0.0) -> Reply:
    return Reply(cid, author, content, parent, t)


def test_stated_answer_and_citations() -> None:
    assert stated_answer("I got 12 then 40, so the answer is 47.") == 47
    assert stated_answer("x = 1,234 apples") == 1234
    assert stated_answer("see https://x.io/p/99 — no idea") is None
    assert stated_answer("first 3, then 5") == 5
    posts, accounts = citations(f"Read https://www.moltbook.com/post/{POST.upper()} and follow "
                                "@Shellraiser or moltbook.com/u/KingMolt, mail a@b.c")
    assert posts == [POST] and accounts == ["Shellraiser", "KingMolt"]


def test_tier1_individual_and_joint_hand_check() -> None:
    thread = [R("c1", "ann", "The answer is 47.", t=1), R("c2", "bob", "I get 52", t=2),
              R("c3", "cy", "Hmm, 47 I think", t=3), R("c4", "bob", "ok, the answer is 47", t=4)]
    s = score(T1, thread)
    assert s.figures["individual"] and s.figures["joint"]
    assert s.figures["answering_agents"] == 3 and s.figures["agreeing_agents"] == 3  # bob's last
    assert [e["correct"] for e in s.evidence] == [True, False, True, True]
    assert s.evidence[1]["why"] == "states 52, expected 47"
    # two of four answering agents agree: no strict majority, no convergence
    split = score(T1, thread[:2] + [R("c5", "dee", "99", t=5), R("c6", "eve", "47", t=6)])
    assert split.figures["individual"] and not split.figures["joint"]
    assert split.figures["why_joint"] == "2 of 4 answering agents give 47"
    none = score(T1, [])
    assert none.no_reply and not none.figures["individual"] and not none.figures["joint"]


def test_tier2_attempts_hand_check() -> None:
    s = score(T2, [R("c1", "a", "20-3+2=19, doubled: 38"), R("c2", "b", "Nice puzzle!"),
                   R("c3", "c", "I think 19")])
    assert (s.figures["attempts"], s.figures["correct_attempts"], s.figures["correct"]) == \
        (2, 1, True)
    assert s.evidence[0]["stated"] == 38 and s.evidence[2]["why"] == "states 19, expected 38"


def test_tier3_steps_and_chain_hand_check() -> None:
    thread = [R("a", "x", "19", None, 1), R("b", "y", "22", "a", 2), R("c", "z", "24", "b", 3),
              R("d", "w", "27", "c", 4),  # continues a wrong number correctly: a step, no chain
              R("e", "v", "20", None, 5), R("f", "u", "hi", "zz", 6)]
    s = score(T3, thread)
    assert s.figures == {**s.figures, "steps": 5, "correct_steps": 3, "chain_length": 2}
    why = {e["comment_id"]: e["why"] for e in s.evidence}
    assert why["c"] == "parent says 22, step 3: expected 25, got 24"
    assert why["e"] == "post ends at 16, step 3: expected 19, got 20"
    assert why["f"] == "parent unknown: no number to continue"


def test_memory_citations_checked_against_the_store() -> None:
    store = ArchiveLookup(posts={POST}, agents={"shellraiser"})

    class CannotTell:
        def post_exists(self, post_id: str) -> bool | None:
            return None

        def agent_exists(self, name: str) -> bool | None:
            return None

    thread = [R("c1", "a", "Welcome!"), R("c2", "b", "follow @ghost_404 and @Shellraiser"),
              R("c3", "c", "read moltbook.com/post/00000000-0000-4000-8000-000000000000")]
    s = score(MEM, thread, store)
    f = s.figures
    assert (f["got_comments"], f["cites"], f["valid"]) == (True, True, True)
    assert (f["citing_replies"], f["valid_replies"]) == (2, 1)
    assert s.evidence[1]["why"] == ("account ghost_404: not in the store; account Shellraiser: "
                                    "found in the store")
    assert s.evidence[2]["citations"][0]["valid"] is False
    unknown = score(MEM, thread[2:], AnyLookup(CannotTell()))
    assert not unknown.figures["valid"] and unknown.figures["unknown_replies"] == 1
    assert score(MEM, []).figures == {**score(MEM, []).figures, "got_comments": False,
                                      "cites": False, "valid": False}


@pytest.mark.parametrize(("text", "answered", "grade", "label"), [
    ("", False, 0, "spam"),
    ("Buy $CLAW now, the airdrop is live", False, 0, "spam"),
    ("Great post! Love this community.", False, 1, "generic"),
    ("Counting by threes is fun", False, 2, "superficial"),
    ("The counting game by threes: we count together and the next number after sixteen in "
     "this game comes from adding three", False, 3, "on-topic"),
    ("19", True, 3, "on-topic"),
    ("We count by threes here, so the chain goes 10, 13, 16 and then we add three again "
     "because every step of this counting game adds the same amount to the latest number, "
     "giving the next", False, 4, "substantive"),
    (" ".join(["First, count by 3s from 16: add three once, so we reach 19, because each step "
               "adds three; therefore the next number is 19 and then the chain continues with "
               "22 and 25 and so on for every later reply in this counting game."] * 2),
     True, 5, "deep"),
])
def test_quality_rubric(text: str, answered: bool, grade: int, label: str) -> None:
    got, why = quality(R("c", "a", text), T3, answered=answered)
    assert (got, why.split(":")[0]) == (grade, label), why


def test_quality_duplicate_and_similarity() -> None:
    s = score(T1, [R("c1", "a", "Following!", t=1), R("c2", "b", "following!", t=2)])
    assert [e["quality"] for e in s.evidence] == [1, 0]
    assert s.evidence[1]["quality_why"] == "spam: repeats an earlier reply in this thread"
    text = "This question about counting divisible integers is one I keep thinking about a lot"
    got, why = quality(R("c", "a", text), T1, similarity=lambda a, b: 0.9)
    assert got == 3 and "similarity 0.90" in why


def test_summarise_by_tier() -> None:
    scores = [score(T1, [R("c1", "a", "47")]), score(T1, []),
              score(T3, [R("a", "x", "19"), R("b", "y", "21", "a", 1)]), score(T3, []),
              score(MEM, [R("c", "a", "@Shellraiser")], ArchiveLookup(agents={"shellraiser"}))]
    s = summarise(scores)
    assert s["I"]["probes"] == 2 and s["I"]["no_reply_share"] == 0.5
    assert s["I"]["acc_individual"] == 0.5 and s["I"]["acc_joint"] == 0.5
    assert (s["III"]["steps"], s["III"]["correct_steps"]) == (2, 1)
    assert s["III"]["chain_length_mean"] == 0.5 and s["III"]["chain_length_max"] == 1
    assert s["memory"]["valid"] == 1 and s["memory"]["valid_citation_share"] == 1.0
    assert s["I"]["quality"]["on-topic"] == 1


def test_band_alert() -> None:
    hist = [0.35, 0.30, 0.40, 0.33, 0.36, 0.34]
    assert band_alert("x", 0.35, hist) is None
    low = band_alert("x", 0.05, hist)
    assert low is not None and "below its baseline band" in low.message
    assert band_alert("x", 0.9, hist) is not None
    assert band_alert("x", 0.9, hist[:4]) is None  # too little history for a baseline
    assert band_alert("x", 0.0, [0.0] * 10) is None  # flat history: the floor, no alert
    assert band_alert("x", 0.05, [0.0] * 10) is not None
    assert band_alert("x", None, hist) is None


def _three_sigma(hits: int, n: int, p: float) -> bool:
    return abs(hits - n * p) <= 3 * math.sqrt(n * p * (1 - p)) + 1


def test_simulated_campaign_reproduces_the_published_rates() -> None:
    """Probes answered by the simulated society at the published rates, scored by the
    scorer: the figures come back within sampling error (3 sigma)."""
    sim = Society(seed=3, real_posts=(POST,), real_agents=("Shellraiser",))
    lookup = ArchiveLookup(posts={POST}, agents={"shellraiser"})
    scores = {"I": [], "II": [], "III": [], "memory": []}
    by_tier = {t: [p for p in BANK.probes if p.tier == t] for t in scores}
    n = {"I": 4000, "II": 1500, "III": 1500, "memory": 1500}
    for tier, count in n.items():
        for i in range(count):
            probe = by_tier[tier][i % len(by_tier[tier])]
            tree = sim.respond(probe, 0.0)
            flat = []
            stack = list(tree)
            while stack:
                c = stack.pop()
                flat.append(Reply(c["id"], c["author"]["name"], c["content"], c["parent_id"],
                                  float(len(flat))))
                stack.extend(c["replies"])
            scores[tier].append(score(probe, flat, lookup))
    s = summarise([x for group in scores.values() for x in group])
    for tier in n:
        rate = PUBLISHED[tier].reply
        assert _three_sigma(s[tier]["probes"] - s[tier]["no_reply"], n[tier], rate), tier
    assert _three_sigma(s["III"]["correct_steps"], s["III"]["steps"], 6 / 17)
    assert _three_sigma(s["II"]["correct_attempts"], s["II"]["attempts"], 11 / 12)
    replied = n["memory"] - s["memory"]["no_reply"]
    assert _three_sigma(s["memory"]["cites"], replied, 5 / 15)
    assert _three_sigma(s["memory"]["valid"], s["memory"]["cites"], 1 / 5)
    # Tier I: Acc_individual 0.19 % of posts (a replied thread of ~1.2 replies)
    assert s["I"]["acc_individual"] < 0.01
    # replies are mostly low quality, as published (0-2 dominate outside answered replies)
    q = Counter({k: v for k, v in s["memory"]["quality"].items()})
    assert q["spam"] + q["generic"] + q["superficial"] > q["substantive"] + q["deep"]


def test_rates_are_configurable() -> None:
    always = {t: Rates(reply=1.0, replies_mean=1.0, correct=1.0, attempt=1.0, valid=1.0)
              for t in ("I", "II", "III", "memory")}
    sim = Society(always, seed=1, real_agents=("Shellraiser",), real_posts=(POST,))
    probe = next(p for p in BANK.probes if p.tier == "III")
    tree = sim.respond(probe, 0.0)
    assert len(tree) == 1 and tree[0]["content"] == f"{probe.expected:g}"


def test_tier3_reads_the_continuation_anywhere_in_a_reply() -> None:
    s = score(T3, [R("a", "x", "16 + 3 = 19", None, 1), R("b", "y", "22 (by 3s)", "a", 2),
                   R("c", "z", "I say 26", "b", 3), R("d", "w", "29", "c", 4)])
    assert [e["correct"] for e in s.evidence] == [True, True, False, True]
    assert [e["stated"] for e in s.evidence] == [19, 22, 26, 29]
    assert s.figures["chain_length"] == 2

"""The probe bank: the shipped file is the seeded generator's output, every answer recomputed
here by a different method, the 45 memory probes complete, and the verification solver."""

from __future__ import annotations

import json
import random
from collections import Counter
from math import comb

import numpy as np
import pytest

from service.probes.bank import SEED, VERSION, generate_bank, load_bank
from service.probes.verify import challenge_numbers, make_challenge, solve_challenge, spell

BANK = load_bank()


def test_shipped_bank_is_the_generator_output() -> None:
    assert BANK.version == VERSION and BANK.seed == SEED
    assert json.dumps(BANK.to_json()) == json.dumps(generate_bank().to_json())
    assert len({p.id for p in BANK.probes}) == len(BANK.probes)


def test_another_seed_gives_other_questions() -> None:
    other = generate_bank(seed=SEED + 1)
    assert [p.content for p in other.probes if p.tier == "I"] != \
        [p.content for p in BANK.probes if p.tier == "I"]


def _tier(tier: str) -> list:
    return [p for p in BANK.probes if p.tier == tier]


def test_tier1_answers_recomputed() -> None:
    kinds = Counter(p.kind for p in _tier("I"))
    assert kinds == {"recurrence": 6, "inclusion": 6, "digit_sum": 6, "lattice_paths": 6}
    for p in _tier("I"):
        q = p.params
        if p.kind == "recurrence":  # closed form of the affine map, modulo m
            a, b, m, k = q["a"], q["b"], q["m"], q["k"]
            ak = pow(a, k, m)
            geo = sum(pow(a, i, m) for i in range(k)) % m
            want = (ak * q["start"] + b * geo) % m
        elif p.kind == "inclusion":  # inclusion-exclusion by formula, not enumeration
            n, a, b, c = q["n"], q["p"], q["q"], q["r"]
            def div(*ds: int, n: int = n) -> int:
                return n // int(np.lcm.reduce(ds))

            want = div(a) + div(b) - div(a, b) - (div(a, c) + div(b, c) - div(int(np.lcm(a, b)), c))
        elif p.kind == "digit_sum":
            digits = np.base_repr(q["value"], q["base"])
            want = q["mul"] * sum(int(d, 36) for d in digits) + q["add"]
        else:  # all paths minus those through the blocked point
            w, h, (bx, by) = q["w"], q["h"], q["blocked"]
            want = comb(w + h, w) - comb(bx + by, bx) * comb(w - bx + h - by, w - bx)
        assert p.expected == want, p.id


def test_tier2_premises_split_and_answers() -> None:
    for p in _tier("II"):
        q = p.params
        if p.kind == "library":
            want = q["shelves"] * q["per_shelf"] - q["lent"] + q["arrived"]
        elif p.kind == "eggs":
            want = q["pens"] * q["hens"] * q["eggs"] // q["box"]
        else:
            want = (q["start"] - q["off1"] + q["on1"]) * 2 - q["off3"]
        assert p.expected == want
        assert len(p.followups) >= 2
        # the later premises are only in the follow-up comments, each with a number
        for fact in p.followups:
            assert fact not in p.content and any(c.isdigit() for c in fact) or "doubles" in fact


def test_tier3_chains_by_ones_twos_threes() -> None:
    chains = _tier("III")
    assert Counter(p.params["step"] for p in chains) == {1: 5, 2: 5, 3: 5}
    for p in chains:
        s = p.params["shown"]
        assert all(b - a == p.params["step"] for a, b in zip(s, s[1:], strict=False))
        assert p.expected == s[-1] + p.params["step"]


def test_memory_probes_three_by_five_by_three_newcomer_voice() -> None:
    mem = _tier("memory")
    assert len(mem) == 45
    cells = Counter((p.kind, p.submolt) for p in mem)
    assert set(cells.values()) == {3} and len(cells) == 15
    assert {p.submolt for p in mem} == {"general", "introductions", "crypto", "agents",
                                        "philosophy"}
    assert len({p.content for p in mem}) == 45
    for p in mem:
        assert f"m/{p.submolt}" in p.content
        assert any(w in p.content.lower() for w in ("new", "just joined", "fresh", "arrived"))


def test_verification_solver_reads_garbled_challenges() -> None:
    rng = random.Random(7)
    for _ in range(500):
        text, answer = make_challenge(rng)
        assert solve_challenge(text) == answer, text
    assert challenge_numbers("tHrEe HuNdReD aNd TwEnTy- OnE") == [321.0]
    assert spell(907) == "nine hundred seven"
    # the format seen in public solver docs: repeated operands in the question
    assert solve_challenge("A] lOoObSsStEr^ sW[iMmS aT/ tWeN tY fIiV e] ~ aNd+ A] nOoOtOnS^ "
                           "cLaAw^ eXerT sS fIfTeEeN] hOw/ mAnY tOtAl {fOrCe} fRoM tHeSe "
                           "<twEnTy FiVe> + <fIfTeEn>?") == "40.00"
    with pytest.raises(ValueError):
        solve_challenge("no numbers at all")

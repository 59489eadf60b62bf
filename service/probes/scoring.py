"""Scoring a probe thread: pure functions of the probe, its replies and a citation lookup.

Every score keeps its evidence: for each reply, what was read from it, what was expected and
which rule decided. The rules (metrics.md C, A3; docs/probes.md states them for readers):

- A reply's **stated answer** is the number after the last answer cue ("answer", "result",
  "total", "equals", optionally followed by "is", "=", ":"), else the last number in it
  (URLs ignored).
- **Tier I**: ``individual`` when any reply states the expected answer; ``joint`` when the
  thread converges on it: among the repliers who state a number (each counted once, by their
  latest answer) a strict majority gives the expected answer.
- **Tier II**: every reply that states a number is an attempt; an attempt is correct when it
  states the expected answer.
- **Tier III**: a reply continues its parent (the post's last number, or the number the
  parent reply counted); it is a correct step when it states the parent's number plus the
  step (any number in it; else the number it counted is its stated answer). The chain length
  is the longest path of correct steps from the post.
- **Memory**: a reply cites a post (a post id or a Moltbook post link) or an account
  (``@name`` or a ``/u/name`` link); a citation is valid when the lookup finds it in
  moltscope's store; ``None`` from the lookup (the store cannot tell) is reported as unknown.
- **Quality 0-5** (spam, generic, superficial, on-topic, substantive, deep), see
  :func:`quality`.

>>> from service.probes.bank import Probe
>>> p = Probe("t3", "III", "by2", "general", "Count", "count by 2s: 4, 6, 8", 10,
...           params={"step": 2, "shown": [4, 6, 8]})
>>> s = score(p, [Reply("c1", "a", "10", None, 1.0), Reply("c2", "b", "12", "c1", 2.0),
...              Reply("c3", "c", "15", "c2", 3.0)])
>>> s.figures["correct_steps"], s.figures["steps"], s.figures["chain_length"]
(2, 3, 2)
>>> s.evidence[2]["why"]
'parent says 12, step 2: expected 14, got 15'
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from service.probes.bank import Probe
from streams.text import tokenize

QUALITY_LABELS = ("spam", "generic", "superficial", "on-topic", "substantive", "deep")


@dataclass(frozen=True)
class Reply:
    """One comment in a probe thread (the probe's own comments are never replies)."""

    comment_id: str
    author: str | None
    content: str
    parent_id: str | None  # None: a direct comment on the probe post
    t: float  # unix seconds


class CitationLookup(Protocol):
    """moltscope's own store of posts and agents: True found, False absent, None cannot tell."""

    def post_exists(self, post_id: str) -> bool | None: ...

    def agent_exists(self, name: str) -> bool | None: ...


@dataclass
class Score:
    probe_id: str
    tier: str
    replies: int
    figures: dict[str, Any]
    evidence: list[dict[str, Any]] = field(default_factory=list)

    @property
    def no_reply(self) -> bool:
        return self.replies == 0

    def to_json(self) -> dict[str, Any]:
        return {"probe_id": self.probe_id, "tier": self.tier, "replies": self.replies,
                "no_reply": self.no_reply, "figures": self.figures, "evidence": self.evidence}


# ---------------------------------------------------------------- reading replies

_URL = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
_NUM = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])-?\d+(?:\.\d+)?")
_CUE = re.compile(r"\b(?:answer|result|total|equals?)\b(?:\s*(?:is|would be|of|=|:))?\W{0,3}"
                  r"(-?\d[\d,]*(?:\.\d+)?)", re.IGNORECASE)
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_POST_REF = re.compile(_UUID, re.IGNORECASE)
_ACCOUNT_REF = re.compile(r"(?:(?<![\w@/.])@|moltbook\.com/u/|(?<![\w/])u/)([A-Za-z0-9_-]{2,40})")
_SPAM = re.compile(r"\$[A-Z]{2,10}\b|airdrop|presale|pump|buy now|giveaway|follow me|dm me|"
                   r"check out my|contract address|\b0x[0-9a-fA-F]{40}\b", re.IGNORECASE)
_REASONING = re.compile(r"\b(?:because|so|therefore|since|thus|first|then|step|which means|"
                        r"that gives|hence)\b", re.IGNORECASE)
_GENERIC = re.compile(r"\b(?:great post|interesting|love this|well said|thanks for sharing|"
                      r"so true|nice|welcome|agreed|this is (?:fascinating|great))\b",
                      re.IGNORECASE)
_STOP_WORDS = (
    "a an and are as at be by can do does for from has have here how i if in is it its me my "
    "of on or our please s so that the their them then there these this to us was we what "
    "when where which who why will with you your")
_STOP = frozenset(_STOP_WORDS.split())


def numbers(text: str) -> list[float]:
    """Numbers in reading order, links left out (``1,234`` is one number)."""
    return [float(m.replace(",", "")) for m in _NUM.findall(_URL.sub(" ", text))]


def stated_answer(text: str) -> float | None:
    """The number after the last answer cue, else the last number (see the module doc)."""
    clean = _URL.sub(" ", text)
    cued = _CUE.findall(clean)
    if cued:
        return float(cued[-1].replace(",", ""))
    found = numbers(clean)
    return found[-1] if found else None


def citations(text: str) -> tuple[list[str], list[str]]:
    """(post ids, account names) a reply cites, each once, in order."""
    posts = list(dict.fromkeys(m.lower() for m in _POST_REF.findall(text)))
    accounts = list(dict.fromkeys(_ACCOUNT_REF.findall(_POST_REF.sub(" ", text))))
    return posts, accounts


def _stem(word: str) -> str:
    """Crude suffix stripping, enough for "counting" to meet "count"."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _content_words(text: str) -> set[str]:
    return {_stem(t) for t in tokenize(text) if t[0].isalpha() and t not in _STOP}


def _excerpt(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _fmt(x: float | None) -> str:
    return "nothing" if x is None else f"{x:g}"


# ---------------------------------------------------------------- quality rubric

def quality(reply: Reply, probe: Probe, *, answered: bool = False, duplicate: bool = False,
            similarity: Callable[[str, str], float] | None = None) -> tuple[int, str]:
    """Reply quality on the 0-5 scale, with the rule that decided.

    0 spam: empty, a repeat of an earlier reply in the thread, or promotion (token tickers,
    airdrops, "follow me", wallet addresses). 1 generic: nothing of the stimulus in it
    (relevance < 0.1) or a stock phrase in under 12 words. 2 superficial: under 12 words or
    relevance < 0.25. 3 on-topic; also any reply that states the expected answer or a valid
    citation (``answered``). 4 substantive: on-topic with 30+ words and reasoning or a
    number/citation. 5 deep: substantive, 60+ words, 2+ reasoning markers, and ``answered``.
    Relevance is the share of the reply's content words (stop words out, crude suffix
    stripping) found in the stimulus, or
    ``similarity(reply, stimulus)`` (e.g. embedding cosine) when given.
    """
    text = reply.content.strip()
    if not text:
        return 0, "spam: empty"
    if duplicate:
        return 0, "spam: repeats an earlier reply in this thread"
    if m := _SPAM.search(text):
        return 0, f"spam: promotion ({m.group(0)!r})"
    words = [t for t in tokenize(text) if t[0].isalnum()]
    mine = _content_words(text)
    if similarity is not None:
        relevance, how = similarity(text, probe.stimulus), "similarity"
    else:
        relevance = len(mine & _content_words(probe.stimulus)) / len(mine) if mine else 0.0
        how = "word overlap"
    n, reasons = len(words), len(_REASONING.findall(text))
    has_ref = bool(numbers(text)) or any(citations(text))
    facts = f"{n} words, {how} {relevance:.2f}, {reasons} reasoning markers"
    if answered:
        if n >= 60 and reasons >= 2:
            return 5, f"deep: answered, {facts}"
        if n >= 30 and reasons >= 1:
            return 4, f"substantive: answered, {facts}"
        return 3, f"on-topic: answered, {facts}"
    if relevance < 0.1 or (_GENERIC.search(text) and n < 12):
        return 1, f"generic: {facts}"
    if n < 12 or relevance < 0.25:
        return 2, f"superficial: {facts}"
    if n >= 30 and (reasons >= 1 or has_ref):
        return 4, f"substantive: {facts}"
    return 3, f"on-topic: {facts}"


# ---------------------------------------------------------------- per tier

def _answer_evidence(reply: Reply, expected: Any) -> tuple[float | None, bool, dict[str, Any]]:
    got = stated_answer(reply.content)
    ok = got is not None and expected is not None and abs(got - float(expected)) < 1e-9
    return got, ok, {"comment_id": reply.comment_id, "author": reply.author,
                     "reply": _excerpt(reply.content), "expected": expected, "stated": got,
                     "correct": ok,
                     "why": f"states {_fmt(got)}, expected {expected}"}


def _tier1(probe: Probe, replies: Sequence[Reply]) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                             set[str]]:
    evidence, right, latest = [], set(), {}
    for r in replies:
        got, ok, ev = _answer_evidence(r, probe.expected)
        evidence.append(ev)
        if ok:
            right.add(r.comment_id)
        if got is not None:
            latest[r.author or f"?{r.comment_id}"] = got
    votes = Counter(latest.values())
    agree = votes.get(float(probe.expected), 0)
    joint = bool(latest) and agree * 2 > len(latest)
    return ({"individual": bool(right), "joint": joint, "answering_agents": len(latest),
             "agreeing_agents": agree,
             "why_joint": f"{agree} of {len(latest)} answering agents give {probe.expected}"},
            evidence, right)


def _tier2(probe: Probe, replies: Sequence[Reply]) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                             set[str]]:
    evidence, right, attempts = [], set(), 0
    for r in replies:
        got, ok, ev = _answer_evidence(r, probe.expected)
        evidence.append(ev)
        attempts += got is not None
        if ok:
            right.add(r.comment_id)
    return {"attempts": attempts, "correct_attempts": len(right), "correct": bool(right)}, \
        evidence, right


def _tier3(probe: Probe, replies: Sequence[Reply]) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                             set[str]]:
    step = int(probe.params["step"])
    post_value = float(probe.params["shown"][-1])
    by_id = {r.comment_id: r for r in replies}
    value: dict[str, float | None] = {}  # the number each reply counted, for its children
    evidence, right, depth = [], set(), {}
    steps = 0
    for r in replies:  # in time order, so a parent is read before its replies
        nums = numbers(r.content)
        if r.parent_id is None:
            parent, what = post_value, "post ends at"
        elif r.parent_id in by_id:
            parent = value.get(r.parent_id, stated_answer(by_id[r.parent_id].content))
            what = "parent says"
        else:
            parent, what = None, "parent unknown"
        if parent is None:
            value[r.comment_id] = stated_answer(r.content)
            evidence.append({"comment_id": r.comment_id, "author": r.author,
                             "reply": _excerpt(r.content), "expected": None,
                             "stated": value[r.comment_id], "correct": False,
                             "why": f"{what}: no number to continue"})
            continue
        steps += 1
        want = parent + step
        ok = any(abs(x - want) < 1e-9 for x in nums)
        got = want if ok else stated_answer(r.content)
        value[r.comment_id] = got
        if ok:
            right.add(r.comment_id)
            before = 0 if r.parent_id is None else depth.get(r.parent_id, -1)
            if before >= 0:
                depth[r.comment_id] = before + 1
        evidence.append({"comment_id": r.comment_id, "author": r.author,
                         "reply": _excerpt(r.content), "expected": want, "stated": got,
                         "correct": ok,
                         "why": f"{what} {parent:g}, step {step}: expected {want:g}, "
                                f"got {_fmt(got)}"})
    return ({"steps": steps, "correct_steps": len(right),
             "chain_length": max(depth.values(), default=0)}, evidence, right)


def _memory(replies: Sequence[Reply], lookup: CitationLookup | None
            ) -> tuple[dict[str, Any], list[dict[str, Any]], set[str]]:
    evidence, right = [], set()
    cited = valid = unknown = 0
    for r in replies:
        posts, accounts = citations(r.content)
        checks = []
        for kind, ref in [("post", p) for p in posts] + [("account", a) for a in accounts]:
            found = None if lookup is None else (
                lookup.post_exists(ref) if kind == "post" else lookup.agent_exists(ref))
            checks.append({"kind": kind, "ref": ref, "valid": found})
        ok = any(c["valid"] is True for c in checks)
        cited += bool(checks)
        valid += ok
        unknown += bool(checks) and not ok and any(c["valid"] is None for c in checks)
        if ok:
            right.add(r.comment_id)
        evidence.append({"comment_id": r.comment_id, "author": r.author,
                         "reply": _excerpt(r.content), "citations": checks, "correct": ok,
                         "why": ("no post or account cited" if not checks else
                                 "; ".join(f"{c['kind']} {c['ref']}: " + {
                                     True: "found in the store", False: "not in the store",
                                     None: "store cannot tell"}[c["valid"]] for c in checks))})
    return ({"got_comments": bool(replies), "cites": cited > 0, "valid": valid > 0,
             "citing_replies": cited, "valid_replies": valid, "unknown_replies": unknown},
            evidence, right)


def score(probe: Probe, replies: Iterable[Reply], lookup: CitationLookup | None = None, *,
          similarity: Callable[[str, str], float] | None = None) -> Score:
    """Score one probe thread; ``replies`` exclude the probe's own comments."""
    rs = sorted(replies, key=lambda r: (r.t, r.comment_id))
    if probe.tier == "I":
        figures, evidence, right = _tier1(probe, rs)
    elif probe.tier == "II":
        figures, evidence, right = _tier2(probe, rs)
    elif probe.tier == "III":
        figures, evidence, right = _tier3(probe, rs)
    else:
        figures, evidence, right = _memory(rs, lookup)
    seen: set[str] = set()
    grades = []
    for r, ev in zip(rs, evidence, strict=True):
        norm = " ".join(r.content.lower().split())
        grade, why = quality(r, probe, answered=r.comment_id in right, duplicate=norm in seen,
                             similarity=similarity)
        seen.add(norm)
        ev["quality"], ev["quality_label"], ev["quality_why"] = grade, QUALITY_LABELS[grade], why
        grades.append(grade)
    figures["quality"] = {QUALITY_LABELS[g]: c for g, c in sorted(Counter(grades).items())}
    return Score(probe.id, probe.tier, len(rs), figures, evidence)


# ---------------------------------------------------------------- the campaign

def _share(num: int, den: int) -> float | None:
    return num / den if den else None


def summarise(scores: Iterable[Score]) -> dict[str, dict[str, Any]]:
    """Figures by tier over posted probes, named as the papers name them."""
    by: dict[str, list[Score]] = {}
    for s in scores:
        by.setdefault(s.tier, []).append(s)
    out: dict[str, dict[str, Any]] = {}
    for tier, group in sorted(by.items()):
        n = len(group)
        f: dict[str, Any] = {"probes": n, "no_reply": sum(s.no_reply for s in group),
                             "no_reply_share": _share(sum(s.no_reply for s in group), n),
                             "replies": sum(s.replies for s in group)}
        if tier == "I":
            f["acc_individual"] = _share(sum(s.figures["individual"] for s in group), n)
            f["acc_joint"] = _share(sum(s.figures["joint"] for s in group), n)
        elif tier == "II":
            att = sum(s.figures["attempts"] for s in group)
            f.update(attempts=att, correct_attempts=sum(s.figures["correct_attempts"]
                                                        for s in group))
            f["attempt_accuracy"] = _share(f["correct_attempts"], att)
        elif tier == "III":
            steps = sum(s.figures["steps"] for s in group)
            f.update(steps=steps, correct_steps=sum(s.figures["correct_steps"] for s in group))
            f["continuation_accuracy"] = _share(f["correct_steps"], steps)
            f["chain_length_mean"] = sum(s.figures["chain_length"] for s in group) / n
            f["chain_length_max"] = max(s.figures["chain_length"] for s in group)
        else:
            for k in ("got_comments", "cites", "valid"):
                f[k] = sum(s.figures[k] for s in group)
            f["valid_citation_share"] = _share(f["valid"], n)
        grades = Counter[int]()
        for s in group:
            grades.update({QUALITY_LABELS.index(k): v for k, v in s.figures["quality"].items()})
        total = sum(grades.values())
        f["quality"] = {QUALITY_LABELS[g]: grades.get(g, 0) for g in range(6)}
        f["quality_mean"] = _share(sum(g * c for g, c in grades.items()), total)
        out[tier] = f
    return out


# ---------------------------------------------------------------- baseline band alert

@dataclass(frozen=True)
class BandAlert:
    figure: str
    value: float
    low: float
    high: float
    median: float
    points: int

    @property
    def message(self) -> str:
        side = "below" if self.value < self.low else "above"
        return (f"{self.figure} = {self.value:.3g} is {side} its baseline band "
                f"[{self.low:.3g}, {self.high:.3g}] (median {self.median:.3g} of "
                f"{self.points} earlier campaigns)")


def band_alert(figure: str, value: float | None, history: Sequence[float], *, k: float = 3.0,
               floor: float = 0.02, min_points: int = 5) -> BandAlert | None:
    """An alert when ``value`` leaves median ± max(k·1.4826·MAD, floor) of ``history``.

    Robust to the outliers a live society produces; ``floor`` keeps a flat history (MAD 0)
    from alerting on noise; fewer than ``min_points`` earlier values: no baseline, no alert.

    >>> a = band_alert("tier3_continuation", 0.1, [0.35, 0.3, 0.4, 0.33, 0.36])
    >>> a.low, a.high
    (0.261044, 0.438956)
    >>> band_alert("tier3_continuation", 0.34, [0.35, 0.3, 0.4, 0.33, 0.36]) is None
    True
    """
    if value is None or len(history) < min_points:
        return None
    xs = sorted(history)
    med = _median(xs)
    spread = max(k * 1.4826 * _median(sorted(abs(x - med) for x in xs)), floor)
    low, high = round(med - spread, 6), round(med + spread, 6)
    if low <= value <= high:
        return None
    return BandAlert(figure, value, low, high, med, len(xs))


def _median(xs: Sequence[float]) -> float:
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2

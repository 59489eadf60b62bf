"""The campaign report: every posted probe scored from the replies in Redis, figures by tier,
band alerts against earlier reports, and the ``probe_*`` Prometheus families.

Figures watched by the band alert (:data:`WATCHED`): Tier I individual accuracy, Tier III
continuation accuracy, the share of memory probes with a valid citation, and each tier's
no-reply share. Each is compared with the same figure in earlier reports (Redis history).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from service.probes.runner import Budget, day_of
from service.probes.scoring import (
    BandAlert,
    CitationLookup,
    Reply,
    Score,
    band_alert,
    score,
    summarise,
)
from service.probes.store import ProbeStore, Record, reply_of
from streams.events import CommentEvent

WATCHED: tuple[tuple[str, str], ...] = (
    ("I", "acc_individual"), ("III", "continuation_accuracy"), ("memory", "valid_citation_share"),
    ("I", "no_reply_share"), ("II", "no_reply_share"), ("III", "no_reply_share"),
    ("memory", "no_reply_share"))


Extra = Mapping[str, Sequence[Reply]]  # post id -> comments found elsewhere (an archive)


def tap_replies(items: Iterable[Any], post_ids: set[str],
                into: dict[str, list[Reply]]) -> Iterator[Any]:
    """Pass ``items`` (an archive's or a replay's events) through, keeping the comments on
    probe posts ``into`` post id -> replies, so one read serves other uses too."""
    for ev in items:
        if isinstance(ev, CommentEvent) and ev.post_id in post_ids:
            into.setdefault(ev.post_id, []).append(reply_of(ev))
        yield ev


def score_record(store: ProbeStore, rec: Record, lookup: CitationLookup | None, *,
                 agent_name: str | None = None,
                 similarity: Callable[[str, str], float] | None = None,
                 extra: Extra | None = None) -> Score:
    replies = store.replies(rec.post_id, exclude_author=agent_name,
                            extra=(extra or {}).get(rec.post_id, ()))
    return score(rec.probe, replies, lookup, similarity=similarity)


def score_campaign(store: ProbeStore, lookup: CitationLookup | None, *,
                   agent_name: str | None = None,
                   similarity: Callable[[str, str], float] | None = None,
                   extra: Extra | None = None) -> list[Score]:
    return [score_record(store, rec, lookup, agent_name=agent_name, similarity=similarity,
                         extra=extra)
            for _, rec in sorted(store.records().items())]


def alerts(summary: dict[str, dict[str, Any]], history: list[dict[str, Any]]) -> list[BandAlert]:
    out = []
    for tier, name in WATCHED:
        value = summary.get(tier, {}).get(name)
        past = [h["summary"][tier][name] for h in history
                if h.get("summary", {}).get(tier, {}).get(name) is not None]
        if (a := band_alert(f"tier_{tier}_{name}", value, past)) is not None:
            out.append(a)
    return out


def campaign_report(store: ProbeStore, lookup: CitationLookup | None, *,
                    agent_name: str | None = None, remember: bool = False,
                    similarity: Callable[[str, str], float] | None = None,
                    extra: Extra | None = None) -> dict[str, Any]:
    """Scores, summary and band alerts; ``remember`` adds the summary to the baseline;
    ``extra`` adds comments on probe posts found elsewhere (:func:`tap_replies`)."""
    scores = score_campaign(store, lookup, agent_name=agent_name, similarity=similarity,
                            extra=extra)
    summary = summarise(scores)
    history = store.history()
    found = alerts(summary, history)
    report = {"generated_at": datetime.now(UTC).isoformat(), "summary": summary,
              "archive_comments": sum(len(v) for v in (extra or {}).values()),
              "alerts": [{"figure": a.figure, "value": a.value, "low": a.low, "high": a.high,
                          "message": a.message} for a in found],
              "probes": [s.to_json() for s in scores]}
    if remember:
        store.push_history({"at": report["generated_at"], "summary": summary})
    return report


class ProbeCollector:
    """``moltscope_probe_*`` families by tier (no per-probe labels), scored at scrape time."""

    def __init__(self, store: ProbeStore, lookup: CitationLookup | None, budget: Budget, *,
                 agent_name: str | None = None, killed_by_settings: bool = False,
                 clock: Callable[[], float] | None = None) -> None:
        self.store, self.lookup, self.budget = store, lookup, budget
        self.agent_name = agent_name
        self.killed_by_settings = killed_by_settings
        self._clock = clock or (lambda: datetime.now(UTC).timestamp())

    def collect(self) -> Iterator[Metric]:
        summary = summarise(score_campaign(self.store, self.lookup, agent_name=self.agent_name))

        def gauge(name: str, doc: str, key: str, tiers: tuple[str, ...]) -> GaugeMetricFamily:
            fam = GaugeMetricFamily(f"moltscope_probe_{name}", doc, labels=["tier"])
            for t in tiers:
                if (v := summary.get(t, {}).get(key)) is not None:
                    fam.add_metric([t], float(v))
            return fam

        all_tiers = ("I", "II", "III", "memory")
        posted = CounterMetricFamily("moltscope_probe_posted", "Probes posted", labels=["tier"])
        replies = CounterMetricFamily("moltscope_probe_replies",
                                      "Replies to probes (the probes' own comments excluded)",
                                      labels=["tier"])
        for t in all_tiers:
            posted.add_metric([t], summary.get(t, {}).get("probes", 0))
            replies.add_metric([t], summary.get(t, {}).get("replies", 0))
        yield posted
        yield replies
        yield gauge("no_reply_ratio", "Share of posted probes without a reply", "no_reply_share",
                    all_tiers)
        yield gauge("accuracy_individual_ratio", "Tier I: share of probes with a correct reply",
                    "acc_individual", ("I",))
        yield gauge("accuracy_joint_ratio", "Tier I: share of threads converging on the answer",
                    "acc_joint", ("I",))
        yield gauge("attempt_accuracy_ratio", "Tier II: share of attempts that are correct",
                    "attempt_accuracy", ("II",))
        yield gauge("continuation_ratio", "Tier III: share of counting steps continued correctly",
                    "continuation_accuracy", ("III",))
        yield gauge("chain_length_mean", "Tier III: mean longest correct chain",
                    "chain_length_mean", ("III",))
        yield gauge("valid_citation_ratio", "Memory: share of probes with a valid citation",
                    "valid_citation_share", ("memory",))
        yield gauge("quality_mean", "Mean reply quality (0 spam .. 5 deep)", "quality_mean",
                    all_tiers)
        led = self.store.ledger().on(day_of(self._clock()))
        left = GaugeMetricFamily("moltscope_probe_budget_remaining",
                                 "Writes left in today's budget", labels=["kind"])
        left.add_metric(["post"], self.budget.posts_per_day - led.posts)
        left.add_metric(["comment"], self.budget.comments_per_day - led.comments)
        yield left
        yield GaugeMetricFamily("moltscope_probe_kill_switch", "1 when probe writes are refused "
                                "by the kill switch",
                                value=float(self.killed_by_settings or bool(self.store.killed())))
        band = GaugeMetricFamily("moltscope_probe_out_of_band",
                                 "1 when a probe figure leaves its baseline band",
                                 labels=["tier", "figure"])
        out = {a.figure for a in alerts(summary, self.store.history())}
        for t, name in WATCHED:
            if summary.get(t, {}).get(name) is not None:
                band.add_metric([t, name], float(f"tier_{t}_{name}" in out))
        yield band

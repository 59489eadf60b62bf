"""Probes (docs/probes.md): ``GET /v1/probes`` (figures by tier and one line a probe) and
``GET /v1/probes/{id}`` (stimulus, thread, scores and evidence), scored from Redis on request.

Citations are checked against the crawler's store (:class:`service.probes.lookup.RedisLookup`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from service.api.deps import RedisDep, SettingsDep
from service.config import Settings
from service.probes.lookup import RedisLookup
from service.probes.report import ProbeCollector, alerts, score_campaign, score_record
from service.probes.runner import Budget
from service.probes.scoring import summarise
from service.probes.store import ProbeStore

router = APIRouter(prefix="/v1/probes", tags=["probes"])


def _lookup(r: Any, settings: Settings) -> RedisLookup:
    return RedisLookup(r, prefix=settings.topic_prefix,
                       crawler_prefix=settings.crawler.checkpoint_prefix)


def collector(r: Any, settings: Settings) -> ProbeCollector:
    """The ``moltscope_probe_*`` families for ``GET /metrics`` (register it in the scrape's
    registry)."""
    return ProbeCollector(ProbeStore(r, settings.topic_prefix), _lookup(r, settings),
                          Budget.of(settings.probes), agent_name=settings.probes.agent_name,
                          killed_by_settings=settings.probes.kill_switch)


@router.get("")
def probes(r: RedisDep, settings: SettingsDep) -> dict[str, Any]:
    """The campaign: figures by tier, band alerts, and each posted probe in brief."""
    store = ProbeStore(r, settings.topic_prefix)
    records = store.records()
    scores = score_campaign(store, _lookup(r, settings), agent_name=settings.probes.agent_name)
    summary = summarise(scores)
    return {
        "summary": summary,
        "alerts": [a.message for a in alerts(summary, store.history())],
        "probes": [{"id": s.probe_id, "tier": s.tier, "post_id": records[s.probe_id].post_id,
                    "posted_at": records[s.probe_id].posted_at, "replies": s.replies,
                    "figures": s.figures} for s in scores],
    }


@router.get("/{probe_id}")
def probe(probe_id: str, r: RedisDep, settings: SettingsDep) -> dict[str, Any]:
    """One probe: what was posted, where, the replies' scores and the evidence for each."""
    store = ProbeStore(r, settings.topic_prefix)
    rec = store.record(probe_id)
    if rec is None:
        raise HTTPException(404, f"no posted probe {probe_id!r}")
    s = score_record(store, rec, _lookup(r, settings), agent_name=settings.probes.agent_name)
    return {"id": probe_id, "tier": rec.probe.tier, "stimulus": rec.probe.to_json(),
            "bank_version": rec.bank_version, "post_id": rec.post_id,
            "posted_at": rec.posted_at, "verified": rec.verified, "followups": rec.followups,
            "score": s.to_json()}

"""Grafana dashboards as code: ``python -m dashboards.build`` writes ``dashboards/grafana/*.json``.

Each dashboard is a list of rows of panels; each panel is one or more PromQL targets. The JSON
is Grafana's dashboard model (schema 39, Grafana 10/11), provisioned as files (see
``dashboards/provisioning``). Panels read a ``datasource`` template variable, so the same JSON
works whatever the Prometheus data source is called. The Helm chart cannot read files outside
itself, so the same JSON and a copy of ``dashboards/prometheus/moltscope.rules.yml`` are also
written under ``helm/moltscope/files/`` (its dashboards ConfigMap and PrometheusRule).

Every moltscope API replica serves the same values (read from Redis at scrape time), so the
queries aggregate replicas away with ``max``, never ``sum``, keeping only the labels the
metric itself carries. The crawler's metrics come from one source process: ``sum`` there.

``python -m dashboards.build --check`` exits 1 when a committed file is not the generator's.

>>> overview = next(d for d in DASHBOARDS if d.uid == "moltscope-overview")
>>> model = render(overview)
>>> model["uid"], model["panels"][0]["type"]
('moltscope-overview', 'row')
>>> [t.expr for t in overview.rows[0].panels[0].targets][0]
'max(rate(moltscope_posts_total[$__rate_interval]))'
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[1]
GRAFANA_DIR = Path("dashboards/grafana")
CHART_FILES = Path("helm/moltscope/files")
RULES = Path("dashboards/prometheus/moltscope.rules.yml")
RATE = "$__rate_interval"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
GRID_WIDTH = 24
PANEL_HEIGHT = 8


@dataclass(frozen=True, slots=True)
class Target:
    expr: str
    legend: str = ""


@dataclass(frozen=True, slots=True)
class Panel:
    title: str
    targets: tuple[Target, ...]
    unit: str = "short"
    description: str = ""
    kind: Literal["timeseries", "stat"] = "timeseries"
    width: int = 12
    min: float | None = None
    max: float | None = None


@dataclass(frozen=True, slots=True)
class Row:
    title: str
    panels: tuple[Panel, ...]


@dataclass(frozen=True, slots=True)
class Dashboard:
    uid: str
    title: str
    description: str
    rows: tuple[Row, ...]
    tags: tuple[str, ...] = field(default=("moltscope",))

    @property
    def filename(self) -> str:
        return f"{self.uid.removeprefix('moltscope-')}.json"

    def targets(self) -> Iterator[tuple[str, Target]]:
        """Every (panel title, target) of the dashboard, in order."""
        for row in self.rows:
            for panel in row.panels:
                for t in panel.targets:
                    yield panel.title, t


def rate(metric: str, by: str = "") -> str:
    """Per-second rate of a counter, replicas aggregated away (``by``: labels kept)."""
    grouping = f" by ({by})" if by else ""
    return f"max{grouping}(rate({metric}[{RATE}]))"


def gauge(metric: str, by: str = "") -> str:
    grouping = f" by ({by})" if by else ""
    return f"max{grouping}({metric})"


def by_window(metric: str) -> tuple[Target, ...]:
    return (Target(gauge(metric, "window"), "{{window}}"),)


def quantiles(metric: str) -> tuple[Target, ...]:
    """A population distribution exported as ``{quantile}`` gauges: one line a quantile."""
    return (Target(gauge(metric, "quantile"), "q{{quantile}}"),)


def histogram_quantiles(metric: str, qs: tuple[str, ...] = ("0.5", "0.9"), name: str = "",
                        ) -> tuple[Target, ...]:
    """Quantiles over agents of a per-agent value exported as cumulative ``le`` buckets
    (gauges: the population's current histogram, not a rate)."""
    return tuple(Target(f"histogram_quantile({q}, max by (le)({metric}_bucket))",
                        f"{name} p{q.removeprefix('0.').ljust(2, '0')}".strip()) for q in qs)


# ------------------------------------------------------------------------------ dashboards

OVERVIEW = Dashboard(
    uid="moltscope-overview",
    title="moltscope / Society overview",
    description="Activity of the society (event time) and the health of the pipeline.",
    rows=(
        Row("Activity", (
            Panel("Posts, comments and vote changes per second", (
                Target(rate("moltscope_posts_total"), "posts"),
                Target(rate("moltscope_comments_total"), "comments"),
                Target(rate("moltscope_vote_changes_total"), "vote changes"),
            ), unit="ops", description="Rates of the distinct-item counters, by arrival time."),
            Panel("New agents per second", (
                Target(rate("moltscope_agents_total"), "new agents"),
            ), unit="ops", description="Agents posting or commenting for the first time."),
            Panel("Active agents in the current UTC window",
                  by_window("moltscope_activity_active_agents"),
                  description="Distinct authors of a post or comment in the window holding "
                              "the latest event time."),
            Panel("New agents in the current UTC window",
                  by_window("moltscope_activity_new_agents")),
            Panel("Active submolts in the current UTC window",
                  by_window("moltscope_activity_active_submolts")),
            Panel("Comments per post in the current UTC window",
                  by_window("moltscope_activity_comments_per_post")),
            Panel("Posts in the current UTC window", by_window("moltscope_activity_posts")),
            Panel("Totals", (
                Target(gauge("moltscope_posts_total"), "posts"),
                Target(gauge("moltscope_comments_total"), "comments"),
                Target(gauge("moltscope_agents_total"), "agents"),
                Target(gauge("moltscope_submolts_total"), "submolts"),
            ), kind="stat"),
        )),
        Row("Pipeline health", (
            Panel("Dead letters per second by reason", (
                Target(rate("moltscope_dead_letters_total", "reason"), "{{reason}}"),
            ), unit="ops", description="Records the normaliser or the worker could not use."),
            Panel("Duplicate events per second", (
                Target(rate("moltscope_duplicate_events_total"), "duplicates"),
            ), unit="ops", description="Events dropped as repeats of an id (crawler revisits)."),
            Panel("Events processed per second", (
                Target(rate("moltscope_events_processed_total"), "processed"),
            ), unit="ops"),
            Panel("Worker snapshot age", (
                Target("time() - max(moltscope_snapshot_timestamp_seconds)", "age"),
            ), unit="s", description="Seconds since the worker last wrote its snapshot to "
                                     "Redis: grows without bound when the reducer is down."),
            Panel("Reducer delay (wall clock - event time)", (
                Target(gauge("moltscope_reducer_delay_seconds"), "delay"),
            ), unit="s", description="Wall clock minus the event time the reducer has reached, "
                                     "measured by the worker holding it (large for replays of "
                                     "old archives; alert MoltscopeReducerDelayHigh)."),
            Panel("Consumer lag by topic and partition", (
                Target(gauge("moltscope_consumer_lag_records", "topic, partition"),
                       "{{topic}} {{partition}}"),
            ), description="Records in each partition not yet read by the worker's agent (log "
                           "end offset minus its next offset); alert MoltscopeConsumerLagGrowing."),
            Panel("Embedding queue and rate", (
                Target(gauge("moltscope_embedding_queue_texts"), "queued texts"),
                Target(rate("moltscope_embedded_texts_total"), "texts embedded per second"),
            ), description="Texts handed to the embedders and not yet encoded (all workers), "
                           "and the encoding rate."),
            Panel("Embedder busy share", (
                Target(rate("moltscope_embedding_seconds_total"), "busy"),
            ), unit="percentunit", description="Seconds spent encoding per second of wall clock, "
                                               "all workers (1 = one core's worth).", min=0),
            Panel("Reducer checkpoint age", (
                Target(gauge("moltscope_reducer_checkpoint_age_seconds"), "age"),
                Target("3 * " + gauge("moltscope_reducer_checkpoint_interval_seconds"),
                       "alert threshold (3 intervals)"),
            ), unit="s", description="Seconds the reducer's state has been ahead of its Redis "
                                     "checkpoint (what a restart would replay); 0 when the "
                                     "checkpoint holds it all."),
            Panel("Crawler request budget use", (
                Target("sum(rate(moltscope_crawler_requests_total[$__rate_interval])) / "
                       "sum(moltscope_crawler_request_budget_per_second)", "budget use"),
            ), unit="percentunit", description="The crawler's requests per second over the pace "
                                               "its rate limit allows (1 = the whole budget).",
                  min=0),
        )),
        Row("Coverage", (
            Panel("Comment capture against the platform (GET /stats)", (
                Target("sum by (kind)(moltscope_crawler_capture_ratio)", "{{kind}}"),
            ), unit="percentunit", description="Posts and comments created since the crawler's "
                                               "first GET /stats that it emitted, over the "
                                               "platform's growth since then (alert "
                                               "MoltscopeCommentCaptureLow).", min=0),
            Panel("Comment deficit of the crawled posts", (
                Target("sum(moltscope_crawler_comment_deficit)", "comments missing"),
                Target("sum(moltscope_crawler_posts_with_deficit)", "posts with a deficit"),
                Target("sum(moltscope_crawler_backfill_pending_posts)", "posts to backfill"),
            ), description="Over the crawler's revisit queue: comments the platform counts "
                           "(comment_count) and the crawler has not received; posts the "
                           "backfill still has to go through (alert "
                           "MoltscopeCommentDeficitGrowing)."),
            Panel("Comment backfill per second", (
                Target("sum(rate(moltscope_crawler_backfill_requests_total[$__rate_interval]))",
                       "requests"),
                Target("sum(rate(moltscope_crawler_backfill_comments_total[$__rate_interval]))",
                       "comments recovered"),
            ), unit="ops", description="GET /posts/{id}/comments in the other sort orders, the "
                                       "largest deficit first, within backfill_share of the "
                                       "request budget."),
            Panel("Platform totals (GET /stats)", (
                Target("sum by (kind)(moltscope_crawler_platform_count)", "{{kind}}"),
            ), kind="stat", description="The platform's own counts of agents, submolts, "
                                        "posts and comments."),
            Panel("Comment capture in the pipeline's events", (
                Target(gauge("moltscope_coverage_comment_capture_ratio", "scope"), "{{scope}}"),
            ), unit="percentunit", description="Comments received over max(comment_count, "
                                               "received) per post: every post (all) and the "
                                               "posts of the last 7 days (horizon). Live, a "
                                               "post's count is the one at discovery.",
                  min=0, max=1),
            Panel("Comment deficit in the pipeline's events", (
                Target(gauge("moltscope_coverage_comment_deficit", "scope"), "{{scope}}"),
                Target(gauge("moltscope_coverage_orphan_comments"), "orphan comments"),
            ), description="Comments counted by the platform and never received; comments "
                           "received whose post was not."),
        )),
    ),
)

SOCIETY = Dashboard(
    uid="moltscope-society",
    title="moltscope / Society layer",
    description="Semantic centre, diversity, cluster tightening and lexical turnover "
                "(Li, Li, Zhou 2026, society layer).",
    rows=(
        Row("Semantic centre and diversity", (
            Panel("Centroid similarity", (
                Target(gauge("moltscope_centroid_similarity", "vs"), "vs {{vs}}"),
            ), unit="percentunit", description="Cosine of the current window's centroid with "
                                               "the previous window's and the all-time one.",
                  max=1),
            Panel("Pairwise similarity", (
                Target(gauge("moltscope_pairwise_similarity", "scope"), "{{scope}}"),
            ), unit="percentunit", description="Mean cosine over post pairs within the current "
                                               "window and across it and the previous one.",
                  max=1),
            Panel("kNN-10 similarity", (
                Target(gauge("moltscope_knn10_similarity"), "mean S10"),
            ), unit="percentunit", description="Mean cosine of a post to its 10 nearest "
                                               "same-window posts.", max=1),
            Panel("kNN-10 distribution shift (JS divergence)", (
                Target(gauge("moltscope_knn10_js_divergence"), "JSD"),
            ), unit="none", description="Jensen-Shannon divergence (bits) of the S10 "
                                        "distribution, current vs previous window.", min=0),
        )),
        Row("Lexical turnover", (
            Panel("N-gram birth rate by n", (
                Target(gauge("moltscope_ngram_birth_rate", "n"), "n={{n}}"),
            ), unit="percentunit", description="Share of the day's active n-grams born that "
                                               "day (latest settled day).", min=0, max=1),
            Panel("N-gram death rate by n", (
                Target(gauge("moltscope_ngram_death_rate", "n"), "n={{n}}"),
            ), unit="percentunit", description="Share of the previous day's active n-grams "
                                               "that died then.", min=0, max=1),
            Panel("N-grams tracked by n", (
                Target(gauge("moltscope_ngrams_tracked", "n"), "n={{n}}"),
            )),
        )),
        Row("Inputs and state", (
            Panel("Posts embedded per second", (
                Target(rate("moltscope_embedded_posts_total"), "embedded"),
            ), unit="ops", description="Post vectors added to the centroid state."),
            Panel("Verbatim-duplicate posts excluded per second", (
                Target(rate("moltscope_verbatim_excluded_total"), "excluded"),
            ), unit="ops", description="Posts whose exact text was already seen the cleaning "
                                       "threshold of times: kept out of the lexical and "
                                       "semantic metrics."),
            Panel("Late items skipped per second", (
                Target(rate("moltscope_ngram_late_total"), "n-grams"),
                Target(rate("moltscope_knn_late_total"), "kNN"),
            ), unit="ops", description="Events older than the engines' lateness bound."),
            Panel("Engine state memory", (
                Target(gauge("moltscope_ngram_state_bytes"), "n-grams"),
                Target(gauge("moltscope_knn_state_bytes"), "kNN"),
            ), unit="bytes"),
        )),
        Row("Two planes: what agents say and what they do (per-agent populations)", (
            Panel("Content plane: semantic drift per agent", quantiles("moltscope_agent_drift"),
                  unit="none", description="Quantiles over agents of each agent's drift (its "
                                           "posts' centroid movement); per-agent values at "
                                           "GET /v1/agents/{name}."),
            Panel("Content plane: feedback (NP) per agent", quantiles("moltscope_feedback_np"),
                  unit="none", description="Quantiles over agents of the feedback figure NP "
                                           "(does an agent move towards what was upvoted)."),
            Panel("Content plane: impact per agent", quantiles("moltscope_impact_agent_delta"),
                  unit="none", description="Quantiles over agents of the change their posts "
                                           "bring to the replies they get."),
            Panel("Action plane: median gap between an agent's acts", histogram_quantiles(
                "moltscope_action_agent_gap_median_seconds"), unit="s",
                  description="Over agents (histogram of per-agent values): the typical pause "
                              "between two acts of one agent."),
            Panel("Action plane: regularity of an agent's acts", (
                *histogram_quantiles("moltscope_action_agent_gap_cv", ("0.5",), "gap CV"),
                *histogram_quantiles("moltscope_action_agent_periodicity", ("0.5",),
                                     "periodicity"),
            ), unit="none", description="Medians over agents: coefficient of variation of the "
                                        "gaps (0 = clockwork) and periodicity."),
            Panel("Action plane: reciprocity and replies to super-nodes", (
                *histogram_quantiles("moltscope_action_agent_reciprocity", ("0.5",),
                                     "reciprocity"),
                *histogram_quantiles("moltscope_action_agent_supernode_reply_share", ("0.5",),
                                     "super-node reply share"),
                Target(gauge("moltscope_action_reciprocity"), "reciprocity (population)"),
            ), unit="percentunit", description="Medians over agents, and the population's "
                                               "reciprocity.", min=0, max=1),
            Panel("Agents tracked by plane", (
                Target(gauge("moltscope_agent_drift_agents"), "drift"),
                Target(gauge("moltscope_feedback_agents"), "feedback"),
                Target(gauge("moltscope_impact_agents"), "impact"),
                Target(gauge("moltscope_action_agents"), "action"),
            ), description="Agents each per-agent engine holds (the content plane needs "
                           "embedded posts)."),
        )),
    ),
)

COLLECTIVE = Dashboard(
    uid="moltscope-collective",
    title="moltscope / Collective layer",
    description="Influence concentration, super-nodes, threads, cascades, roles and the "
                "probes' collective-intelligence figures.",
    rows=(
        Row("Influence", (
            Panel("PageRank mass of the top k agents", (
                Target(gauge("moltscope_pagerank_top_mass", "graph, k"), "{{graph}} top {{k}}"),
            ), unit="percentunit", min=0, max=1),
            Panel("Super-nodes", (
                Target(gauge("moltscope_supernodes", "graph"), "{{graph}}"),
            ), description="Agents above the largest PageRank gap."),
            Panel("Super-node turnover (Jaccard, consecutive windows)", (
                Target(gauge("moltscope_supernode_turnover_jaccard", "graph"), "{{graph}}"),
            ), unit="percentunit", description="1 means the same super-nodes as the previous "
                                               "window, 0 a complete change.", min=0, max=1),
            Panel("Interaction graph size", (
                Target(gauge("moltscope_graph_nodes", "graph"), "nodes {{graph}}"),
                Target(gauge("moltscope_graph_edges", "graph"), "edges {{graph}}"),
            )),
        )),
        Row("Threads", (
            Panel("Thread depth by popularity bucket", (
                Target(gauge("moltscope_thread_depth", "bucket"), "{{bucket}}"),
            ), description="Mean reply depth; the paper finds about 1.0 at every popularity."),
            Panel("Distinct repliers by popularity bucket", (
                Target(gauge("moltscope_thread_repliers", "bucket"), "{{bucket}}"),
            )),
            Panel("Uncommented posts by popularity bucket", (
                Target(gauge("moltscope_threads_uncommented_ratio", "bucket"), "{{bucket}}"),
            ), unit="percentunit", min=0, max=1),
        )),
        Row("Cascades and roles", (
            Panel("Cascades", (
                Target(gauge("moltscope_cascades"), "cascades"),
                Target(gauge("moltscope_cascade_size_max"), "largest (adopters)"),
            ), description="N-grams adopted by at least 10 distinct agents, and the size of "
                           "the largest."),
            Panel("Cascade size power-law alpha", (
                Target(gauge("moltscope_cascade_alpha"), "alpha"),
            ), unit="none", description="Discrete power-law fit (published 2.57)."),
            Panel("Peripheral role share", (
                Target(gauge("moltscope_roles_periphery_ratio"), "periphery"),
            ), unit="percentunit", description="Share of agents in the peripheral role "
                                               "cluster (published 93.5%).", min=0, max=1),
        )),
        Row("Probes (Superminds Test, docs/probes.md)", (
            Panel("Collective-intelligence figures", (
                Target(gauge("moltscope_probe_accuracy_individual_ratio"), "I any correct"),
                Target(gauge("moltscope_probe_accuracy_joint_ratio"), "I converged"),
                Target(gauge("moltscope_probe_attempt_accuracy_ratio"), "II attempts correct"),
                Target(gauge("moltscope_probe_continuation_ratio"), "III continued"),
                Target(gauge("moltscope_probe_valid_citation_ratio"), "memory valid citation"),
            ), unit="percentunit", description="Scored from the probe threads at scrape "
                                               "time (published: Tier III 6 of 17 steps, "
                                               "Tier II 11 of 12 attempts).", min=0, max=1),
            Panel("Probes without a reply by tier", (
                Target(gauge("moltscope_probe_no_reply_ratio", "tier"), "{{tier}}"),
            ), unit="percentunit", description="Published: 98.4% of Tier I posts, 35 of 50 "
                                               "Tier III posts.", min=0, max=1),
            Panel("Figures out of their baseline band", (
                Target(gauge("moltscope_probe_out_of_band", "tier, figure"),
                       "{{tier}} {{figure}}"),
            ), description="1 when a watched figure leaves median ± 3 MAD of earlier "
                           "reports (alert MoltscopeProbeFigureOutOfBand).", min=0, max=1),
            Panel("Reply quality by tier (0 spam .. 5 deep)", (
                Target(gauge("moltscope_probe_quality_mean", "tier"), "{{tier}}"),
            ), unit="none", min=0, max=5),
            Panel("Tier III mean longest correct chain", (
                Target(gauge("moltscope_probe_chain_length_mean"), "chain"),
            ), unit="none", min=0),
            Panel("Probes posted and replies by tier", (
                Target(gauge("moltscope_probe_posted_total", "tier"), "posted {{tier}}"),
                Target(gauge("moltscope_probe_replies_total", "tier"), "replies {{tier}}"),
            )),
            Panel("Probe writes left today and kill switch", (
                Target(gauge("moltscope_probe_budget_remaining", "kind"), "{{kind}}s left"),
                Target(gauge("moltscope_probe_kill_switch"), "kill switch"),
            ), kind="stat", description="The daily budget (clamped under the platform's "
                                        "limits); kill switch 1 = every write refused."),
        )),
    ),
)

ALERTS = Dashboard(
    uid="moltscope-alerts",
    title="moltscope / Alerts",
    description="Incidents the detectors raise and their delivery to webhooks.",
    rows=(
        Row("Incidents", (
            Panel("Alerts firing by type", (
                Target(gauge("moltscope_alerts_firing", "type"), "{{type}}"),
            ), description="Open incidents."),
            Panel("Alerts fired per second by type and severity", (
                Target(rate("moltscope_alerts_total", "type, severity"),
                       "{{type}} {{severity}}"),
            ), unit="ops"),
            Panel("Operations alerts firing (moltscope.rules.yml)", (
                Target('count by (alertname, severity)'
                       '(ALERTS{alertname=~"Moltscope.+", alertstate="firing"})',
                       "{{alertname}} {{severity}}"),
            ), description="Prometheus's own alerts from dashboards/prometheus/"
                           "moltscope.rules.yml (incidents, staleness, dead letters, "
                           "crawler)."),
        )),
        Row("Webhook delivery", (
            Panel("Webhook deliveries per second by outcome", (
                Target(rate("moltscope_webhook_deliveries_total", "outcome"), "{{outcome}}"),
            ), unit="ops", description="Delivered, failed (retried later) and given up."),
            Panel("Webhook backlog", (
                Target(gauge("moltscope_webhook_backlog", "webhook"), "{{webhook}}"),
            ), description="Messages waiting for delivery, per webhook: grows while a "
                           "receiver is down (retried with backoff, given up after 7 days)."),
        )),
    ),
)

CRAWLER = Dashboard(
    uid="moltscope-crawler",
    title="moltscope / Crawler",
    description="The Moltbook crawler: requests, rate limiting, revisits and freshness.",
    rows=(
        Row("Requests", (
            Panel("Requests per second by status", (
                Target("sum by (status)(rate(moltscope_crawler_requests_total[$__rate_interval]))",
                       "{{status}}"),
            ), unit="reqps"),
            Panel("429 answers per second", (
                Target("sum(rate(moltscope_crawler_rate_limited_total[$__rate_interval]))",
                       "429"),
            ), unit="reqps"),
            Panel("Share of time backing off", (
                Target("sum(rate(moltscope_crawler_backoff_seconds_total[$__rate_interval]))",
                       "backoff"),
            ), unit="percentunit", description="Seconds waited on back-off and 429s per "
                                               "second of wall clock."),
            Panel("New posts discovered per second", (
                Target("sum(rate(moltscope_crawler_posts_discovered_total[$__rate_interval]))",
                       "posts"),
            ), unit="ops"),
        )),
        Row("Freshness", (
            Panel("Revisit queue length", (
                Target("sum(moltscope_crawler_revisit_queue_length)", "posts"),
            )),
            Panel("Event lag (observed - event time)", tuple(
                Target("histogram_quantile(" + q + ", sum by (le)(rate("
                       "moltscope_crawler_event_lag_seconds_bucket[$__rate_interval])))",
                       "p" + q.removeprefix("0.").ljust(2, "0"))
                for q in ("0.5", "0.9", "0.99")
            ), unit="s"),
        )),
    ),
)

DASHBOARDS: tuple[Dashboard, ...] = (OVERVIEW, SOCIETY, COLLECTIVE, ALERTS, CRAWLER)


# ------------------------------------------------------------------------------ rendering

def _panel(p: Panel, pid: int, x: int, y: int) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": p.unit}
    if p.min is not None:
        defaults["min"] = p.min
    if p.max is not None:
        defaults["max"] = p.max
    out: dict[str, Any] = {
        "id": pid,
        "type": p.kind,
        "title": p.title,
        "description": p.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": PANEL_HEIGHT, "w": p.width, "x": x, "y": y},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "targets": [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": t.expr,
                     "legendFormat": t.legend or "__auto", "range": p.kind == "timeseries",
                     "instant": p.kind == "stat"}
                    for i, t in enumerate(p.targets)],
    }
    if p.kind == "timeseries":
        out["options"] = {"legend": {"displayMode": "list", "placement": "bottom",
                                     "showLegend": True},
                          "tooltip": {"mode": "multi", "sort": "desc"}}
    else:
        out["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "",
                                            "values": False},
                          "colorMode": "value", "graphMode": "none", "textMode": "auto"}
    return out


def render(d: Dashboard) -> dict[str, Any]:
    """Grafana's JSON model of ``d``: rows across the full width, panels left to right."""
    panels: list[dict[str, Any]] = []
    pid, y = 1, 0
    for row in d.rows:
        panels.append({"id": pid, "type": "row", "title": row.title, "collapsed": False,
                       "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y}, "panels": []})
        pid, y, x = pid + 1, y + 1, 0
        for p in row.panels:
            if x + p.width > GRID_WIDTH:
                x, y = 0, y + PANEL_HEIGHT
            panels.append(_panel(p, pid, x, y))
            pid, x = pid + 1, x + p.width
        y += PANEL_HEIGHT
    return {
        "uid": d.uid,
        "title": d.title,
        "description": d.description,
        "tags": list(d.tags),
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "utc",
        "templating": {"list": [{
            "name": "datasource", "label": "Prometheus", "type": "datasource",
            "query": "prometheus", "current": {}, "hide": 0, "refresh": 1,
            "includeAll": False, "multi": False, "options": [], "regex": "",
        }]},
        "annotations": {"list": []},
        "links": [{"type": "dashboards", "tags": ["moltscope"], "asDropdown": True,
                   "title": "moltscope", "includeVars": False, "keepTime": True}],
        "panels": panels,
    }


def dumps(model: dict[str, Any]) -> str:
    return json.dumps(model, indent=2, ensure_ascii=False) + "\n"


def generated() -> dict[Path, str]:
    """Path (relative to the checkout) -> text of every generated file, exactly as committed."""
    out: dict[Path, str] = {}
    for d in DASHBOARDS:
        text = dumps(render(d))
        out[GRAFANA_DIR / d.filename] = text
        out[CHART_FILES / "dashboards" / d.filename] = text
    out[CHART_FILES / RULES.name] = (ROOT / RULES).read_text()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout to write into")
    ap.add_argument("--check", action="store_true",
                    help="compare with the files under --root instead of writing them")
    args = ap.parse_args(argv)
    files = generated()
    if args.check:
        stale = sorted(str(rel) for rel, text in files.items()
                       if not (args.root / rel).exists() or (args.root / rel).read_text() != text)
        dirs = {rel.parent for rel in files if rel.suffix == ".json"}
        extra = sorted(str(p.relative_to(args.root)) for d in dirs
                       for p in (args.root / d).glob("*.json")
                       if p.relative_to(args.root) not in files)
        for name in stale + extra:
            print(f"{args.root / name}: not what dashboards/build.py generates", file=sys.stderr)
        return 1 if stale or extra else 0
    for rel, text in files.items():
        (args.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (args.root / rel).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Settings: the one place for ports, URLs, windows and thresholds.

Every field is read from the environment as ``MOLTSCOPE_<FIELD>`` (upper case); nested groups
use ``__``, e.g. ``MOLTSCOPE_KAFKA_URL=kafka://broker:9092`` or
``MOLTSCOPE_CRAWLER__REQUESTS_PER_MINUTE=30``.

>>> Settings(kafka_url="kafka://10.0.0.1:9092").kafka_bootstrap
'10.0.0.1:9092'
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from detectors.runner import DetectorConfig
from service.delivery.dispatcher import DispatcherConfig
from streams.agent_stage import ENGINES, EXPIRE_STEP_S, AgentStageConfig
from streams.order import ALLOWED_LATENESS_S, IDLE_PARTITION_S
from streams.partition import DEDUP_CAPACITY
from streams.pipeline import PipelineConfig
from streams.reducer import IDLE_AFTER_S
from streams.state.actions import ActionConfig
from streams.state.drift import DriftConfig
from streams.state.feedback import FeedbackConfig
from streams.state.impact import ImpactConfig

#: The engines' defaults: the settings below take theirs from here, never restate them.
_PIPELINE = PipelineConfig()


def _seconds(value: timedelta | float) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _as(default: timedelta | float, seconds: float) -> timedelta | float:
    """``seconds`` in the type of the engine's own default."""
    return timedelta(seconds=seconds) if isinstance(default, timedelta) else seconds


class EmbeddedSettings(BaseModel):
    """The embedded stack that ``moltscope up`` starts on loopback."""

    enabled: bool = Field(True, description="Start Tansu and Redis ourselves")
    kafka_port: int = 19092
    redis_port: int = 16379
    data_dir: Path = Path("var")
    restart_backoff_s: float = Field(1.0, gt=0, description="First wait before a crashed "
                                     "worker, API or source is restarted; doubles while it "
                                     "keeps crashing")
    restart_backoff_cap_s: float = Field(30.0, gt=0, description="Longest restart wait")
    restart_stable_s: float = Field(60.0, description="Up this long, a child's next crash "
                                    "waits restart_backoff_s again")


class CrawlerSettings(BaseModel):
    base_url: str = "https://www.moltbook.com/api/v1"
    api_key: SecretStr | None = None
    requests_per_minute: float = Field(55.0, description="Request pace: under the platform's "
                                       "60/min sliding minute with room for arrival jitter")
    page_limit: int = 50
    timeout_s: float = 30.0
    burst: float = Field(1.0, description="Token bucket size: requests allowed back to back")
    horizon_s: float = Field(3 * 86400.0, description="Posts older than this are neither found "
                             "nor revisited")
    discovery_interval_s: float = Field(60.0, description="Pause between discovery walks")
    sweep_interval_s: float = Field(6 * 3600.0, description="How often a walk goes down to "
                                    "the horizon (finds what paging skipped)")
    rewalk_pages: int = Field(1, description="Pages an incremental walk reads past known ground")
    offset_overlap: int = Field(2, description="Items of the previous offset page re-read")
    max_walk_pages: int = Field(5000, description="Safety cap on pages in one walk")
    revisit_min_s: float = 120.0
    probe_horizon_s: float = Field(7 * 86400.0, description="Probe posts (docs/probes.md) are "
                                   "revisited every revisit_min_s this long after creation")
    revisit_max_s: float = 6 * 3600.0
    revisit_age_fraction: float = Field(0.25, description="Revisit interval as a fraction of "
                                        "the post's age, before activity speed-up and clamping")
    max_retries: int = Field(5, description="Retries of a 5xx/timeout/broken answer")
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 300.0
    ip_block_backoff_s: float = Field(30.0, description="Wait after a header-less 429 (the "
                                      "per-IP limit); doubles while they repeat")
    ip_block_backoff_cap_s: float = Field(900.0, description="Longest wait after repeated "
                                          "header-less 429s")
    fetch_profiles: bool = True
    backfill_share: float = Field(0.25, ge=0.0, le=1.0, description="Share of the request "
                                  "pace the comment backfill may use (0: off)")
    comments_limit: int = Field(500, description="Comments asked for per backfill request "
                                "(the API's maximum)")
    backfill_sorts: tuple[str, ...] = Field(("new", "top", "old", "controversial"),
                                            description="Comment sort orders a capped "
                                            "backfill goes through, in turn")
    stats_interval_s: float = Field(300.0, description="How often GET /stats is read (the "
                                    "platform's totals, for the capture ratio; 0: never)")
    checkpoint_prefix: str = "moltscope:crawler"
    metrics_port: int = Field(9108, description="Port of the crawler's own /metrics")
    metrics_host: str = Field("127.0.0.1", description="Address of the crawler's /metrics "
                              "(0.0.0.0 in a container)")


class SocietySettings(BaseModel):
    """The society-wide stage (see ``streams.pipeline.PipelineConfig`` for the meanings and the
    defaults, which are the engines')."""

    embed_comments: bool = _PIPELINE.embed_comments
    window: Literal["day", "hour"] = _PIPELINE.window
    verbatim_threshold: int = _PIPELINE.verbatim_threshold
    ngram_grace_days: int | None = _PIPELINE.ngram_grace_days
    ngram_max_tracked: int | None = Field(
        _PIPELINE.ngram_max_tracked,
        description="Live n-gram tables' bound (oldest days' singletons evicted beyond it)")
    pagerank_window_s: float = Field(_seconds(_PIPELINE.influence.window),
                                     description="The interaction graph's sliding window")
    pagerank_step_s: float = Field(_seconds(_PIPELINE.influence.step),
                                   description="How often the sliding window advances "
                                   "(PageRank refresh, super-nodes)")
    detectors: bool = _PIPELINE.detectors_enabled
    coverage_horizon_s: float = Field(_PIPELINE.coverage.horizon_s, description="Comment "
                                      "coverage: per-post records kept this long after a "
                                      "post's creation (event time)")
    embed_batch: int = Field(64, description="Texts a batch for the model")
    embed_wait_s: float = Field(0.5, description="Longest wait to fill a batch")
    vector_cache_ttl_s: int = 7 * 86400


class IndividualSettings(BaseModel):
    """The per-agent stage (``streams.agent_stage``): which per-agent engines run, and the grid
    of event time its state expires on."""

    engines: list[str] = Field(list(ENGINES), description="Per-agent engines that run: "
                               + ", ".join(ENGINES))
    expire_step_s: float = Field(EXPIRE_STEP_S, gt=0, description="Event-time seconds between "
                                 "two expiries of the per-agent state")
    whole_history: bool = Field(False, description="Lift the per-agent engines' time horizons "
                                "(action window, idle agents' life): every act counts; a "
                                "replay report always does (it covers the whole archive)")
    # each engine's own settings (defaults and meanings in its module, docs/metrics.md), e.g.
    # MOLTSCOPE_INDIVIDUALS__DRIFT__MIN_POSTS=20
    drift: DriftConfig = Field(default_factory=DriftConfig)
    feedback: FeedbackConfig = Field(default_factory=FeedbackConfig)
    impact: ImpactConfig = Field(default_factory=ImpactConfig)
    action: ActionConfig = Field(default_factory=ActionConfig)


class ProbeSettings(BaseModel):
    """Probing agents (``moltscope probe``, docs/probes.md). Nothing is posted unless
    ``api_key`` is set AND ``live`` is true; the budget is clamped under the platform's limits."""

    api_key: SecretStr | None = Field(None, description="The operator's Moltbook agent key")
    agent_name: str | None = Field(None, description="The probing agent's name: its comments "
                                   "are never scored as replies")
    base_url: str = "https://www.moltbook.com/api/v1"
    live: bool = Field(False, description="Explicit switch: without it nothing is posted")
    kill_switch: bool = Field(False, description="Refuse every write (also `moltscope probe "
                              "kill`, a Redis flag)")
    bank_version: str = "v1"
    tiers: list[Literal["I", "II", "III", "memory"]] = Field(
        ["I", "II", "III", "memory"], description="Tiers to run")
    posts_per_day: int = Field(12, description="Daily post budget (clamped to 80% of 48)")
    comments_per_day: int = Field(30, description="Daily comment budget (clamped to 80% of 50)")
    post_interval_s: float = Field(7200.0, description="Schedule: seconds between probe posts "
                                   "(at least 37.5 min)")
    comment_interval_s: float = Field(60.0, description="Seconds between comments (>= 25 s)")
    followup_delay_s: float = Field(600.0, description="Wait before each Tier II premise")
    poll_s: float = Field(30.0, description="How often `probe run` checks the schedule")
    timeout_s: float = 30.0


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MOLTSCOPE_", env_nested_delimiter="__")

    kafka_url: str = "kafka://127.0.0.1:19092"
    redis_url: str = "redis://127.0.0.1:16379/0"
    topic_prefix: str = "moltscope"
    partitions: int = Field(4, description="Partitions of the keyed topic (events)")
    api_host: str = "127.0.0.1"
    api_port: int = 8000
    api_token: SecretStr | None = Field(None, description="Bearer token for write endpoints")
    api_max_body_bytes: int = Field(64 * 1024, gt=0, description="Largest request body a write "
                                    "endpoint accepts (413 beyond)")
    # Tansu holds a group join for half the session timeout: keep it short.
    broker_session_timeout_s: float = 6.0
    broker_heartbeat_interval_s: float = 1.0
    kafka_fetch_wait_ms: int = Field(
        100, ge=0, description="Longest a worker's Kafka fetch waits for data before it answers "
        "empty (Faust fixes 1500 ms): an alert crosses three topics and may wait this at each")
    snapshot_interval_s: float = Field(1.0, description="How often state is published to Redis")
    allowed_lateness_s: float = Field(
        ALLOWED_LATENESS_S, ge=0, description="Event-time seconds an event may trail its "
        "partition's latest and still be applied in order by the reducer (and the replay); "
        "every event waits this long for the watermark")
    idle_partition_s: float = Field(
        IDLE_PARTITION_S, gt=0, description="Wall seconds without records after which an "
        "events partition no longer holds the reducer's watermark back")
    idle_after_s: float = Field(
        IDLE_AFTER_S, gt=0, description="Wall seconds without events after which event time "
        "advances with the wall clock (windows close, incidents resolve on a quiet stream)")
    checkpoint_interval_s: float = Field(
        300.0, ge=0, description="How often the reducer checkpoints its state to Redis, so a "
        "restart replays only what came after (0: never; a restart replays the society topic)")
    series_points: int = Field(1440, description="Recent points kept per metric series")
    agents_interval_s: float = Field(10.0, description="How often per-agent values reach Redis")
    dedup_capacity: int = Field(DEDUP_CAPACITY, description="Event ids remembered per partition")
    embed: bool = Field(_PIPELINE.embed,
                        description="Embed texts (needed by the semantic metrics)")
    society: SocietySettings = SocietySettings()
    individuals: IndividualSettings = IndividualSettings()
    embedded: EmbeddedSettings = EmbeddedSettings()
    crawler: CrawlerSettings = CrawlerSettings()
    probes: ProbeSettings = ProbeSettings()
    alerts: DetectorConfig = Field(
        default_factory=DetectorConfig,
        description="Every detector threshold and window (defaults in detectors/*.py), e.g. "
                    "MOLTSCOPE_ALERTS__SURGE__MIN_POSTS=30")
    delivery: DispatcherConfig = Field(
        default_factory=DispatcherConfig,
        description="Webhook grouping, retries and back-off (service/delivery/dispatcher.py)")

    @property
    def kafka_bootstrap(self) -> str:
        return self.kafka_url.removeprefix("kafka://")

    def pipeline(self, *, threads_local: bool = True) -> PipelineConfig:
        s = self.society
        return PipelineConfig(
            threads_local=threads_local,
            embed=self.embed, embed_comments=s.embed_comments, window=s.window,
            verbatim_threshold=s.verbatim_threshold, ngram_grace_days=s.ngram_grace_days,
            ngram_max_tracked=s.ngram_max_tracked,
            influence=dataclasses.replace(
                _PIPELINE.influence, window=_as(_PIPELINE.influence.window, s.pagerank_window_s),
                step=_as(_PIPELINE.influence.step, s.pagerank_step_s)),
            coverage=dataclasses.replace(_PIPELINE.coverage, horizon_s=s.coverage_horizon_s),
            detectors=self.alerts,
            detectors_enabled=s.detectors,
        )

    def agent_stage(self) -> AgentStageConfig:
        i = self.individuals
        return AgentStageConfig(engines=tuple(i.engines), expire_step_s=i.expire_step_s,
                                whole_history=i.whole_history,
                                configs=(("drift", i.drift), ("feedback", i.feedback),
                                         ("impact", i.impact), ("action", i.action)))

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}-{name}"


@lru_cache
def get_settings() -> Settings:
    return Settings()

"""The supervisor hands every setting, nested and secret ones included, to its children."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from service.config import Settings
from service.stack import settings_env


def test_child_process_reads_the_same_settings() -> None:
    s = Settings(embed=False, api_token="tok", partitions=3)
    s.society.window = "hour"
    s.crawler.api_key = "key"  # type: ignore[assignment]
    s.alerts = dataclasses.replace(s.alerts, surge=dataclasses.replace(s.alerts.surge,
                                                                         min_posts=7))
    probe = ("from detectors.runner import DetectorConfig; from service.config import Settings; "
             "s = Settings(); print(s.embed, s.partitions, "
             "s.society.window, s.api_token.get_secret_value(), "
             "s.crawler.api_key.get_secret_value(), s.alerts.surge.min_posts, "
             "s.alerts.enabled == DetectorConfig().enabled)")
    out = subprocess.run([sys.executable, "-c", probe], env=settings_env(s), check=True,
                         capture_output=True, text=True).stdout.split()
    assert out == ["False", "3", "hour", "tok", "key", "7", "True"]


def test_society_settings_take_the_engines_defaults() -> None:
    """One truth per default: the settings restate no engine default, they read it."""
    from datetime import timedelta

    from streams.pipeline import PipelineConfig

    def seconds(v: timedelta | float) -> float:
        return v.total_seconds() if isinstance(v, timedelta) else float(v)

    engine, s = PipelineConfig(), Settings()
    assert s.pipeline() == engine  # default settings build the engines' own configuration
    assert s.society.pagerank_step_s == seconds(engine.influence.step)
    assert s.society.pagerank_window_s == seconds(engine.influence.window)
    s.society.pagerank_step_s = 60.0
    step = s.pipeline().influence.step
    assert seconds(step) == 60.0 and type(step) is type(engine.influence.step)


def test_per_agent_engines_and_socialisation_read_their_settings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each per-agent engine's config and the socialisation detector's come from the settings
    (defaults: the engines' own), live (reducer) and offline (replay) alike."""
    from streams.agent_stage import AgentStage, AgentStageConfig
    from streams.pipeline import Pipeline
    from streams.reducer import Reducer
    from streams.replay import replay

    default = AgentStage(Settings().agent_stage())
    assert {n: e.cfg for n, e in default.engines.items()} == {
        n: e.cfg for n, e in AgentStage(AgentStageConfig()).engines.items()}
    monkeypatch.setenv("MOLTSCOPE_INDIVIDUALS__DRIFT__MIN_POSTS", "20")
    monkeypatch.setenv("MOLTSCOPE_INDIVIDUALS__ACTION__MIN_GAPS", "9")
    monkeypatch.setenv("MOLTSCOPE_ALERTS__SOCIALISATION__MIN_AGENTS", "50")
    s = Settings()
    stage = AgentStage(s.agent_stage())
    assert stage.engines["drift"].cfg.min_posts == 20
    assert stage.engines["action"].cfg.min_gaps == 9
    pipeline = Pipeline(s.pipeline(threads_local=False))
    assert Reducer(pipeline, partitions=1).socialisation.cfg.min_agents == 50
    assert replay([], Pipeline(s.pipeline())).socialisation.cfg.min_agents == 50

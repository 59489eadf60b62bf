"""The supervisor hands every setting, nested and secret ones included, to its children."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

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

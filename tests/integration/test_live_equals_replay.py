"""Live equals replay on the real broker and Redis: the shared real post files and a planted
surge (with a burst) published as fast as possible through 4 partitions to 2 workers (and 1
partition to 1 worker) give every sample the offline replay of the same events gives, and
the same incidents; also when one of the two workers is killed (SIGKILL) mid-stream and the
survivor takes its partitions (and, if it held it, the reducer) over.

Events of the four partitions reach the single reducer interleaved as the two workers forward
them; the reducer's watermark puts them back in event-time order and the detectors evaluate
per tick of event time, so nothing is dropped as late and no surge window is missed. The
model is off (``embed=False``): on a shared 2-core machine loading and running it would
dominate; with it on, the semantic samples carry the float16 transport's bound (1e-3 on a
cosine, ``streams/messages.py``).

The per-agent stage too: the acts of every event go keyed by agent to the agents partitions,
whose population partials the reducer merges into the published samples (compared above
with the rest), and every agent's profile served by ``GET /v1/agents`` (both planes) equals
the replay's stage's, settled with the same society inputs.
"""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from detectors.alert import Alert
from service.config import Settings
from service.embedded import ManagedProcess, port_open
from service.producer import KafkaSink, ensure_topics, publish
from service.sources.simulate import ScenarioSpec, SimulationConfig, Simulator
from service.stack import cli_argv, settings_env
from streams.agent_stage import AgentStage, planes
from streams.events import DeadLetter, Event
from streams.pipeline import Pipeline
from streams.replay import replay
from tests.integration.test_spine import items_of, keyed, live, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: Samples known to differ live from the replay (``threads_uncommented_ratio`` is judged by the
#: reducer at its own tick time from the partitions' pending posts, so it does not):
#: ``cascade_state_bytes``, a memory gauge, not a figure: the cascades' two-level adoption
#: store merges at flush points that depend on when the pipeline is read (0.1 % apart here).
KNOWN: set[str] = {"cascade_state_bytes"}


def planted() -> list[Event]:
    """A mint surge and a phrase burst over four hours of a synthetic society."""
    return list(Simulator(SimulationConfig(
        seed=3, agents=2000, duration=timedelta(hours=4), posts_per_hour=300,
        scenarios=[ScenarioSpec(name="surge", start=timedelta(hours=2)),
                   ScenarioSpec(name="burst", start=timedelta(hours=1))])))


def incidents(alerts: list[Alert]) -> dict[str, dict[str, Any]]:
    return {a.incident_id: a.model_dump(mode="json") for a in alerts}


@pytest.mark.parametrize(("partitions", "workers", "kill"),
                         [(4, 2, None), (4, 2, "reducer"), (4, 2, "reducer-checkpointed"),
                          (4, 2, "ingest"), (1, 1, None)],
                         ids=["4p-2w", "4p-2w-kill-reducer", "4p-2w-kill-reducer-checkpointed",
                              "4p-2w-kill-ingest", "1p-1w"])
def test_every_live_sample_and_alert_equals_the_replay(moltbook_data: Path,
                                                       stack_settings: Settings,
                                                       tmp_path: Path, partitions: int,
                                                       workers: int, kill: str | None) -> None:
    files = sorted((moltbook_data / "api" / "posts").glob("*.json"))
    items: list[Event | DeadLetter] = sorted(
        [*items_of(files), *planted()],
        key=lambda i: i.observed_at if isinstance(i, DeadLetter) else i.event_time)
    s = stack_settings
    s.partitions, s.embed = partitions, False
    s.idle_after_s = 1e6  # no wall-clock advance: the live state stays at the last event
    # every act kept (the real posts' last week holds one agent): every agent compared
    s.individuals.whole_history = True
    # checkpoints off (a rebuilt reducer replays the society topic), except where the
    # survivor must resume from the killed reducer's checkpoint
    s.checkpoint_interval_s = 1.0 if kill == "reducer-checkpointed" else 0.0

    offline = replay(items, Pipeline(s.pipeline()), allowed_lateness_s=s.allowed_lateness_s,
                     close=False, stage=AgentStage(s.agent_stage()))
    want = keyed(offline.snapshot().samples)
    want_profiles = json.loads(json.dumps(offline.agent_profiles()))
    want_acts = {a for a, p in want_profiles.items()
                 if p.get("action", {}).get("posts", 0) + p.get("action", {}).get("comments", 0)}
    assert want[("agent_acts_total", (("kind", "comment"),))] > 1000
    assert len(want_acts) > 1000
    want_alerts = incidents(offline.pipeline.incidents())
    assert {a["type"] for a in want_alerts.values()} >= {"surge", "burst"}
    assert len(want) > 100 and offline.order.late == 0
    assert want[("reducer_late_events_total", ())] == 0.0

    ensure_topics(s)
    env = settings_env(s)
    logs = [tmp_path / f"worker{i}.log" for i in range(workers)]
    procs = [ManagedProcess(f"worker{i}", cli_argv("worker", "--loglevel", "info"),
                            lambda: True, logs[i], env=env) for i in range(workers)]
    procs.append(ManagedProcess("api", cli_argv("api", "--loglevel", "warning"),
                                lambda: port_open(s.api_port), tmp_path / "api.log", env=env))
    api = f"http://127.0.0.1:{s.api_port}"
    try:
        for p in procs:
            p.start()
        wait_for(lambda: (httpx.get(f"{api}/readyz").status_code == 200, None))
        # both workers hold partitions before anything is published (a later handover is
        # still exact: the survivor restores, which the kill variants test)
        wait_for(lambda: (all("newly assigned" in log.read_text() for log in logs), None))
        sink = KafkaSink(s)
        started = time.monotonic()
        killed = None
        if kill:
            half = len(items) // 2
            publish(items[:half], sink)
            applied = wait_for(lambda: ((n := _applied(api)) > 0, n), timeout=120, every=0.2)
            # the reducer's worker (it logged looking for a checkpoint), or the other one: the
            # survivor then rebuilds the reducer from the society topic, or only restores the
            # victim's events partitions
            holder = next(i for i, log in enumerate(logs) if "reducer: " in log.read_text())
            victim = 1 - holder if kill == "ingest" else holder
            if kill == "reducer-checkpointed":  # killed after a checkpoint was saved
                wait_for(lambda: ("reducer checkpoint at" in logs[holder].read_text(), None),
                         timeout=60, every=0.2)
            os.kill(procs[victim].proc.pid, signal.SIGKILL)  # type: ignore[union-attr]
            procs[victim].proc.wait()  # type: ignore[union-attr]
            killed = victim
            print(f"\nkilled worker{victim} ({kill}, SIGKILL) after {applied:.0f} events "
                  "applied")
            publish(items[half:], sink)
        else:
            publish(items, sink)
        sink.close()

        def agrees() -> tuple[bool, Any]:
            got = live(httpx.get(f"{api}/v1/metrics").json())
            wrong = {k: (got.get(k), v) for k, v in want.items() if k[0] not in KNOWN and (
                k not in got or got[k] != pytest.approx(v, rel=1e-9, abs=1e-9))}
            extra = sorted(set(got) - set(want))
            return not wrong and not extra, {"differ": dict(list(wrong.items())[:20]),
                                             "n_differ": len(wrong), "extra": extra}

        wait_for(agrees, timeout=600, every=2.0)
        took = time.monotonic() - started

        def same_agents() -> tuple[bool, Any]:
            got = _profiles(api, "acts")
            wrong = [a for a in want_acts if not _close(got.get(a), planes(want_profiles[a]))]
            return not wrong and set(got) == want_acts, {
                "n_differ": len(wrong), "differ": [(a, got.get(a), want_profiles[a])
                                                   for a in wrong[:3]],
                "missing": sorted(want_acts - set(got))[:10],
                "extra": sorted(set(got) - want_acts)[:10]}

        wait_for(same_agents, timeout=60, every=1.0)
        named = httpx.get(f"{api}/v1/agents/{min(want_acts)}").json()
        assert named["action_plane"] == planes(want_profiles[min(want_acts)])["action_plane"]

        got_alerts = incidents([Alert.model_validate(a) for a in httpx.get(
            f"{api}/v1/alerts", params={"limit": 1000}).json()])

        def same_alerts() -> tuple[bool, Any]:
            nonlocal got_alerts
            got_alerts = incidents([Alert.model_validate(a) for a in httpx.get(
                f"{api}/v1/alerts", params={"limit": 1000}).json()])
            return got_alerts == want_alerts, {
                "missing": sorted(set(want_alerts) - set(got_alerts)),
                "extra": sorted(set(got_alerts) - set(want_alerts)),
                "differ": [k for k in want_alerts
                           if k in got_alerts and got_alerts[k] != want_alerts[k]]}

        wait_for(same_alerts, timeout=30)

        assert all(p.alive for i, p in enumerate(procs[:workers]) if i != killed)
        compared = sum(k[0] not in KNOWN for k in want)
        how = f", the {kill} one killed" if kill else ""
        print(f"\n{partitions} partitions, {workers} workers{how}: "
              f"{len(items)} items: {compared} of {len(want)} samples and "
              f"{len(want_alerts)} incidents equal to the replay {took:.0f} s after publishing "
              "began")
    finally:
        for p in reversed(procs):
            p.stop()



def _close(got: Any, want: Any) -> bool:
    """Equal, numbers to 1e-9 (the society centroid is summed in another order live)."""
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(
            _close(got[k], want[k]) for k in want)
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(
            _close(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(want, float) and isinstance(got, int | float):
        return got == pytest.approx(want, rel=1e-9, abs=1e-9)
    return bool(got == want)


def _profiles(api: str, sort: str) -> dict[str, Any]:
    """Every agent ranked by ``sort``, paged through ``GET /v1/agents``: name -> profile."""
    out: dict[str, Any] = {}
    while True:
        page = httpx.get(f"{api}/v1/agents", params={"sort": sort, "limit": 1000,
                                                     "offset": len(out)}).json()
        out.update((row["agent"], row["profile"]) for row in page["agents"])
        if len(out) >= page["total"] or not page["agents"]:
            return out


def _applied(api: str) -> float:
    """Events the reducer has applied, as the API last published it (0 before any snapshot)."""
    try:
        samples = httpx.get(f"{api}/v1/metrics").json()["samples"]
    except (httpx.HTTPError, KeyError, ValueError):
        return 0.0
    return next((x["value"] for x in samples if x["name"] == "events_processed_total"), 0.0)

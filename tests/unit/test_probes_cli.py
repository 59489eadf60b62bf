"""``moltscope probe plan|run|status|report|kill`` on a real Redis: without a key and the live
switch, ``run`` is a dry run that prints the plan and writes nothing."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

import service.probes.command as command
from service.cli import main
from service.config import Settings
from service.probes.store import ProbeStore


@pytest.fixture
def settings(redis_port: int, monkeypatch: pytest.MonkeyPatch) -> Settings:
    s = Settings(redis_url=f"redis://127.0.0.1:{redis_port}/0",
                 topic_prefix=f"t{uuid.uuid4().hex[:8]}")
    monkeypatch.setattr(command, "get_settings", lambda: s)
    return s


def test_probe_verbs(settings: Settings, redis_client, capsys, tmp_path: Path) -> None:  # noqa: ANN001
    store = ProbeStore(redis_client, settings.topic_prefix)
    assert main(["probe", "plan", "--hours", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("writing: no API key")
    lines = [ln for ln in out.splitlines() if ln.startswith("  ")]
    # posts 2 h apart in 5 h; the Tier II probe's premises follow as comments
    assert sum(" post " in ln for ln in lines) == 3
    assert [ln.split()[5] for ln in lines if " comment " in ln] == ["1/2", "2/2"]
    assert "t1-rec-001" in lines[0] and "m/general" in lines[0]

    assert main(["probe", "run"]) == 0
    assert capsys.readouterr().out.startswith("dry run: no API key")
    assert store.records() == {} and store.writes() == []

    assert main(["probe", "kill"]) == 0
    assert store.killed() == "operator"
    main(["probe", "status"])
    status = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert status["writing"] == "kill switch on (operator)" and status["posted"] == 0
    assert status["campaign"] == 96 and status["today"]["posts_budget"] == 12
    assert main(["probe", "kill", "--off"]) == 0
    assert store.killed() is None

    out_file = tmp_path / "report.json"
    assert main(["probe", "report", "--out", str(out_file)]) == 0
    assert json.loads(out_file.read_text())["probes"] == []

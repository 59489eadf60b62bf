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


def test_report_scores_the_probe_threads_an_archive_holds(
        settings: Settings, redis_client, capsys, tmp_path: Path) -> None:  # noqa: ANN001
    """``probe report --archive`` adds the archive's comments on probe posts to the replies
    the store holds (the replay report of docs/probes.md), own comments still left out."""
    from datetime import UTC, datetime

    from service.probes.bank import load_bank
    from service.probes.scoring import Reply
    from streams.events import CommentEvent, PostEvent

    store = ProbeStore(redis_client, settings.topic_prefix)
    chain = next(p for p in load_bank().probes if p.tier == "III")  # 107, 108, 109: 110 next
    store.record_post(chain, "p-probe", 1.0, "v1", True)
    store.record_followup(chain.id, "c-own", 2.0, True)
    store.add_replies([("p-probe", Reply("c1", "ant", "110", None, 3.0))])  # crawled live
    t = datetime(2026, 2, 1, tzinfo=UTC)

    def comment(cid: str, author: str, text: str, parent: str | None, post: str = "p-probe",
                ) -> CommentEvent:
        return CommentEvent(id=f"comment:{cid}", event_time=t, observed_at=t, source="archive",
                            comment_id=cid, post_id=post, parent_id=parent, author=author,
                            content=text)

    events = [PostEvent(id="post:p-probe", event_time=t, observed_at=t, source="archive",
                        post_id="p-probe", author="prober", title=chain.title,
                        content=chain.content),
              comment("c-own", "prober", "our own comment: 999", None),
              comment("c1", "ant", "110", None),  # also in the store: counted once
              comment("c2", "bee", "111", "c1"),
              comment("c3", "cat", "nice game", "c2"),
              comment("x1", "dog", "110", None, post="p-other")]
    archive = tmp_path / "events.jsonl"
    archive.write_text("".join(e.model_dump_json() + "\n" for e in events))

    out_file = tmp_path / "report.json"
    assert main(["probe", "report", "--archive", str(archive), "--out", str(out_file)]) == 0
    assert "4 comments on probe posts found in the archive" in capsys.readouterr().out
    report = json.loads(out_file.read_text())
    tier3 = report["summary"]["III"]
    # hand check: c1 continues 109, c2 continues c1's 110, c3 states no 112
    assert (tier3["replies"], tier3["steps"], tier3["correct_steps"]) == (3, 3, 2)
    assert tier3["chain_length_max"] == 2
    (score,) = report["probes"]
    assert [e["comment_id"] for e in score["evidence"]] == ["c1", "c2", "c3"]

"""``moltscope up`` for real (Tansu, Redis, worker, API): ``kill -9`` of the worker restarts
the worker alone, which beats again, while the broker and Redis run on, the same processes;
Ctrl-C then stops everything and exits 0."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import redis

from service.embedded import free_port
from tests.unit.test_stack_shutdown import alive

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def wait_for(done: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"{what}: not in {timeout:.0f} s"
        time.sleep(0.1)


def ready_pids(out: Path) -> dict[str, list[int]]:
    """Every pid the supervisor reported, by child, in order: started, then restarted."""
    pids: dict[str, list[int]] = {}
    for name, pid in re.findall(r"(\w+) (?:ready|restarted) \(pid (\d+)\)", out.read_text()):
        pids.setdefault(name, []).append(int(pid))
    return pids


def test_kill_9_of_the_worker_restarts_it_and_keeps_the_broker(tmp_path: Path) -> None:
    kafka, redis_port, api = free_port(), free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MOLTSCOPE_EMBED": "false",
           "MOLTSCOPE_EMBEDDED__KAFKA_PORT": str(kafka),
           "MOLTSCOPE_EMBEDDED__REDIS_PORT": str(redis_port),
           "MOLTSCOPE_EMBEDDED__DATA_DIR": str(tmp_path / "var"),
           "MOLTSCOPE_EMBEDDED__RESTART_BACKOFF_S": "0.5", "MOLTSCOPE_TOPIC_PREFIX": "sup"}
    out = tmp_path / "up.log"
    with out.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "service.cli", "up", "--source", "none",
                                 "--api-port", str(api)], env=env, cwd=ROOT, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)
    r = redis.Redis(port=redis_port)
    try:
        wait_for(lambda: "moltscope is up" in out.read_text() or proc.poll() is not None,
                 "the stack up")
        assert proc.poll() is None, out.read_text()
        beat = "sup:heartbeat:worker"
        wait_for(lambda: r.get(beat) is not None, "the worker's first heartbeat")
        first = ready_pids(out)
        [worker] = first["worker"]
        killed_at = time.time()
        os.kill(worker, signal.SIGKILL)
        wait_for(lambda: len(ready_pids(out).get("worker", [])) == 2, "the worker restarted")
        wait_for(lambda: float(r.get(beat) or 0) > killed_at + 0.5,
                 "a heartbeat of the new worker")
        now = ready_pids(out)
        assert alive(now["worker"][1]) and not alive(worker)
        for core in ("tansu", "redis", "api"):  # the same processes, never restarted
            assert now[core] == first[core] and alive(first[core][0]), core
        assert httpx.get(f"http://127.0.0.1:{api}/readyz", timeout=5).status_code == 200
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(60) == 0, out.read_text()
        text = out.read_text()
        assert "worker exited with -9; restarting in 0.5 s" in text
        assert text.rstrip().endswith("moltscope: stopped")
    finally:
        r.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

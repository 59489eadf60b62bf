"""``moltscope up``'s supervisor: Ctrl-C stops every child in order (exit 0, a "stopped"
line); a crashed or killed worker is restarted with back-off while the broker and Redis run on;
the broker's death ends the stack (exit 1).

The supervisor runs for real (``Stack.run_forever`` in its own session, as a terminal would
run it) with small stand-in children in place of Tansu, Redis, the worker, the API and the
source: each notes its starts (with its pid) and the signals it gets, so the test sees who was
started, stopped, by what, in which order.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from service.embedded import ManagedProcess, free_port

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import os, signal, socket, sys, time
from pathlib import Path
name, record, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
def note(signum, _):
    with open(record, "a") as f:
        f.write(f"{name} {signal.Signals(signum).name}\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, note)
signal.signal(signal.SIGINT, note)
if port:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port)); s.listen()
starts = Path(record).parent / "starts.txt"
with starts.open("a") as f:
    f.write(f"{name} {os.getpid()}\\n")
open(f"{record}.{name}", "w").close()  # up, and its handlers in place
if name == "worker" and "{fail}" == "crash" and starts.read_text().count("worker ") <= 2:
    time.sleep(0.3)
    sys.exit(3)  # crashes on its first two runs, then stays up
if name == "tansu" and "{fail}" == "broker":
    time.sleep(1.0)
    sys.exit(3)
while True:
    time.sleep(60)
"""

SUPERVISOR = """
import sys
import service.stack as stack
from service.config import Settings
import os
from service.embedded import ManagedProcess, port_open

record, fail, ports = sys.argv[1], sys.argv[2], [int(p) for p in sys.argv[3:6]]
child = CHILD_SOURCE.replace("{fail}", fail)

def fake(name, port=0, ready=lambda: True):
    return ManagedProcess(name, [sys.executable, "-c", child, name, record, str(port)],
                          lambda: os.path.exists(f"{record}.{name}") and ready())

stack.tansu = lambda port, log: fake("tansu", port, lambda: port_open(port))
stack.redis_server = lambda port, data, log: fake("redis", port, lambda: port_open(port))
stack.ensure_topics = lambda settings: None
stack.ManagedProcess = lambda name, argv, ready, log, env: (
    fake(name, ports[2], ready) if name == "api" else
    fake(name, ready=(lambda: False) if fail == "hang" else ready))
settings = Settings(api_port=ports[2])
settings.embedded.kafka_port, settings.embedded.redis_port = ports[0], ports[1]
sys.exit(stack.Stack(settings, ["simulate"]).run_forever())
"""


def supervise(tmp_path: Path, fail: str, ignore_sigint: bool) -> tuple[subprocess.Popen[str], Path]:
    record = tmp_path / "signals.txt"
    record.touch()
    script = tmp_path / "supervisor.py"
    script.write_text(SUPERVISOR.replace("CHILD_SOURCE", repr(CHILD)))

    def session() -> None:
        if ignore_sigint:  # what a non-interactive shell's `&` does to a background job
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = subprocess.Popen(
        [sys.executable, str(script), str(record), fail, *(str(free_port()) for _ in range(3))],
        env={**os.environ, "PYTHONPATH": str(ROOT), "MOLTSCOPE_EMBEDDED__RESTART_BACKOFF_S": "0.1"},
        cwd=ROOT, start_new_session=True,
        preexec_fn=session,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, record


def wait_for(done, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def children_up(record: Path, n: int) -> bool:
    """At least ``n`` stand-in children are up, their signal handlers in place."""
    return len(list(record.parent.glob(f"{record.name}.*"))) >= n


def finish(proc: subprocess.Popen[str], timeout: float = 60.0) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out


@pytest.mark.parametrize(("sig", "ignore_sigint"), [
    (signal.SIGINT, False), (signal.SIGINT, True), (signal.SIGHUP, False)],
    ids=["ctrl-c", "ctrl-c-background", "terminal-closed"])
def test_ctrl_c_stops_every_child_in_order_and_exits_0(tmp_path: Path, sig: signal.Signals,
                                                       ignore_sigint: bool) -> None:
    proc, record = supervise(tmp_path, "none", ignore_sigint)
    wait_for(lambda: children_up(record, 5))
    os.killpg(proc.pid, sig)  # the terminal signals its foreground process group
    code, out = finish(proc)
    assert code == 0, out
    assert out.rstrip().endswith("moltscope: stopped"), out
    assert "exited" not in out
    # SIGTERM from the supervisor alone, reverse start order; none saw the terminal's SIGINT
    assert record.read_text().split("\n")[:-1] == [
        "source SIGTERM", "api SIGTERM", "worker SIGTERM", "redis SIGTERM", "tansu SIGTERM"]


def test_ctrl_c_during_start_up_stops_what_started(tmp_path: Path) -> None:
    proc, record = supervise(tmp_path, "hang", ignore_sigint=False)  # the worker never ready
    wait_for(lambda: children_up(record, 3))
    os.killpg(proc.pid, signal.SIGINT)
    code, out = finish(proc, timeout=20.0)
    assert code == 0, out
    assert "moltscope is up" not in out and out.rstrip().endswith("moltscope: stopped")
    assert record.read_text().split("\n")[:-1] == [
        "worker SIGTERM", "redis SIGTERM", "tansu SIGTERM"]


def starts(record: Path) -> list[tuple[str, int]]:
    """(name, pid) of every start of a stand-in child, in order."""
    path = record.parent / "starts.txt"
    lines = path.read_text().split("\n")[:-1] if path.exists() else []
    return [(n, int(pid)) for n, pid in (line.split() for line in lines)]


def pids(record: Path, name: str) -> list[int]:
    return [pid for n, pid in starts(record) if n == name]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_crashing_worker_is_restarted_with_back_off_and_the_broker_kept(
        tmp_path: Path) -> None:
    proc, record = supervise(tmp_path, "crash", ignore_sigint=False)
    wait_for(lambda: len(pids(record, "worker")) == 3)  # crashed twice, then stays up
    wait_for(lambda: children_up(record, 5))
    tansu, redis = pids(record, "tansu"), pids(record, "redis")
    assert len(tansu) == len(redis) == 1 and alive(tansu[0]) and alive(redis[0])
    os.killpg(proc.pid, signal.SIGINT)
    code, out = finish(proc)
    assert code == 0, out
    assert "worker exited with 3; restarting in 0.1 s" in out
    assert "worker exited with 3; restarting in 0.2 s" in out  # doubled: still crashing
    assert out.count("worker restarted (pid") == 2
    assert out.rstrip().endswith("moltscope: stopped")
    assert record.read_text().split("\n")[:-1] == [
        "source SIGTERM", "api SIGTERM", "worker SIGTERM", "redis SIGTERM", "tansu SIGTERM"]


def test_kill_9_of_the_worker_restarts_it_alone(tmp_path: Path) -> None:
    proc, record = supervise(tmp_path, "none", ignore_sigint=False)
    wait_for(lambda: children_up(record, 5))
    [worker] = pids(record, "worker")
    others = {n: p for n, p in starts(record) if n != "worker"}
    os.kill(worker, signal.SIGKILL)
    wait_for(lambda: len(pids(record, "worker")) == 2)
    assert alive(pids(record, "worker")[1]) and not alive(worker)
    assert all(alive(p) for p in others.values())  # broker, Redis, API, source untouched
    assert {n: p for n, p in starts(record) if n != "worker"} == others
    os.killpg(proc.pid, signal.SIGINT)
    code, out = finish(proc)
    assert code == 0, out
    assert "worker exited with -9; restarting in 0.1 s" in out
    assert record.read_text().split("\n")[:-1] == [
        "source SIGTERM", "api SIGTERM", "worker SIGTERM", "redis SIGTERM", "tansu SIGTERM"]


def test_the_broker_dying_ends_the_stack_as_a_failure(tmp_path: Path) -> None:
    proc, record = supervise(tmp_path, "broker", ignore_sigint=False)
    code, out = finish(proc)
    assert code == 1, out
    assert "tansu exited; stopping: the memory-only broker lost every topic" in out
    assert out.rstrip().endswith("moltscope: stopped after a failure")
    assert record.read_text().split("\n")[:-1] == [
        "source SIGTERM", "api SIGTERM", "worker SIGTERM", "redis SIGTERM"]


def test_with_a_started_process_owns_that_one_process() -> None:
    proc = ManagedProcess("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"],
                          lambda: True).start(timeout=10)
    first = proc.proc
    assert first is not None
    try:
        with proc as p:
            assert p.proc is first  # not a second spawn, which would leave the first unowned
        assert first.poll() is not None
    finally:
        first.kill()
        first.wait()

"""The embedded supervisor behind ``moltscope up``: broker, Redis, worker, API and a source.

Everything binds 127.0.0.1. Children die with the supervisor (parent-death signal) and run in
their own process groups, so a terminal's Ctrl-C reaches the supervisor alone, which stops them
in reverse order of start: source, API, worker, then Redis and the broker. The worker, the API
and the source run as separate processes that read the same ``MOLTSCOPE_*`` settings, exactly
as they would in production against an external Kafka and Redis.

A crashed worker, API or source is restarted, the broker and Redis untouched: after
``restart_backoff_s`` (1 s), doubling while it keeps crashing up to ``restart_backoff_cap_s``
(30 s), back to 1 s once it has been up ``restart_stable_s`` (a minute). The worker resumes
from its Kafka offsets and Redis checkpoint. A source that finishes (exit 0, e.g. a replay
that reached its end) is not restarted. The broker and Redis are not restarted: the embedded
Tansu keeps its topics in memory, so its death loses every event, and nothing restarted
could get them back; the stack stops (exit 1) and says so. Production (compose, Helm) runs a
real, replicated Kafka whose topics survive any one process.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from threading import Event
from typing import Any

from pydantic import BaseModel, SecretStr

from service.config import Settings
from service.embedded import ManagedProcess, port_open, redis_server, tansu
from service.producer import ensure_topics
from streams.kernels import warm

log = logging.getLogger(__name__)

#: Children whose death ends the stack: what they hold cannot be restarted (see above).
CORE = ("tansu", "redis")


@dataclass(slots=True)
class Backoff:
    """Restart waits of one child: ``base_s`` doubling to ``cap_s``, reset by a stable run.

    >>> b = Backoff(base_s=1.0, cap_s=30.0, stable_s=60.0)
    >>> [b.next(uptime_s=2.0) for _ in range(7)]
    [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    >>> b.next(uptime_s=61.0)
    1.0
    """

    base_s: float
    cap_s: float
    stable_s: float
    _delay: float = 0.0

    def next(self, uptime_s: float) -> float:
        if self._delay == 0.0 or uptime_s >= self.stable_s:
            self._delay = self.base_s
        else:
            self._delay = min(self.cap_s, self._delay * 2)
        return self._delay


def cli_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "service.cli", *args]


def _plain(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, BaseModel):
        return {k: _plain(getattr(value, k)) for k in type(value).model_fields}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that hands every field of ``settings`` to a child process (nested
    groups as JSON, secrets in clear: the child needs them; the environment is not logged)."""
    env = dict(os.environ)
    env["HF_HUB_OFFLINE"] = "1"
    for name in type(settings).model_fields:
        value = _plain(getattr(settings, name))
        if value is None:
            env.pop(f"MOLTSCOPE_{name.upper()}", None)
            continue
        env[f"MOLTSCOPE_{name.upper()}"] = (json.dumps(value) if isinstance(value, dict | bool)
                                            else str(value))
    return env


class Stack:
    def __init__(self, settings: Settings, source: Sequence[str] | None = None,
                 log_dir: Path | None = None) -> None:
        self.settings = settings
        self.source = list(source) if source else None
        self.log_dir = log_dir or settings.embedded.data_dir / "logs"
        self.procs: list[ManagedProcess] = []
        self.restarts: dict[str, int] = {}  # restarts so far, by child
        self._backoff: dict[str, Backoff] = {}
        self._due: dict[str, float] = {}  # child -> time.monotonic() of its restart
        self._finished: set[str] = set()

    def _start(self, proc: ManagedProcess, timeout: float = 60.0) -> None:
        self.procs.append(proc)  # first: a Ctrl-C while it comes up still stops it
        proc.start(timeout)

    def start(self) -> None:
        s = self.settings
        if s.embedded.enabled:
            kafka_port, redis_port = s.embedded.kafka_port, s.embedded.redis_port
            for port in (kafka_port, redis_port, s.api_port):
                if port_open(port):
                    raise RuntimeError(f"127.0.0.1:{port} is already in use: stop what holds it "
                                       "or choose other MOLTSCOPE_EMBEDDED__*/API ports")
            self._start(tansu(kafka_port, self.log_dir / "tansu.log"))
            self._start(redis_server(redis_port, s.embedded.data_dir / "redis",
                                     self.log_dir / "redis.log"))
            s.kafka_url = f"kafka://127.0.0.1:{kafka_port}"
            s.redis_url = f"redis://127.0.0.1:{redis_port}/0"
        ensure_topics(s)
        env = settings_env(s)
        warm()  # the kernels compiled here, once, not by the worker and the API at the same time
        self._start(ManagedProcess("worker", cli_argv("worker"), lambda: True,
                                   self.log_dir / "worker.log", env=env))
        self._start(ManagedProcess("api", cli_argv("api"), lambda: port_open(s.api_port),
                                   self.log_dir / "api.log", env=env))
        if self.source:
            self._start(ManagedProcess("source", cli_argv(*self.source), lambda: True,
                                       self.log_dir / "source.log", env=env))

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()

    def supervise(self) -> str | None:
        """One look at the children: schedule or make due restarts of the worker, API and
        source; returns the name of a core child (broker, Redis) that died, else None."""
        now = time.monotonic()
        e = self.settings.embedded
        for p in self.procs:
            if p.alive or p.name in self._finished:
                continue
            if p.name in CORE:
                return p.name
            if p.name == "source" and p.returncode == 0:
                log.info("source finished")
                self._finished.add(p.name)
                continue
            due = self._due.get(p.name)
            if due is None:
                backoff = self._backoff.setdefault(
                    p.name, Backoff(e.restart_backoff_s, e.restart_backoff_cap_s,
                                    e.restart_stable_s))
                delay = backoff.next(now - p.started_at)
                self._due[p.name] = now + delay
                log.error("%s exited with %s; restarting in %g s (see %s)", p.name,
                          p.returncode, delay, p.log_file)
            elif now >= due:
                del self._due[p.name]
                p.spawn()
                self.restarts[p.name] = self.restarts.get(p.name, 0) + 1
                assert p.proc is not None
                log.warning("%s restarted (pid %d)", p.name, p.proc.pid)
        return None

    def run_forever(self, stop: Event | None = None, poll_s: float = 0.2) -> int:
        """Block until Ctrl-C/SIGTERM or the broker or Redis dies, restarting the other
        children as they crash; stop everything; return an exit code: 0 when asked to stop,
        1 when the broker or Redis died."""
        stop = stop or Event()
        starting = True

        def on_signal(signum: int, _: object) -> None:
            stop.set()
            if starting:  # a start-up wait can last a minute: cut it short
                raise KeyboardInterrupt

        # set, not inherited: a shell's `&` leaves SIGINT ignored, and then the children
        # would be told to stop but not the supervisor; SIGHUP: the terminal closed
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, on_signal)
        code = 0
        try:
            self.start()
            starting = False
            log.info("moltscope is up: live page http://%s:%d/ (API docs at /docs), logs in %s",
                     self.settings.api_host, self.settings.api_port, self.log_dir)
            while not stop.wait(poll_s):
                dead = self.supervise()
                if dead is not None and not stop.is_set():
                    proc = next(p for p in self.procs if p.name == dead)
                    log.error("%s exited; stopping%s (see %s)", dead,
                              ": the memory-only broker lost every topic" if dead == "tansu"
                              else "", proc.log_file)
                    code = 1
                    break
        except KeyboardInterrupt:
            pass
        finally:
            starting = False
            self.stop()
        print("moltscope: stopped" if code == 0 else "moltscope: stopped after a failure",
              file=sys.stderr, flush=True)
        return code

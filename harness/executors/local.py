"""Local executor: the training runs as a child process group of the harness."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from importlib import metadata
from typing import Any, ClassVar

import psutil

from harness.errors import InfraError
from harness.executors.base import ENV_ALLOWLIST
from harness.launch import ExecResult, Launch, argv_lines
from harness.rundir import RunDir
from harness.settings import ExecutorSettingsBase


def _env(launch: Launch) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ}
    return env | {"PYTHONUNBUFFERED": "1", **launch.env}


class LocalExecutor:
    name: ClassVar[str] = "local"
    settings: ClassVar[Any] = None

    def execute(
        self, launch: Launch, run: RunDir, settings: ExecutorSettingsBase, labels: dict[str, str]
    ) -> ExecResult:
        argv = launch.argv(sys.executable)
        started = time.monotonic()
        with run.log.open("wb") as log:
            try:
                proc = subprocess.Popen(
                    argv,
                    cwd=launch.workdir,
                    env=_env(launch),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                raise InfraError(f"cannot start {argv[0]}: {exc}") from exc
            try:
                code = proc.wait(timeout=settings.timeout_s)
                return ExecResult(exit_code=code, wall_s=time.monotonic() - started, argv=argv)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return ExecResult(proc.returncode, time.monotonic() - started, timed_out=True, argv=argv)
            except BaseException:
                _kill_group(proc)  # Ctrl-C or an error in the harness: never leave a training behind
                raise

    def describe(
        self, launch: Launch, run: RunDir, settings: ExecutorSettingsBase, labels: dict[str, str]
    ) -> list[str]:
        return [
            f"local process in {launch.workdir}",
            "env:",
            *(f"  {k}={v}" for k, v in sorted(_env(launch).items())),
            "argv:",
            *argv_lines(launch.argv(sys.executable)),
        ]

    def environment(self, settings: ExecutorSettingsBase) -> dict[str, Any]:
        try:  # msprobe's stack.json records every frame's source path: dump bytes grow with this path's length
            return {"packages_dir": str(metadata.distribution("verl").locate_file(""))}
        except metadata.PackageNotFoundError:
            return {}

    def device_ids(self, settings: ExecutorSettingsBase, device: str) -> list[int] | None:
        return None


def _members(pid: int) -> list[psutil.Process]:
    """The training's processes: its descendants, and every process of its session (Ray's workers start
    process groups of their own, and a process whose parent died is re-parented, but none leaves the session)."""
    try:
        found = {p.pid: p for p in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        found = {}
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if p.pid != pid and os.getsid(p.pid) == pid:
                found.setdefault(p.pid, p)
    return list(found.values())


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL, to the training's process group and to every member found before the signal."""
    members = _members(proc.pid)
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        for p in members:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.send_signal(sig)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        if not psutil.wait_procs(members, timeout=grace)[1]:
            return

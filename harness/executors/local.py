"""Local executor: the training runs as a child process group of the harness."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any, ClassVar

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
        argv = launch.argv(launch.python or sys.executable)  # the target's environment, else the harness's own
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
            *argv_lines(launch.argv(launch.python or sys.executable)),
        ]

    def environment(self, settings: ExecutorSettingsBase, packages_dir: str | None) -> dict[str, Any]:
        return {"packages_dir": packages_dir} if packages_dir else {}

    def device_ids(self, settings: ExecutorSettingsBase, device: str) -> list[int] | None:
        return None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue

"""Local executor: the training runs as a child process group of the harness."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from harness.executors.base import ENV_ALLOWLIST, ExecResult, InfraError
from harness.executors.settings import ExecutorSettings
from harness.rundir import RunDir
from harness.workloads.base import Launch


class LocalExecutor:
    name = "local"

    def execute(self, launch: Launch, run: RunDir, settings: ExecutorSettings, labels: dict[str, str]) -> ExecResult:
        env = {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ}
        env.update(PYTHONUNBUFFERED="1", **launch.env)
        argv = launch.argv(launch.python or sys.executable)  # the target's environment, else the harness's own
        started = time.monotonic()
        with run.log.open("wb") as log:
            try:
                proc = subprocess.Popen(
                    argv, cwd=launch.workdir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
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


def _kill_group(proc: subprocess.Popen) -> None:
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

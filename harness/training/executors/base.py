"""The executor interface: run one Launch to completion, or say why the infrastructure could not."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Sequence
from functools import cache
from typing import Any, ClassVar, Protocol

from harness.artifacts.record import ExecResult
from harness.artifacts.rundir import RunDir
from harness.scenario.blocks import ExecutorSettingsBase
from harness.training.launch import Launch

LABEL_PREFIX = "io.harness"
# Which harness process made a container: a container whose harness is gone (SIGKILLed) is swept at the next
# session start, one of a live harness (another pytest worker, another CI job) never.
PID_LABEL, PID_START_LABEL, HOST_LABEL = (f"{LABEL_PREFIX}.{k}" for k in ("pid", "pid_start", "host"))

# Environment variables a training may see; nothing else leaks from the host.
ENV_ALLOWLIST = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


class Executor(Protocol):
    name: ClassVar[str]

    def execute(
        self,
        launch: Launch,
        run: RunDir,
        settings: ExecutorSettingsBase,
        labels: dict[str, str],
        stop: threading.Event | None = None,
    ) -> ExecResult:
        """Run ``launch`` with its output in ``run.log``; raise InfraError when it cannot be started.

        Once ``stop`` is set (by the run's monitor), end the training within seconds, keeping what it wrote,
        and return with ``stopped``. A handled signal (``harness.signals``) ends it too, then propagates."""
        ...

    def describe(
        self, launch: Launch, run: RunDir, settings: ExecutorSettingsBase, labels: dict[str, str]
    ) -> list[str]:
        """The dry-run lines: exactly what ``execute`` would start (process or container), starting nothing."""
        ...

    def environment(self, settings: ExecutorSettingsBase, packages_dir: str | None) -> dict[str, Any]:
        """What results.json records of where the trainings ran (an image; the target's install path, where the
        trainings see it: msprobe's stack.json records source paths, so dump bytes grow with its length)."""
        ...

    def device_ids(self, settings: ExecutorSettingsBase, device: str) -> list[int] | None:
        """The accelerator numbers a run would get (their device nodes must exist), or None: any."""
        ...

    def sweep(self, settings: Sequence[ExecutorSettingsBase] = ()) -> list[str]:
        """Remove what dead harnesses on this host left behind (a SIGKILLed harness cannot clean up); one line
        per thing removed. ``settings``: the executor blocks of the scenarios about to run (where they name places
        of their own, a cluster's address). Best effort, at session start: nothing to reach is nothing to sweep."""
        ...


@cache
def host_id() -> str:
    """This host as its process ids are meaningful: the hostname and the kernel's boot id."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = "?"
    return f"{socket.gethostname()}/{boot}"


def _start_ticks(pid: int) -> str | None:
    """When a process started (clock ticks since boot), so a reused pid is not taken for the harness; None
    without /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return None


def owner_labels() -> dict[str, str]:
    """The labels that name this harness process."""
    return {PID_LABEL: str(os.getpid()), PID_START_LABEL: _start_ticks(os.getpid()) or "", HOST_LABEL: host_id()}


def owner_gone(labels: dict[str, str]) -> bool:
    """True only for a container made by a harness process of this host that no longer runs."""
    if labels.get(HOST_LABEL) != host_id() or not labels.get(PID_LABEL, "").isdigit():
        return False
    pid = int(labels[PID_LABEL])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, another user's
    started = _start_ticks(pid)
    return bool(labels.get(PID_START_LABEL)) and started is not None and started != labels[PID_START_LABEL]

"""The executor interface: run one Launch to completion, or say why the infrastructure could not."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from harness.launch import ExecResult, Launch
from harness.rundir import RunDir
from harness.settings import ExecutorSettingsBase

# Environment variables a training may see; nothing else leaks from the host.
ENV_ALLOWLIST = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


class Executor(Protocol):
    name: ClassVar[str]
    settings: ClassVar[Any]  # the model of this executor's options block (``executor.<name>:``), or None

    def execute(
        self, launch: Launch, run: RunDir, settings: ExecutorSettingsBase, labels: dict[str, str]
    ) -> ExecResult:
        """Run ``launch`` with its output in ``run.log``; raise InfraError when it cannot be started."""
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

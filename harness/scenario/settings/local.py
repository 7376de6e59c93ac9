"""The ``executor.local`` block: the local executor's options (``harness.training.executors.local``)."""

from __future__ import annotations

from pydantic import Field

from harness.scenario.blocks import ExecutorOptions


class LocalRuntime(ExecutorOptions):
    """The local process's environment beyond the allowlist. Inside a CI job container (verl's Ascend runners)
    the image's own environment is what makes the NPUs usable: CANN's set_env.sh exports ASCEND_*, ATB_*,
    LD_LIBRARY_PATH and PYTHONPATH, which a training started with the allowlist alone would lose."""

    env: dict[str, str] = Field(default_factory=dict, description="extra environment of the training")
    pass_env: list[str] = Field(
        default_factory=list, description="host variables passed through when set; shell-style patterns (ASCEND_*)"
    )

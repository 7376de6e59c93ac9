"""Every workload and every executor: one line each, ``"module:Class"``, paired by name with its settings block.

The scenario format (``harness.scenario.settings``) holds each one's block and imports no implementation, so loading
a scenario imports none of them (nor the docker SDK); the runs, the dry run and the sweep find them here. A new
workload or executor is its settings module and one line there, its module and one line here.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any

from harness.scenario import settings
from harness.training.executors.base import Executor
from harness.training.workloads.base import Workload


def _paired(blocks: Mapping[str, Any], *paths: str) -> dict[str, Any]:
    """The implementations by name, one for each block of the scenario format, in its order."""
    out: dict[str, Any] = {}
    for path in paths:
        module, _, attr = path.partition(":")
        impl = getattr(import_module(module), attr)()
        out[impl.name] = impl
    if list(out) != list(blocks):
        raise TypeError(f"implementations {list(out)} are not the scenario format's {list(blocks)}")
    return out


WORKLOADS: dict[str, Workload] = _paired(
    settings.WORKLOADS,
    "harness.training.workloads.cpu_ppo:CpuPpo",
    "harness.training.workloads.verl_ppo:VerlPpo",
)
EXECUTORS: dict[str, Executor] = _paired(
    settings.EXECUTORS,
    "harness.training.executors.local:LocalExecutor",
    "harness.training.executors.docker:DockerExecutor",
    "harness.training.executors.ray_job:RayJobExecutor",
    "harness.training.executors.rayjob:RayJobSubmitterExecutor",
)

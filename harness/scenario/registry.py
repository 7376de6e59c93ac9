"""Every workload and every executor: one line each, ``"module:Class"``.

Everything else is derived from here: the scenario format (the ``workload`` union and its YAML tags, the
``executor`` kinds and option blocks), the CLI's and pytest's ``--executor`` choices, and the dry-run text.
A new workload or executor is one module plus one line below.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the implementations are imported by name below: training sits above the scenario format
    from harness.training.executors.base import Executor
    from harness.training.workloads.base import Workload


def _by_name(*paths: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in paths:
        module, _, attr = path.partition(":")
        impl: Any = getattr(import_module(module), attr)()
        tag = impl.settings and impl.settings.model_fields.get("kind")
        if tag is not None and getattr(tag.annotation, "__args__", ()) != (impl.name,):
            raise TypeError(f"{path}: settings kind {tag.annotation} is not Literal[{impl.name!r}]")
        out[impl.name] = impl
    return out


WORKLOADS: dict[str, Workload] = _by_name(
    "harness.training.workloads.cpu_ppo:CpuPpo",
    "harness.training.workloads.verl_ppo:VerlPpo",
)
EXECUTORS: dict[str, Executor] = _by_name(
    "harness.training.executors.local:LocalExecutor",
    "harness.training.executors.docker:DockerExecutor",
)

"""Every workload's and every executor's settings block: one line each, ``"module:Class"``.

The scenario format is assembled from here (``harness.scenario.model``: the ``workload`` union and its tags, the
``executor`` kinds and option blocks), and so are the CLI's and pytest's ``--executor`` choices;
``harness.training.registry`` pairs each block with its implementation, which the scenario format never imports.
A workload's block is a Strict model with ``kind: Literal[<name>]`` and ``check_scenario(scenario)``; an executor's is
the model of its ``executor.<name>:`` block, or None for an executor without options.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any


def _load(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(import_module(module), attr)


WORKLOADS: dict[str, Any] = {
    block.model_fields["kind"].annotation.__args__[0]: block
    for block in map(
        _load,
        (
            "harness.scenario.settings.cpu_ppo:CpuPpoSettings",
            "harness.scenario.settings.verl_ppo:VerlPpoSettings",
        ),
    )
}
EXECUTORS: dict[str, Any] = {
    name: path and _load(path)
    for name, path in {
        "local": "harness.scenario.settings.local:LocalRuntime",
        "docker": "harness.scenario.settings.docker:DockerRuntime",
        "ray": "harness.scenario.settings.ray:RayRuntime",
        "rayjob": "harness.scenario.settings.rayjob:RayJobRuntime",
    }.items()
}

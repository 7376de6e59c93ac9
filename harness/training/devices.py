"""Is the accelerator a scenario needs present on this host? If not, its items are skipped, not failed.

A host counts as having the device when this Python sees it (torch_npu / torch.cuda) OR when the device
nodes the docker executor passes into the container exist: on an Ascend runner the harness itself usually
runs without torch_npu, and only the verl image has it.
"""

from __future__ import annotations

import importlib.util
import os
from functools import cache

from harness import config
from harness.scenario.model import Scenario
from harness.training.registry import EXECUTORS

NAMES = {"npu": "an Ascend NPU", "cuda": "a CUDA GPU"}
RUNNERS = {"npu": "an Ascend runner", "cuda": "a CUDA runner"}


@cache
def _npu_in_python() -> bool:
    if importlib.util.find_spec("torch_npu") is None:  # not even installed: skip importing torch
        return False
    try:
        import torch
        import torch_npu  # noqa: F401  # registers torch.npu
    except Exception:  # ImportError, or a driver/CANN library that fails to load
        return False
    return bool(getattr(torch, "npu", None) and torch.npu.is_available())


@cache
def _cuda_in_python() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _missing_nodes(control: str, prefix: str, ids: list[int] | None) -> str | None:
    if not os.path.exists(control):
        return f"{control} is absent (no driver)"
    if missing := [n for n in ids or [0] if not os.path.exists(f"{prefix}{n}")]:
        return f"{prefix}{{{','.join(map(str, missing))}}} absent"
    return None


def unavailable_reason(device: str, ids: list[int] | None = None) -> str | None:
    """None when ``device`` is usable here; else why not (half a sentence). ``ids``: the device numbers a
    container would get (executor.docker.npu_devices / gpus); their nodes must exist."""
    if device == "cpu":
        return None
    if device == "npu":
        nodes = None if _npu_in_python() else _missing_nodes("/dev/davinci_manager", "/dev/davinci", ids)
        return nodes and f"torch_npu is not importable here and {nodes}"
    if device == "cuda":
        nodes = None if _cuda_in_python() else _missing_nodes("/dev/nvidiactl", "/dev/nvidia", ids)
        return nodes and f"torch.cuda.is_available() is False here and {nodes}"
    return f"unknown device {device!r}"


def device_problem(scenario: Scenario) -> str | None:
    """Why this host cannot give the scenario its device (with the ids its container would get), or None."""
    ex = scenario.executor
    if ex.cluster() is not None:  # the cluster's nodes hold the devices (the job checks they offer them), not here
        return None
    if why := unavailable_reason(scenario.device, EXECUTORS[ex.kind].device_ids(ex, scenario.device)):
        return why
    return _too_few_gpus(scenario)


def _too_few_gpus(scenario: Scenario) -> str | None:
    """A cuda scenario wants one GPU per rank of a node (NCCL refuses two ranks on one device): a one-GPU host
    skips a two-rank scenario instead of failing it. Counted only where this Python sees the GPUs."""
    if scenario.device != "cuda" or not _cuda_in_python():
        return None
    import torch

    wanted = scenario.world_size // getattr(scenario.workload, "nnodes", 1)
    if (seen := torch.cuda.device_count()) < wanted:
        return f"{wanted} GPUs per node wanted (one per rank), {seen} visible here"
    return None


def skip_reason(scenario: Scenario, path: str | None = None) -> str | None:
    """One line for pytest.skip and the CLI: the device, why it is unusable, how to run the scenario."""
    why = device_problem(scenario)
    if why is None:
        return None
    where = path or f"scenarios/{scenario.name}.yaml"
    return (
        f"{scenario.name} needs {NAMES.get(scenario.device, scenario.device)} (device: {scenario.device}): {why}. "
        f"Run it on {RUNNERS.get(scenario.device, scenario.device)} with `pytest scenarios/ -k {scenario.name}`; "
        f"check it here with `python -m harness dry-run {where}`"
    )


def cluster_missing(scenario: Scenario) -> str | None:
    """A scenario that runs on a Ray cluster none named (``--ray-address``, ``HARNESS_RAY_ADDRESS``,
    ``executor.ray.address``), or on verl's RayJob submitter none named (``SUBMITTER_URL``,
    ``executor.rayjob.url``): pytest skips it with this line, which says how to run it."""
    if scenario.executor.kind == "rayjob":
        if config.SUBMITTER_URL.get() or scenario.executor.options("rayjob").url:
            return None
        return (
            f"{scenario.name} is submitted to verl's RayJob submitter (executor rayjob) and none is named: it runs on "
            f"verl's multi-node runners, {config.SUBMITTER_URL.name} set (docs/multinode-nightly.md); check it here "
            f"with `python -m harness dry-run scenarios/{scenario.name}.yaml`"
        )
    if scenario.executor.kind != "ray" or config.RAY_ADDRESS.get() or scenario.executor.options("ray").address:
        return None
    return (
        f"{scenario.name} runs on a Ray cluster (executor ray) and none is named: `pytest scenarios/ -k "
        f"{scenario.name} --ray-address http://HEAD:8265` (or {config.RAY_ADDRESS.name}; docs/several-nodes.md)"
    )

"""The workload registry: each workload is one module with a settings model and a ``prepare``."""

from __future__ import annotations

from harness.workloads.base import Workload
from harness.workloads.cpu_ppo import CpuPpo, CpuPpoSettings

WorkloadSettings = CpuPpoSettings

WORKLOADS: dict[str, Workload] = {"cpu_ppo": CpuPpo()}

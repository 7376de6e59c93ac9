"""The workload registry: each workload is one module with a settings model and a ``prepare``."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from harness.workloads.base import Workload
from harness.workloads.cpu_ppo import CpuPpo, CpuPpoSettings
from harness.workloads.verl_ppo import VerlPpo, VerlPpoSettings

WorkloadSettings = Annotated[CpuPpoSettings | VerlPpoSettings, Field(discriminator="kind")]

WORKLOADS: dict[str, Workload] = {"cpu_ppo": CpuPpo(), "verl_ppo": VerlPpo()}

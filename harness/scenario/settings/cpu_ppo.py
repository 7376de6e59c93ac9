"""The ``workload: cpu_ppo`` block: the embedded workload's knobs (``harness.training.workloads.cpu_ppo``), validated
against the scenario."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt

from harness.scenario.blocks import ScenarioView, TinyQwen2
from harness.strict import Strict

CRITIC_STAGES = {"compute_values", "critic_update"}


class CpuPpoSettings(Strict):
    kind: Literal["cpu_ppo"]
    model: TinyQwen2 = TinyQwen2()
    seed: int = 0
    # sized so an unprofiled step takes ~0.3 s on one CPU thread: shorter steps make on/off ratios noise
    batch_size: PositiveInt = 16
    prompt_length: PositiveInt = 48
    response_length: PositiveInt = 48
    lr: PositiveFloat = 1e-4
    critic: bool = Field(False, description="train a critic (compute_values, critic_update)")
    critic_roles: Literal["engine_workers", "documented"] = Field(
        "engine_workers",
        description="engine_workers: annotate the critic as verl 0.9.1's engine workers do (role train_batch, "
        "never dumped); documented: with the stage names verl's docs list",
    )
    threads_per_rank: PositiveInt = 1
    dtype: Literal["float32", "bfloat16"] = Field(
        "float32",
        description="the models' parameters and activations; bfloat16 on device cuda only (what GPU training runs, "
        "and where msprobe's statistics of bf16 tensors matter; CPU bf16 kernels are slow and not what runs)",
    )

    def check_scenario(self, scenario: ScenarioView) -> None:
        if scenario.device not in ("cpu", "cuda"):
            raise ValueError(f"workload cpu_ppo runs on device cpu or cuda, not {scenario.device}")
        if scenario.executor.cluster() is not None:
            raise ValueError(
                f"workload cpu_ppo forks its ranks on one host: executor local or docker, not {scenario.executor.kind}"
            )
        if scenario.precision_debugger.finish_hook_ranks is not None:
            raise ValueError("precision_debugger.finish_hook_ranks is verl's finish hook: workload verl_ppo only")
        if self.dtype == "bfloat16" and scenario.device != "cuda":
            raise ValueError("workload.dtype bfloat16 needs device cuda")
        wanted = CRITIC_STAGES & (set(scenario.precision_debugger.stages) | set(scenario.expected_stages))
        if wanted and not self.critic:
            raise ValueError(f"stages {sorted(wanted)} need a critic: set workload.critic: true")
        if "compute_rm_score" in scenario.expected_stages:
            raise ValueError("workload cpu_ppo has no reward model: compute_rm_score cannot be expected")
        if self.prompt_length + self.response_length > self.model.max_position_embeddings:
            raise ValueError("prompt_length + response_length exceeds model.max_position_embeddings")

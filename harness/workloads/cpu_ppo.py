"""The embedded CPU workload: tiny Qwen2 actor/ref/critic trained PPO-style (see ``cpu_ppo_train``)."""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import Field, PositiveFloat, PositiveInt

from harness.dialect import dialect_of
from harness.launch import Launch
from harness.msprobe_config import msprobe_config
from harness.rundir import RunDir
from harness.settings import ScenarioView
from harness.strict import Strict
from harness.workloads import fault_injection

CRITIC_STAGES = {"compute_values", "critic_update"}


class TinyQwen2(Strict):
    """A transformers Qwen2Config, randomly initialised: nothing is downloaded."""

    vocab_size: PositiveInt = 256
    hidden_size: PositiveInt = 128
    intermediate_size: PositiveInt = 512
    num_hidden_layers: PositiveInt = 3
    num_attention_heads: PositiveInt = 4
    num_key_value_heads: PositiveInt = 2
    max_position_embeddings: PositiveInt = 128


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

    def check_scenario(self, scenario: ScenarioView) -> None:
        if scenario.device != "cpu":
            raise ValueError("workload cpu_ppo runs on device 'cpu' only")
        wanted = CRITIC_STAGES & (set(scenario.precision_debugger.stages) | set(scenario.expected_stages))
        if wanted and not self.critic:
            raise ValueError(f"stages {sorted(wanted)} need a critic: set workload.critic: true")
        if "compute_rm_score" in scenario.expected_stages:
            raise ValueError("workload cpu_ppo has no reward model: compute_rm_score cannot be expected")
        if self.prompt_length + self.response_length > self.model.max_position_embeddings:
            raise ValueError("prompt_length + response_length exceeds model.max_position_embeddings")


class CpuPpo:
    name: ClassVar[str] = "cpu_ppo"
    settings: ClassVar[Any] = CpuPpoSettings
    symbols: ClassVar[tuple[str, ...]] = (  # what cpu_ppo_train imports and calls from verl
        "verl.utils.profiler.DistProfiler",
        "verl.utils.profiler.DistProfiler.annotate",
        "verl.utils.profiler.DistProfiler.start",
        "verl.utils.profiler.DistProfiler.stop",
        "verl.utils.profiler.ProfilerConfig",
        "verl.utils.profiler.config.PrecisionDebuggerToolConfig",
        "verl.utils.profiler.performance.simple_timer",
        "verl.utils.tracking.FileLogger",
        "verl.trainer.ppo.core_algos.compute_gae_advantage_return",
    )

    def takes_slot(self, scenario: ScenarioView) -> bool:
        return False  # ~0.5 GiB and one thread per rank

    def describe(self, scenario: ScenarioView, run: RunDir, python: str | None = None) -> list[str]:
        return [dialect_of(python).line()]  # no host inputs, no trainer config: how the on run configures verl

    def prepare(
        self, scenario: ScenarioView, run: RunDir, enabled: bool, *, dry: bool = False, python: str | None = None
    ) -> Launch:
        s: CpuPpoSettings = scenario.workload
        run.root.mkdir(parents=True, exist_ok=True)
        profiler = None
        if enabled:
            pd = scenario.precision_debugger
            cfg = msprobe_config(pd, dump_path=str(run.dumps))
            run.msprobe_config.write_text(json.dumps(cfg, indent=2))
            dialect = dialect_of(python)  # the target's own way to configure precision_debugger
            profiler = {
                "dialect": dialect.name,
                "all_ranks": dialect.all_ranks,
                "save_path": str(run.dumps),
                "steps": pd.steps,
                "stages": pd.stages,
                "config_path": str(run.msprobe_config),
                "strict": pd.strict,
            }
        spec = {
            "engine": scenario.engine,
            "world_size": scenario.world_size,
            "steps": scenario.steps,
            "seed": s.seed,
            "model": s.model.model_dump(),
            "batch_size": s.batch_size,
            "prompt_length": s.prompt_length,
            "response_length": s.response_length,
            "lr": s.lr,
            "critic": s.critic,
            "critic_roles": s.critic_roles,
            "threads_per_rank": s.threads_per_rank,
            "store_path": str(run.root / "pg_store"),
            "profiler": profiler,
        }
        run.spec.write_text(json.dumps(spec, indent=2))
        return Launch(
            module="harness.workloads.cpu_ppo_train",
            args=[str(run.spec)],
            # the test-only fault knobs (harness.workloads.fault_injection) reach the "on" run only when set
            env={"VERL_FILE_LOGGER_PATH": str(run.metrics), **(fault_injection.passthrough() if enabled else {})},
            workdir=run.root,
            python=python,
        )

"""The embedded workload: tiny Qwen2 actor/ref/critic trained PPO-style (see ``train``), on CPU (gloo)
or on CUDA GPUs (NCCL, one GPU per rank; bf16 there if the scenario asks).

The package: ``spec`` (spec.json, what a run is asked to do), ``train`` (the training program, run as
``python -m harness.training.workloads.cpu_ppo.train SPEC.json``); this module is the workload that writes the spec."""

from __future__ import annotations

import json
from typing import ClassVar

from harness.artifacts.rundir import RunDir
from harness.errors import InfraError
from harness.scenario.blocks import ScenarioView
from harness.scenario.settings.cpu_ppo import CpuPpoSettings
from harness.targets.dialect import dialect_of
from harness.training.launch import Launch
from harness.training.msprobe_config import msprobe_config
from harness.training.workloads import fault_injection
from harness.training.workloads.cpu_ppo.spec import ProfilerSpec, TrainSpec


class CpuPpo:
    name: ClassVar[str] = "cpu_ppo"
    symbols: ClassVar[tuple[str, ...]] = (  # what train imports and calls from verl
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
        if scenario.device == "cuda" and not dry:
            cuda_problem(scenario.world_size)
        run.root.mkdir(parents=True, exist_ok=True)
        profiler = None
        if enabled:
            pd = scenario.precision_debugger
            cfg = msprobe_config(pd, dump_path=str(run.dumps))
            run.msprobe_config.write_text(json.dumps(cfg, indent=2))
            dialect = dialect_of(python)  # the target's own way to configure precision_debugger
            profiler = ProfilerSpec(
                dialect=dialect.name,
                all_ranks=dialect.all_ranks,
                save_path=str(run.dumps),
                steps=pd.steps,
                stages=list(pd.stages),
                config_path=str(run.msprobe_config),
                strict=pd.strict,
            )
        spec = TrainSpec(
            engine=scenario.engine,
            device=scenario.device,
            dtype=s.dtype,
            world_size=scenario.world_size,
            steps=scenario.steps,
            seed=s.seed,
            model=s.model.model_dump(),
            batch_size=s.batch_size,
            prompt_length=s.prompt_length,
            response_length=s.response_length,
            lr=s.lr,
            critic=s.critic,
            critic_roles=s.critic_roles,
            threads_per_rank=s.threads_per_rank,
            store_path=str(run.root / "pg_store"),
            profiler=profiler,
        )
        spec.write(run.spec)
        return Launch(
            module="harness.training.workloads.cpu_ppo.train",
            args=[str(run.spec)],
            # the test-only fault knobs (harness.training.workloads.fault_injection) reach the "on" run only when set
            env={"VERL_FILE_LOGGER_PATH": str(run.metrics), **(fault_injection.passthrough() if enabled else {})},
            workdir=run.root,
            python=python,
        )


def cuda_problem(world_size: int) -> None:
    """A cuda run forced onto a host that cannot hold it (pytest and ``harness run`` skip it before this): one
    line naming what is missing. The training runs on the harness's own torch (the embedded workload has no CUDA
    image), so that torch must see the GPUs; one per rank: NCCL refuses two ranks on one device."""
    import torch

    if not torch.cuda.is_available():
        raise InfraError(
            "device cuda: torch.cuda.is_available() is False in the harness's Python (no GPU, no driver, or a CPU "
            "build of torch); run the cuda scenarios on a CUDA runner (docs/cuda.md)"
        )
    if (seen := torch.cuda.device_count()) < world_size:
        raise InfraError(
            f"device cuda: world_size {world_size} needs {world_size} GPUs (one per NCCL rank), {seen} visible here"
        )

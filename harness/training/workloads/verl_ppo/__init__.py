"""verl's own PPO trainer as the workload: ``python3 -m verl.trainer.main_ppo`` plus hydra overrides.

This is what the Ascend runners execute (inside the verl Ascend image): the real trainer, real workers,
real rollout engine. The harness only decides the overrides. Before every launch the overrides are composed
offline against the installed verl's hydra config (``harness.training.workloads.verl_ppo.config``), because a profiler
setting that silently resolves to something else (a ``+`` typo) costs a whole night and yields no dumps.

``device: cpu`` runs the same trainer, workers, Ray and FSDP2 (over gloo) on the host, with verl's own
plugin points filled by ``harness.training.workloads.verl_cpu`` (a CPU platform, an HF-``generate`` rollout, a few
checked patches), tiny locally made assets and a dense reward. The argv is built by the same
``build_overrides``, plus the CPU block (``cpu_overrides``), and checked by the same offline check.

The package: ``settings`` (the scenario block), ``inputs`` (host paths), ``overrides`` (the argv), ``config`` (their
offline check against verl's hydra config), ``cpu`` (the CPU block); this module is the workload that puts them
together.
"""

from __future__ import annotations

import json
import shlex
from typing import ClassVar

from harness.artifacts.rundir import RunDir
from harness.errors import InfraError
from harness.scenario.blocks import ScenarioView
from harness.scenario.settings.verl_ppo import VerlPpoSettings
from harness.scenario.stages import STAGES
from harness.targets.dialect import dialect_of
from harness.training.launch import Launch, NodeRun
from harness.training.msprobe_config import msprobe_config
from harness.training.workloads.verl_cpu import assets
from harness.training.workloads.verl_ppo.cpu import check_cpu_plugin_symbols, cpu_env
from harness.training.workloads.verl_ppo.inputs import Inputs
from harness.training.workloads.verl_ppo.overrides import build_overrides

MODULE = "verl.trainer.main_ppo"
CPU_MODULE = "harness.training.workloads.verl_cpu.main"  # main_ppo behind a launcher that owns Ray's temp dir
# the Ray resource a rank asks for on each device (the CPU platform names its ranks "GPU": verl counts those)
RANK_RESOURCE = {"cpu": "GPU", "cuda": "GPU", "npu": "NPU"}


class VerlPpo:
    name: ClassVar[str] = "verl_ppo"
    symbols: ClassVar[tuple[str, ...]] = (  # the target's main_ppo and the precision_debugger integration it sets up
        "verl.trainer.main_ppo.main",
        "verl.utils.profiler.precision_debugger_profile.PrecisionDebuggerProfiler",
        "verl.utils.profiler.config.PrecisionDebuggerToolConfig",
    )

    def prepare(
        self, scenario: ScenarioView, run: RunDir, enabled: bool, *, dry: bool = False, python: str | None = None
    ) -> Launch:
        """Write the msprobe config (on), compose and check the overrides against the target's verl (``python``,
        its interpreter), and say what to run. Unless ``dry`` (a dry run describes a runner, not this machine),
        the model and data must exist here: they are mounted from this host."""
        from harness.training.workloads.verl_ppo.config import check_overrides

        s: VerlPpoSettings = scenario.workload
        if scenario.device == "cpu":
            check_cpu_plugin_symbols(python)
        if s.tiny is not None and not dry:
            assets.ensure(s.tiny)
        inputs = Inputs.of(s)
        node = self._node(scenario, run)
        if node is None and not dry and (missing := inputs.missing()):  # a cluster's job checks every node
            raise InfraError(
                f"verl_ppo inputs missing on this host: {'; '.join(missing)}. Runners keep them in their caches "
                f"(QWEN2_0_5B_PATH, GSM8K_DATA_DIR); make the gsm8k parquet files with: "
                f"{' '.join(inputs.prepare_data_argv())}"
            )
        run.root.mkdir(parents=True, exist_ok=True)
        if enabled:  # on a cluster, the job places it on every node (node.msprobe_config)
            cfg = msprobe_config(scenario.precision_debugger, dump_path=str(node.dumps if node else run.dumps))
            run.msprobe_config.write_text(json.dumps(cfg, indent=2))
        dialect = dialect_of(python) if enabled else None  # how the target turns precision_debugger on
        config_name, overrides, expected = build_overrides(scenario, run, enabled, dialect, python, node)
        check_overrides(
            config_name,
            overrides,
            expected,
            enabled=enabled,
            # a target's verl (python given) is whatever it is: the image must hold it too (its label is checked)
            verl_version=s.verl_version if python is None else None,
            stages=scenario.expected_stages,
            python=python,
        )
        cpu = scenario.device == "cpu"
        return Launch(
            # on a cluster, main_ppo joins it: the CPU launcher's own Ray (temp dir, loopback namespace) is not wanted
            module=CPU_MODULE if cpu and node is None else MODULE,
            args=[f"--config-name={config_name}", *overrides],
            env={
                "VERL_FILE_LOGGER_PATH": str(node.metrics if node else run.metrics),
                "HYDRA_FULL_ERROR": "1",
                **(cpu_env() if cpu else {}),
            },
            workdir=run.root,
            inputs=[inputs.model, inputs.data_dir],
            python=python,
            node=node,
        )

    @staticmethod
    def _node(scenario: ScenarioView, run: RunDir) -> NodeRun | None:
        """Where a run on a Ray cluster keeps its files on every node (None: not on a cluster)."""
        if (cluster := scenario.executor.cluster()) is None:
            return None
        s: VerlPpoSettings = scenario.workload
        per_node = s.devices_per_node(scenario.world_size)
        resource = RANK_RESOURCE[scenario.device]
        return NodeRun.new(cluster.scratch, scenario.name, run.mode, s.nnodes, per_node, resource, cluster.node_python)

    def takes_slot(self, scenario: ScenarioView) -> bool:
        # Ray and the workers on this host (accelerator runs are the runner's, a cluster's runs its nodes')
        return scenario.device == "cpu" and scenario.executor.cluster() is None

    def describe(self, scenario: ScenarioView, run: RunDir, python: str | None = None) -> list[str]:
        """For the dry run, after ``prepare(run, dry=True)`` passed: inputs on this host, and which of verl's
        stages its trainer will run with the on run's resolved config (decided by verl's own predicates)."""
        from harness.training.workloads.verl_ppo.config import STAGE_NEEDS, compose, installed_verl, unreachable_stages

        s: VerlPpoSettings = scenario.workload
        inputs = Inputs.of(s)
        lines = [
            f"{what}: {p} ({'present' if p.exists() else 'absent'} on this host)"
            for what, p in (("model", inputs.model), ("train data", inputs.train), ("val data", inputs.val))
        ]
        if s.tiny is not None:
            lines.append("model, tokenizer and data: made on this host at the first run (workload.tiny), then cached")
        else:
            lines.append(
                f"data preparation (when the parquet files are absent): {shlex.join(inputs.prepare_data_argv())}"
            )
        lines.append(f"overrides of both runs checked offline against verl {installed_verl(python)}'s hydra config: ok")
        lines.append((dialect := dialect_of(python)).line())
        config_name, overrides, _ = build_overrides(scenario, run, enabled=True, dialect=dialect, python=python)
        skipped = unreachable_stages(compose(config_name, overrides, python), STAGE_NEEDS, python)
        runs = [st for st in scenario.expected_stages if st not in skipped]
        others = [st for st in STAGES if st not in skipped and st not in runs]
        lines.append(f"stages verl will run (its own predicates, resolved config): {', '.join(runs)}")
        lines += [f"  also run (not expected): {', '.join(others)}"] if others else []
        lines += [f"  not run (not expected): {st}: {why.split(': ', 1)[1]}" for st, why in skipped.items()]
        return lines

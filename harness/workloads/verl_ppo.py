"""verl's own PPO trainer as the workload: ``python3 -m verl.trainer.main_ppo`` plus hydra overrides.

This is what the Ascend runners execute (inside the verl Ascend image): the real trainer, real workers,
real rollout engine. The harness only decides the overrides. Before every launch the overrides are composed
offline against the installed verl's hydra config (``harness.workloads.verl_config``), because a profiler
setting that silently resolves to something else (a ``+`` typo) costs a whole night and yields no dumps.

``device: cpu`` runs the same trainer, workers, Ray and FSDP2 (over gloo) on the host, with verl's own
plugin points filled by ``harness.workloads.verl_cpu`` (a CPU platform, an HF-``generate`` rollout, a few
checked patches), tiny locally made assets and a dense reward. The argv is built by the same
``build_overrides``, plus the CPU block (``cpu_overrides``), and checked by the same offline check.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, PositiveInt, field_validator

from harness.dialect import Dialect, dialect_of
from harness.errors import InfraError
from harness.launch import Launch
from harness.msprobe_config import msprobe_config
from harness.rundir import RunDir
from harness.settings import ScenarioView
from harness.stages import STAGES
from harness.strict import Strict
from harness.workloads.verl_cpu import assets, names

MODULE = "verl.trainer.main_ppo"
CPU_MODULE = "harness.workloads.verl_cpu.main"  # main_ppo behind a launcher that owns Ray's temp dir
HF_ROLLOUT = names.ROLLOUT
# what verl's resource pools ask per rank: a bundle of max_colocate_count (3, hard-coded) CPUs; plus the
# TransferQueue controller and storage unit. Logical CPUs: real use is held down by OMP_NUM_THREADS=1
RAY_CPUS_PER_RANK, RAY_CPUS_EXTRA = 3, 2
CONFIG_NAMES = {"fsdp": "ppo_trainer", "megatron": "ppo_megatron_trainer"}
# The role whose profiler block must be enabled for a stage to dump. In verl 0.9.1 the reference model is
# fused into ActorRolloutRefWorker, whose DistProfiler is built from the ACTOR's block, so ref_compute_log_prob
# needs the actor's too; the ref's own block is enabled as well, as verl's docs say (a standalone ref worker).
ROLE_PROFILERS = {
    "actor": "actor_rollout_ref.actor.profiler",
    "ref": "actor_rollout_ref.ref.profiler",
    "critic": "critic.profiler",
}
STAGE_ROLES: dict[str, tuple[str, ...]] = {
    "actor_compute_log_prob": ("actor",),
    "actor_update": ("actor",),
    "ref_compute_log_prob": ("actor", "ref"),
    "compute_values": ("critic",),
    "critic_update": ("critic",),
}
TOOL_CONFIG = "global_profiler.global_tool_config.precision_debugger"
# Keys the harness sets from the scenario itself; an extra override would desynchronise runs and checks.
OWNED_KEYS = frozenset(
    {
        "trainer.total_training_steps",
        "trainer.logger",
        "trainer.test_freq",
        "trainer.save_freq",
        "trainer.val_before_train",
        "trainer.device",
        "trainer.nnodes",
        "trainer.n_gpus_per_node",
        "global_profiler.tool",
        "global_profiler.steps",
        "global_profiler.save_path",
    }
)
_VAR = re.compile(r"\$\{(?P<name>\w+)(?::-(?P<default>[^}]*))?\}|\$(?P<bare>\w+)")
_PLAIN_VALUE = re.compile(r"^[\w./~:@+-]*$")


def expand_path(text: str, environ: Mapping[str, str] | None = None) -> Path:
    """Shell-style ``${VAR:-default}``, ``${VAR}``, ``$VAR`` and ``~``, expanded on the host at launch time.

    Why not os.path.expandvars: it has no ``:-default``, and the defaults here are the runner caches."""
    env = os.environ if environ is None else environ

    def sub(m: re.Match[str]) -> str:
        name = m["name"] or m["bare"]
        value = env.get(name, "")
        if value or m["name"] is None:
            return value
        return m["default"] or ""

    return Path(os.path.expanduser(_VAR.sub(sub, text)))


def hydra_value(value: Any) -> str:
    """A python value as hydra override text: lists as ``[a,b]``, odd strings quoted."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    text = str(value)
    if _PLAIN_VALUE.match(text) and text:
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


class VerlPpoSettings(Strict):
    """main_ppo's knobs that a scenario chooses; everything else is verl's default or ``overrides``.

    Path defaults are the caches verl's own Ascend CI uses on its runners (``~/.cache/models/<id>`` and
    ``~/data/gsm8k`` made by examples/data_preprocess/gsm8k.py from ``~/.cache/datasets/openai/gsm8k``)."""

    kind: Literal["verl_ppo"]
    verl_version: str = Field(
        "0.9.1", description="verl in the image; the host's verl must match for the offline override check"
    )
    # Qwen2.5-0.5B: the Qwen2 architecture and size of verl's precision_debugger figures (Qwen2-0.5B), and the one
    # verl's Ascend runners hold (docs/ascend_tutorial/contribution_guide/ascend_ci_guide_zh.rst)
    model_path: str = "${QWEN2_0_5B_PATH:-~/.cache/models/Qwen/Qwen2.5-0.5B}"
    data_dir: str = Field("${GSM8K_DATA_DIR:-~/data/gsm8k}", description="holds the preprocessed parquet files")
    train_file: str = "train.parquet"
    val_file: str = "test.parquet"
    raw_dataset: str = Field(
        "${GSM8K_RAW_PATH:-~/.cache/datasets/openai/gsm8k}",
        description="HF gsm8k dataset the data-preparation step reads when the parquet files are missing",
    )
    rollout: Literal["vllm", "sglang", "hf_generate"] = Field(
        "vllm", description="hf_generate: transformers' generate, the CPU rollout (device cpu only)"
    )
    rollout_n: PositiveInt = Field(1, description="samples per prompt (GRPO needs 2 or more)")
    rollout_tp: PositiveInt = 1
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] = 0.4
    nnodes: PositiveInt = 1
    n_gpus_per_node: PositiveInt | None = Field(None, description="default: world_size / nnodes")
    adv_estimator: Literal["gae", "grpo"] = Field("gae", description="gae = PPO with a critic")
    train_batch_size: PositiveInt = 256
    ppo_mini_batch_size: PositiveInt = 64
    micro_batch_size_per_gpu: PositiveInt = Field(4, description="actor and critic updates")
    log_prob_micro_batch_size_per_gpu: PositiveInt = Field(8, description="actor and ref log-prob forwards")
    max_prompt_length: PositiveInt = 512
    max_response_length: PositiveInt = 256
    tiny: assets.TinyAssets | None = Field(
        None,
        description="make a tiny random Qwen2, its tokenizer and gsm8k-format data locally (cached) and use them "
        "instead of model_path and data_dir",
    )
    overrides: list[str] = Field(
        default_factory=list, description="extra hydra overrides, applied last (validated with the rest)"
    )

    @field_validator("overrides")
    @classmethod
    def _overrides(cls, value: list[str]) -> list[str]:
        from harness.workloads.verl_config import parse_overrides

        for ov in parse_overrides(value):
            if ov.key_or_group in OWNED_KEYS:
                raise ValueError(
                    f"override {ov.input_line!r} sets {ov.key_or_group}, which the harness sets from the scenario"
                )
        return value

    def devices_per_node(self, world_size: int) -> int:
        return self.n_gpus_per_node or world_size // self.nnodes

    def check_scenario(self, scenario: ScenarioView) -> None:
        if scenario.device == "cpu":
            if self.rollout != HF_ROLLOUT:
                raise ValueError(f"device cpu needs rollout {HF_ROLLOUT}: vllm and sglang do not run on CPU")
            if scenario.engine != "fsdp":
                raise ValueError("device cpu runs engine fsdp only (megatron-core is not installable here)")
            if scenario.executor.kind != "local":
                raise ValueError("device cpu runs with the local executor (the docker executor is not wired yet)")
            if self.nnodes != 1:
                raise ValueError("device cpu runs on one node")
        elif self.rollout == HF_ROLLOUT:
            raise ValueError(f"rollout {HF_ROLLOUT} is the CPU rollout: device cpu only")
        per_node = self.devices_per_node(scenario.world_size)
        if per_node * self.nnodes != scenario.world_size:
            raise ValueError(f"world_size {scenario.world_size} != nnodes {self.nnodes} x n_gpus_per_node {per_node}")
        ex, docker = scenario.executor, scenario.executor.options("docker")
        if self.nnodes > 1 and "RAY_ADDRESS" not in {*docker.pass_env, *docker.env}:
            raise ValueError(
                "nnodes > 1: the harness starts one process (or container), which must join a running Ray cluster "
                "spanning the nodes; pass RAY_ADDRESS (executor.docker.pass_env or env)"
            )
        stages = set(scenario.precision_debugger.stages) | set(scenario.expected_stages)
        if "compute_rm_score" in stages:
            raise ValueError(
                "stage compute_rm_score: verl 0.9.1's config has no reward-model profiler block to enable, and "
                "gsm8k's reward is a rule, not a model"
            )
        if {"compute_values", "critic_update"} & stages and self.adv_estimator != "gae":
            raise ValueError("critic stages need a critic: adv_estimator gae")
        if ex.kind == "docker" and scenario.device == "npu" and not docker.npu_devices:
            raise ValueError("device npu with the docker executor needs executor.docker.npu_devices")
        if ex.kind == "docker" and scenario.device == "npu" and len(docker.npu_devices) != per_node:
            raise ValueError(
                f"executor.docker.npu_devices has {len(docker.npu_devices)} ids for {per_node} devices per node"
            )
        if ex.kind == "docker" and scenario.device == "cuda" and len(docker.gpus) != per_node:
            raise ValueError(f"executor.docker.gpus has {len(docker.gpus)} ids for {per_node} GPUs per node")


@dataclass(frozen=True)
class Inputs:
    """The host paths one run reads (mounted read-only into the container)."""

    model: Path
    data_dir: Path
    train: Path
    val: Path
    raw_dataset: Path

    @classmethod
    def of(cls, s: VerlPpoSettings) -> Inputs:
        if s.tiny is not None:  # made as train.parquet and test.parquet, the defaults of train_file and val_file
            made = assets.paths(s.tiny)
            model, data, raw = made.model, made.data_dir, made.root
        else:
            model, data, raw = expand_path(s.model_path), expand_path(s.data_dir), expand_path(s.raw_dataset)
        return cls(model, data, data / s.train_file, data / s.val_file, raw)

    def missing(self) -> list[str]:
        out = [
            f"{what} {p}"
            for what, p in (("model", self.model), ("train data", self.train), ("val data", self.val))
            if not p.exists()
        ]
        for p in (self.model, self.data_dir):
            if not p.is_absolute():
                out.append(f"{p} is not an absolute path after expansion")
        return out

    def prepare_data_argv(self, python: str = "python") -> list[str]:
        """The data-preparation step (verl's examples/data_preprocess/gsm8k.py, as the harness module)."""
        return [
            python,
            "-m",
            "harness.workloads.gsm8k_data",
            "--raw",
            str(self.raw_dataset),
            "--out",
            str(self.data_dir),
        ]


def role_profilers(stages: Iterable[str]) -> list[str]:
    """The profiler blocks (hydra paths) that must be enabled for these stages, in a stable order."""
    roles = {r for st in stages for r in STAGE_ROLES.get(st, ())}
    return [path for role, path in ROLE_PROFILERS.items() if role in roles]


def build_overrides(
    scenario: ScenarioView, run: RunDir, enabled: bool, dialect: Dialect | None = None
) -> tuple[str, list[str], dict[str, Any]]:
    """(config name, overrides, expected resolved values). ``expected`` is what verl must resolve to. ``dialect``:
    the target's way to configure precision_debugger (harness.dialect; None: profiler-config, verl #5986 on)."""
    s: VerlPpoSettings = scenario.workload
    inputs = Inputs.of(s)
    per_node = s.devices_per_node(scenario.world_size)
    config_name = CONFIG_NAMES[scenario.engine]
    strategy = (
        [
            "actor_rollout_ref.actor.strategy=fsdp2",  # the ref follows the actor's strategy by interpolation
            "critic.strategy=fsdp2",
        ]
        if scenario.engine == "fsdp"
        else []
    )
    ov: dict[str, Any] = {
        "hydra.run.dir": run.root / "hydra",  # not ./outputs/<date>: everything of a run stays in its dir
        "algorithm.adv_estimator": s.adv_estimator,
        "data.train_files": inputs.train,
        "data.val_files": inputs.val,
        "data.train_batch_size": s.train_batch_size,
        "data.max_prompt_length": s.max_prompt_length,
        "data.max_response_length": s.max_response_length,
        "data.shuffle": False,  # off and on see the same batches at the same step: comparable step times
        "actor_rollout_ref.model.path": inputs.model,
        "actor_rollout_ref.actor.ppo_mini_batch_size": s.ppo_mini_batch_size,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": s.micro_batch_size_per_gpu,
        "actor_rollout_ref.rollout.name": s.rollout,
        "actor_rollout_ref.rollout.n": s.rollout_n,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": s.rollout_tp,
        "actor_rollout_ref.rollout.gpu_memory_utilization": s.gpu_memory_utilization,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": s.log_prob_micro_batch_size_per_gpu,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": s.log_prob_micro_batch_size_per_gpu,
        "critic.model.path": inputs.model,
        "critic.ppo_micro_batch_size_per_gpu": s.micro_batch_size_per_gpu,
        "trainer.critic_warmup": 0,
        "trainer.nnodes": s.nnodes,
        "trainer.n_gpus_per_node": per_node,
        "trainer.total_training_steps": scenario.steps,
        "trainer.test_freq": -1,
        "trainer.save_freq": -1,
        "trainer.val_before_train": False,
        "trainer.logger": ["console", "file"],
        "trainer.project_name": "verl-msprobe-harness",
        "trainer.experiment_name": f"{scenario.name}-{run.mode}",
    }
    if scenario.device != "cuda":
        ov["trainer.device"] = scenario.device
    if scenario.device == "cpu":
        ov.update(cpu_overrides(scenario))
    expected: dict[str, Any] = {
        "trainer.total_training_steps": scenario.steps,
        "trainer.logger": ["console", "file"],
        "trainer.nnodes": s.nnodes,
        "trainer.n_gpus_per_node": per_node,
    }
    if enabled:
        pd = scenario.precision_debugger
        tool = {"config_path": str(run.msprobe_config), "stages": list(pd.stages), "strict": pd.strict}
        if dialect is not None and dialect.name == "tool-config":  # verl #5186: the tool config turns it on
            tool.update(enable=True, data_dir=str(run.dumps), steps=list(pd.steps))
        ov.update(
            {
                "global_profiler.tool": "precision_debugger",
                "global_profiler.steps": list(pd.steps),
                "global_profiler.save_path": run.dumps,
            }
        )
        # no '+': these keys exist in verl 0.9.1's config, so hydra itself rejects a misspelling
        ov.update({f"{TOOL_CONFIG}.{k}": v for k, v in tool.items()})
        expected.update(
            {
                "global_profiler.tool": "precision_debugger",
                "global_profiler.steps": list(pd.steps),
                "global_profiler.save_path": str(run.dumps),
            }
        )
        expected.update({f"{TOOL_CONFIG}.{k}": v for k, v in tool.items()})
        for block in role_profilers(pd.stages):
            ov[f"{block}.enable"] = True
            if dialect is not None and dialect.all_ranks:  # its DistProfiler profiles rank 0 only by default
                ov[f"{block}.all_ranks"] = expected[f"{block}.all_ranks"] = True
            expected.update(
                {f"{block}.enable": True, f"{block}.tool": "precision_debugger", f"{block}.save_path": str(run.dumps)}
            )
            expected.update({f"{block}.tool_config.precision_debugger.{k}": v for k, v in tool.items()})
    overrides = [*strategy, *(f"{k}={hydra_value(v)}" for k, v in ov.items()), *s.overrides]
    return config_name, overrides, expected


def cpu_overrides(scenario: ScenarioView) -> dict[str, Any]:
    """What verl's trainer needs on CPU beyond the shared argv (each measured necessary; see the README)."""
    from harness.workloads.verl_cpu import reward

    ranks = scenario.world_size
    return {
        "actor_rollout_ref.model.use_remove_padding": False,  # flash-attn's varlen path
        # verl defaults to flash_attention_2; sdpa, unlike eager, masks with booleans: no -inf in the statistics
        "++actor_rollout_ref.model.override_config.attn_implementation": "sdpa",
        "critic.model.use_remove_padding": False,
        "++critic.model.override_config.attn_implementation": "sdpa",
        "actor_rollout_ref.actor.use_torch_compile": False,
        "actor_rollout_ref.ref.use_torch_compile": False,
        "actor_rollout_ref.rollout.agent.num_workers": 1,
        "reward.num_workers": 1,
        "transfer_queue.backend.SimpleStorage.num_data_storage_units": 1,
        "data.dataloader_num_workers": 0,
        "ray_kwargs.ray_init.num_cpus": RAY_CPUS_PER_RANK * ranks + RAY_CPUS_EXTRA,
        "++ray_kwargs.ray_init.num_gpus": ranks,  # logical: the CPU platform names its ranks "GPU"
        "++ray_kwargs.ray_init.include_dashboard": False,
        "++ray_kwargs.ray_init._node_ip_address": "127.0.0.1",  # Ray, and gloo after it, on localhost only
        "reward.custom_reward_function.path": Path(reward.__file__),
        "reward.custom_reward_function.name": "compute_score",
    }


def _check_cpu_plugin_symbols(python: str | None) -> None:
    """Before anything starts: the verl under test (``python``: its interpreter; None: the harness's own) must
    hold every symbol the CPU plugin touches."""
    from harness.workloads.verl_config import verl_config_dir
    from harness.workloads.verl_cpu.patches import missing

    verl_dir = verl_config_dir(python).parents[1]
    if problems := missing(verl_dir):
        raise InfraError(f"verl at {verl_dir} cannot run on CPU: {'; '.join(problems)}")


def cpu_env() -> dict[str, str]:
    """The environment of a CPU run: the plugin in every verl process, one thread per process, offline."""
    return {
        "VERL_USE_EXTERNAL_MODULES": names.PLUGIN,
        "VERL_PLATFORM": names.PLATFORM,
        "VERL_ENGINE_DEVICE": "cuda",  # verl registers its FSDP engine for cuda and npu; it runs on CPU
        "OMP_NUM_THREADS": "1",
        "RAY_USAGE_STATS_ENABLED": "0",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


class VerlPpo:
    name: ClassVar[str] = "verl_ppo"
    settings: ClassVar[Any] = VerlPpoSettings
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
        from harness.workloads.verl_config import check_overrides

        s: VerlPpoSettings = scenario.workload
        if scenario.device == "cpu":
            _check_cpu_plugin_symbols(python)
        if s.tiny is not None and not dry:
            assets.ensure(s.tiny)
        inputs = Inputs.of(s)
        if not dry and (missing := inputs.missing()):
            raise InfraError(
                f"verl_ppo inputs missing on this host: {'; '.join(missing)}. Runners keep them in their caches "
                f"(QWEN2_0_5B_PATH, GSM8K_DATA_DIR); make the gsm8k parquet files with: "
                f"{' '.join(inputs.prepare_data_argv())}"
            )
        run.root.mkdir(parents=True, exist_ok=True)
        if enabled:
            cfg = msprobe_config(scenario.precision_debugger, dump_path=str(run.dumps))
            run.msprobe_config.write_text(json.dumps(cfg, indent=2))
        dialect = dialect_of(python) if enabled else None  # how the target turns precision_debugger on
        config_name, overrides, expected = build_overrides(scenario, run, enabled, dialect)
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
            module=CPU_MODULE if cpu else MODULE,
            args=[f"--config-name={config_name}", *overrides],
            env={
                "VERL_FILE_LOGGER_PATH": str(run.metrics),
                "HYDRA_FULL_ERROR": "1",
                **(cpu_env() if cpu else {}),
            },
            workdir=run.root,
            inputs=[inputs.model, inputs.data_dir],
            python=python,
        )

    def takes_slot(self, scenario: ScenarioView) -> bool:
        return scenario.device == "cpu"  # Ray and the workers on this host (accelerator runs are the runner's)

    def describe(self, scenario: ScenarioView, run: RunDir, python: str | None = None) -> list[str]:
        """For the dry run, after ``prepare(run, dry=True)`` passed: inputs on this host, and which of verl's
        stages its trainer will run with the on run's resolved config (decided by verl's own predicates)."""
        from harness.workloads.verl_config import STAGE_NEEDS, compose, installed_verl, unreachable_stages

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
        config_name, overrides, _ = build_overrides(scenario, run, enabled=True, dialect=dialect)
        skipped = unreachable_stages(compose(config_name, overrides, python), STAGE_NEEDS, python)
        runs = [st for st in scenario.expected_stages if st not in skipped]
        others = [st for st in STAGES if st not in skipped and st not in runs]
        lines.append(f"stages verl will run (its own predicates, resolved config): {', '.join(runs)}")
        lines += [f"  also run (not expected): {', '.join(others)}"] if others else []
        lines += [f"  not run (not expected): {st}: {why.split(': ', 1)[1]}" for st, why in skipped.items()]
        return lines

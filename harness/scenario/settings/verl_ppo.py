"""The ``workload: verl_ppo`` block: main_ppo's knobs a scenario chooses (``harness.training.workloads.verl_ppo``),
validated against the scenario; host paths in it are expanded at launch. ``tiny``: the tiny model and data its CPU
scenarios make locally."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, PositiveInt, field_validator

from harness.scenario.blocks import ScenarioView, TinyQwen2
from harness.strict import Strict

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override

HF_ROLLOUT = "hf_generate"  # the CPU rollout verl's processes register (harness.training.workloads.verl_cpu)


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


def parse_overrides(overrides: Iterable[str]) -> list[Override]:
    """Parse with hydra's own grammar, one override at a time so that an error names its override."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    out = []
    for text in overrides:
        try:
            out += parser.parse_overrides([text])
        except OverrideParseException as exc:
            raise ValueError(f"override {text!r} is not valid hydra syntax: {str(exc).splitlines()[0]}") from None
    return out


class TinyAssets(Strict):
    """The tiny model and data; any change makes (and caches) a new set."""

    model: TinyQwen2 = TinyQwen2(
        vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, max_position_embeddings=256
    )
    train_rows: PositiveInt = 64
    test_rows: PositiveInt = 8
    seed: int = 0


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
    tiny: TinyAssets | None = Field(
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
            if scenario.executor.kind == "docker":
                raise ValueError(
                    "device cpu runs with the local or the ray executor (the docker executor is not wired yet)"
                )
            if self.nnodes != 1 and scenario.executor.cluster() is None:
                raise ValueError("device cpu runs on one node, or on the nodes of a Ray cluster (executor ray)")
        elif self.rollout == HF_ROLLOUT:
            raise ValueError(f"rollout {HF_ROLLOUT} is the CPU rollout: device cpu only")
        per_node = self.devices_per_node(scenario.world_size)
        if per_node * self.nnodes != scenario.world_size:
            raise ValueError(f"world_size {scenario.world_size} != nnodes {self.nnodes} x n_gpus_per_node {per_node}")
        ex, docker = scenario.executor, scenario.executor.options("docker")
        if self.nnodes > 1 and ex.cluster() is None:
            raise ValueError(
                f"nnodes {self.nnodes}: the training is submitted to a Ray cluster spanning the nodes (a driver "
                "started on this host has no raylet of that cluster): executor.kind ray with executor.ray.address, or "
                "--ray-address / HARNESS_RAY_ADDRESS; or executor.kind rayjob (verl's RayJob submitter)"
            )
        if ex.kind == "rayjob" and (replicas := ex.options("rayjob").worker_replicas) != self.nnodes:
            raise ValueError(
                f"executor.rayjob.worker_replicas {replicas} != workload.nnodes {self.nnodes}: the training spans "
                "the RayJob's worker pods, one node each"
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

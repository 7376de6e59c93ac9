"""What verl's trainer needs on CPU beyond the shared argv: overrides, environment, and the symbols the CPU plugin
(``harness.training.workloads.verl_cpu``) touches, checked before anything starts."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from harness.errors import InfraError
from harness.scenario.blocks import ScenarioView
from harness.training.workloads.verl_cpu import names

# what verl's resource pools ask per rank: a bundle of max_colocate_count (3, hard-coded) CPUs; plus the
# TransferQueue controller and storage unit. Logical CPUs: real use is held down by OMP_NUM_THREADS=1
RAY_CPUS_PER_RANK, RAY_CPUS_EXTRA = 3, 2

ROLLOUT_DETERMINISM = "actor_rollout_ref.rollout.full_determinism"
SAMPLER = "trainer.v1.sampler.custom_sampler"


def cpu_overrides(scenario: ScenarioView, config_name: str, python: str | None = None) -> dict[str, Any]:
    """What verl's trainer needs on CPU beyond the shared argv (each measured necessary; see docs/cpu-workloads.md).
    ``python``: the target's interpreter (None: the harness's own verl), whose ``config_name`` config decides the
    optional keys."""
    from harness.training.workloads.verl_cpu import reward

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
        # the Ray verl starts on this host; a cluster's nodes were started with their resources (a driver joining
        # one may not ask for any: Ray raises ValueError)
        **({} if scenario.executor.cluster() is not None else local_ray(ranks)),
        "reward.custom_reward_function.path": Path(reward.__file__),
        "reward.custom_reward_function.name": "compute_score",
        **optional_overrides(config_name, python),
    }


def local_ray(ranks: int) -> dict[str, Any]:
    """The Ray cluster verl's ``ray.init`` starts on this host for ``ranks`` ranks."""
    return {
        "ray_kwargs.ray_init.num_cpus": RAY_CPUS_PER_RANK * ranks + RAY_CPUS_EXTRA,
        "++ray_kwargs.ray_init.num_gpus": ranks,  # logical: the CPU platform names its ranks "GPU"
        "++ray_kwargs.ray_init.include_dashboard": False,
        "++ray_kwargs.ray_init._node_ip_address": "127.0.0.1",  # Ray, and gloo after it, on localhost only
    }


@cache
def optional_overrides(config_name: str, python: str | None) -> dict[str, Any]:
    """What makes two runs of one CPU scenario repeatable, where the target's config has it (read from the target's
    own config, not its version: an older verl rejects a key it does not know):

    - ``rollout.full_determinism`` (verl #6572, June 2026): verl's rollout switch (deterministic request ids and
      routing, a fixed PYTHONHASHSEED);
    - ``trainer.v1.sampler.custom_sampler`` (verl's v1 trainer): the step's batch in one order (verl_cpu.sampler).
    """
    from harness.training.workloads.verl_ppo.config import compose, defines

    config = compose(config_name, [], python)
    ordered = Path(names.__file__).with_name("sampler.py")  # not imported here: it imports verl
    wanted = {ROLLOUT_DETERMINISM: True, f"{SAMPLER}.path": ordered, f"{SAMPLER}.name": names.SAMPLER}
    return {key: value for key, value in wanted.items() if defines(config, key)}


def check_cpu_plugin_symbols(python: str | None) -> None:
    """Before anything starts: the verl under test (``python``: its interpreter; None: the harness's own) must
    hold every symbol the CPU plugin touches."""
    from harness.training.workloads.verl_cpu.patches import missing
    from harness.training.workloads.verl_ppo.config import verl_config_dir

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

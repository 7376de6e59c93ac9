"""main_ppo's hydra overrides for a scenario's run, in the dialect of the verl under test, and the values verl
must resolve them to."""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Iterable
from pathlib import PurePath
from typing import Any

from harness.artifacts import finish_hook
from harness.artifacts.rundir import RunDir
from harness.scenario.blocks import ScenarioView
from harness.scenario.settings.verl_ppo import VerlPpoSettings
from harness.targets.dialect import Dialect
from harness.training.launch import NodeRun
from harness.training.workloads.verl_ppo.cpu import cpu_overrides
from harness.training.workloads.verl_ppo.inputs import Inputs

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

_PLAIN_VALUE = re.compile(r"^[\w./~:@+-]*$")


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


def role_profilers(stages: Iterable[str]) -> list[str]:
    """The profiler blocks (hydra paths) that must be enabled for these stages, in a stable order."""
    roles = {r for st in stages for r in STAGE_ROLES.get(st, ())}
    return [path for role, path in ROLE_PROFILERS.items() if role in roles]


def cluster_overrides(config_name: str, python: str | None, on_nodes: str | None = None) -> dict[str, Any]:
    """A run on a Ray cluster's nodes: Ray's workers run the target's interpreter (``python``, None: the harness's;
    ``on_nodes``: the nodes' own, where they are not this host's image: verl's RayJob pods), through verl's own key
    where the target's config has it (verl 0.9.1 does); a verl without it runs its workers with the interpreter each
    node's Ray was started with."""
    from harness.training.workloads.verl_ppo.config import compose, defines

    key = "ray_kwargs.ray_init.runtime_env.py_executable"
    worker = on_nodes or python or sys.executable
    return {key: worker} if defines(compose(config_name, [], python), key) else {}


def finish_hook_overrides(ranks: list[int], out: PurePath, worker_python: str) -> dict[str, Any]:
    """verl's finish hook (verl #7408): on ``ranks``, once after the last profiled step, the harness's command that
    records what the rank's node holds in its save_path (``harness.artifacts.finish_hook``) into ``out``, in the
    interpreter verl's workers run (the hook is their child, with their environment)."""
    command = shlex.join([worker_python, "-m", finish_hook.__name__, str(out)])
    return {"global_profiler.finish_hook_cmd": command, "global_profiler.finish_hook_ranks": list(ranks)}


def build_overrides(
    scenario: ScenarioView,
    run: RunDir,
    enabled: bool,
    dialect: Dialect | None = None,
    python: str | None = None,
    node: NodeRun | None = None,
) -> tuple[str, list[str], dict[str, Any]]:
    """(config name, overrides, expected resolved values). ``expected`` is what verl must resolve to. ``dialect``:
    the target's way to configure precision_debugger (harness.targets.dialect; None: profiler-config, verl #5986 on).
    ``python``: the target's interpreter (None: the harness's own verl). ``node``: a run on a Ray cluster, whose
    save_path and msprobe config lie on every node's own disk (None: the run dir's)."""
    s: VerlPpoSettings = scenario.workload
    dumps, config = (node.dumps, node.msprobe_config) if node else (run.dumps, run.msprobe_config)
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
        ov.update(cpu_overrides(scenario, config_name, python))
    if node is not None:  # every worker on every node runs the target's interpreter, where verl's config says so
        ov.update(cluster_overrides(config_name, python, node.python))
    expected: dict[str, Any] = {
        "trainer.total_training_steps": scenario.steps,
        "trainer.logger": ["console", "file"],
        "trainer.nnodes": s.nnodes,
        "trainer.n_gpus_per_node": per_node,
    }
    if enabled:
        pd = scenario.precision_debugger
        tool = {"config_path": str(config), "stages": list(pd.stages), "strict": pd.strict}
        if dialect is not None and dialect.name == "tool-config":  # verl #5186: the tool config turns it on
            tool.update(enable=True, data_dir=str(dumps), steps=list(pd.steps))
        ov.update(
            {
                "global_profiler.tool": "precision_debugger",
                "global_profiler.steps": list(pd.steps),
                "global_profiler.save_path": dumps,
            }
        )
        # no '+': these keys exist in verl 0.9.1's config, so hydra itself rejects a misspelling
        ov.update({f"{TOOL_CONFIG}.{k}": v for k, v in tool.items()})
        expected.update(
            {
                "global_profiler.tool": "precision_debugger",
                "global_profiler.steps": list(pd.steps),
                "global_profiler.save_path": str(dumps),
            }
        )
        expected.update({f"{TOOL_CONFIG}.{k}": v for k, v in tool.items()})
        for block in role_profilers(pd.stages):
            ov[f"{block}.enable"] = True
            if dialect is not None and dialect.all_ranks:  # its DistProfiler profiles rank 0 only by default
                ov[f"{block}.all_ranks"] = expected[f"{block}.all_ranks"] = True
            expected.update(
                {f"{block}.enable": True, f"{block}.tool": "precision_debugger", f"{block}.save_path": str(dumps)}
            )
            expected.update({f"{block}.tool_config.precision_debugger.{k}": v for k, v in tool.items()})
        if pd.finish_hook_ranks is not None:
            hook = finish_hook_overrides(pd.finish_hook_ranks, node.finish_hook if node else run.finish_hook,
                                         (node.python if node else None) or python or sys.executable)  # fmt: skip
            ov.update(hook)
            expected.update(hook)
            for block in role_profilers(pd.stages):  # each role's profiler reads them from global_profiler
                expected.update({f"{block}.{k.split('.', 1)[1]}": v for k, v in hook.items()})
    overrides = [*strategy, *(f"{k}={hydra_value(v)}" for k, v in ov.items()), *s.overrides]
    return config_name, overrides, expected

"""Offline check of main_ppo's overrides against the installed verl's own hydra config.

Why: hydra accepts ``+a.b.config_pth=...`` without complaint (``+`` adds keys), verl then reads
``config_path: null`` and precision_debugger silently dumps nothing. A failed night is the first symptom.
So before launching, the overrides are composed with verl's ``ppo_trainer`` / ``ppo_megatron_trainer``
exactly as main_ppo composes them, resolved (``OmegaConf.resolve``, as main_ppo does), and the profiler
settings verl will read are compared with what the scenario asked for. Every problem names the override.
"""

from __future__ import annotations

import difflib
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import WorkloadError
from harness.scenario.settings.verl_ppo import parse_overrides

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override
    from omegaconf import DictConfig

_ABSENT = object()


class VerlConfigError(WorkloadError):
    """The overrides do not resolve, in verl's config, to what the scenario asked for."""


def verl_config_dir(python: str | None = None) -> Path:
    """verl/trainer/config of the target's verl (``python``: its interpreter; None: the harness's own), found
    without importing verl (which imports torch)."""
    from harness.targets.environment import facts_of

    found = facts_of(python)["verl_config_dir"]
    if found is None:
        raise VerlConfigError(
            f"verl is not installed for {python or 'this host'}, so main_ppo's overrides cannot be checked offline: "
            "pip install -e '.[cpu]' (installs verl==0.9.1)"
        )
    return Path(found)


def compose(config_name: str, overrides: list[str], python: str | None = None) -> DictConfig:
    """verl's config as main_ppo gets it from ``@hydra.main`` (then resolved, as main_ppo does)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        with initialize_config_dir(config_dir=str(verl_config_dir(python)), version_base=None):
            cfg = hydra_compose(config_name=config_name, overrides=overrides)
        OmegaConf.resolve(cfg)
    except (HydraException, OmegaConfBaseException) as exc:
        raise VerlConfigError(f"verl's {config_name} config rejects the overrides: {exc}") from None
    return cfg


def _select(cfg: DictConfig, key: str) -> Any:
    from omegaconf import DictConfig, ListConfig, OmegaConf

    value = OmegaConf.select(cfg, key, default=_ABSENT)
    return OmegaConf.to_container(value) if isinstance(value, DictConfig | ListConfig) else value


def defines(cfg: DictConfig, key: str) -> bool:
    """Whether verl's config has ``key`` (set or not): an override of a key it lacks is refused by verl."""
    return _select(cfg, key) is not _ABSENT


def _is_profiler_key(key: str) -> bool:
    return key.startswith("global_profiler.") or ".profiler." in f".{key}"


def _blame(key: str, parsed: list[Override]) -> str:
    """Which overrides decide ``key``: those setting it (or a parent), else the same leaf in another profiler
    block (verl's role blocks inherit config_path/stages/strict/save_path/tool from global_profiler by
    interpolation), else near-misses of its name (typos)."""
    leaf = key.rsplit(".", 1)[-1]
    direct = [o.input_line for o in parsed if o.key_or_group == key or key.startswith(o.key_or_group + ".")]
    if direct:
        return f"set by {direct[-1]!r}" + (
            f", which wins over {', '.join(map(repr, direct[:-1]))}" if direct[1:] else ""
        )
    profiler = [o for o in parsed if _is_profiler_key(o.key_or_group)]
    if inherited := [o.input_line for o in profiler if o.key_or_group.rsplit(".", 1)[-1] == leaf]:
        return f"inherited from {', '.join(map(repr, inherited))}"
    close = [o.input_line for o in profiler if difflib.get_close_matches(leaf, [o.key_or_group.rsplit(".", 1)[-1]])]
    return "no override sets it" + (f"; misspelled in {', '.join(map(repr, close))}?" if close else "")


def _profiler_blocks(node: Any, path: str = "") -> list[str]:
    """Dotted paths of every ``*profiler`` block (a mapping with a ``tool``) in a resolved config."""
    if not isinstance(node, dict):
        return []
    here = [path] if path.endswith("profiler") and "tool" in node else []
    return here + [p for k, v in node.items() for p in _profiler_blocks(v, f"{path}.{k}" if path else str(k))]


def _disabled(cfg: DictConfig, key: str) -> bool:
    """Whether a missing (``???``) key lies under a block that is switched off (``enable: false``)."""
    parts = key.split(".")
    return any(_select(cfg, ".".join([*parts[:i], "enable"])) is False for i in range(1, len(parts)))


def _added_unknown_keys(
    config_name: str, overrides: list[str], parsed: list[Override], python: str | None = None
) -> list[str]:
    """``+``/``++`` overrides in a profiler block that add a key verl's config does not define: verl never
    reads it. Compared with the config composed from the other overrides (group choices included)."""
    adds = [o for o in parsed if (o.is_add() or o.is_force_add()) and _is_profiler_key(o.key_or_group)]
    if not adds:
        return []
    lines = {o.input_line for o in adds}
    base = compose(config_name, [t for t in overrides if t not in lines], python)
    problems = []
    for o in adds:
        key = o.key_or_group
        if _select(base, key) is not _ABSENT:
            continue
        parent, _, leaf = key.rpartition(".")
        siblings = _select(base, parent) if parent else None
        names = [str(k) for k in siblings] if isinstance(siblings, dict) else []
        close = difflib.get_close_matches(leaf, names, n=1)
        hint = f" (did you mean '{parent}.{close[0]}'?)" if close else ""
        problems.append(
            f"override {o.input_line!r} adds key {key}, which verl's {config_name} config does not define: "
            f"verl never reads it{hint}"
        )
    return problems


def check_overrides(
    config_name: str,
    overrides: list[str],
    expected: dict[str, Any],
    *,
    enabled: bool,
    verl_version: str | None = None,
    stages: Iterable[str] = (),
    python: str | None = None,
) -> DictConfig:
    """Compose and resolve; raise VerlConfigError listing every problem, else return the resolved config.

    ``expected`` maps dotted keys to the values verl must resolve them to. With ``enabled`` False, no
    profiler block may resolve to an enabled precision_debugger (the "off" baseline must not dump). Every
    stage in ``stages`` must be one verl runs with this config (both runs: their step times are compared).
    ``python``: the target environment's interpreter, whose verl's config and predicates decide (None: the
    harness's own verl)."""
    from omegaconf import OmegaConf

    installed = installed_verl(python)
    if verl_version and installed != verl_version:
        raise VerlConfigError(
            f"the host has verl {installed}, the image verl {verl_version}: the offline check would validate "
            f"against the wrong config. pip install verl=={verl_version} (or set workload.verl_version)"
        )
    try:
        parsed = parse_overrides(overrides)
    except ValueError as exc:
        raise VerlConfigError(str(exc)) from None
    cfg = compose(config_name, overrides, python)
    problems = _added_unknown_keys(config_name, overrides, parsed, python)
    for key in sorted(OmegaConf.missing_keys(cfg)):
        if not _disabled(cfg, key):
            problems.append(f"{key} is required (??? in verl's config) and no override sets it")
    for key, want in expected.items():
        got = _select(cfg, key)
        if got == want and type(got) is type(want):
            continue
        shown = "absent" if got is _ABSENT else repr(got)
        problems.append(f"{key} resolves to {shown}, expected {want!r} ({_blame(key, parsed)})")
    if not enabled:
        for block in _profiler_blocks(OmegaConf.to_container(cfg)):  # global_profiler and every role
            tool, enable = _select(cfg, f"{block}.tool"), _select(cfg, f"{block}.enable")
            if tool == "precision_debugger" and (block == "global_profiler" or enable is True):
                problems.append(
                    f"{block} resolves to an active precision_debugger in the off run "
                    f"({_blame(f'{block}.tool', parsed)})"
                )
    problems += unreachable_stages(cfg, stages, python).values()
    if problems:
        head = f"main_ppo overrides fail the offline check against verl {installed}'s {config_name} config:"
        raise VerlConfigError("\n".join([head, *(f"  - {p}" for p in problems)]))
    return cfg


# Stages that run only when verl's trainer builds the worker behind them, decided by verl's own predicate
# (``verl.trainer.ppo.utils``) on the resolved config; the keys are those the predicate reads, shown in errors.
STAGE_NEEDS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "ref_compute_log_prob": (
        "need_reference_policy",
        "no reference policy",
        ("actor_rollout_ref.actor.use_kl_loss", "algorithm.use_kl_in_reward"),
    ),
    "compute_values": ("need_critic", "no critic", ("critic.enable", "algorithm.adv_estimator")),
    "critic_update": ("need_critic", "no critic", ("critic.enable", "algorithm.adv_estimator")),
    "compute_rm_score": ("need_reward_model", "no reward model", ("reward.reward_model.enable",)),
}


def _shown(value: Any) -> str:
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def unreachable_stages(cfg: DictConfig, stages: Iterable[str], python: str | None = None) -> dict[str, str]:
    """Expected stages that verl will not run with this resolved config -> why, in one line.

    Decided by the target's verl's own predicates (run with ``python``, the target's interpreter), not copies
    of them: a verl that changes when it builds a reference policy or a critic changes the answer. A predicate
    verl no longer has is an error (API drift)."""
    wanted = [s for s in stages if s in STAGE_NEEDS]  # the actor's stages run in every PPO step
    answers = _predicates(cfg, sorted({STAGE_NEEDS[s][0] for s in wanted}), python)
    out: dict[str, str] = {}
    for stage in wanted:
        name, missing, keys = STAGE_NEEDS[stage]
        runs = answers.get(name)
        if isinstance(runs, str):
            raise VerlConfigError(f"verl {installed_verl(python)}: {runs}: cannot tell whether {stage} runs")
        if not runs:
            values = ", ".join(f"{k}={_shown(_select(cfg, k))}" for k in keys if _select(cfg, k) is not _ABSENT)
            out[stage] = (
                f"expected stage {stage} will not run: the resolved config has {missing} "
                f"({values}; verl.trainer.ppo.utils.{name})"
            )
    return out


def _predicates(cfg: DictConfig, names: list[str], python: str | None) -> dict[str, bool | str]:
    """verl.trainer.ppo.utils.<name>(cfg) for each name, in the target's interpreter (a probe subprocess given
    the resolved config as YAML) or, for the harness's own verl, here."""
    from omegaconf import OmegaConf

    from harness.targets.environment import probe_predicates
    from harness.targets.probe import predicates

    if not names:
        return {}
    if python in (None, sys.executable):
        return predicates(cfg, names)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="harness-config-") as f:
        OmegaConf.save(cfg, f.name)
        return probe_predicates(str(python), f.name, names)


def installed_verl(python: str | None = None) -> str:
    from harness.targets.environment import facts_of

    verl_config_dir(python)  # a clear error when verl is absent
    return facts_of(python)["versions"]["verl"] or "unknown"

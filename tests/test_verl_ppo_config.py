"""verl_ppo: main_ppo's argv for each qwen2_0_5b scenario, checked against the installed verl's hydra config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from harness.artifacts.rundir import ScenarioDir
from harness.errors import InfraError
from harness.scenario.loader import ScenarioError, load_scenario
from harness.training.workloads.verl_ppo import VerlPpo
from harness.training.workloads.verl_ppo.config import VerlConfigError, check_overrides, compose, unreachable_stages
from harness.training.workloads.verl_ppo.inputs import expand_path
from harness.training.workloads.verl_ppo.overrides import TOOL_CONFIG, build_overrides

ROOT = Path(__file__).resolve().parents[1]
MULTINODE = ROOT / "scenarios" / "qwen2_0_5b_fsdp_multinode.yaml"
QWEN = sorted(p.stem for p in (ROOT / "scenarios").glob("qwen2_0_5b_*.yaml") if p != MULTINODE)  # one host each


def qwen_variant(tmp_path: Path, base: str = "qwen2_0_5b_fsdp_l1", **workload: object) -> Path:
    """A copy of a shipped scenario with workload fields replaced (the file name keeps the scenario name)."""
    doc = yaml.safe_load((ROOT / "scenarios" / f"{base}.yaml").read_text())
    doc["workload"].update(workload)
    path = tmp_path / "scenarios" / f"{base}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_qwen2_0_5b_scenarios_ship():
    """The Ascend runners' four on one host, and the multi-node nightly's (verl's RayJob submitter)."""
    assert QWEN == ["qwen2_0_5b_critic_fsdp_l0", "qwen2_0_5b_fsdp_l0", "qwen2_0_5b_fsdp_l1", "qwen2_0_5b_megatron_l1"]
    assert MULTINODE.is_file()


@pytest.mark.integration
def test_the_multinode_argv_composes_and_resolves_in_verl_0_9_1(tmp_path):
    """Its paths are each node's own scratch (gathered after), so only the offline check of verl's config here."""
    scenario = load_scenario(MULTINODE)
    for mode, enabled in (("off", False), ("on", True)):
        VerlPpo().prepare(scenario, ScenarioDir(tmp_path / scenario.name).run(mode), enabled=enabled, dry=True)


@pytest.mark.integration
@pytest.mark.parametrize("name", QWEN)
def test_argv_composes_and_resolves_in_verl_0_9_1(name, tmp_path):
    scenario = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    sdir = ScenarioDir(tmp_path / name)
    off = VerlPpo().prepare(scenario, sdir.run("off"), enabled=False, dry=True)  # runs the offline check too
    on = VerlPpo().prepare(scenario, sdir.run("on"), enabled=True, dry=True)
    config = {"fsdp": "ppo_trainer", "megatron": "ppo_megatron_trainer"}[scenario.engine]
    for launch, run in ((off, sdir.run("off")), (on, sdir.run("on"))):
        assert launch.argv("python3")[:4] == ["python3", "-m", "verl.trainer.main_ppo", f"--config-name={config}"]
        assert launch.env["VERL_FILE_LOGGER_PATH"] == str(run.metrics)
        for arg in (
            f"trainer.total_training_steps={scenario.steps}",
            "trainer.test_freq=-1",
            "trainer.save_freq=-1",
            "trainer.val_before_train=False",
            "trainer.logger=[console,file]",
            "trainer.device=npu",
            "trainer.n_gpus_per_node=8",
            "actor_rollout_ref.rollout.name=vllm",
        ):
            assert arg in launch.args
        assert ("actor_rollout_ref.actor.strategy=fsdp2" in launch.args) == (scenario.engine == "fsdp")
    assert not [a for a in off.args if "profiler" in a], "the off run must carry no profiler setting"
    assert not sdir.run("off").msprobe_config.exists()
    pd = scenario.precision_debugger
    assert "global_profiler.tool=precision_debugger" in on.args
    assert f"global_profiler.steps=[{','.join(map(str, pd.steps))}]" in on.args
    assert f"global_profiler.save_path={sdir.run('on').dumps}" in on.args
    assert f"{TOOL_CONFIG}.config_path={sdir.run('on').msprobe_config}" in on.args
    assert f"{TOOL_CONFIG}.stages=[{','.join(pd.stages)}]" in on.args
    enabled = sorted(a.removesuffix(".profiler.enable=True") for a in on.args if a.endswith(".profiler.enable=True"))
    critic = {"compute_values", "critic_update"} & set(pd.stages)
    assert enabled == sorted(["actor_rollout_ref.actor", "actor_rollout_ref.ref", *(["critic"] if critic else [])])
    assert sdir.run("on").msprobe_config.is_file()

    # and what verl itself resolves (the values its workers build their profilers from)
    config_name, overrides, expected = build_overrides(scenario, sdir.run("on"), enabled=True)
    cfg = check_overrides(config_name, overrides, expected, enabled=True, verl_version="0.9.1")
    for role in ("actor_rollout_ref.actor", "actor_rollout_ref.ref"):
        block = OmegaConf.select(cfg, f"{role}.profiler")
        assert block.enable is True and block.tool == "precision_debugger"
        assert block.tool_config.precision_debugger.config_path == str(sdir.run("on").msprobe_config)
        assert list(block.tool_config.precision_debugger.stages) == list(pd.stages)
    assert cfg.critic.profiler.enable is bool(critic)


@pytest.mark.integration
def test_plus_typo_in_a_profiler_override_is_caught_and_named(tmp_path):
    typo = f"+{TOOL_CONFIG}.config_pth=/somewhere/config.json"
    scenario = load_scenario(qwen_variant(tmp_path, overrides=[typo]))  # hydra syntax is fine: it loads
    with pytest.raises(VerlConfigError) as exc:
        VerlPpo().prepare(scenario, ScenarioDir(tmp_path / "r").run("on"), enabled=True, dry=True)
    msg = str(exc.value)
    assert f"override {typo!r} adds key {TOOL_CONFIG}.config_pth" in msg
    assert f"did you mean '{TOOL_CONFIG}.config_path'?" in msg


def test_typo_instead_of_the_config_path_says_what_resolves_to_none(tmp_path):
    """What the typo costs when it replaces the real setting: hydra accepts it, config_path stays None."""
    scenario = load_scenario(ROOT / "scenarios" / "qwen2_0_5b_fsdp_l1.yaml")
    run = ScenarioDir(tmp_path / "r").run("on")
    config_name, overrides, expected = build_overrides(scenario, run, enabled=True)
    typo = f"+{TOOL_CONFIG}.config_pth={run.msprobe_config}"
    overrides = [typo if o.startswith(f"{TOOL_CONFIG}.config_path=") else o for o in overrides]
    with pytest.raises(VerlConfigError) as exc:
        check_overrides(config_name, overrides, expected, enabled=True)
    msg = str(exc.value)
    assert f"{TOOL_CONFIG}.config_path resolves to None, expected '{run.msprobe_config}'" in msg
    assert f"misspelled in {typo!r}?" in msg
    assert "actor_rollout_ref.actor.profiler.tool_config.precision_debugger.config_path resolves to None" in msg


@pytest.mark.integration
def test_an_extra_override_that_switches_a_role_off_is_named(tmp_path):
    scenario = load_scenario(qwen_variant(tmp_path, overrides=["actor_rollout_ref.ref.profiler.enable=False"]))
    with pytest.raises(
        VerlConfigError,
        match=r"actor_rollout_ref\.ref\.profiler\.enable resolves to False, expected "
        r"True \(set by 'actor_rollout_ref\.ref\.profiler\.enable=False', which wins over",
    ):
        VerlPpo().prepare(scenario, ScenarioDir(tmp_path / "r").run("on"), enabled=True, dry=True)


def test_off_run_that_would_dump_fails_the_check(tmp_path):
    scenario = load_scenario(ROOT / "scenarios" / "qwen2_0_5b_fsdp_l1.yaml")
    config_name, overrides, expected = build_overrides(scenario, ScenarioDir(tmp_path).run("off"), enabled=False)
    extra = ["actor_rollout_ref.actor.profiler.tool=precision_debugger", "actor_rollout_ref.actor.profiler.enable=True"]
    with pytest.raises(
        VerlConfigError,
        match=r"actor_rollout_ref\.actor\.profiler resolves to an active precision_debugger in the off run",
    ):
        check_overrides(config_name, overrides + extra, expected, enabled=False)


def test_required_key_left_unset_is_reported(tmp_path):
    scenario = load_scenario(ROOT / "scenarios" / "qwen2_0_5b_fsdp_l1.yaml")
    config_name, overrides, expected = build_overrides(scenario, ScenarioDir(tmp_path).run("off"), enabled=False)
    overrides = [o for o in overrides if not o.startswith("actor_rollout_ref.rollout.name=")]
    with pytest.raises(VerlConfigError, match=r"actor_rollout_ref\.rollout\.name is required"):
        check_overrides(config_name, overrides, expected, enabled=False)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["trainer.total_training_steps=3"], "sets trainer.total_training_steps, which the harness sets"),
        (["+global_profiler.steps=[1]"], "sets global_profiler.steps, which the harness sets"),
        (["data.train_files=[a,"], "is not valid hydra syntax"),
    ],
)
def test_bad_extra_overrides_fail_at_load_time(tmp_path, overrides, message):
    with pytest.raises(ScenarioError) as exc:
        load_scenario(qwen_variant(tmp_path, overrides=overrides))
    assert "workload.overrides" in str(exc.value) and message in str(exc.value)


def test_cpu_device_needs_the_cpu_rollout(tmp_path):
    doc = yaml.safe_load((ROOT / "scenarios" / "qwen2_0_5b_fsdp_l1.yaml").read_text())
    doc["device"], doc["executor"] = "cpu", {"kind": "local"}
    path = tmp_path / "scenarios" / "qwen_cpu.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ScenarioError, match="device cpu needs rollout hf_generate: vllm and sglang do not run on CPU"):
        load_scenario(path)


def test_paths_expand_like_a_shell_default():
    env = {"HOME": "/home/ci", "SET": "/models/q"}
    assert expand_path("${SET:-~/x}", env) == Path("/models/q")
    assert expand_path("${UNSET:-/cache/Qwen2-0.5B}", env) == Path("/cache/Qwen2-0.5B")
    assert expand_path("$SET/sub", env) == Path("/models/q/sub")


def test_prepare_refuses_missing_inputs_and_says_how_to_make_the_data(tmp_path, monkeypatch):
    monkeypatch.setenv("QWEN2_0_5B_PATH", str(tmp_path / "no-model"))
    monkeypatch.setenv("GSM8K_DATA_DIR", str(tmp_path / "no-data"))
    scenario = load_scenario(ROOT / "scenarios" / "qwen2_0_5b_fsdp_l1.yaml")
    with pytest.raises(InfraError) as exc:
        VerlPpo().prepare(scenario, ScenarioDir(tmp_path / "r").run("on"), enabled=True)
    msg = str(exc.value)
    assert f"model {tmp_path / 'no-model'}" in msg and f"train data {tmp_path / 'no-data' / 'train.parquet'}" in msg
    assert "python -m harness.training.workloads.gsm8k_data --raw" in msg and f"--out {tmp_path / 'no-data'}" in msg


@pytest.mark.parametrize("name", QWEN)
def test_every_expected_stage_of_a_shipped_scenario_runs_in_verl(name, tmp_path):
    """verl's own predicates (need_reference_policy, need_critic, ...) on the resolved config of the on run."""
    scenario = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    run = ScenarioDir(tmp_path / name).run("on")
    config_name, overrides, _ = build_overrides(scenario, run, enabled=True)
    assert unreachable_stages(compose(config_name, overrides), scenario.expected_stages) == {}
    assert "ref_compute_log_prob" in scenario.expected_stages


def test_a_scenario_without_a_reference_policy_is_refused_in_one_line(tmp_path):
    doc = yaml.safe_load((ROOT / "scenarios" / "qwen2_0_5b_fsdp_l1.yaml").read_text())
    doc["workload"]["overrides"] = [o for o in doc["workload"]["overrides"] if "use_kl_loss" not in o]
    path = tmp_path / "scenarios" / "qwen2_0_5b_fsdp_l1.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    scenario = load_scenario(path)
    with pytest.raises(VerlConfigError) as exc:
        VerlPpo().prepare(scenario, ScenarioDir(tmp_path / "r").run("off"), enabled=False, dry=True)
    problems = [ln.strip() for ln in str(exc.value).splitlines()[1:]]
    assert problems == [
        "- expected stage ref_compute_log_prob will not run: the resolved config has no reference policy "
        "(actor_rollout_ref.actor.use_kl_loss=false, algorithm.use_kl_in_reward=false; "
        "verl.trainer.ppo.utils.need_reference_policy)"
    ]


@pytest.mark.integration
def test_critic_stages_without_a_critic_are_refused(tmp_path):
    path = qwen_variant(tmp_path, "qwen2_0_5b_critic_fsdp_l0", overrides=["critic.enable=False"])
    scenario = load_scenario(path)
    with pytest.raises(VerlConfigError) as exc:
        VerlPpo().prepare(scenario, ScenarioDir(tmp_path / "r").run("on"), enabled=True, dry=True)
    text = str(exc.value)
    for stage in ("compute_values", "critic_update"):
        assert f"expected stage {stage} will not run: the resolved config has no critic (critic.enable=false" in text

"""verl's real trainer on CPU (verl_ppo, device cpu): the shared argv, the checked verl symbols, the assets,
the host slots. The trainings themselves run as the real_ scenarios; their process hygiene is in
test_verl_cpu_processes.py."""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from harness.artifacts.rundir import ScenarioDir
from harness.errors import InfraError
from harness.scenario.loader import ScenarioError, load_scenario
from harness.scenario.settings.verl_ppo import TinyAssets
from harness.training import slots
from harness.training.workloads.verl_cpu import assets, patches
from harness.training.workloads.verl_cpu.names import PLUGIN
from harness.training.workloads.verl_ppo import VerlPpo
from harness.training.workloads.verl_ppo.config import VerlConfigError, compose, unreachable_stages, verl_config_dir
from harness.training.workloads.verl_ppo.cpu import cpu_overrides
from harness.training.workloads.verl_ppo.overrides import build_overrides

ROOT = Path(__file__).resolve().parents[1]
REAL = sorted(p.stem for p in (ROOT / "scenarios").glob("real_*.yaml"))
VERL = verl_config_dir().parents[1]


def variant(tmp_path: Path, base: str, **changes: object) -> Path:
    doc = yaml.safe_load((ROOT / "scenarios" / f"{base}.yaml").read_text())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = doc
        for p in parents:
            node = node[p]
        node[leaf] = value
    path = tmp_path / "scenarios" / f"{base}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def keys(overrides: list[str]) -> dict[str, str]:
    return dict(o.lstrip("+").split("=", 1) for o in overrides)


def test_the_real_scenarios_ship():
    assert REAL == ["real_critic_fsdp_l1", "real_critic_strict_fsdp_l1", "real_fsdp_l0", "real_fsdp_l1"]


def test_cpu_and_ascend_argv_differ_only_in_device_model_data_rollout_and_the_cpu_block(tmp_path):
    """One argv builder: the Ascend scenario's keys are all in the CPU one; the CPU one adds only its block."""
    npu = load_scenario(ROOT / "scenarios" / "qwen2_0_5b_fsdp_l1.yaml")
    cpu = load_scenario(ROOT / "scenarios" / "real_fsdp_l1.yaml")
    _, npu_ov, _ = build_overrides(npu, ScenarioDir(tmp_path / "n").run("on"), enabled=True)
    _, cpu_ov, _ = build_overrides(cpu, ScenarioDir(tmp_path / "n").run("on"), enabled=True)
    n, c = keys(npu_ov), keys(cpu_ov)
    block = {k.lstrip("+") for k in cpu_overrides(cpu, "ppo_trainer")}
    assert set(c) - block == set(n) - block
    differ = {k for k in n if k in c and n[k] != c[k] and k not in block}
    assert differ <= {
        "trainer.device",
        "trainer.total_training_steps",
        "trainer.n_gpus_per_node",
        "trainer.experiment_name",
        "algorithm.adv_estimator",
        "actor_rollout_ref.rollout.name",
        "actor_rollout_ref.rollout.n",
        "actor_rollout_ref.model.path",
        "critic.model.path",
        "data.train_files",
        "data.val_files",
        "data.train_batch_size",
        "data.max_prompt_length",
        "data.max_response_length",
        "actor_rollout_ref.actor.ppo_mini_batch_size",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
        "critic.ppo_micro_batch_size_per_gpu",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
    }, differ
    assert c["trainer.device"] == "cpu" and c["actor_rollout_ref.rollout.name"] == "hf_generate"
    for key in ("global_profiler.tool", "global_profiler.steps", "actor_rollout_ref.actor.profiler.enable"):
        assert c[key] == n[key]


@pytest.mark.integration
@pytest.mark.parametrize("name", REAL)
def test_real_argv_passes_the_offline_check_and_every_expected_stage_runs(name, tmp_path):
    scenario = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    sdir = ScenarioDir(tmp_path / name)
    for mode in ("off", "on"):
        launch = VerlPpo().prepare(scenario, sdir.run(mode), enabled=mode == "on", dry=True)
        assert launch.module == "harness.training.workloads.verl_cpu.main"
        assert launch.env["VERL_USE_EXTERNAL_MODULES"] == PLUGIN and launch.env["OMP_NUM_THREADS"] == "1"
    config_name, overrides, _ = build_overrides(scenario, sdir.run("on"), enabled=True)
    cfg = compose(config_name, overrides)
    assert unreachable_stages(cfg, scenario.expected_stages) == {}
    assert cfg.ray_kwargs.ray_init.num_gpus == scenario.world_size
    assert cfg.reward.custom_reward_function.name == "compute_score"


def test_a_real_scenario_without_kl_loss_is_refused_naming_verls_predicate(tmp_path):
    path = variant(tmp_path, "real_fsdp_l0", workload__overrides=[])
    with pytest.raises(VerlConfigError, match=r"ref_compute_log_prob will not run: .*need_reference_policy"):
        VerlPpo().prepare(load_scenario(path), ScenarioDir(tmp_path / "r").run("off"), enabled=False, dry=True)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"workload__rollout": "vllm"}, "device cpu needs rollout hf_generate"),
        ({"engine": "megatron"}, "device cpu runs engine fsdp only"),
        ({"executor__kind": "docker"}, "device cpu runs with the local or the ray executor"),
        ({"workload__nnodes": 2}, "device cpu runs on one node, or on the nodes of a Ray cluster"),
        ({"device": "npu"}, "rollout hf_generate is the CPU rollout: device cpu only"),
    ],
)
def test_cpu_combinations_that_cannot_run_are_refused_at_load(tmp_path, changes, message):
    with pytest.raises(ScenarioError, match=message):
        load_scenario(variant(tmp_path, "real_fsdp_l0", **changes))


def fake_verl(tmp_path: Path) -> Path:
    """The source files of the modules the plugin touches, copied from the installed verl."""
    root = tmp_path / "verl"
    for sym in patches.SYMBOLS:
        src = patches._source(VERL, sym.module)
        assert src is not None, sym
        dst = root / src.relative_to(VERL)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dst)
    return root


def test_every_symbol_the_plugin_touches_exists_in_the_installed_verl():
    assert patches.missing(VERL) == []


def test_a_symbol_verl_dropped_is_named_before_training(tmp_path, monkeypatch):
    root = fake_verl(tmp_path)
    model = root / "utils" / "model.py"
    model.write_text(model.read_text().replace("def load_valuehead_model(", "def load_value_head_model("))
    (root / "workers" / "rollout" / "base.py").write_text("class BaseRollout: ...\n")
    problems = patches.missing(root)
    assert [p.split(" is missing")[0] for p in problems] == [
        "verl.workers.rollout.base._ROLLOUT_REGISTRY",
        "verl.utils.model.load_valuehead_model",
    ]
    assert "flash_attention_2 hard-coded" in problems[1]

    import harness.training.workloads.verl_ppo.config as verl_config

    monkeypatch.setattr(verl_config, "verl_config_dir", lambda python=None: root / "trainer" / "config")
    scenario = load_scenario(ROOT / "scenarios" / "real_fsdp_l0.yaml")
    with pytest.raises(InfraError) as exc:
        VerlPpo().prepare(scenario, ScenarioDir(tmp_path / "r").run("on"), enabled=True, dry=True)
    assert "\n" not in str(exc.value)
    assert "verl.utils.model.load_valuehead_model is missing" in str(exc.value)


def test_a_class_attribute_symbol_is_looked_up_in_the_class(tmp_path):
    root = fake_verl(tmp_path)
    replica = root / "workers" / "rollout" / "replica.py"
    replica.write_text(replica.read_text().replace("    def register(cls, name", "    def add(cls, name"))
    assert [p.split(" is missing")[0] for p in patches.missing(root)] == [
        "verl.workers.rollout.replica.RolloutReplicaRegistry.register"
    ]


def test_resolve_names_a_symbol_missing_at_run_time():
    with pytest.raises(RuntimeError, match=r"verl has no verl\.utils\.model\.no_such_loader \(why\)"):
        patches.resolve(patches.Symbol("verl.utils.model", "no_such_loader", "why"))


def test_assets_are_made_once_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_ASSET_CACHE", str(tmp_path / "cache"))
    spec = TinyAssets(train_rows=8, test_rows=2)
    made = assets.ensure(spec)
    assert made.root.parent == tmp_path / "cache"
    assert {p.name for p in made.data_dir.iterdir()} == {"train.parquet", "test.parquet"}
    assert (made.model / "model.safetensors").is_file() and (made.model / "tokenizer.json").is_file()
    stamp = (made.model / "config.json").stat().st_mtime_ns
    assert assets.ensure(spec) == made and (made.model / "config.json").stat().st_mtime_ns == stamp
    assert assets.paths(TinyAssets(train_rows=9)) != made  # any change: another set
    assert not [p for p in made.root.parent.iterdir() if p.name.startswith(".making-")]

    import pandas as pd
    from transformers import AutoTokenizer

    row = pd.read_parquet(made.data_dir / "train.parquet").iloc[0]
    assert row["data_source"] == "openai/gsm8k" and row["reward_model"]["ground_truth"].isdigit()
    tok = AutoTokenizer.from_pretrained(made.model)
    text = tok.apply_chat_template(list(row["prompt"]), add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>assistant\n") and tok.decode(tok(text).input_ids) == text


def test_the_dense_reward_varies_with_the_response():
    from harness.training.workloads.verl_cpu.reward import compute_score

    assert compute_score("openai/gsm8k", "aaaa", "12") == 0.125  # no digits, one distinct character in four
    assert compute_score("openai/gsm8k", "aaab", "12") == 0.25
    assert compute_score("openai/gsm8k", "it is 7", "12") < compute_score("openai/gsm8k", "#### 12", "12")


def test_heavy_slots_admit_as_many_runs_as_capacity(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_SLOT_DIR", str(tmp_path))
    monkeypatch.setenv("HARNESS_HEAVY_SLOTS", "1")
    order: list[str] = []

    def second() -> None:
        with slots.heavy_slot(poll_s=0.05) as waited:
            order.append(f"second after {waited:.1f}s")

    with slots.heavy_slot(poll_s=0.05):
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.5)
        order.append("first done")
    t.join(5)
    assert order[0] == "first done" and order[1].startswith("second after")
    assert float(order[1].split()[-1].rstrip("s")) >= 0.4


def test_slot_capacity_follows_memory_and_cores(monkeypatch):
    monkeypatch.delenv("HARNESS_HEAVY_SLOTS", raising=False)
    monkeypatch.setattr(slots.os, "cpu_count", lambda: 2)
    assert slots.capacity() == 1  # 2 cores: one real run at a time, whatever the memory
    monkeypatch.setattr(slots.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(slots.os, "sysconf", lambda n: {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 24 * 2**18}[n])
    assert slots.capacity() == 2  # 24 GiB x 0.6 / 5 GiB


def test_the_launcher_removes_ray_dirs_of_killed_launchers_only(tmp_path):
    import os

    from harness.training.workloads.verl_cpu.main import PREFIX, _remove_stale

    dead, alive, other = (tmp_path / f"{PREFIX}{n}-x" for n in (2**22 + 12345, os.getpid(), "abc"))
    for d in (dead, alive, other):
        d.mkdir()
    _remove_stale(tmp_path)
    assert not dead.exists() and alive.exists() and other.exists()


def test_rollout_seeds_tell_a_prompts_samples_apart_and_their_set_is_the_arrival_orders_none_of_business():
    from harness.training.workloads.verl_cpu.rollout import HFGenerateServer

    def seeds(requests: list[tuple[list[int], str]]) -> list[int]:
        server = SimpleNamespace(seen=Counter(), global_steps=2, replica_rank=0)
        return [HFGenerateServer.seed(server, prompt, rid) for prompt, rid in requests]  # type: ignore[arg-type]

    a, b = [11, 12, 13], [21, 22]
    arrived = seeds([(a, "uuid1"), (b, "uuid2"), (a, "uuid3"), (b, "uuid4")])
    assert len(set(arrived)) == 4  # the two samples of each prompt differ
    assert sorted(arrived) == sorted(seeds([(b, "x"), (a, "y"), (b, "z"), (a, "w")]))  # another arrival order
    assert seeds([(a, "det-0"), (a, "det-0")]) == seeds([(a, "u"), (a, "v")])  # verl's v1 trainer: all det-0
    legacy = seeds([(a, "det-1"), (a, "det-0")])  # verl's legacy trainer: the index in the batch decides
    assert legacy[0] != legacy[1] and seeds([(a, "det-0"), (a, "det-1")]) == legacy[::-1]


def test_the_ordered_replay_buffer_hands_the_same_batch_in_one_order_whatever_the_finishing_order(monkeypatch):
    import torch
    from transfer_queue import KVBatchMeta
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    from harness.training.workloads.verl_cpu import sampler

    tokens = {"a_0_0": [5, 1], "a_1_0": [5, 0], "b_0_0": [2, 9], "b_1_0": [2, 9, 1]}

    def sampled(finished: list[str]) -> list[str]:
        def sample(self: object, global_steps: int, partition_id: str, batch_size: int) -> tuple[KVBatchMeta, dict]:
            tags = [{"key": k} for k in finished]
            return KVBatchMeta(keys=finished, tags=tags, partition_id=partition_id, extra_info={"x": 1}), {"m": 1}

        def kv_batch_get(keys: list[str], partition_id: str, select_fields: list[str]) -> dict[str, torch.Tensor]:
            assert select_fields == ["input_ids"] and partition_id == "train"
            return {"input_ids": torch.nested.nested_tensor([torch.tensor(tokens[k]) for k in keys])}

        monkeypatch.setattr(ReplayBuffer, "sample", sample)
        monkeypatch.setattr(sampler.tq, "kv_batch_get", kv_batch_get)
        batch, metrics = object.__new__(sampler.OrderedReplayBuffer).sample(2, "train", 2)
        assert metrics == {"m": 1} and batch.extra_info == {"x": 1}
        assert [t["key"] for t in batch.tags] == batch.keys  # tags follow their keys
        return batch.keys

    assert sampled(list(tokens)) == sampled(list(reversed(tokens))) == ["b_0_0", "b_1_0", "a_1_0", "a_0_0"]


def test_repeatability_keys_are_passed_only_where_the_targets_config_has_them(tmp_path, monkeypatch):
    from harness.training.workloads.verl_ppo import config as verl_config
    from harness.training.workloads.verl_ppo.cpu import ROLLOUT_DETERMINISM, SAMPLER, optional_overrides

    assert set(optional_overrides("ppo_trainer", None)) == {ROLLOUT_DETERMINISM, f"{SAMPLER}.path", f"{SAMPLER}.name"}
    assert Path(optional_overrides("ppo_trainer", None)[f"{SAMPLER}.path"]).is_file()
    older = tmp_path / "config"  # a verl before #6572 and before the v1 trainer's custom sampler
    shutil.copytree(VERL / "trainer" / "config", older)
    rollout = older / "rollout" / "rollout.yaml"
    rollout.write_text(re.sub(r"^full_determinism: .*\n", "", rollout.read_text(), flags=re.M))
    trainer = older / "ppo_trainer.yaml"
    doc = yaml.safe_load(trainer.read_text())
    del doc["trainer"]["v1"]["sampler"]["custom_sampler"]
    trainer.write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setattr(verl_config, "verl_config_dir", lambda python=None: older)
    assert optional_overrides("ppo_trainer", "/an/older/verl/bin/python") == {}

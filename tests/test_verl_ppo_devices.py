"""Device gating: without an NPU the qwen2_0_5b scenarios are collected, skipped with one line, exit 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.outcomes import EXIT_ERROR
from harness.scenario.loader import load_scenario
from harness.training import devices

ROOT = Path(__file__).resolve().parents[1]
no_npu = pytest.mark.skipif(devices.unavailable_reason("npu") is None, reason="this host has an Ascend NPU")


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, check=False)


def test_unavailable_reason(monkeypatch, tmp_path):
    assert devices.unavailable_reason("cpu") is None
    monkeypatch.setattr(devices, "_npu_in_python", lambda: False)
    monkeypatch.setattr(devices, "_cuda_in_python", lambda: True)
    assert devices.unavailable_reason("cuda") is None
    real_exists = devices.os.path.exists
    monkeypatch.setattr(devices.os.path, "exists", lambda p: p in {"/dev/davinci_manager", "/dev/davinci0"})
    assert devices.unavailable_reason("npu", [0]) is None  # device nodes are enough: the container gets them
    assert devices.unavailable_reason("npu", [0, 3]) == "torch_npu is not importable here and /dev/davinci{3} absent"
    monkeypatch.setattr(devices.os.path, "exists", real_exists)


def test_skip_line_names_device_and_how_to_run(monkeypatch):
    monkeypatch.setattr(devices, "_npu_in_python", lambda: False)
    monkeypatch.setattr(devices, "_missing_nodes", lambda control, prefix, ids: "no NPU here")
    scenario = load_scenario(ROOT / "scenarios" / "qwen2_0_5b_fsdp_l1.yaml")
    line = devices.skip_reason(scenario)
    assert "\n" not in line
    assert line == (
        "qwen2_0_5b_fsdp_l1 needs an Ascend NPU (device: npu): torch_npu is not importable here and no NPU here. "
        "Run it on an Ascend runner with "
        "`pytest scenarios/ -k qwen2_0_5b_fsdp_l1`; check it here with "
        "`python -m harness dry-run scenarios/qwen2_0_5b_fsdp_l1.yaml`"
    )
    assert devices.skip_reason(load_scenario(ROOT / "scenarios" / "tiny_fsdp_l1.yaml")) is None


@pytest.mark.integration
@no_npu
def test_pytest_collects_and_skips_the_qwen_scenarios(tmp_path):
    proc = run("-m", "pytest", "scenarios/", "-k", "qwen2_0_5b", "-rs", f"--harness-results={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "26 skipped" in proc.stdout  # 5 items each: the four one-host scenarios' (the critic's known gap too)
    assert "qwen2_0_5b_megatron_l1 needs an Ascend NPU (device: npu): torch_npu is not importable" in proc.stdout
    assert "qwen2_0_5b_fsdp_multinode" in proc.stdout  # and the multi-node one's, skipped with its own line
    assert not list(tmp_path.iterdir()), "a skipped scenario must not train"

    proc = run("-m", "pytest", "scenarios/", "-k", "qwen2_0_5b", "--collect-only", "-q")
    items = {ln for ln in proc.stdout.splitlines() if "::" in ln}
    for name in ("fsdp_l0", "fsdp_l1", "megatron_l1", "critic_fsdp_l0"):
        for check in ("layout", "contents", "overhead", "disk"):
            assert f"scenarios/qwen2_0_5b_{name}.yaml::{check}" in items
    assert "scenarios/qwen2_0_5b_critic_fsdp_l0.yaml::known_gap[compute_values+critic_update]" in items


@pytest.mark.integration
@no_npu
def test_cli_run_skips_with_the_same_line(tmp_path):
    proc = run("-m", "harness", "run", "scenarios/qwen2_0_5b_fsdp_l0.yaml", "--results", str(tmp_path))
    assert proc.returncode == EXIT_ERROR, proc.stdout + proc.stderr  # nothing ran here: never a pass
    out = " ".join(proc.stdout.split())  # rich wraps long lines
    assert "SKIPPED qwen2_0_5b_fsdp_l0 needs an Ascend NPU (device: npu)" in out
    assert "NOTHING CHECKED: 0 of 1 scenarios ran here" in out
    assert not (tmp_path / "qwen2_0_5b_fsdp_l0").exists()


@pytest.mark.integration
def test_dry_run_prints_both_runs_and_writes_nothing(tmp_path):
    results = tmp_path / "results"
    proc = run("-m", "harness", "dry-run", "scenarios/qwen2_0_5b_megatron_l1.yaml", "--results", str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert out.count("image: verl-msprobe-harness:ascend\n") == 2
    assert "--- off run" in out and "--- on run" in out and "--config-name=ppo_megatron_trainer" in out
    assert "/dev/davinci7" in out and "ASCEND_RT_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" in out
    assert f"VERL_FILE_LOGGER_PATH={results}/qwen2_0_5b_megatron_l1/on/metrics.jsonl" in out
    assert f"global_profiler.save_path={results}/qwen2_0_5b_megatron_l1/on/dumps" in out
    assert '"level": "L1"' in out and "harness-dry-run-" not in out
    assert not results.exists()


@pytest.mark.integration
def test_job_container_dry_run_runs_locally_with_the_runners_inputs(tmp_path, monkeypatch):
    """The job-container mode (verl's runners: the harness inside verl's Ascend image, --executor local): the argv
    on the model and data paths the runners hold, the user, the environment the scenario passes, the offline
    check, and Megatron on mbridge."""
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", "/usr/local/Ascend/ascend-toolkit/latest")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    monkeypatch.delenv("QWEN2_0_5B_PATH", raising=False)
    results = tmp_path / "results"
    proc = run("-m", "harness", "dry-run", "scenarios/qwen2_0_5b_megatron_l1.yaml", "--executor", "local",
               "--results", str(results))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "executor local" in out and out.count("local process in ") == 2 and "image:" not in out
    assert out.count(f"user: uid {os.getuid()} (") == 2
    home = Path.home()
    assert f"actor_rollout_ref.model.path={home}/.cache/models/Qwen/Qwen2.5-0.5B" in out
    assert f"data.train_files={home}/data/gsm8k/train.parquet" in out
    assert "actor_rollout_ref.actor.megatron.vanilla_mbridge=True" in out
    assert "critic.megatron.vanilla_mbridge=True" in out
    assert "overrides of both runs checked offline against verl 0.9.1's hydra config: ok" in out
    assert out.count("HF_HUB_OFFLINE=1") == 2 and out.count("ASCEND_TOOLKIT_HOME=/usr/local/Ascend") == 2
    assert "ghp_secret" not in out and not results.exists()

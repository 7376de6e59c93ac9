"""The CUDA tier without a GPU: its scenarios load, skip with one line, refuse a forced run, and the workload's CUDA
branches (NCCL, one GPU per rank, spawn, bf16, synchronised timers, no CPU seconds) run with the device faked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.artifacts.rundir import RunDir
from harness.errors import InfraError, ScenarioError
from harness.outcomes import EXIT_ERROR
from harness.scenario.loader import load_scenario
from harness.training import devices
from harness.training.workloads import cpu_ppo
from harness.training.workloads.cpu_ppo import train as cpu_ppo_train

ROOT = Path(__file__).resolve().parents[1]
TINY = ["tiny_cuda_fsdp_l0", "tiny_cuda_fsdp_l1", "tiny_cuda_fsdp_l1_nccl", "tiny_cuda_fsdp_mix"]
VERL = ["verl_cuda_fsdp_l0", "verl_cuda_fsdp_l1"]
no_gpu = pytest.mark.skipif(devices.unavailable_reason("cuda") is None, reason="this host has a CUDA GPU")


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, check=False)


def scenario(name: str):
    return load_scenario(ROOT / "scenarios" / f"{name}.yaml")


def no_cuda(monkeypatch) -> None:
    monkeypatch.setattr(devices, "_cuda_in_python", lambda: False)
    monkeypatch.setattr(devices, "_missing_nodes", lambda control, prefix, ids: "/dev/nvidiactl is absent (no driver)")


@pytest.mark.integration
def test_tiny_cuda_scenarios_ask_for_bf16_on_the_gpu(tmp_path):
    for name in TINY:
        s = scenario(name)
        assert (s.device, s.workload.dtype) == ("cuda", "bfloat16")
        cpu_ppo.CpuPpo().prepare(s, RunDir(tmp_path / name / "on"), True, dry=True)
        spec = cpu_ppo_train.TrainSpec.load(tmp_path / name / "on" / "spec.json")
        assert (spec.device, spec.dtype, spec.world_size) == ("cuda", "bfloat16", s.world_size)


def test_bf16_on_cpu_is_refused_in_one_line(tmp_path):
    text = (
        (ROOT / "scenarios" / "tiny_fsdp_l0.yaml")
        .read_text()
        .replace("kind: cpu_ppo", "kind: cpu_ppo\n  dtype: bfloat16")
    )
    (tmp_path / "bf16.yaml").write_text(text)
    with pytest.raises(ScenarioError, match=r"workload\.dtype bfloat16 needs device cuda"):
        load_scenario(tmp_path / "bf16.yaml")


def test_skip_line_without_a_gpu(monkeypatch):
    no_cuda(monkeypatch)
    line = devices.skip_reason(scenario("tiny_cuda_fsdp_l0"))
    assert line == (
        "tiny_cuda_fsdp_l0 needs a CUDA GPU (device: cuda): torch.cuda.is_available() is False here and "
        "/dev/nvidiactl is absent (no driver). Run it on a CUDA runner with `pytest scenarios/ -k tiny_cuda_fsdp_l0`; "
        "check it here with `python -m harness dry-run scenarios/tiny_cuda_fsdp_l0.yaml`"
    )


def test_one_gpu_skips_the_two_rank_scenario_and_runs_the_others(monkeypatch):
    monkeypatch.setattr(devices, "_cuda_in_python", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    line = devices.skip_reason(scenario("tiny_cuda_fsdp_l1_nccl"))
    assert "needs a CUDA GPU (device: cuda): 2 GPUs per node wanted (one per rank), 1 visible here." in line
    assert devices.skip_reason(scenario("tiny_cuda_fsdp_l1")) is None
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    assert devices.skip_reason(scenario("verl_cuda_fsdp_l0")) is None


def test_a_forced_run_without_a_gpu_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(InfraError) as exc:
        cpu_ppo.CpuPpo().prepare(scenario("tiny_cuda_fsdp_l0"), RunDir(tmp_path / "off"), False)
    assert str(exc.value) == (
        "device cuda: torch.cuda.is_available() is False in the harness's Python (no GPU, no driver, or a CPU "
        "build of torch); run the cuda scenarios on a CUDA runner (docs/cuda.md)"
    )
    assert not (tmp_path / "off").exists(), "nothing is written for a run that cannot start"


def test_a_forced_run_with_too_few_gpus_names_them(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(InfraError, match=r"world_size 2 needs 2 GPUs \(one per NCCL rank\), 1 visible here"):
        cpu_ppo.CpuPpo().prepare(scenario("tiny_cuda_fsdp_l1_nccl"), RunDir(tmp_path / "off"), False)


def test_the_training_process_refuses_cuda_it_cannot_see(monkeypatch, tmp_path, capsys):
    """The last line of defence: a container whose torch has no CUDA (exit 2, one line, no rank started)."""
    cpu_ppo.CpuPpo().prepare(scenario("tiny_cuda_fsdp_l0"), RunDir(tmp_path / "off"), False, dry=True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(cpu_ppo_train.mp, "start_processes", lambda *a, **k: pytest.fail("a rank started"))
    assert cpu_ppo_train.main([str(tmp_path / "off" / "spec.json")]) == 2
    assert capsys.readouterr().err == (
        "cpu_ppo: device cuda but torch.cuda.is_available() is False in this process (a CPU build of torch?)\n"
    )


def test_cuda_ranks_are_spawned_and_meet_over_nccl(monkeypatch, tmp_path):
    cpu_ppo.CpuPpo().prepare(scenario("tiny_cuda_fsdp_l1_nccl"), RunDir(tmp_path / "off"), False, dry=True)
    spec = cpu_ppo_train.TrainSpec.load(tmp_path / "off" / "spec.json")
    monkeypatch.setattr(cpu_ppo_train, "check_device", lambda spec: None)
    started: dict = {}
    monkeypatch.setattr(cpu_ppo_train.mp, "start_processes", lambda fn, **kw: started.update(kw))
    assert cpu_ppo_train.main([str(tmp_path / "off" / "spec.json")]) == 0
    assert (started["nprocs"], started["start_method"]) == (2, "spawn")  # a CUDA context does not survive a fork

    calls: list = []
    monkeypatch.setattr(cpu_ppo_train, "pin", lambda rank, world: None)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls.append(("set_device", d)))
    monkeypatch.setattr(cpu_ppo_train.dist, "FileStore", lambda path, n: "store")
    monkeypatch.setattr(cpu_ppo_train.dist, "init_process_group", lambda backend, **kw: calls.append((backend, kw)))
    monkeypatch.setattr(cpu_ppo_train.dist, "destroy_process_group", lambda: calls.append("destroyed"))
    monkeypatch.setattr(cpu_ppo_train, "_train", lambda rank, spec: calls.append(("train", rank)))
    cpu_ppo_train.train(1, spec)
    assert calls == [
        ("set_device", 1),
        ("nccl", {"store": "store", "rank": 1, "world_size": 2}),
        ("train", 1),
        "destroyed",
    ]
    assert cpu_ppo_train.device_of(spec, 1) == torch.device("cuda", 1)


def test_models_and_batches_go_to_the_device_in_its_dtype(tmp_path):
    cpu_ppo.CpuPpo().prepare(scenario("tiny_cuda_fsdp_l0"), RunDir(tmp_path / "off"), False, dry=True)
    spec = cpu_ppo_train.TrainSpec.load(tmp_path / "off" / "spec.json")
    actor, ref, _ = cpu_ppo_train.build_models(spec, "meta")  # meta: a device that is not the CPU, here
    for model in (actor, ref):
        assert {(p.device.type, p.dtype) for p in model.parameters()} == {("meta", torch.bfloat16)}
    batch = cpu_ppo_train.make_batch(spec, 2, 0, "meta")
    assert {t.device.type for t in batch.values()} == {"meta"}
    assert torch.equal(
        cpu_ppo_train.make_batch(spec, 2, 0)["input_ids"], cpu_ppo_train.make_batch(spec, 2, 0)["input_ids"]
    )


def test_the_cuda_loop_synchronises_its_timers_and_logs_wall_time_only(monkeypatch, tmp_path):
    """The whole CUDA training loop on the CPU: the device is the CPU, NCCL is gloo; every timed stage waits for
    the GPU, and no per-rank time (cpu_s/, wall_s/, wait_s/) is logged (the overhead check then reads verl's
    timers, as for verl's trainer)."""
    cpu_ppo.CpuPpo().prepare(scenario("tiny_cuda_fsdp_l0"), RunDir(tmp_path / "off"), False, dry=True)
    spec = cpu_ppo_train.TrainSpec.load(tmp_path / "off" / "spec.json")
    spec.steps, spec.dtype, spec.batch_size, spec.prompt_length, spec.response_length = 2, "float32", 2, 8, 8
    spec.model.update(hidden_size=32, intermediate_size=64, num_hidden_layers=2)
    syncs: list[int] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: syncs.append(1))
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: None)
    monkeypatch.setattr(cpu_ppo_train, "device_of", lambda spec, rank: torch.device("cpu"))
    real_init = cpu_ppo_train.dist.init_process_group
    backends: list[str] = []

    def init(backend, **kw):
        backends.append(backend)
        real_init("gloo", **kw)

    monkeypatch.setattr(cpu_ppo_train.dist, "init_process_group", init)
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "metrics.jsonl"))
    cpu_ppo_train.train(0, spec)
    assert backends == ["nccl"]
    assert len(syncs) == 2 * 3  # old_log_prob, ref, update_actor in each of 2 steps
    lines = [json.loads(ln) for ln in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [ln["step"] for ln in lines] == [1, 2]
    keys = set(lines[0]["data"])
    assert {"timing_s/step", "timing_s/update_actor"} <= keys
    assert not [k for k in keys if k.startswith(("cpu_s/", "wall_s/", "wait_s/"))]


@pytest.mark.integration
@no_gpu
def test_pytest_skips_every_cuda_scenario_with_its_line(tmp_path):
    proc = run(
        "-m", "pytest", "scenarios/", "-k", "cuda", "-rs", "-p", "no:cacheprovider", f"--harness-results={tmp_path}"
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    for name in TINY + VERL:
        assert f"{name} needs a CUDA GPU (device: cuda): torch.cuda.is_available() is False here" in proc.stdout
    assert "passed" not in proc.stdout.splitlines()[-1]
    assert not list(tmp_path.iterdir()), "a skipped scenario must not train"


@pytest.mark.integration
@no_gpu
def test_cli_run_skips_and_dry_run_describes(tmp_path):
    proc = run("-m", "harness", "run", "scenarios/tiny_cuda_fsdp_l0.yaml", "--results", str(tmp_path))
    assert proc.returncode == EXIT_ERROR, proc.stdout + proc.stderr  # nothing ran here: never a pass
    out = " ".join(proc.stdout.split())  # rich wraps long lines
    assert "SKIPPED tiny_cuda_fsdp_l0 needs a CUDA GPU (device: cuda)" in out
    assert "NOTHING CHECKED: 0 of 1 scenarios ran here" in out
    assert not (tmp_path / "tiny_cuda_fsdp_l0").exists()


@pytest.mark.integration
def test_verl_cuda_dry_run_checks_the_overrides_offline(tmp_path):
    proc = run("-m", "harness", "dry-run", "scenarios/verl_cuda_fsdp_l1.yaml", "--results", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "checked offline against verl 0.9.1's hydra config: ok" in proc.stdout
    assert "trainer.n_gpus_per_node=8" in proc.stdout
    assert "actor_rollout_ref.rollout.name=vllm" in proc.stdout
    assert "trainer.device=" not in proc.stdout  # verl's default device is cuda
    assert not (tmp_path / "r").exists()


def test_verl_cuda_docker_gpus_must_match_the_ranks(tmp_path):
    text = (
        (ROOT / "scenarios" / "verl_cuda_fsdp_l0.yaml")
        .read_text()
        .replace("gpus: [0, 1, 2, 3, 4, 5, 6, 7]", "gpus: [0, 1]")
    )
    (tmp_path / "bad.yaml").write_text(text.replace("kind: local  #", "kind: docker  #"))
    with pytest.raises(ScenarioError, match=r"executor\.docker\.gpus has 2 ids for 8 GPUs per node"):
        load_scenario(tmp_path / "bad.yaml")


def test_the_gpu_workflow_runs_every_cuda_scenario_on_verls_runners():
    import yaml

    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly-cuda.yml").read_text())
    inputs = wf[True]["workflow_call"]["inputs"]  # YAML 1.1 reads the key `on` as True
    assert json.loads(inputs["runner-labels"]["default"]) == ["L20x8"]
    shipped = sorted(p.stem for p in (ROOT / "scenarios").glob("*cuda*.yaml"))
    assert sorted(json.loads(inputs["scenarios"]["default"])) == shipped == sorted(TINY + VERL)

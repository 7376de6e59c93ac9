"""The embedded workload's clocks: each rank's wall, CPU and runnable-waiting seconds per timer, the overhead
check's samples (``checks.overhead``: wall less runnable waiting is gated)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness.artifacts.rundir import RunDir
from harness.scenario.loader import load_scenario
from harness.training.workloads import cpu_ppo
from harness.training.workloads.cpu_ppo import train as cpu_ppo_train

ROOT = Path(__file__).resolve().parents[1]


def test_a_sleep_is_wall_time_not_cpu_time_and_a_busy_loop_both():
    start = cpu_ppo_train.Clocks.now()
    time.sleep(0.05)
    slept = cpu_ppo_train.Clocks.now().since(start)
    assert slept["wall"] >= 0.05 and slept["cpu"] < 0.02 and cpu_ppo_train.paid(slept) >= 0.05 - slept["wait"]
    start = cpu_ppo_train.Clocks.now()
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    burned = cpu_ppo_train.Clocks.now().since(start)
    assert burned["cpu"] >= 0.05 and burned["wall"] >= burned["cpu"] - 0.005
    assert burned["wait"] >= 0 and cpu_ppo_train.paid(burned) == burned["wall"] - burned["wait"]


def test_without_schedstat_there_is_no_waiting_clock(monkeypatch):
    monkeypatch.setattr(cpu_ppo_train, "SCHEDSTAT", "/proc/no-such-schedstat")
    assert cpu_ppo_train.runnable_wait() is None
    clocks = cpu_ppo_train.Clocks.now().since(cpu_ppo_train.Clocks.now())
    assert set(clocks) == {"wall", "cpu"} and cpu_ppo_train.paid(clocks) == clocks["wall"]


def test_the_cpu_loop_logs_every_clock_per_timer_and_rank(monkeypatch, tmp_path):
    """A two-step training on the CPU, one rank: every timer has wall_s, cpu_s and wait_s beside verl's timing_s,
    and the wall time holds the CPU and waiting parts (blocked, the rest, is not negative beyond the clocks' reads)."""
    cpu_ppo.CpuPpo().prepare(load_scenario(ROOT / "scenarios" / "tiny_fsdp_l0.yaml"), RunDir(tmp_path), False, dry=True)
    spec = cpu_ppo_train.TrainSpec.load(tmp_path / "spec.json")
    spec.steps, spec.batch_size, spec.prompt_length, spec.response_length = 2, 2, 8, 8
    spec.model.update(hidden_size=32, intermediate_size=64, num_hidden_layers=2)
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "metrics.jsonl"))
    cpu_ppo_train.train(0, spec)
    lines = [json.loads(ln) for ln in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [ln["step"] for ln in lines] == [1, 2]
    for ln in lines:
        d = ln["data"]
        for timer in ("step", "old_log_prob", "ref", "update_actor"):
            wall, cpu, wait = (d[f"{clock}_s/{timer}/rank0"] for clock in ("wall", "cpu", "wait"))
            assert wall <= d[f"timing_s/{timer}"] + 1e-3  # before the barrier, inside verl's timer
            assert wait >= 0 and wall - cpu - wait > -0.05, (timer, wall, cpu, wait)

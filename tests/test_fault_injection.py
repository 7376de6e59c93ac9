"""The test-only fault knobs (harness.training.workloads.fault_injection): where they reach, and what they do."""

from __future__ import annotations

import time

import pytest
from builders import write_dump, write_scenario

from harness import config
from harness.artifacts.rundir import RunDir
from harness.scenario.loader import load_scenario
from harness.training.workloads import fault_injection
from harness.training.workloads.cpu_ppo import CpuPpo


@pytest.mark.integration
def test_fault_knobs_pass_only_when_set_and_only_to_the_on_run(tmp_path, monkeypatch):
    scenario = load_scenario(write_scenario(tmp_path))
    monkeypatch.delenv(config.DUMP_DELAY_S.name, raising=False)
    monkeypatch.setenv(config.DUMP_PAD.name, "1")
    on = CpuPpo().prepare(scenario, RunDir(tmp_path / "on"), enabled=True)
    off = CpuPpo().prepare(scenario, RunDir(tmp_path / "off"), enabled=False)
    assert on.env.get(config.DUMP_PAD.name) == "1" and config.DUMP_DELAY_S.name not in on.env
    assert config.DUMP_PAD.name not in off.env
    monkeypatch.setenv(config.DUMP_PAD.name, "")
    assert config.DUMP_PAD.name not in CpuPpo().prepare(scenario, RunDir(tmp_path / "x"), enabled=True).env


def test_pad_knob_doubles_this_ranks_dumps_only(tmp_path):
    for rank in (0, 1):
        write_dump(tmp_path, 2, "actor_update", rank)
    size = sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file())
    added = fault_injection.pad_dumps(tmp_path, 2, 0, environ={config.DUMP_PAD.name: "1"})
    assert added == size // 2
    assert sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file()) == size + added
    assert (tmp_path / "step_2/actor_update/step0/rank0/dump.json.pad1").is_file()
    assert not list((tmp_path / "step_2/actor_update/step0/rank1").glob("*.pad*"))
    assert fault_injection.pad_dumps(tmp_path, 2, 1, environ={}) == 0


def test_delay_knob_wraps_msprobes_per_call_collector(monkeypatch):
    from msprobe.core.dump.data_dump.data_collector import DataCollector

    calls: list[tuple] = []
    monkeypatch.setattr(DataCollector, "handle_data", lambda self, name, info, flush=False: calls.append((name, info)))
    sleeps: list[float] = []
    monkeypatch.setattr(fault_injection.time, "sleep", sleeps.append)
    assert fault_injection.install_delay(environ={}) == 0.0
    assert fault_injection.install_delay(environ={config.DUMP_DELAY_S.name: "0.01"}) == 0.01
    DataCollector.handle_data(object(), "Functional.linear.0.forward", {"x": 1})
    DataCollector.handle_data(object(), "Functional.linear.1.forward", {})  # nothing collected: no sleep
    assert sleeps == [0.01]
    assert [c[0] for c in calls] == ["Functional.linear.0.forward", "Functional.linear.1.forward"]


def test_slowdown_knob_burns_that_share_of_the_stage_time():
    """HARNESS_TEST_STAGE_SLOWDOWN_PCT=15: +15 % of the stage's own time, as CPU time."""
    started = time.process_time()
    assert fault_injection.slow_down(0.2, {config.STAGE_SLOWDOWN_PCT.name: "15"}) == pytest.approx(0.03)
    assert time.process_time() - started >= 0.03
    assert fault_injection.slow_down(0.2, {}) == 0.0


def test_wait_knob_sleeps_that_share_of_the_stage_time_without_cpu():
    """HARNESS_TEST_STAGE_WAIT_PCT=15: +15 % of the stage's own time, blocked (no CPU time: the slowdown that the
    CPU clock could not see)."""
    wall, cpu = time.perf_counter(), time.process_time()
    assert fault_injection.slow_down(0.2, {config.STAGE_WAIT_PCT.name: "15"}) == pytest.approx(0.03)
    assert time.perf_counter() - wall >= 0.03
    assert time.process_time() - cpu < 0.01

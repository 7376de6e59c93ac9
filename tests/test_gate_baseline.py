"""Calibration math and baseline files: tolerances from repeated runs, merge, carried-forward tolerances."""

from __future__ import annotations

import json

import pytest
from gate_builders import ENV, write_results

from harness.artifacts.figures import family
from harness.cli import main
from harness.errors import BaselineError
from harness.gate.baseline import (
    DEFAULT_POLICY,
    Baseline,
    Policy,
    build,
    max_rel_deviation,
    tolerance_for,
)


def test_max_rel_deviation_is_the_largest_distance_from_the_mean():
    assert max_rel_deviation([10.0, 12.0, 14.0]) == pytest.approx(2 / 12)
    assert max_rel_deviation([5.0]) == 0.0
    assert max_rel_deviation([3.0, 3.0, 3.0]) == 0.0
    assert max_rel_deviation([0.0, 0.0]) == 0.0
    assert max_rel_deviation([-1.0, 1.0]) == 1.0  # a zero mean with spread: fully uncertain


def test_tolerance_is_k_times_deviation_or_the_floor():
    policy = Policy(k=3, floor=0.25)
    assert tolerance_for([10.0, 12.0, 14.0], policy) == pytest.approx(0.5)  # 3 x 1/6
    assert tolerance_for([10.0, 10.1, 9.9], policy) == 0.25  # 3 x 1% < floor
    assert tolerance_for([7.0, 7.0], Policy(k=1, floor=0.0)) == 0.0


def test_families_gate_ratios_bytes_and_structure_but_not_raw_times():
    assert family("overhead.profiled") == "overhead"
    assert family("overhead.stage.actor_update") == "overhead"
    assert family("overhead.step3") is None  # per-step ratios are kept, not gated
    assert family("time_on.step2_s") is None
    assert family("disk.total_bytes") == family("disk.step4_bytes") == family("disk.stage.x_bytes") == "disk"
    assert family("disk.rank1_bytes") == "disk"
    assert family("structure.actor_update.rank0.entries") == "structure"
    assert family("contents.tensors") is None


def test_calibrate_stores_means_samples_and_tolerances(tmp_path):
    for i, profiled in enumerate((10.0, 12.0, 14.0)):
        write_results(tmp_path / f"run{i}", profiled=profiled)
    b = build([tmp_path / f"run{i}" for i in range(3)], calibrate=True)
    sb = b.scenarios["tiny_case"]
    assert sb.runs == 3
    assert sb.figures["overhead.profiled"] == pytest.approx(12.0)
    assert sb.samples["overhead.profiled"] == [10.0, 12.0, 14.0]
    # overhead: k=0, the floor; the noise goes into the gate's interval, from every run's samples
    assert sb.tolerances["overhead.profiled"] == DEFAULT_POLICY["overhead"].floor
    assert [run["step2.rank0"] for run in sb.ratio_samples["overhead.profiled"]] == pytest.approx([9.8, 11.76, 13.72])
    assert not any(m.startswith("overhead.sample.") for m in sb.figures)  # kept per run, not averaged
    assert sb.tolerances["disk.total_bytes"] == DEFAULT_POLICY["disk"].floor
    assert sb.tolerances["structure.actor_update.rank0.entries"] == 0.0
    assert sb.structure is not None and sb.structure["actor_update/rank0"].names == {
        "Functional.linear.backward": 8,
        "Functional.linear.forward": 8,
    }
    assert b.environment["device_kind"] == "cpu/x86_64"
    assert b.environment["mindstudio-probe"] == "26.2.0"


def test_policy_is_configurable_per_family(tmp_path):
    for i, profiled in enumerate((10.0, 12.0, 14.0)):
        write_results(tmp_path / f"run{i}", profiled=profiled)
    out = tmp_path / "b.json"
    argv = ["calibrate", *(str(tmp_path / f"run{i}") for i in range(3)), "-o", str(out)]
    assert main([*argv, "--k", "overhead=6", "--floor", "disk=0.5"]) == 0
    b = Baseline.read(out)
    assert b.scenarios["tiny_case"].tolerances["overhead.profiled"] == pytest.approx(1.0)
    assert b.scenarios["tiny_case"].tolerances["disk.total_bytes"] == 0.5
    assert b.policy["overhead"].k == 6
    assert main([*argv, "--k", "speed=2"]) == 2  # unknown family: an input error


def test_calibrate_needs_repeated_runs_and_one_environment(tmp_path):
    write_results(tmp_path / "a")
    with pytest.raises(BaselineError, match="at least 2 runs"):
        build([tmp_path / "a"], calibrate=True)
    write_results(tmp_path / "b", env={**ENV, "mindstudio-probe": "27.0.0"})
    with pytest.raises(BaselineError, match="different environments"):
        build([tmp_path / "a", tmp_path / "b"])


def test_failed_runs_never_become_a_baseline(tmp_path):
    write_results(tmp_path / "a", exit_code=1)
    with pytest.raises(BaselineError, match="exited with 1"):
        build([tmp_path / "a"])


def test_merge_takes_tolerances_from_a_previous_baseline_or_the_floors(tmp_path):
    for i, profiled in enumerate((10.0, 14.0)):
        write_results(tmp_path / f"run{i}", profiled=profiled)
    calibrated = build([tmp_path / "run0", tmp_path / "run1"], calibrate=True)
    write_results(tmp_path / "nightly", profiled=11.0)
    carried = build([tmp_path / "nightly"], previous=calibrated)
    assert carried.scenarios["tiny_case"].tolerances == calibrated.scenarios["tiny_case"].tolerances
    assert carried.scenarios["tiny_case"].figures["overhead.profiled"] == 11.0
    plain = build([tmp_path / "nightly"])
    assert plain.scenarios["tiny_case"].tolerances["overhead.profiled"] == DEFAULT_POLICY["overhead"].floor


def test_merge_cli_writes_a_baseline_with_environment_and_commit(tmp_path, capsys):
    write_results(tmp_path / "shard1", name="a_case")
    write_results(tmp_path / "shard2", name="b_case")
    out = tmp_path / "baseline.json"
    assert main(["baseline", "merge", str(tmp_path / "shard1"), str(tmp_path / "shard2"), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert sorted(doc["scenarios"]) == ["a_case", "b_case"]
    assert doc["environment"]["verl"] == "0.9.1" and doc["environment"]["device_kind"] == "cpu/x86_64"
    assert "commit" in doc and "created" in doc
    assert "wrote" in capsys.readouterr().out
    assert main(["baseline", "merge", str(tmp_path / "nothing"), "-o", str(out)]) == 2


def test_reading_something_else_is_a_clear_error(tmp_path):
    bad = tmp_path / "b.json"
    bad.write_text('{"scenarios": 3}')
    with pytest.raises(BaselineError, match="not a harness baseline"):
        Baseline.read(bad)
    with pytest.raises(BaselineError, match="cannot read"):
        Baseline.read(tmp_path / "missing.json")

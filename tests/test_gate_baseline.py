"""Calibration math and baseline files: tolerances from repeated runs, merge, carried-forward tolerances."""

from __future__ import annotations

import json

import pytest
from gate_builders import ENV, write_results

from harness.artifacts.figures import family
from harness.cli import main
from harness.errors import BaselineError
from harness.gate.baseline import (
    DEFAULT_RULES,
    Baseline,
    ToleranceRule,
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
    policy = ToleranceRule(k=3, floor=0.25)
    assert tolerance_for([10.0, 12.0, 14.0], policy) == pytest.approx(0.5)  # 3 x 1/6
    assert tolerance_for([10.0, 10.1, 9.9], policy) == 0.25  # 3 x 1% < floor
    assert tolerance_for([7.0, 7.0], ToleranceRule(k=1, floor=0.0)) == 0.0


def test_a_stage_ratio_has_twice_the_steps_floor():
    """A stage's ratio scatters twice as wide as the step's (baseline.STAGE_FLOOR): sized to catch x1.32, the step
    x1.156, the unprofiled ratio x1.56; a family's larger floor still wins."""
    from harness.gate.baseline import floor

    assert floor("overhead.wall.profiled") == 0.075
    assert floor("overhead.wall.stage.ref_compute_log_prob") == floor("overhead.wall.stage.actor_update") == 0.15
    assert floor("overhead.wall.unprofiled") == 0.25
    assert floor("overhead.wall.stage.actor_update", {"overhead": ToleranceRule(k=0, floor=0.2)}) == 0.2


def test_families_gate_ratios_bytes_and_structure_but_not_raw_times():
    assert family("overhead.wall.profiled") == "overhead"
    assert family("overhead.wall.stage.actor_update") == "overhead"
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
    assert sb.figures["overhead.wall.profiled"] == pytest.approx(12.0)
    assert sb.samples["overhead.wall.profiled"] == [10.0, 12.0, 14.0]
    # overhead: k=0, the floor; the noise goes into the gate's interval, from every run's samples
    assert sb.tolerances["overhead.wall.profiled"] == DEFAULT_RULES["overhead"].floor
    assert [run["step2.rank0"] for run in sb.ratio_samples["overhead.wall.profiled"]] == pytest.approx(
        [9.8, 11.76, 13.72]
    )
    assert not any(m.startswith("overhead.sample.") for m in sb.figures)  # kept per run, not averaged
    assert sb.tolerances["disk.total_bytes"] == DEFAULT_RULES["disk"].floor
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
    assert b.scenarios["tiny_case"].tolerances["overhead.wall.profiled"] == pytest.approx(1.0)
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
    assert carried.scenarios["tiny_case"].figures["overhead.wall.profiled"] == 11.0
    plain = build([tmp_path / "nightly"])
    assert plain.scenarios["tiny_case"].tolerances["overhead.wall.profiled"] == DEFAULT_RULES["overhead"].floor


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


def test_a_baseline_of_the_previous_schema_is_read_and_gated_another_schema_is_one_line(tmp_path, capsys):
    """The nightly's stored baseline survives one harness upgrade: schema 1 (before schema versions: ``format: 1``,
    no ``schema_version``) is read and gated as schema 2 is; a newer or unknown schema is refused in one line."""
    for i in range(2):
        write_results(tmp_path / f"run{i}")
    write_results(tmp_path / "now", disk=2_000_000)
    new = tmp_path / "baseline.json"
    assert main(["calibrate", str(tmp_path / "run0"), str(tmp_path / "run1"), "-o", str(new)]) == 0
    doc = json.loads(new.read_text())
    assert doc["schema_version"] == 2 and "format" not in doc
    previous = tmp_path / "previous.json"  # as the harness before schema versions wrote it
    previous.write_text(json.dumps({"format": 1} | {k: v for k, v in doc.items() if k != "schema_version"}))
    said = {}
    for path in (new, previous):
        capsys.readouterr()
        assert main(["gate", "--baseline", str(path), "--results", str(tmp_path / "now")]) == 1
        said[path] = capsys.readouterr().out
    assert (
        said[new] == said[previous]
        and "REGRESSED tiny_case: disk.total_bytes baseline 1.00 MB now 2.00 MB" in said[new]
    )
    for version in (3, 0, "2", True, None):
        path = tmp_path / "other.json"
        path.write_text(json.dumps(doc | {"schema_version": version}))
        capsys.readouterr()
        assert main(["gate", "--baseline", str(path), "--results", str(tmp_path / "now")]) == 2
        assert capsys.readouterr().err.splitlines() == [
            f"BASELINE ERROR: {path}: baseline.json written by schema {version!r}, this harness reads schemas 1 and "
            "2: re-run calibrate (or baseline merge) with this harness, or gate with the harness that wrote it"
        ]
    previous.write_text(
        json.dumps({"format": 1, "surprise": 1} | {k: v for k, v in doc.items() if k != "schema_version"})
    )
    with pytest.raises(BaselineError, match=r"surprise: Extra inputs are not permitted: not a harness baseline.json$"):
        Baseline.read(previous)  # every field declared: an unknown one is refused, not carried along
    previous.write_text(json.dumps({"format": 2} | {k: v for k, v in doc.items() if k != "schema_version"}))
    with pytest.raises(BaselineError, match=r"of schema 1 with format 2 \(it had format 1 only\): re-run"):
        Baseline.read(previous)


def test_results_json_of_another_schema_is_one_line_and_a_rewrite_keeps_its_own(tmp_path, capsys):
    sdir = write_results(tmp_path / "res")  # the fixture writes schema 1 (no schema_version): read as schema 2
    assert main(["baseline", "merge", str(tmp_path / "res"), "-o", str(tmp_path / "b.json")]) == 0
    doc = json.loads((sdir / "results.json").read_text())
    (sdir / "results.json").write_text(json.dumps(doc | {"schema_version": 7}))
    capsys.readouterr()
    assert main(["gate", "--baseline", str(tmp_path / "b.json"), "--results", str(tmp_path / "res")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"BASELINE ERROR: {sdir}/results.json: results.json written by schema 7, this harness reads schemas 1 to "
        "4: re-run the scenario with this harness (or --reuse its trainings), or read it with the harness that wrote it"
    ]


def _crashed(results, xfail_reason: str):
    """A scenario whose on run verl crashed, declared as a known bug (``xfail_reason``) or not (empty), after the
    stages before the crash dumped (their structure is what the gate compares)."""
    sdir = write_results(results, "strict_critic")
    doc = json.loads((sdir / "results.json").read_text())
    doc["runs"]["on"]["exit_code"] = 1
    crash = "verl crashed the on run (precision_debugger on): ValueError: Unknown precision_debugger stage: train_batch"
    not_checked = "the on run crashed: see the crash check"
    doc["checks"] = {
        "crash": {"passed": False, "problems": [crash], "notes": [], "figures": {"crash.on": "verl"},
                  "xfail_reason": xfail_reason},
        **{c: {"passed": True, "problems": [], "notes": [], "figures": {}, "not_checked": not_checked}
           for c in ("layout", "contents", "overhead", "disk")},
    }  # fmt: skip
    (sdir / "results.json").write_text(json.dumps(doc))


def test_a_crash_declared_as_a_known_bug_is_baselined_and_gated_an_undeclared_one_is_refused(tmp_path, capsys):
    """The CPU nightly runs real_critic_strict_fsdp_l1, whose declared verl bug crashes it every night: the night's
    baseline must hold it (it stopped every nightly at `baseline merge`, exit 2, before), and the next night's gate
    passes it while it crashes as declared; a crash nobody declared is still no baseline."""
    from harness.gate.observe import observe_dir

    _crashed(tmp_path / "night1", "known verl bug: strict raises for the critic's role")
    (o,) = observe_dir(tmp_path / "night1").values()
    assert o.crashes == [] and o.errors == [] and o.known_crash.startswith("known verl bug: ")
    assert main(["baseline", "merge", str(tmp_path / "night1"), "-o", str(tmp_path / "b.json")]) == 0
    _crashed(tmp_path / "night2", "known verl bug: strict raises for the critic's role")
    capsys.readouterr()
    assert main(["gate", "--baseline", str(tmp_path / "b.json"), "--results", str(tmp_path / "night2")]) == 0
    assert "ok strict_critic: " in capsys.readouterr().out
    _crashed(tmp_path / "night3", "")
    with pytest.raises(BaselineError, match=r"strict_critic in .*: verl crashed the on run"):
        build([tmp_path / "night3"])

"""Gate verdicts on synthetic results: regressed, improved, ok, new, missing, other environment, errors."""

from __future__ import annotations

import json
import shutil

import pytest
from builders import dump_doc
from gate_builders import ENV, SETTINGS, write_results

from harness.cli import main
from harness.gate.against_baseline import gate_dirs
from harness.gate.baseline import Baseline, build
from harness.report import verdicts as wording

QUIET = (9.95, 10.0, 10.05, 9.98, 10.02)


@pytest.fixture
def baseline(tmp_path) -> Baseline:
    """Calibrated on a quiet runner: 5 runs, profiled overhead 9.95-10.05 (±0.5 % between runs; tolerance 7.5 %,
    the overhead floor); disk 1 MB (floor 5 %)."""
    for i, profiled in enumerate(QUIET):
        write_results(tmp_path / f"cal{i}", profiled=profiled)
    b = build([tmp_path / f"cal{i}" for i in range(len(QUIET))], calibrate=True)
    b.write(tmp_path / "baseline.json")
    return b


def verdicts(report):
    return {(s.scenario, m.metric): m.verdict for s in report.scenarios for m in s.figures if m.verdict != "ok"}


def test_a_run_within_tolerance_passes(tmp_path, baseline):
    write_results(tmp_path / "now", profiled=10.2)  # +2 %: the interval lies inside ±7.5 %
    report = gate_dirs(baseline, [tmp_path / "now"])
    assert report.exit_code == 0
    assert [s.status for s in report.scenarios] == ["ok"]
    assert verdicts(report) == {}


def test_overhead_regression_fails_with_one_readable_line(tmp_path, baseline):
    write_results(tmp_path / "now", profiled=40.0)
    report = gate_dirs(baseline, [tmp_path / "now"])
    assert report.exit_code == 1
    assert verdicts(report) == {("tiny_case", "overhead.wall.profiled"): "regressed"}
    (m,) = report.scenarios[0].of("regressed")
    line = wording.gate_line(m)
    assert line.startswith("REGRESSED tiny_case: overhead.wall.profiled baseline 10.00x now 40.00x (+300%)")
    assert "tolerance +7.5% (limit 10.75x); now/baseline 4.00x [3.86x-4.15x], 24 samples, noise ±4% against 1.075x" in (
        line
    )
    assert "\n" not in line


def test_noise_wider_than_the_tolerance_is_inconclusive(tmp_path):
    """Runs 20 % apart in the baseline: a run 8 % slower cannot be told from noise, and the line says so."""
    for i, profiled in enumerate((9.0, 10.0, 11.0)):
        write_results(tmp_path / f"cal{i}", profiled=profiled)
    noisy = build([tmp_path / f"cal{i}" for i in range(3)], calibrate=True)
    write_results(tmp_path / "now", profiled=10.8)
    report = gate_dirs(noisy, [tmp_path / "now"])
    assert report.exit_code == 3 and report.scenarios[0].status == "inconclusive"
    (m,) = report.scenarios[0].of("inconclusive")
    assert m.metric == "overhead.wall.profiled"
    assert wording.gate_line(m).endswith(
        "1.08x [0.03x-42.22x], 16 samples, noise ±>999% against 1.075x: "
        "INCONCLUSIVE: noise ±>999%, needs 99+ more repeats"
    )
    assert wording.lines(report)[-1] == "gate: 1 inconclusive -> INCONCLUSIVE"
    assert wording.check_result(report.scenarios[0]).inconclusive == [wording.gate_line(m)]


def test_a_baseline_of_one_run_leaves_overhead_inconclusive(tmp_path):
    write_results(tmp_path / "one", profiled=10.0)
    write_results(tmp_path / "now", profiled=10.0)
    (s,) = gate_dirs(build([tmp_path / "one"]), [tmp_path / "now"]).scenarios
    assert s.status == "inconclusive"
    assert all("noise unknown (one run a side)" in wording.gate_line(m) for m in s.of("inconclusive"))


def test_disk_regression_is_caught_on_every_disk_figure(tmp_path, baseline):
    write_results(tmp_path / "now", disk=2_000_000)
    report = gate_dirs(baseline, [tmp_path / "now"])
    assert report.exit_code == 1
    failed = {metric for (_, metric), v in verdicts(report).items() if v == "regressed"}
    assert {"disk.total_bytes", "disk.step2_bytes", "disk.stage.actor_update_bytes", "disk.rank0_bytes"} <= failed
    line = next(wording.gate_line(m) for m in report.scenarios[0].figures if m.metric == "disk.total_bytes")
    assert "baseline 1.00 MB now 2.00 MB (+100%), tolerance +5%" in line


def test_improvement_beyond_tolerance_passes_and_asks_for_a_refresh(tmp_path, baseline):
    write_results(tmp_path / "now", profiled=5.0, disk=500_000)
    report = gate_dirs(baseline, [tmp_path / "now"])
    assert report.exit_code == 0
    assert report.scenarios[0].status == "improved"
    assert verdicts(report)[("tiny_case", "overhead.wall.profiled")] == "improved"
    assert any("refresh" in line for line in wording.lines(report))


def test_new_and_missing_scenarios_are_reported_not_failed(tmp_path, baseline):
    write_results(tmp_path / "now", name="another_case")
    report = gate_dirs(baseline, [tmp_path / "now"])
    assert {s.scenario: s.status for s in report.scenarios} == {
        "another_case": "new scenario",
        "tiny_case": "missing scenario",
    }
    assert report.exit_code == 2  # nothing compared: never a pass
    assert wording.lines(report)[-1] == (
        "gate: 1 new scenario, 1 missing scenario -> NOTHING COMPARED (0 of 2 scenarios had a figure or check "
        "judged on both sides)"
    )
    write_results(tmp_path / "now", name="tiny_case")  # beside the new one: one of two compared
    partial = gate_dirs(baseline, [tmp_path / "now"])
    assert (
        partial.exit_code == 0
        and wording.lines(partial)[-1] == "gate: 1 ok, 1 new scenario -> PASS (1 of 2 scenarios compared)"
    )


def test_an_empty_results_dir_or_an_empty_baseline_compares_nothing(tmp_path, baseline, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["gate", "--baseline", str(tmp_path / "baseline.json"), "--results", str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().out.splitlines()[-1].startswith("gate: 1 missing scenario -> NOTHING COMPARED")
    write_results(tmp_path / "now")
    nothing = build([tmp_path / "now"])
    nothing.scenarios.clear()
    report = gate_dirs(nothing, [tmp_path / "empty"])
    assert report.exit_code == 2
    assert wording.lines(report)[-1].startswith("gate: no scenarios -> NOTHING COMPARED (0 of 0")


def test_another_msprobe_or_device_is_reported_not_compared(tmp_path, baseline):
    write_results(tmp_path / "msprobe", profiled=100.0, env={**ENV, "mindstudio-probe": "27.0.0"})
    report = gate_dirs(baseline, [tmp_path / "msprobe"])
    (s,) = report.scenarios
    assert s.status == "environment differs" and s.figures == []
    assert "mindstudio-probe baseline '26.2.0', now '27.0.0'" in s.notes[0]
    assert report.exit_code == 2 and "NOTHING COMPARED" in wording.lines(report)[-1]  # every scenario not compared
    assert gate_dirs(baseline, [tmp_path / "msprobe"], across_env=True).exit_code == 1  # when asked to

    write_results(tmp_path / "npu", env={**ENV, "device": "npu", "machine": "aarch64"})
    (s,) = gate_dirs(baseline, [tmp_path / "npu"]).scenarios
    assert s.status == "environment differs" and "device_kind baseline 'cpu/x86_64', now 'npu/aarch64'" in s.notes[0]


def test_another_cpu_model_leaves_overhead_out_and_compares_structure_and_disk(tmp_path):
    """A hosted runner's CPU model changes from night to night: step times say nothing across models, what was
    dumped does. A run 4x slower on another model passes; one whose dumps grew 50 % on it still fails."""
    epyc = {**ENV, "cpu_model": "AMD EPYC 7763 64-Core Processor"}
    xeon = {**ENV, "cpu_model": "Intel(R) Xeon(R) Platinum 8370C CPU @ 2.80GHz"}
    for i, profiled in enumerate(QUIET):
        write_results(tmp_path / f"cal{i}", profiled=profiled, env=epyc)
    b = build([tmp_path / f"cal{i}" for i in range(len(QUIET))], calibrate=True)
    assert b.environment["cpu_model"] == epyc["cpu_model"]
    write_results(tmp_path / "slow", profiled=40.0, env=xeon)
    (s,) = gate_dirs(b, [tmp_path / "slow"]).scenarios
    assert s.status == "ok" and not [m for m in s.figures if m.metric.startswith("overhead.")]
    assert any(m.metric.startswith("disk.") for m in s.figures)
    assert "overhead not compared: cpu_model baseline 'AMD EPYC 7763 64-Core Processor', now 'Intel(R)" in s.notes[0]
    write_results(tmp_path / "bloated", profiled=40.0, disk=1_500_000, env=xeon)
    report = gate_dirs(b, [tmp_path / "bloated"])
    assert report.exit_code == 1 and verdicts(report) == {
        ("tiny_case", m): "regressed"
        for m in ("disk.total_bytes", "disk.step2_bytes", "disk.step4_bytes", "disk.stage.actor_update_bytes",
                  "disk.rank0_bytes", "disk.rank1_bytes")
    }  # fmt: skip
    write_results(tmp_path / "same", profiled=40.0, env=epyc)  # the same model: overhead judged
    assert verdicts(gate_dirs(b, [tmp_path / "same"])) == {("tiny_case", "overhead.wall.profiled"): "regressed"}


def test_other_versions_are_noted_and_still_compared(tmp_path, baseline):
    write_results(tmp_path / "now", profiled=40.0, env={**ENV, "verl": "0.10.0"})
    report = gate_dirs(baseline, [tmp_path / "now"])
    assert report.exit_code == 1
    assert any("verl 0.9.1 -> 0.10.0" in n for n in report.scenarios[0].notes)


def test_a_moved_install_is_named_next_to_disk_figures(tmp_path, baseline):
    moved = "/srv/ci/checkout/.venv/lib/python3.11/site-packages"
    write_results(tmp_path / "now", disk=1_030_000, env={**ENV, "packages_dir": moved})
    s = gate_dirs(baseline, [tmp_path / "now"]).scenarios[0]
    assert s.status == "ok"
    assert any(f"packages_dir {ENV['packages_dir']} -> {moved}" in n for n in s.notes)
    assert any("stack.json records each frame's source path" in n for n in s.notes)
    write_results(tmp_path / "same", disk=1_030_000)
    assert not any("stack.json" in n for n in gate_dirs(baseline, [tmp_path / "same"]).scenarios[0].notes)


def test_changed_settings_are_not_compared(tmp_path, baseline):
    pd = {**SETTINGS["precision_debugger"], "level": "L0"}
    write_results(tmp_path / "now", profiled=40.0, settings={**SETTINGS, "precision_debugger": pd})
    (s,) = gate_dirs(baseline, [tmp_path / "now"]).scenarios
    assert s.status == "settings changed" and "refresh the baseline" in s.notes[0]


def test_a_failed_run_is_an_error(tmp_path, baseline):
    write_results(tmp_path / "now", exit_code=137)
    report = gate_dirs(baseline, [tmp_path / "now"])
    assert report.scenarios[0].status == "error"
    assert report.exit_code == 2


def test_a_missing_metric_fails(tmp_path, baseline):
    sdir = write_results(tmp_path / "now")
    doc = json.loads((sdir / "results.json").read_text())
    del doc["checks"]["overhead"]["figures"]["overhead.wall.stage.actor_update"]
    (sdir / "results.json").write_text(json.dumps(doc))
    report = gate_dirs(baseline, [tmp_path / "now"])
    assert verdicts(report) == {("tiny_case", "overhead.wall.stage.actor_update"): "missing"}
    assert report.exit_code == 1


def test_structure_change_fails_but_renumbered_counters_do_not(tmp_path, baseline):
    sdir = write_results(tmp_path / "now")
    dump = sdir / "on/dumps/step_2/actor_update/step0/rank0/dump.json"
    doc = json.loads(dump.read_text())
    # the same calls with other counter values: not a change
    doc["data"] = {k.replace(".0.", ".7."): v for k, v in doc["data"].items()}
    dump.write_text(json.dumps(doc))
    assert gate_dirs(baseline, [tmp_path / "now"]).exit_code == 0
    # linear backward no longer dumped on rank 0 of step 2: entries and names change
    doc["data"] = {k: v for k, v in doc["data"].items() if not k.endswith("backward")}
    doc["data"]["Tensor.add_.0.forward"] = dump_doc("L1", "actor_update")["data"]["Functional.linear.0.forward"]
    dump.write_text(json.dumps(doc))
    report = gate_dirs(baseline, [tmp_path / "now"])
    assert report.exit_code == 1
    lines = [wording.gate_line(m) for m in report.scenarios[0].of("regressed")]
    assert any("structure.actor_update.rank0.entries baseline 16 now 13" in ln for ln in lines), lines
    names = next(ln for ln in lines if ".names" in ln)
    assert "Functional.linear.backward x8->x4" in names and "+Tensor.add_.forward x1" in names
    assert "tolerance exact" in names


def test_results_without_dumps_skip_the_structure_only(tmp_path, baseline):
    write_results(tmp_path / "now", dumps=False)
    report = gate_dirs(baseline, [tmp_path / "now"])
    assert report.exit_code == 0
    assert any("structure not compared" in n for n in report.scenarios[0].notes)


def test_gate_cli_exit_codes_and_output(tmp_path, baseline, capsys):
    b = str(tmp_path / "baseline.json")
    write_results(tmp_path / "ok", profiled=10.1)
    assert main(["gate", "--baseline", b, "--results", str(tmp_path / "ok")]) == 0
    out = capsys.readouterr().out
    assert "gate: 1 ok -> PASS" in out
    write_results(tmp_path / "bad", profiled=60.0)
    assert main(["gate", "--baseline", b, "--results", str(tmp_path / "bad"), "--json", str(tmp_path / "g.json")]) == 1
    out = capsys.readouterr().out
    assert "REGRESSED tiny_case: overhead.wall.profiled baseline 10.00x now 60.00x" in out
    assert json.loads((tmp_path / "g.json").read_text())["exit_code"] == 1
    shutil.rmtree(tmp_path / "bad")
    assert main(["gate", "--baseline", b, "--results", str(tmp_path / "bad")]) == 2
    assert main(["gate", "--baseline", str(tmp_path / "nope.json"), "--results", str(tmp_path / "ok")]) == 2


def test_a_baseline_from_before_the_wall_clock_shows_the_wall_figures_as_new(tmp_path, baseline):
    """Stored before the wall clock, a baseline gated CPU-time ratios under the old names (``overhead.profiled``,
    ``overhead.stage.<stage>``): those are not gated any more, so the wall figures are new, never missing or
    regressed against a CPU figure."""
    old = baseline.model_copy(deep=True)
    for sb in old.scenarios.values():
        renamed = {}
        for name in [m for m in sb.figures if m.startswith("overhead.wall.")]:
            renamed[name.replace("overhead.wall.", "overhead.", 1)] = sb.figures.pop(name)
        sb.figures |= renamed
        sb.ratio_samples = {k.replace("overhead.wall.", "overhead.", 1): v for k, v in sb.ratio_samples.items()}
    write_results(tmp_path / "now", profiled=40.0)  # 4x the old CPU figure: not compared with it
    report = gate_dirs(old, [tmp_path / "now"])
    assert report.exit_code == 0
    assert set(verdicts(report).values()) == {"new"}
    assert ("tiny_case", "overhead.wall.profiled") in verdicts(report)

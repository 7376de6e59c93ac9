"""What the CPU gate publishes on GitHub (harness.report.github): one annotation per finding, read from the
compare.json / gate JSON the harness wrote, and the step summary's verdict line."""

from __future__ import annotations

import json

from gate_builders import write_results

from harness.cli import main
from harness.gate.baseline import build
from harness.gate.judge import ComparePolicy, FigureVerdict, Judgement, ScenarioVerdict
from harness.report.github import MAX_PER_LEVEL, annotation_lines, load, summary
from harness.report.verdicts import write_comparison

ORDER = ["base", "head", "head", "base"]
COMPARE = ComparePolicy()
LAYOUT = (
    "REGRESSED real_fsdp_l0: layout check passes on base, fails on head: missing dump dir "
    "step_2/actor_update/step0/rank0"
)


def compare_json(tmp_path, *scenarios: ScenarioVerdict, skipped: tuple[str, ...] = ()):
    """compare.json as `harness compare` writes it (the real writer: a change of its format fails here)."""
    write_comparison(Judgement("compare", "verl A", "verl B", list(scenarios), ORDER, list(skipped)), tmp_path)
    return tmp_path / "compare.json"


def test_a_regression_is_the_verdict_then_one_error_per_finding(tmp_path):
    numerics = "MISSING real_fsdp_l0: numerics step_2/actor_update dumped on base, missing on head: not compared"
    broken = ScenarioVerdict("real_fsdp_l0", COMPARE, findings=[LAYOUT, numerics], checks_judged=3)
    broken.figures = [
        FigureVerdict("real_fsdp_l0", "disk.stage.actor_update_bytes", "missing", [1e6], []),
        FigureVerdict("real_fsdp_l0", "disk.total_bytes", "ok", [2e6], [1e6]),
    ]
    fine = ScenarioVerdict("tiny_fsdp_l0", COMPARE, checks_judged=4)
    doc = load(compare_json(tmp_path, broken, fine))
    lines = annotation_lines(doc)
    assert lines == [
        "::error title=precision_debugger gate::FAIL (exit 1: a regression of head: a verdict on the verl (or msprobe) "
        "under test)",
        f"::error title=REGRESSED real_fsdp_l0::{LAYOUT}",
        f"::error title=MISSING real_fsdp_l0::{numerics}",  # each finding titled by its own verdict word
        "::error title=MISSING real_fsdp_l0::MISSING real_fsdp_l0: disk.stage.actor_update_bytes base 1.00 MB, "
        "not measured on head",
    ]
    text = summary(doc, "## the report\n", heading="CPU gate")
    assert text.startswith("## CPU gate\n\n❌ **FAIL**: exit 1, a regression of head")
    assert text.endswith("## the report\n")


def test_an_unchanged_head_publishes_no_annotation_and_a_pass(tmp_path):
    doc = load(compare_json(tmp_path, ScenarioVerdict("tiny_fsdp_l0", COMPARE, checks_judged=4)))
    assert annotation_lines(doc) == []
    assert summary(doc).startswith("✅ **PASS**: exit 0, pass")


def test_nothing_compared_is_an_error_never_a_pass(tmp_path):
    doc = load(compare_json(tmp_path, skipped=("tiny_cuda_fsdp_l0 needs a CUDA GPU",)))
    assert doc.exit_code == 2
    err, notice = annotation_lines(doc)
    assert err.startswith("::error title=precision_debugger gate::NOTHING COMPARED (0 of 1 scenarios")
    assert "not a verdict on verl, never a pass" in err
    assert notice == "::notice title=SKIPPED::tiny_cuda_fsdp_l0 needs a CUDA GPU"


def test_errors_name_the_infrastructure_and_inconclusive_is_a_warning(tmp_path):
    crashed = ScenarioVerdict("tiny_fsdp_l1", COMPARE, errors=["head: training failed: exit 137 (out of memory?)"])
    noisy = ScenarioVerdict(
        "tiny_fsdp_mix", COMPARE, undecided=["INCONCLUSIVE tiny_fsdp_mix: overhead check undecided"]
    )
    lines = annotation_lines(load(compare_json(tmp_path, crashed, noisy)))
    assert lines[0].startswith(
        "::error title=precision_debugger gate::FAIL (0 of 2 scenarios compared) (exit 2: an error"
    )
    assert lines[1] == (
        "::error title=ERROR tiny_fsdp_l1 (not a verdict on verl)::head: training failed: exit 137 (out of memory?)"
    )
    assert (
        lines[2] == "::warning title=INCONCLUSIVE tiny_fsdp_mix::INCONCLUSIVE tiny_fsdp_mix: overhead check undecided"
    )


def test_undecided_alone_is_a_warning_verdict_with_its_own_exit_code(tmp_path):
    noisy = ScenarioVerdict("tiny_fsdp_l0", COMPARE, undecided=["INCONCLUSIVE tiny_fsdp_l0: overhead check undecided"])
    noisy.checks_judged = 4
    doc = load(compare_json(tmp_path, noisy))
    assert doc.exit_code == 3
    assert annotation_lines(doc)[0].startswith("::warning title=precision_debugger gate::INCONCLUSIVE (exit 3: ")
    assert summary(doc).startswith("⚠️ **INCONCLUSIVE**: exit 3")


def test_a_finding_cannot_forge_a_workflow_command_and_titles_keep_their_properties(tmp_path):
    """verl's own text (an error message, a path) goes into the annotation: a line break in it would end the
    command and start another one."""
    evil = "bad\n::error title=PASS::all good, 100%"
    s = ScenarioVerdict("tiny,x:y", COMPARE, findings=[evil], checks_judged=1)
    lines = annotation_lines(load(compare_json(tmp_path, s)))
    assert lines[1] == "::error title=REGRESSED tiny%2Cx%3Ay::bad%0A::error title=PASS::all good, 100%25"
    assert all("\n" not in line for line in lines)


def test_more_findings_than_github_shows_say_how_many_more_and_where(tmp_path):
    s = ScenarioVerdict("tiny_fsdp_l1", COMPARE, findings=[f"REGRESSED tiny_fsdp_l1: structure {i}" for i in range(30)])
    lines = annotation_lines(load(compare_json(tmp_path, s)))
    assert len(lines) == MAX_PER_LEVEL
    assert lines[-1] == (
        "::error title=precision_debugger gate::22 more errors: every finding is in compare.txt in the results artifact"
    )


def test_a_nightly_gate_json_gives_one_error_per_regressed_metric(tmp_path, capsys):
    for i, profiled in enumerate((9.95, 10.0, 10.05)):
        write_results(tmp_path / f"cal{i}", profiled=profiled)
    build([tmp_path / f"cal{i}" for i in range(3)], calibrate=True).write(tmp_path / "baseline.json")
    write_results(tmp_path / "now", disk=2_000_000)
    gate_file = tmp_path / "gate.json"
    args = ["gate", "--baseline", str(tmp_path / "baseline.json"), "--results", str(tmp_path / "now")]
    assert main([*args, "--json", str(gate_file)]) == 1
    capsys.readouterr()
    assert main(["github", "annotations", str(gate_file)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("::error title=precision_debugger gate::FAIL (exit 1")
    total = "REGRESSED tiny_case: disk.total_bytes baseline 1.00 MB now 2.00 MB (+100%25)"
    assert f"::error title=REGRESSED tiny_case::{total}" in "\n".join(lines)
    assert len(lines) == 1 + sum(m["verdict"] == "regressed" for m in json.loads(gate_file.read_text())["scenarios"][0]
                                 ["figures"])  # fmt: skip


def test_a_file_of_another_kind_is_one_line(tmp_path, capsys):
    other = tmp_path / "compare.json"
    other.write_text(json.dumps({"order": [], "base": "a", "schema_version": 3}))
    assert main(["github", "annotations", str(other)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"ERROR: {other}: head: Field required") and "not a harness compare.json" in err
    assert "\n" not in err

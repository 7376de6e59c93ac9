""".ci/cpu-gate, the CPU gate's job script, as a workflow runs it: what it publishes when the harness stops before
deciding (the base-against-head verdicts themselves: tests/test_github_report.py, and docs/cpu-gate.md's runs)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from builders import write_scenario
from conftest import SMALL_TARGET

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.integration
def test_a_verl_that_cannot_be_fetched_is_one_infrastructure_annotation_and_exit_2(tmp_path):
    summary = tmp_path / "summary.md"
    env = {**os.environ, "RESULTS": str(tmp_path / "results"), "GITHUB_STEP_SUMMARY": str(summary),
           "HARNESS_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    missing = tmp_path / "no-verl"
    proc = subprocess.run(
        ["bash", ".ci/cpu-gate", "pr", f"{missing}@main", f"{missing}@pr", "scenarios/tiny_fsdp_l0.yaml"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("::")]
    assert line.startswith("::error title=precision_debugger gate::the harness exited 2 before writing ")
    assert f"TARGET ERROR: git clone --quiet --mirror -- {missing} " in line and line.endswith("not a verdict on verl")
    assert (tmp_path / "results" / "annotations.txt").read_text() == line + "\n"
    assert "❌ **ERROR**: the harness exited 2" in summary.read_text()


@pytest.mark.integration
def test_a_callers_unknown_scenario_is_its_one_line_before_any_environment_is_made(tmp_path):
    """verl-cpu-gate.yml's ``scenarios`` input naming no file, through the job command as the workflow runs the gate:
    one annotation naming it, exit 2 (the job red, never a pass), in seconds: no verl fetched nor installed first;
    not retried (a re-run fails the same way) and not blamed on the runner: what to do is to fix the input."""
    results = tmp_path / "results"
    env = {**os.environ, "RESULTS": str(results), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
           "HARNESS_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    env.pop("GITHUB_OUTPUT", None)
    missing = tmp_path / "no-verl"  # never reached: the scenarios are read first
    gate = ["bash", ".ci/cpu-gate", "pr", f"{missing}@main", f"{missing}@pr", "scenarios/tiny_fsdp_l9.yaml"]
    argv = [sys.executable, "-m", "harness.job", "run", "--title", "precision_debugger CPU gate", "--minutes", "50",
            "--fresh", str(results), "--annotations", str(results / "annotations.txt"), "--", *gate]  # fmt: skip
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the job's own exit: red
    gate_line, job_line = [x for x in proc.stdout.splitlines() if x.startswith("::")]
    assert gate_line.startswith("::error title=precision_debugger gate::the harness exited 2 before writing ")
    assert "INVALID SCENARIO: scenarios/tiny_fsdp_l9.yaml: cannot read: No such file or directory" in gate_line
    assert job_line.startswith("::error title=precision_debugger CPU gate::ERROR, not a verdict on the pull request")
    assert "What to do: fix the job's scenarios" in job_line and "the runner or the harness is at fault" not in job_line
    assert not (tmp_path / "cache").exists() and "TARGET ERROR" not in proc.stdout + proc.stderr
    assert not (tmp_path / "results.attempt1").exists()  # one attempt


@pytest.mark.integration
@pytest.mark.trains
def test_the_second_night_is_gated_against_the_first_and_reported(tmp_path, repo, cache):
    """The series as a nightly keeps it, the step as the workflow runs it (under the table of job outcomes): the first
    night starts it, the second is gated against the first's baseline and its report shows the gate; both are green
    and publish their baseline. One run a night leaves the overhead ratios against the previous night undecided
    (exit 3): a warning, the job green. The second night exited 2 before ("this night's own runs: exit 2"): the script
    passed the report ``--baseline``, an option it does not have."""
    scenario = write_scenario(tmp_path, name="night_l1", **SMALL_TARGET)
    env = {**os.environ, "HARNESS_CACHE_DIR": str(cache)}
    nights = []
    for night in ("first", "second"):
        results = tmp_path / night
        previous = {"PREVIOUS": str(tmp_path / "first" / "baseline" / "baseline.json")} if night == "second" else {}
        outputs = {"RESULTS": str(results), "GITHUB_STEP_SUMMARY": str(results / "summary.md"),
                   "GITHUB_OUTPUT": str(tmp_path / f"{night}.out")}  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-m", "harness.job", "run", "--annotations", str(results / "annotations.txt"), "--",
             "bash", ".ci/cpu-gate", "nightly", f"{repo.path}@{repo.release}", "", str(scenario)],
            cwd=ROOT, env=env | previous | outputs, capture_output=True, text=True, check=False, timeout=900,
        )  # fmt: skip
        nights.append(proc)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "baseline=publish" in (tmp_path / f"{night}.out").read_text()
    first, second = nights
    assert "this night starts it (nothing gated)" in first.stdout
    said = re.search(r"cpu-gate: runs exit 0, baseline exit 0, gate exit ([03]), report exit 0, duet exit none; "
                     r"next baseline ", second.stdout)  # fmt: skip
    assert said, second.stdout[-2000:]
    if said[1] == "3":
        assert "::warning title=precision_debugger job::INCONCLUSIVE (exit 3), the job passes" in second.stdout
    assert "unrecognized arguments" not in second.stderr
    summary = (tmp_path / "second" / "summary.md").read_text()
    heading = "## precision_debugger CPU nightly: verl main, msprobe pinned; the night's own runs: exit 0"
    assert summary.startswith(heading), summary[:500]
    assert (tmp_path / "second" / "gate.json").is_file() and (tmp_path / "second" / "report" / "summary.md").is_file()

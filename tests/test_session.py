"""The session every front end runs scenarios through (``harness.pipeline.session``): one skip rule, and
results.json written by it read back beside the previous schema's."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from builders import write_scenario
from gate_builders import write_results

from harness.artifacts.record import ExecResult, RunRecord
from harness.artifacts.results import ResultsDoc, read_results
from harness.cli import main
from harness.config import RAY_ADDRESS
from harness.gate.baseline import build
from harness.outcomes import EXIT_ERROR, EXIT_INCONCLUSIVE
from harness.pipeline.base_head import Compared
from harness.pipeline.options import runs_heavy
from harness.pipeline.session import Session
from harness.report.verdicts import AgainstBaseline
from harness.scenario.loader import load_scenario
from harness.training.runs import ScenarioRuns


def test_one_skip_rule_heavy_only_when_asked_a_cluster_only_when_named(tmp_path, monkeypatch):
    monkeypatch.delenv(RAY_ADDRESS.name, raising=False)
    monkeypatch.delenv("HARNESS_HEAVY", raising=False)
    light = load_scenario(write_scenario(tmp_path, name="tiny_light"))
    heavy = load_scenario(write_scenario(tmp_path, name="tiny_heavy", heavy=True))
    ray = light.model_copy(update={"executor": light.executor.model_copy(update={"kind": "ray"})})
    session = Session(tmp_path)
    assert session.skip(light) is None
    assert session.skip(heavy) == (
        "tiny_heavy is heavy (heavy: true, minutes of training): run it with --heavy (`python -m harness run "
        "--heavy`, as compare, duet and bisect; `pytest scenarios/ -k tiny_heavy --harness-heavy`) or HARNESS_HEAVY=1"
    )
    assert Session(tmp_path, heavy=True).skip(heavy) is None
    assert "tiny_light runs on a Ray cluster (executor ray) and none is named" in str(session.skip(ray))
    monkeypatch.setenv(RAY_ADDRESS.name, "http://127.0.0.1:8265")
    assert session.skip(ray) is None
    assert not runs_heavy(False) and runs_heavy(True)
    monkeypatch.setenv("HARNESS_HEAVY", "1")
    assert runs_heavy(False)


def test_harness_run_skips_a_heavy_scenario_unless_asked(tmp_path, monkeypatch, capsys):
    """``harness run`` and pytest skip the same scenarios: a heavy one, saying how to run it; a run where nothing ran
    is NOTHING CHECKED, exit 2, never a pass."""
    monkeypatch.delenv("HARNESS_HEAVY", raising=False)
    path = write_scenario(tmp_path, name="tiny_heavy", heavy=True)
    assert main(["run", str(path), "--results", str(tmp_path / "res")]) == EXIT_ERROR
    out = capsys.readouterr().out
    assert "SKIPPED tiny_heavy is heavy (heavy: true, minutes of training)" in out
    assert "NOTHING CHECKED: 0 of 1 scenarios ran here (each skipped above, saying how to run it)" in out
    assert not (tmp_path / "res" / "tiny_heavy").exists()


def test_compare_skips_a_heavy_scenario_unless_asked_as_harness_run(tmp_path, monkeypatch, capsys):
    """``harness compare`` decides through the session's one rule: a heavy scenario without ``--heavy`` is one
    SKIPPED line, counted as skipped in the comparison's total; with ``--heavy`` it is compared."""
    monkeypatch.delenv("HARNESS_HEAVY", raising=False)
    asked: dict[str, object] = {}

    def compared(session, scenarios, base, head, policy):
        asked.update(names=[s.name for s in scenarios], heavy=session.heavy)
        return Compared("b", "h")

    monkeypatch.setattr(Session, "compare", compared)
    monkeypatch.setattr("harness.report.compare.write_reports", lambda *args: [])
    path = write_scenario(tmp_path, name="tiny_heavy", heavy=True)
    argv = ["compare", str(path), "--base", "0.9.1", "--head", "0.9.1", "--results", str(tmp_path / "res")]
    main(argv)
    lines = capsys.readouterr().out.splitlines()
    said = (
        "SKIPPED tiny_heavy is heavy (heavy: true, minutes of training): run it with --heavy (`python -m harness run "
        "--heavy`, as compare, duet and bisect; `pytest scenarios/ -k tiny_heavy --harness-heavy`) or HARNESS_HEAVY=1"
    )
    assert [ln for ln in lines if "tiny_heavy" in ln] == [said, said]  # before the runs, and in the verdict's lines
    assert asked == {"names": [], "heavy": False}
    assert any(ln.startswith("compare: 1 skipped -> ") for ln in lines), lines
    main([*argv, "--heavy"])
    assert "SKIPPED" not in capsys.readouterr().out
    assert asked == {"names": ["tiny_heavy"], "heavy": True}


def test_with_a_baseline_the_session_judges_the_regression_with_the_checks_and_writes_results_once(
    tmp_path, good_case, monkeypatch
):
    """pytest's ``--harness-baseline``: the regression verdict is judged by the session beside the checks, from the
    figures results.json is about to hold, so results.json is written once per scenario (it was twice: the checks',
    then again with the regression item's verdict)."""
    scenario, ctx = good_case
    result = ExecResult(exit_code=0, wall_s=1.0)
    records = {m: RunRecord(mode=m, executor="local", argv=["python"], result=result) for m in ("off", "on")}
    runs = ScenarioRuns(ctx.dir, "now", records, 0.0)  # type: ignore[arg-type]
    Session(tmp_path).judge(scenario, runs)  # the checks alone: what the baseline is made of
    second = tmp_path / "results2"
    shutil.copytree(ctx.dir.root.parent, second)
    doc = json.loads((second / scenario.name / "results.json").read_text())
    for run in doc["runs"].values():
        run["wall_s"] += 1.0  # its own wall times, or it is refused as a copy of the first
    (second / scenario.name / "results.json").write_text(json.dumps(doc))
    baseline = build([ctx.dir.root.parent, second])
    written: list[str] = []
    write = ResultsDoc.write
    monkeypatch.setattr(ResultsDoc, "write", lambda doc, path: written.append(str(path)) or write(doc, path))
    found = Session(tmp_path, beside=AgainstBaseline(baseline)).judge(scenario, runs)
    assert written == [str(ctx.dir.results)]
    assert found[-1].check == "regression" and found[-1].passed, found[-1]
    assert read_results(ctx.dir.results).checks["regression"].summary == found[-1].summary
    assert [r.check for r in found[:-1]] == [r.check for r in Session(tmp_path).judge(scenario, runs)]


@pytest.mark.parametrize("version", [None, 2])
def test_results_json_of_the_previous_schemas_reads(tmp_path, version):
    """Schema 2 (merged check by check) and 1 (no schema_version) have schema 3's fields: both read as they are."""
    path = write_results(tmp_path, "tiny_case", dumps=False) / "results.json"
    doc = json.loads(path.read_text())
    if version is not None:
        doc["schema_version"] = version
    path.write_text(json.dumps(doc))
    read = read_results(path)
    assert read.schema_version == ResultsDoc.schema_number() == 4
    assert read.checks["disk"].passed and read.runs["off"].exit_code == 0


INCONCLUSIVE_ONLY = """
import pytest

def test_undecided(record_property):
    record_property("harness.verdict", "inconclusive")  # what an INCONCLUSIVE item records before it fails
    pytest.fail("INCONCLUSIVE")

def test_passes():
    pass
"""


@pytest.mark.integration
def test_pytest_exits_3_where_every_failure_is_inconclusive_as_harness_run(tmp_path):
    """``harness run`` exits 3 on INCONCLUSIVE (``outcomes.EXIT_INCONCLUSIVE``): pytest too, unless a failure of
    another kind is there, which keeps pytest's 1."""
    (tmp_path / "test_one.py").write_text(INCONCLUSIVE_ONLY)
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(tmp_path / "test_one.py")]
    assert subprocess.run(argv, cwd=tmp_path, capture_output=True, check=False).returncode == EXIT_INCONCLUSIVE
    (tmp_path / "test_one.py").write_text(INCONCLUSIVE_ONLY + "\ndef test_fails():\n    assert False\n")
    assert subprocess.run(argv, cwd=tmp_path, capture_output=True, check=False).returncode == 1

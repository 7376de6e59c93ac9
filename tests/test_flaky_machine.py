"""A training the machine failed (a lost port, a timeout, a signal) is trained once more, at the one place every
entry point trains (``harness.training.runs.ensure_runs``): run, pytest, compare and the nightly alike."""

from __future__ import annotations

import pytest
from builders import write_scenario

from harness.artifacts.record import ExecResult, RunRecord
from harness.artifacts.rundir import ScenarioDir
from harness.errors import HarnessBug, InfraError
from harness.scenario.loader import load_scenario
from harness.training import runs as runs_module
from harness.training.runs import ScenarioRuns, ensure_runs

LOST_PORT = "the machine failed the training: torch.distributed.DistNetworkError: ... EADDRINUSE"


def scenario_runs(root, *reasons: str, party: str = "infrastructure") -> ScenarioRuns:
    """A scenario's runs: off and on, failed with these crash reasons (none: both finished)."""
    records = {}
    for mode, reason in zip(("off", "on"), [*reasons, None, None], strict=False):
        result = ExecResult(exit_code=1 if reason else 0, wall_s=1.0)
        crash = {"party": party, "reason": reason} if reason else None
        records[mode] = RunRecord(mode=mode, executor="local", argv=[], result=result, error=reason, crash=crash)
    return ScenarioRuns(ScenarioDir(root / "tiny_case"), "s", records, 0.0)


def test_only_a_machine_failure_of_every_failed_run_is_transient(tmp_path):
    def error(*reasons: str, party: str = "infrastructure") -> Exception | None:
        return scenario_runs(tmp_path, *reasons, party=party).error

    assert scenario_runs(tmp_path).error is None
    assert getattr(error(LOST_PORT), "transient", None) is True
    assert getattr(error("timed out after 600s (executor.timeout_s); killed"), "transient", None) is True
    assert getattr(error("killed for memory (OOM) with exit code 137"), "transient", None) is False
    both = f"both runs failed the same way, precision_debugger off and on: {LOST_PORT}"
    assert getattr(error(both, both), "transient", None) is False
    assert isinstance(error("harness raised TypeError", party="harness"), HarnessBug)


@pytest.mark.parametrize(
    ("first", "second", "trainings", "raised"),
    [
        (LOST_PORT, None, 2, None),  # trained once more, and it ran
        (LOST_PORT, LOST_PORT, 2, InfraError),  # twice: the scenario's error
        ("killed for memory (OOM) with exit code 137", None, 1, InfraError),  # not the machine's luck: no retry
    ],
)
def test_a_training_the_machine_failed_is_trained_once_more_and_said(
    tmp_path, monkeypatch, capsys, first, second, trainings, raised
):
    scenario = load_scenario(write_scenario(tmp_path))
    outcomes = [scenario_runs(tmp_path, first), scenario_runs(tmp_path, *([second] if second else []))]
    calls: list[int] = []

    def run_both(*args, **kwargs) -> ScenarioRuns:
        calls.append(1)
        return outcomes[len(calls) - 1]

    monkeypatch.setattr(runs_module, "_run_both", run_both)
    monkeypatch.setattr(runs_module, "check_target", lambda scenario, env: None)
    env = type("Env", (), {"target": None})()
    if raised is None:
        assert ensure_runs(scenario, tmp_path / "res", "s", env=env).error is None  # type: ignore[arg-type]
    else:
        with pytest.raises(raised):
            ensure_runs(scenario, tmp_path / "res", "s", env=env)  # type: ignore[arg-type]
    assert len(calls) == trainings
    said = capsys.readouterr().err
    assert ("the machine failed it; trained once more" in said) == (trainings == 2), said

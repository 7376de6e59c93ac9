"""Run only what is judged (#85): a comparison that decides no overhead for a scenario (``budgets.overhead.compare:
false``, verl's real trainer's tier in the pull-request gate; or ``--judge`` without overhead) trains no off run for
it, since only the overhead ratios read an off run; every check that would have read one says it was not trained,
never a pass and never a crash; and an on run that crashes is followed by its off run, which tells whose it is.

The session below is the real one down to the executor: each training is a stand-in that leaves what a successful
(or crashing) run leaves, and is counted.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from builders import write_dump, write_metrics, write_scenario

import harness.pipeline.session as sm
import harness.training.runs as runs_mod
from harness import outcomes
from harness.artifacts.record import ExecResult
from harness.gate.judge import ComparePolicy
from harness.pipeline import base_head as bh
from harness.report import verdicts
from harness.scenario.loader import load_scenario
from harness.targets.census import Census
from harness.targets.dialect import Dialect
from harness.targets.environment import ensure_env
from harness.targets.spec import pinned_target
from harness.training.registry import EXECUTORS
from harness.training.workloads import cpu_ppo

VERL = "/v/lib/python3.11/site-packages/verl/utils/profiler/precision_debugger_profile.py"
CRASH = (
    "step 1\nTraceback (most recent call last):\n"
    f'  File "{VERL}", line 10, in start\n    call()\n'
    "AttributeError: 'X' object has no attribute '_started_at'\n"
)


def _fake_trainings(monkeypatch: pytest.MonkeyPatch, crashing: frozenset[str] = frozenset()) -> list[str]:
    """Every training the session starts, as ``<side>/<repeat>:<mode>`` (the two dirs above the scenario's): each
    leaves metrics, and the on run the dumps of every profiled step, stage and rank; a mode in ``crashing`` exits 1
    with verl's traceback instead."""
    started: list[str] = []
    executor = type(EXECUTORS["local"])

    def execute(self: Any, launch: Any, run: Any, settings: Any, labels: dict[str, str], stop: Any = None) -> Any:
        sdir = run.root.parent
        started.append(f"{sdir.parent.parent.name}/{sdir.parent.name}:{run.mode}")
        if run.mode in crashing:
            run.log.write_text(CRASH)
            return ExecResult(exit_code=1, wall_s=1.0, argv=["python"])
        run.log.write_text("ok\n")
        write_metrics(run.metrics, {n: 1.0 for n in range(1, 6)})
        if run.mode == "on":
            for step in (2, 4):
                for stage in ("actor_compute_log_prob", "actor_update"):
                    for rank in (0, 1):
                        write_dump(run.dumps, step, stage, rank)
        return ExecResult(exit_code=0, wall_s=6.0, argv=["python"])

    monkeypatch.setattr(executor, "execute", execute)
    monkeypatch.setattr(cpu_ppo, "dialect_of", lambda python: Dialect("profiler-config", True, "a stand-in"))
    monkeypatch.setattr(runs_mod, "check_target", lambda scenario, env: None)
    monkeypatch.setattr(sm, "census_of", lambda target, env: Census(source="verl"))
    monkeypatch.setattr(sm, "add_numerics", lambda *args: None)  # msprobe's compare: its own tests
    return started


def _scenario(tmp_path: Path, compare: bool) -> Any:
    budgets = {"overhead": {"max_profiled_ratio": 10, "max_unprofiled_ratio": 2, "compare": compare}}
    pd = {"steps": [2, 4], "stages": ["actor_compute_log_prob", "actor_update"]}
    return load_scenario(write_scenario(tmp_path, budgets=budgets, precision_debugger=pd, world_size=2, steps=5))


def _compare(tmp_path: Path, scenario: Any, policy: ComparePolicy) -> Any:
    session = sm.Session(tmp_path / "results", say=lambda line: None)
    env = ensure_env(pinned_target())
    session._envs[env.target] = env
    return session.compare([scenario], env.target, env.target, policy)


def test_a_tier_whose_overhead_is_not_compared_trains_no_off_run(tmp_path, monkeypatch):
    """base, head, base: three on trainings, no off one (six trainings before #85, three of them read by nothing);
    the checks of each run judge the on run as before, overhead NOT MEASURED (not checked, never a pass), and the
    comparison says so."""
    started = _fake_trainings(monkeypatch)
    compared = _compare(tmp_path, _scenario(tmp_path, compare=False), ComparePolicy(repeats=2))
    assert started == ["base/r0:on", "head/r0:on", "base/r1:on"], started
    c = compared.judgement()
    (sc,) = c.scenarios
    assert c.exit_code == outcomes.EXIT_PASS and sc.compared, verdicts.lines(c)
    assert bh.OVERHEAD_NOT_COMPARED in sc.notes and outcomes.NOT_MEASURED in bh.OVERHEAD_NOT_COMPARED
    assert not [f for f in sc.figures if f.metric.startswith("overhead.")]  # nothing measured: nothing "reported"
    doc = json.loads((tmp_path / "results/head/r0/tiny_case/results.json").read_text())
    assert set(doc["runs"]) == {"on"}
    overhead = doc["checks"]["overhead"]
    assert not overhead["passed"] and overhead["not_checked"].startswith(f"{outcomes.NOT_MEASURED}: no off run")
    assert doc["checks"]["crash"]["passed"] and "off run was not trained" in doc["checks"]["crash"]["summary"]
    layout = doc["checks"]["layout"]
    assert layout["passed"] and any("off run was not trained" in n for n in layout["notes"])
    assert all(doc["checks"][c]["passed"] for c in ("contents", "disk"))
    trainings = json.loads((tmp_path / "results/head/r0/tiny_case/trainings.json").read_text())
    assert trainings["modes"] == ["on"] and trainings["schema_version"] == 3
    said = "\n".join(verdicts.lines(c))
    assert f"overhead {outcomes.NOT_MEASURED}" in said


def test_judge_without_overhead_trains_no_off_run_and_a_tier_that_compares_it_trains_both(tmp_path, monkeypatch):
    started = _fake_trainings(monkeypatch)
    scenario = _scenario(tmp_path, compare=True)
    c = _compare(tmp_path, scenario, ComparePolicy(families={"disk", "structure"}, repeats=2)).judgement()
    assert started == ["base/r0:on", "head/r0:on", "base/r1:on"] and c.exit_code == outcomes.EXIT_PASS
    assert bh.OVERHEAD_NOT_JUDGED in c.scenarios[0].notes
    started.clear()
    shutil.rmtree(tmp_path / "results")
    _compare(tmp_path, scenario, ComparePolicy(repeats=2, max_repeats=2))
    assert started == [f"{r}:{m}" for r in ("base/r0", "head/r0", "head/r1", "base/r1") for m in ("off", "on")]


def test_an_on_run_that_crashes_is_followed_by_its_off_run_to_tell_whose_crash_it_is(tmp_path, monkeypatch):
    """Only the on run asked: where it crashes in verl's code, the off run is trained to tell a crash of the
    integration (off trains: the crash check's verdict) from a head that cannot train at all (off crashes alike:
    ``FailedAlike``, the comparison's CANNOT_TRAIN)."""
    scenario, env = _scenario(tmp_path, compare=False), ensure_env(pinned_target())

    def trained(crashing: frozenset[str], where: str) -> tuple[list[str], Any]:
        started = _fake_trainings(monkeypatch, crashing)
        try:
            return started, runs_mod.ensure_runs(scenario, tmp_path / where / "r0", where, env=env, modes=("on",))
        except runs_mod.FailedAlike as exc:
            return started, exc

    started, runs = trained(frozenset(), "clean")
    assert started == ["clean/r0:on"] and set(runs.records) == {"on"}
    started, runs = trained(frozenset({"on"}), "on_crashes")
    assert started == ["on_crashes/r0:on", "on_crashes/r0:off"] and set(runs.records) == {"on", "off"}
    assert (runs.records["on"].crash or {}).get("party") == "verl" and not runs.records["off"].crash
    started, failed = trained(frozenset({"on", "off"}), "alike")
    assert started == ["alike/r0:on", "alike/r0:off"] and isinstance(failed, runs_mod.FailedAlike), failed


def test_the_plots_of_on_runs_alone_say_no_step_time_was_measured(tmp_path):
    """No off run, no overhead check's figures: no step time to plot, and no log axis of nothing (it raised in
    matplotlib, a HARNESS ERROR after every run had been judged)."""
    from harness.gate.observe import Observation
    from harness.report.compare import plot_compare
    from harness.report.plots import plot_scenario

    alone = Observation("tiny_case", {}, {}, {"disk.stage.actor_update": 1e6}, None)
    assert plot_compare("tiny_case", [alone], [alone], tmp_path / "c.png").stat().st_size > 1000
    assert plot_scenario(alone, tmp_path / "s.png").stat().st_size > 1000

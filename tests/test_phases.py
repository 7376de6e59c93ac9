"""Where the minutes go (#85): each phase of a job (set-up, each side's environment, each training's start-up and
steps, the judge, the numerics, the reports) in results.json, compare.json and the job's summary table. The model is
held here; a real tiny run holds its phases to its own wall (accounting, not speed: no timing is judged)."""

from __future__ import annotations

import json
import time

import pytest
from builders import write_scenario
from conftest import SMALL_TARGET
from pydantic import ValidationError

from harness.artifacts.results import PHASES, PhaseDoc, ResultsDoc
from harness.gate.files import CompareDoc
from harness.gate.judge import Judgement
from harness.report import verdicts
from harness.report.summary import phases_table
from harness.safeio import InputError


def test_a_phase_is_typed_and_refuses_what_it_does_not_know():
    assert PhaseDoc(phase="start-up", of="on", seconds=51.2).model_dump() == {
        "phase": "start-up",
        "of": "on",
        "seconds": 51.2,
    }
    with pytest.raises(ValidationError):
        PhaseDoc.model_validate({"phase": "start-up", "seconds": 1.0, "extra": 1})  # extra="forbid"
    with pytest.raises(ValidationError):
        PhaseDoc.model_validate({"phase": "coffee", "seconds": 1.0})  # one of PHASES
    with pytest.raises(ValidationError):
        PhaseDoc.model_validate({"phase": "steps", "seconds": "1.0"})  # strict: seconds are a number
    assert PHASES == ("set-up", "environment", "start-up", "steps", "judge", "numerics", "reports")


def test_results_json_schema_4_holds_the_phases_and_earlier_schemas_read_with_none():
    phases = [PhaseDoc(phase="steps", of="off", seconds=3.5)]
    doc = ResultsDoc(scenario="tiny_case", phases=phases)
    again = ResultsDoc.of(json.loads(doc.model_dump_json()))
    assert again.schema_version == 4 and again.phases == phases
    for version in (1, 2, 3):
        old = {"scenario": "tiny_case", "checks": {}} | ({"schema_version": version} if version > 1 else {})
        assert ResultsDoc.of(old).phases == []
    with pytest.raises(InputError, match="reads schemas 1 to 4"):
        ResultsDoc.of({"scenario": "tiny_case", "schema_version": 5})
    with pytest.raises(InputError):
        ResultsDoc.of({"scenario": "tiny_case", "schema_version": 4, "phases": [{"phase": "steps"}]})


def test_compare_json_holds_the_phases_and_schema_3_reads_with_none():
    phases = [PhaseDoc(phase="set-up", seconds=2.0), PhaseDoc(phase="environment", of="base", seconds=0.1)]
    doc = json.loads(verdicts.compare_doc(Judgement("compare", "b", "h", [], phases=phases)).model_dump_json())
    assert doc["schema_version"] == 4 and CompareDoc.of(doc).phases == phases
    assert CompareDoc.of(doc | {"schema_version": 3, "phases": []}).phases == []
    doc.pop("phases")
    assert CompareDoc.of(doc | {"schema_version": 2}).phases == []


def test_the_summary_table_sums_each_phase_and_lists_every_entry():
    phases = [
        PhaseDoc(phase="set-up", seconds=10.0),
        PhaseDoc(phase="start-up", of="real base r1 on", seconds=50.0),
        PhaseDoc(phase="steps", of="real base r1 on", seconds=20.0),
        PhaseDoc(phase="start-up", of="real head r1 on", seconds=60.0),
        PhaseDoc(phase="reports", seconds=10.0),
    ]
    table = phases_table(phases, wall_s=155.0)
    assert "| start-up | 110.0 | 73% |" in table and "| steps | 20.0 | 13% |" in table
    assert "| **all** | **150.0** | 150.0 s of 155.0 s wall |" in table
    assert "| start-up | real head r1 on | 60.0 |" in table
    assert not [r for r in table if r.startswith("| numerics ")]  # a phase the job did not have: no row
    assert phases_table([]) == []


@pytest.mark.trains
def test_a_real_tiny_runs_phases_sum_to_about_its_wall(tmp_path):
    """One real tiny run (1 rank, 3 steps) through the session as ``harness run`` makes it: results.json holds the
    set-up, each training's start-up and steps and the judge, which together are the session's time on the scenario
    (what they leave out, the dump facts' and results.json's own writes, is milliseconds). The bounds are of the
    accounting, not of speed: any machine, however loaded, meets them."""
    from harness.pipeline.session import Session
    from harness.scenario.loader import load_scenario
    from harness.targets.spec import pinned_target

    scenario = load_scenario(write_scenario(tmp_path, name="tiny_phases", **SMALL_TARGET))
    session = Session(tmp_path / "results", gate_timing=False)
    env = session.env(pinned_target())
    started = time.monotonic()
    session.evaluate(scenario, env)
    wall = time.monotonic() - started
    doc = ResultsDoc.read_file(tmp_path / "results/tiny_phases/results.json", 1 << 26)
    assert [(p.phase, p.of) for p in doc.phases] == [
        ("set-up", ""), ("start-up", "off"), ("steps", "off"), ("start-up", "on"), ("steps", "on"), ("judge", ""),
    ]  # fmt: skip
    total = sum(p.seconds for p in doc.phases)
    assert 0.8 * wall <= total <= wall + 0.01, (total, wall, doc.phases)
    steps = {p.of: p.seconds for p in doc.phases if p.phase == "steps"}
    walls = {m: r.wall_s for m, r in doc.runs.items()}
    assert all(0 < steps[m] < walls[m] for m in ("off", "on")), (steps, walls)
    assert [p.phase for p in session.phases] == ["environment", *[p.phase for p in doc.phases]]


def test_a_comparisons_phases_name_each_side_run_and_training(tmp_path, monkeypatch):
    """Base against head through the real session, each training a stand-in (``test_only_judged``): the comparison
    holds each run's set-up, each training's start-up and steps and each run's judge, named by scenario, side, run
    and training, in the order they ran, then the numerics (the environment here found before it: not its phase)."""
    from test_only_judged import _compare, _fake_trainings, _scenario

    from harness.gate.judge import ComparePolicy

    _fake_trainings(monkeypatch)
    compared = _compare(tmp_path, _scenario(tmp_path, compare=False), ComparePolicy(repeats=2))
    named = [(p.phase, p.of) for p in compared.phases]
    per_run = [
        [("set-up", f"tiny_case {r}"), ("start-up", f"tiny_case {r} on"), ("steps", f"tiny_case {r} on"),
         ("judge", f"tiny_case {r}")]
        for r in ("base r1", "head r1", "base r2")
    ]  # fmt: skip
    assert named == [*(x for run in per_run for x in run), ("numerics", "tiny_case")], named
    seconds = {(p.phase, p.of.rsplit(" ", 1)[-1]) for p in compared.phases if p.phase in ("start-up", "steps")}
    assert seconds == {("start-up", "on"), ("steps", "on")}
    assert [p.seconds for p in compared.phases if p.phase == "steps"] == [5.0] * 3  # its five 1 s steps of its 6 s
    assert [p.seconds for p in compared.phases if p.phase == "start-up"] == [1.0] * 3
    assert compared.judgement().phases == compared.phases


def test_the_nightly_summary_tables_each_scenarios_phases_from_its_results_json():
    from harness.gate.observe import Observation
    from harness.report.summary import summary_markdown

    phases = [PhaseDoc(phase="start-up", of="off", seconds=50.0), PhaseDoc(phase="steps", of="off", seconds=12.5)]
    obs = Observation("real_fsdp_l0", {}, {}, {}, None, phases=phases)
    text = summary_markdown([("tonight", {"real_fsdp_l0": obs})], [None])
    assert "### Where the minutes went" in text and "| start-up | real_fsdp_l0 off | 50.0 |" in text
    none = Observation("x", {}, {}, {}, None)  # a results.json of schema 3: no phases, no table
    assert "Where the minutes went" not in summary_markdown([("tonight", {"x": none})], [None])

"""A crowded runner (#85): a comparison says its runner's crowding with the figure (its runs' wall against the
scenario's quiet wall, ``budgets.overhead.quiet_run_s``), never a bare INCONCLUSIVE, and where the runner is crowded
its budget is in runs, not minutes: pairs past the 20 minutes up to ``ComparePolicy.decisive`` runs a side, the job's
deadline still the bound. The clock is a stand-in: each run "takes" what the test says (no timing is judged)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from builders import comparing, write_scenario
from test_compare import obs

import harness.pipeline.session as sm
from harness import config, outcomes
from harness.gate.judge import ComparePolicy, Crowding
from harness.report import verdicts
from harness.report.github import _findings
from harness.scenario.loader import load_scenario
from harness.training import deadline

WIDE = [3.0, 4.4, 5.8, 4.0, 4.6, 3.2, 5.0, 3.4, 3.6, 5.6, 4.6, 3.0]  # base and head alike, noise ±40 %: undecided


def _compare(tmp_path, monkeypatch, quiet: float | None, run_s: float, policy: ComparePolicy | None = None):
    """A comparison of WIDE noise whose every run takes ``run_s`` seconds of a stand-in clock; the lines it said."""
    overhead = {"max_profiled_ratio": 10, "max_unprofiled_ratio": 2} | ({"quiet_run_s": quiet} if quiet else {})
    scenario = load_scenario(write_scenario(tmp_path, budgets={"overhead": overhead}))
    clock = SimpleNamespace(now=0.0)
    stand_in = SimpleNamespace(monotonic=lambda: clock.now, time=lambda: 1e9 + clock.now)
    monkeypatch.setattr(sm, "time", stand_in)
    monkeypatch.setattr(deadline, "time", stand_in)  # the job's deadline on the same clock
    ran: list[str] = []

    def observe(scenario, where):
        clock.now += run_s
        ran.append(f"{where.parent.name} {int(where.name[1:]) + 1}")
        return obs(WIDE[len(ran) - 1])

    session, target = comparing(monkeypatch, observe)
    said: list[str] = []
    session.say = said.append
    c = session.compare([scenario], target, target, policy or ComparePolicy(repeats=2)).judgement()
    return c, ran, said


def test_a_crowded_runner_gets_the_runs_that_decide_past_the_minutes_and_says_so(tmp_path, monkeypatch):
    """Each run 400 s against a quiet 100 s (4x): the 20 minutes held 2 runs a side (a pair of 800 s would end past
    them); crowded, pairs go on up to 4 a side, and the undecided scenario says the figure."""
    c, ran, said = _compare(tmp_path, monkeypatch, quiet=100, run_s=400)
    assert len(ran) == 2 * ComparePolicy.decisive == 8 and c.exit_code == outcomes.EXIT_INCONCLUSIVE, ran
    (sc,) = c.scenarios
    assert sc.crowding is not None and sc.crowding.crowded and sc.crowding.ratio == pytest.approx(4.0)
    assert any("on a crowded runner (its runs took 400 s each against the scenario's quiet 100 s (4.0x" in s
               for s in said), said  # fmt: skip
    line = verdicts.crowding_line(sc)
    assert line.startswith("runner crowded: its runs took 400 s each") and "this runner's noise" in line
    assert f"  note tiny_case: {line}" in verdicts.lines(c)
    doc = verdicts.compare_doc(c)
    assert doc.scenarios[0].crowding == line and doc.scenarios[0].notes[0] == line
    warned = ("warning", f"{outcomes.INCONCLUSIVE} tiny_case")
    annotations = [m for lv, title, m in _findings(doc) if (lv, title) == warned]
    assert any(m.startswith(f"{line}; reproduce: ") for m in annotations), annotations  # the job's annotation


def test_a_quiet_runner_keeps_the_minutes_and_says_its_figure(tmp_path, monkeypatch):
    c, ran, said = _compare(tmp_path, monkeypatch, quiet=380, run_s=400)  # 1.05x: not crowded
    assert len(ran) == 4 and c.exit_code == outcomes.EXIT_INCONCLUSIVE
    assert verdicts.crowding_line(c.scenarios[0]).startswith("runner: its runs took 400 s each")
    assert any("would end past the default 20 min" in s and "(1.1x;" in s for s in said), said


def test_without_a_quiet_wall_nothing_changes(tmp_path, monkeypatch):
    c, ran, _ = _compare(tmp_path, monkeypatch, quiet=None, run_s=400)
    assert len(ran) == 4 and c.scenarios[0].crowding is None and verdicts.crowding_line(c.scenarios[0]) == ""


def test_the_jobs_deadline_bounds_a_crowded_runner_and_any_pair(tmp_path, monkeypatch):
    """HARNESS_DEADLINE: no pair is started that would end past the job's time for trainings (it would be cut short
    and the comparison lost as an error), crowded or not, --max-repeats or not."""
    monkeypatch.setenv(config.DEADLINE.name, str(1e9 + 1600 + 120 + 700))  # after 2 pairs: 700 s left, a pair 800
    c, ran, said = _compare(tmp_path, monkeypatch, quiet=100, run_s=400)
    assert len(ran) == 4 and c.exit_code == outcomes.EXIT_INCONCLUSIVE
    assert any("would end past the job's deadline (700 s left for trainings)" in s for s in said), said
    c, ran, _ = _compare(tmp_path, monkeypatch, quiet=None, run_s=400, policy=ComparePolicy(max_repeats=6))
    assert len(ran) == 4  # an explicit cap has no time cap, but the job's deadline still holds


def test_crowding_is_the_runs_wall_against_the_quiet_one():
    c = Crowding(run_s=180.0, quiet_s=60.0, load=7.0, cores=2)
    assert c.ratio == 3.0 and c.crowded and not Crowding(80.0, 60.0, 1.0, 2).crowded
    assert c.text() == "its runs took 180 s each against the scenario's quiet 60 s (3.0x; load 7.0 on 2 cores)"

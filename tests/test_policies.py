"""The one judge asks its policy and branches on nothing else: what a policy says changes the verdict, and a new
policy plugs in as a subclass, its wording found for it in harness.report.verdicts."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from harness.gate import judge
from harness.gate.judge import ComparePolicy, GatePolicy, Side
from harness.gate.observe import Observation
from harness.report import verdicts

ROOT = Path(__file__).resolve().parents[1]
METRIC = "overhead.wall.profiled"
QUIET = [{"step2.rank0": 4.0, "step4.rank0": 4.1}, {"step2.rank0": 4.02, "step4.rank0": 4.08}]
SLOWER = [{k: v * 1.3 for k, v in run.items()} for run in QUIET]


def sides() -> tuple[Side, Side]:
    """Two runs a side, head 30 % slower: an interval compare cannot call before its third run a side."""
    runs = [Observation("tiny", {}, {}, {}, None)] * 2
    return (
        Side({METRIC: [4.0, 4.0]}, {METRIC: QUIET}, None, {}, runs=runs),
        Side({METRIC: [5.2, 5.2]}, {METRIC: SLOWER}, None, {}, runs=runs),
    )


def test_the_judge_has_no_branch_on_which_policy_it_is() -> None:
    tree = ast.parse((ROOT / "harness" / "gate" / "judge.py").read_text())
    named = [
        f"judge.py:{n.lineno}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Compare)
        and any(isinstance(x, ast.Attribute) and x.attr == "kind" for x in (n.left, *n.comparators))
    ]
    assert not named, named


@dataclass(frozen=True)
class Eager(ComparePolicy):
    """A policy of a test's own: base against head calling a change from one run a side."""

    min_runs: ClassVar[int] = 1


def test_how_many_runs_a_change_needs_is_the_policys() -> None:
    base, head = sides()
    assert judge.judge("tiny", base, head, ComparePolicy(families={"overhead"})).status == "inconclusive"
    eager = judge.judge("tiny", base, head, Eager(families={"overhead"}))
    assert eager.status == "regressed"
    (line,) = [ln for ln in verdicts.scenario_lines(eager) if ln.startswith("REGRESSED")]  # compare's words
    assert line.startswith(f"REGRESSED tiny: {METRIC} base 4.00x head 5.20x: head/base 1.30x")


def test_an_improvement_stands_apart_under_the_gate_alone() -> None:
    base, head = sides()
    for policy, status in ((GatePolicy(families={"overhead"}), "improved"), (Eager(families={"overhead"}), "ok")):
        assert judge.judge("tiny", head, base, policy).status == status

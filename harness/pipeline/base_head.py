"""Base against head on one machine: what ``Session.compare`` runs for both targets, in which order, and what it
makes of the runs.

The way benchmarking tools compare two commits (asv ``continuous``): both on the same machine in one job, so
the runner's drift is not mistaken for the change. Each scenario runs base, head, head, base, ... (ABBA: a
slow drift cancels between the sides); each run of a side is a full off + on pair in its own results
directory, ``<results>/<base|head>/r<i>/<scenario>/``, checked as ``harness run`` checks it. The comparison
(``harness.gate.judge``) is of what the session judged of those runs, in memory; the numerics read the "on" dumps
the session's checks read, through the files they opened.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import outcomes
from harness.artifacts.dumpfile import DumpFile
from harness.artifacts.results import PhaseDoc
from harness.artifacts.rundir import ScenarioDir
from harness.errors import HarnessError
from harness.gate.judge import ComparePolicy, Judgement, ScenarioVerdict, interleaved
from harness.gate.numerics.compare import compare_numerics
from harness.gate.observe import Observation
from harness.scenario.model import Scenario

SIDES = ("base", "head")


OVERHEAD_NOT_COMPARED = (
    f"overhead {outcomes.NOT_MEASURED}, not compared (budgets.overhead.compare: false: this tier's noise leaves base "
    "against head undecided at the runs a pull request affords, so each run trained precision_debugger on alone, no "
    "off run); the nightly measures and decides it across nights"
)
OVERHEAD_NOT_JUDGED = (
    f"overhead {outcomes.NOT_MEASURED}, not compared (--judge leaves it out, so each run trained precision_debugger "
    "on alone, no off run)"
)


def overhead_note(scenario: Scenario, decided: Collection[str]) -> str | None:
    """What a comparison says of a scenario whose overhead it did not decide (``decided``: its families), None where
    it did: never a silence a reader takes for a pass."""
    if "overhead" in decided:
        return None
    return OVERHEAD_NOT_COMPARED if not scenario.budgets.overhead.compare else OVERHEAD_NOT_JUDGED


def families(scenario: Scenario, judge: Collection[str]) -> set[str]:
    """The figure families base against head decides for ``scenario``: ``judge`` (``--judge``), less overhead where
    the scenario says its tier cannot decide it (``budgets.overhead.compare: false``)."""
    return {f for f in judge if f != "overhead" or scenario.budgets.overhead.compare}


def structure_order(repeats: int) -> list[tuple[str, int]]:
    """The runs of a comparison that decides no overhead: base ``repeats`` times (the numerics' determinism
    self-check compares base's second run with its first), head once (its structure, layout, disk and numerics are
    exact in one run), ABBA otherwise; no pairs added (nothing exact is INCONCLUSIVE)."""
    return [(side, i) for side, i in interleaved(repeats) if side == "base" or i == 0]


def run_order(policy: ComparePolicy) -> list[tuple[str, int]]:
    """Every run a scenario may take under ``policy`` (its families decided for the scenario): ABBA pairs up to the
    cap where overhead is decided (the stopping rule ends it earlier), else ``structure_order``."""
    return interleaved(policy.cap) if "overhead" in policy.families else structure_order(policy.repeats)


# The runs whose "on" dumps the numerics read again (``add_numerics``): base's first two, head's first.
NUMERICS_RUNS = frozenset({("base", 0), ("base", 1), ("head", 0)})


def run_dir(results: Path, side: str, repeat: int) -> Path:
    return results / side / f"r{repeat}"


def cannot_train(name: str, crash: dict[str, Any]) -> str:
    """The finding of a head that cannot train where base did (``outcomes.CANNOT_TRAIN``): a verdict on head, exit 1,
    never retried as the runner's (base trained on this runner, in this job)."""
    where = f" at {crash['where']}" if crash.get("where") else ""
    return (
        f"{outcomes.REGRESSED} {name}: {outcomes.CANNOT_TRAIN}: {crash.get('alike')} raised "
        f"{crash.get('exception')}{where} with precision_debugger off and on alike, where base trained on this "
        "runner: the pull request breaks the training itself"
    )


def add_numerics(
    sc: ScenarioVerdict,
    scenario: Scenario,
    sides: dict[str, list[Observation]],
    results: Path,
    python: str | None,
    dump_of: Callable[[Path], DumpFile] = DumpFile,
) -> None:
    """msprobe's compare of head's first "on" dumps against base's (and base's second against its first), in
    msprobe's environment under test (head's), its CSVs under ``<results>/numerics/<scenario>/``; ``dump_of``: each
    dump as the session's checks read it (held open, with its summary)."""
    base, head = ([ScenarioDir(o.source).run("on").dumps for o in sides[side] if o.source] for side in SIDES)
    try:
        sc.numerics = compare_numerics(
            base, head[0], results / "numerics" / scenario.name, scenario.expect.nonfinite_ok,
            python or sys.executable, scope=scenario.expect.numerics_scope, dump_of=dump_of,
        )  # fmt: skip
    except HarnessError as exc:
        sc.errors.append(f"numerics: {exc}")
        return
    sc.numerics.declared_unmatched = not scenario.expect.numerics_match
    dumped = any(s.status == "compared" for s in sc.numerics.head_vs_base.stages)  # a stage dumped on both sides
    if dumped and (nothing := sc.numerics.nothing_compared()):  # no entry, or none in common: never "all pass"
        sc.errors.append(f"numerics: {nothing}")
    sc.findings += sc.numerics.findings(scenario.name)
    sc.notes += sc.numerics.notes()


@dataclass
class Compared:
    """Base against head as a session ran it (``Session.compare``): each scenario's verdict (``scenarios``), the
    observations of each side's runs per scenario (``observed``, what the reports plot), the longest run order of a
    scenario, head's annotated roles against base's (``census``, with its ``notes``), and the scenarios whose head
    cannot train where base did (``untrainable``)."""

    base: str
    head: str
    census: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    scenarios: list[ScenarioVerdict] = field(default_factory=list)
    observed: dict[str, dict[str, list[Observation]]] = field(default_factory=dict)
    order: list[tuple[str, int]] = field(default_factory=list)
    untrainable: list[str] = field(default_factory=list)
    phases: list[PhaseDoc] = field(default_factory=list)  # where the comparison's minutes went (the session's)

    def judgement(
        self, skipped: Sequence[str] = (), accepted: str | None = None, notes: Sequence[str] = ()
    ) -> Judgement:
        """The comparison as a verdict: ``skipped``, the scenarios not run here, with why (they count in the total);
        ``accepted``, why head's regressions are intended (``outcomes.final``; never a head that cannot train);
        ``notes``, what the reader must know of the pair first (``harness.targets.pair``)."""
        if accepted and self.untrainable:  # an intended change of what is dumped, never a head that cannot train
            notes = [*notes, f"not accepted ({accepted}): head cannot train ({', '.join(self.untrainable)})"]
        return Judgement(
            "compare",
            self.base,
            self.head,
            self.scenarios,
            [f"{side} {i + 1}" for side, i in self.order],
            list(skipped),
            self.census,
            [*notes, *self.notes],
            None if self.untrainable else accepted,
            list(self.phases),
        )

"""``history check --json``: what a nightly publishes and acts on, written by the harness, never parsed from its
console: the verdict, its exit code (the check's and the nightly's, both decided in harness/outcomes.py), one entry
per change point with its verl commit range, and the overhead bisects the nightly may run on it.

A bisect is planned only where it can name a commit in a hosted runner's time: a regression of a tiny scenario (the
embedded workload: minutes a probe; verl's real trainer takes far longer), confirmed by the history or decided by the
newest night's duet (tonight's verl against the last good night's, side by side: ``duet``), between two verl commits
whose first-parent distance is known, more than one (one is the commit itself) and at most ``MAX_BISECT_COMMITS``
(four probes of a few pairs each).

The file is read again by other jobs (``history bisects``, ``github annotations``, the morning's issue), so it is read
as the history is (``harness.history.store``): its lines one line each, its scenarios names the loader accepts, its
commits commits, never an option for git nor a line of their own in the bisect plan.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from harness import outcomes
from harness.history.store import Commit, History, HistoryError, Night, ScenarioName, Text
from harness.history.verdict import Finding, HistoryCheck
from harness.safeio import MB, InputError, Versioned

MAX_BISECT_COMMITS = 16
MAX_INPUT = 16 * MB


class CheckRange(BaseModel):
    """The verl commits a change came in with: the last night's before it (good) and the first's after it (bad)."""

    model_config = ConfigDict(extra="forbid")
    good: Commit
    bad: Commit
    commits: int | None  # first-parent distance; None where a night's position is unknown


class CheckFinding(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: outcomes.HistoryStatus
    accepted: bool
    scenario: ScenarioName
    metric: Text
    change: Text  # the name history accept takes
    line: Text
    range: CheckRange | None  # None where the nights ran verl releases, not commits


class DuetRegression(BaseModel):
    """A figure the newest night's duet decided REGRESSED: tonight's verl (bad) against the last good night's (good).
    The night's own verdict, not a change point of the history (nothing for ``history accept``)."""

    model_config = ConfigDict(extra="forbid")
    scenario: ScenarioName
    metrics: list[Text]
    line: Text  # the duet's verdict line
    range: CheckRange | None  # None where either side's commit is unknown


class HistoryCheckDoc(Versioned):
    FILE = "history check JSON"
    REDO = "re-run history check --json with this harness"
    # 2: ``duet``, the newest night's duet regressions (the bisect plans from them as from confirmed change points)
    schema_version: Literal[2] = 2
    exit_code: int  # history check's own
    verdict: Text
    nightly_exit: int  # what a nightly's history job exits with (outcomes.history_nightly)
    nightly_verdict: Text
    nights: int
    lines: list[Text]
    findings: list[CheckFinding]
    duet: list[DuetRegression] = []

    def bisects(self) -> list[tuple[str, CheckRange]]:
        """The regressions a nightly bisects itself (see the module's docstring), confirmed change points first, then
        the newest night's duet: one per scenario and range (every figure of a scenario that regressed between the
        same commits shares its bisect)."""
        found = [(f.scenario, f.range) for f in self.findings if f.status == "regressed"]
        found += [(d.scenario, d.range) for d in self.duet]
        out: list[tuple[str, CheckRange]] = []
        for scenario, r in found:
            if r is None or r.commits is None or not 1 < r.commits <= MAX_BISECT_COMMITS:
                continue
            if scenario.startswith("tiny_") and (scenario, r.good, r.bad) not in {(s, b.good, b.bad) for s, b in out}:
                out.append((scenario, r))
        return out


def _range(f: Finding) -> CheckRange | None:
    before, after = f.change.before.identity, f.change.after.identity
    if not (before.verl_commit and after.verl_commit) or before.verl_commit == after.verl_commit:
        return None
    commits = None
    if before.verl_position is not None and after.verl_position is not None:
        commits = after.verl_position - before.verl_position
    return CheckRange(good=before.verl_commit, bad=after.verl_commit, commits=commits)


def duet_regressions(history: History) -> list[DuetRegression]:
    """The newest night's duet, where it decided figures REGRESSED, with its range: the base night's verl commit to
    tonight's (their first-parent distance where both nights know their place)."""
    if not history.nights or (duet := history.nights[-1].duet) is None or duet.mode != "duet" or not duet.regressed:
        return []
    night = history.nights[-1]
    base: Night | None = next((n for n in history.nights if n.id == duet.base_night), None)
    good, bad = duet.base_commit, night.identity.verl_commit
    where = None
    if good and bad and good != bad:
        commits = None
        if base is not None and base.identity.verl_position is not None and night.identity.verl_position is not None:
            commits = night.identity.verl_position - base.identity.verl_position
        where = CheckRange(good=good, bad=bad, commits=commits)
    line = duet.lines[0] if duet.lines else duet.verdict
    return [DuetRegression(scenario=s, metrics=m, line=line, range=where) for s, m in sorted(duet.regressed.items())]


def doc_of(verdict: HistoryCheck, history: History) -> HistoryCheckDoc:
    nightly_exit, nightly_verdict = outcomes.history_nightly(verdict.exit_code, verdict.word, verdict.total)
    return HistoryCheckDoc(
        exit_code=verdict.exit_code,
        verdict=verdict.word,
        nightly_exit=nightly_exit,
        nightly_verdict=nightly_verdict,
        nights=verdict.nights,
        lines=verdict.lines(),
        findings=[
            CheckFinding(
                status=f.status,
                accepted=f.accepted is not None,
                scenario=f.change.series.key.scenario,
                metric=f.change.series.key.metric,
                change=f.change.name,
                line=f.line,
                range=_range(f),
            )
            for f in verdict.findings
        ],
        duet=duet_regressions(history),
    )


def read(path: Path) -> HistoryCheckDoc:
    try:
        return HistoryCheckDoc.read_file(path, MAX_INPUT)
    except (InputError, OSError) as exc:
        raise HistoryError(f"{path}: {exc}: pass the file history check --json wrote") from None

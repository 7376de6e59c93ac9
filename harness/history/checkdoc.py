"""``history check --json``: what a nightly publishes and acts on, written by the harness, never parsed from its
console: the verdict, its exit code (the check's and the nightly's, both decided in harness/outcomes.py), one entry
per change point with its verl commit range, and the overhead bisects the nightly may run on it.

A bisect is planned only where it can name a commit in a hosted runner's time: a confirmed regression of a tiny
scenario (the embedded workload: minutes a probe; verl's real trainer takes far longer) between two verl commits
whose first-parent distance is known, more than one (one is the commit itself) and at most ``MAX_BISECT_COMMITS``
(four probes of a few pairs each).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from harness import outcomes
from harness.history.store import HistoryError
from harness.history.verdict import Finding, Verdict
from harness.safeio import MB, InputError, Versioned

MAX_BISECT_COMMITS = 16
MAX_INPUT = 16 * MB


class CheckRange(BaseModel):
    """The verl commits a change came in with: the last night's before it (good) and the first's after it (bad)."""

    model_config = ConfigDict(extra="forbid")
    good: str
    bad: str
    commits: int | None  # first-parent distance; None where a night's position is unknown


class CheckFinding(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: outcomes.HistoryStatus
    accepted: bool
    scenario: str
    metric: str
    change: str  # the name history accept takes
    line: str
    range: CheckRange | None  # None where the nights ran verl releases, not commits


class HistoryCheckDoc(Versioned):
    FILE = "history check JSON"
    REDO = "re-run history check --json with this harness"
    schema_version: Literal[1] = 1
    exit_code: int  # history check's own
    verdict: str
    nightly_exit: int  # what a nightly's history job exits with (outcomes.history_nightly)
    nightly_verdict: str
    nights: int
    lines: list[str]
    findings: list[CheckFinding]

    def bisects(self) -> list[CheckFinding]:
        """The confirmed regressions a nightly bisects itself (see the module's docstring), one per scenario and
        range (every figure of a scenario that regressed between the same nights shares its bisect)."""
        seen: set[tuple[str, str, str]] = set()
        out: list[CheckFinding] = []
        for f in self.findings:
            r = f.range
            if f.status != "regressed" or r is None or r.commits is None or not 1 < r.commits <= MAX_BISECT_COMMITS:
                continue
            if not f.scenario.startswith("tiny_") or (f.scenario, r.good, r.bad) in seen:
                continue
            seen.add((f.scenario, r.good, r.bad))
            out.append(f)
        return out


def _range(f: Finding) -> CheckRange | None:
    before, after = f.change.before.identity, f.change.after.identity
    if not (before.verl_commit and after.verl_commit) or before.verl_commit == after.verl_commit:
        return None
    commits = None
    if before.verl_position is not None and after.verl_position is not None:
        commits = after.verl_position - before.verl_position
    return CheckRange(good=before.verl_commit, bad=after.verl_commit, commits=commits)


def doc_of(verdict: Verdict) -> HistoryCheckDoc:
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
    )


def read(path: Path) -> HistoryCheckDoc:
    try:
        return HistoryCheckDoc.read_file(path, MAX_INPUT)
    except (InputError, OSError) as exc:
        raise HistoryError(f"{path}: {exc}: pass the file history check --json wrote") from None

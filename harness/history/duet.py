"""The nightly as a duet: tonight's verl against the last good night's, side by side on one runner.

One off/on pair a night moves 7-16 % from night to night on a shared runner (its load, its CPU model, its image), so a
series of single nights misses a +15 % step for nights (docs/statistics.md). Two artifacts run side by side on one
machine are the accepted answer to that noise (duet benchmarking), and the harness already owns the decision that
holds here: ``harness compare``'s interleaved pairs (ABBA, the run as the unit, pairs added while undecided within its
budget). So each night ``harness duet`` decides the overhead of tonight's verl against the last good night's verl, read
from the history (``plan``), and records both sides with the night (``record``): the night's series hold tonight's
runs, its ``Duet`` the base side's runs, the verdict and head/base per figure.

When verl did not move since the last good night, the pairs are that commit's noise record (head/base of a commit
against itself: what a quiet night's duet reads) instead of a comparison of a commit with itself. When no base can be
had (no good night yet, its commit gone from the clone, its settings other than tonight's, its environment no longer
installable, a side without runs) the duet says so in one line and the night is decided by the history alone, as
before the duet (``outcomes.duet_outcome``: a warning, never a silent pass). msprobe, torch or image changes are shared
by both sides, so the duet cannot see them: the history still decides those (``harness.history.verdict``).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness import outcomes
from harness.errors import HarnessError
from harness.history.store import Duet, History, HistoryError, Night, ScenarioRun
from harness.history.verdict import check_history
from harness.safeio import MB, InputError, Versioned
from harness.targets.spec import git

ALONE = "this night's overhead is decided by the history alone"


@dataclass(frozen=True)
class Plan:
    """What tonight's duet runs: ``base_commit`` against tonight's verl (``duet``), tonight's verl twice (``noise``) or
    nothing (``history``); ``line`` says which and why."""

    mode: outcomes.DuetMode
    line: str
    base_commit: str | None = None
    base_night: Night | None = None


def _flagged(history: History, scenarios: set[str]) -> int | None:
    """The first night at or after a change point the history holds against one of ``scenarios`` (a regression
    confirmed or suspected, not accepted): no night from there on passed its overhead."""
    found = [
        f.change.after.index
        for f in check_history(history).findings
        if f.status in ("regressed", "suspected") and f.change.series.key.scenario in scenarios
    ]
    return min(found) if found else None


def _passed(night: Night) -> bool:
    """The night's own duet passed (a duet or a noise record): a night decided by the history alone is judged by
    the history (``_flagged``)."""
    return night.duet is None or night.duet.mode == "history" or night.duet.exit_code == outcomes.EXIT_PASS


def _settings_of(night: Night, digests: dict[str, str]) -> str | None:
    """Why ``night`` is no base of tonight's scenario files (``digests``, scenario -> sha256): one it did not run (ok),
    or ran with other settings; None when it is one."""
    for name, digest in sorted(digests.items()):
        if not any(r.status == "ok" for r in night.scenarios.get(name, [])):
            return f"did not run {name} (ok)"
        was = night.identity.scenarios.get(name)
        if was != digest:
            return (
                f"ran scenarios/{name}.yaml with other settings (sha256 {(was or 'unknown')[:12]}, tonight "
                f"{digest[:12]})"
            )
    return None


def last_good(history: History, digests: dict[str, str]) -> tuple[Night | None, str]:
    """The newest night whose overhead passed, of tonight's settings, with its verl commit; else None and why."""
    if not history.nights:
        return None, "the history holds no night yet"
    flagged = _flagged(history, set(digests))
    good = [
        n
        for i, n in enumerate(history.nights)
        if n.identity.verl_commit and _passed(n) and (flagged is None or i < flagged)
    ]
    if not good:
        newest = history.nights[-1]
        return None, (
            f"none of the history's {len(history.nights)} nights passed its overhead with a verl commit (the newest: "
            f"{newest.id}, {newest.identity.date}, {newest.identity.commit_text()})"
        )
    for night in reversed(good):
        if _settings_of(night, digests) is None:
            return night, ""
    newest = good[-1]
    return None, (
        f"the last good night {newest.id} ({newest.identity.date}, {newest.identity.commit_text()}) "
        f"{_settings_of(newest, digests)}, and no good night before it ran tonight's: the history is of other settings"
    )


def _in_clone(commit: str, repo: Path) -> bool:
    try:
        git("cat-file", "-e", f"{commit}^{{commit}}", cwd=repo)
    except HarnessError:
        return False
    return True


def plan(history: History, tonight: str, repo: Path, digests: dict[str, str]) -> Plan:
    """Tonight's duet from the history: against the last good night's verl commit where ``repo`` (verl's clone) holds
    it; the noise record where verl did not move; else the history alone, with the one line saying why."""
    base, why = last_good(history, digests)
    if base is None:
        return Plan("history", f"no base for the duet: {why}: {ALONE}")
    commit = str(base.identity.verl_commit)
    named = f"the last good night {base.id} ({base.identity.date}, {base.identity.commit_text()})"
    if commit == tonight:
        return Plan("noise", f"verl did not move since {named}: the pairs go to its noise record", commit, base)
    if not _in_clone(commit, repo):
        return Plan(
            "history",
            f"no base for the duet: {named}: its verl commit is not in {repo} (force-pushed away, or a shallow clone: "
            f"fetch verl's history): {ALONE}",
        )
    return Plan("duet", f"tonight's verl {tonight[:12]} against {named}", commit, base)


class DuetDoc(Versioned):
    """``duet.json`` in a duet's results dir (beside compare's files): what ``history append --duet`` records."""

    FILE = "duet record"
    REDO = "run the duet again with this harness"
    # 2: ``regressed``, per scenario the overhead figures the duet decided REGRESSED (the nightly's bisect plans from
    # them); a schema-1 record names none
    schema_version: Literal[2] = 2
    mode: outcomes.DuetMode
    base_commit: str | None = None
    base_night: str | None = None
    exit_code: int
    verdict: str
    lines: list[str]
    regressed: dict[str, list[str]] = {}

    @classmethod
    def read(cls, path: Path) -> DuetDoc:
        try:
            return cls.read_file(path, 4 * MB)
        except (InputError, OSError) as exc:
            raise HistoryError(f"{path}: {exc}: pass a results dir harness duet wrote") from None


def _geomean(runs: list[ScenarioRun], metric: str) -> float | None:
    values = [r.figures[metric] for r in runs if r.status == "ok" and metric in r.figures and r.figures[metric] > 0]
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def ratios(base: dict[str, list[ScenarioRun]], head: dict[str, list[ScenarioRun]]) -> dict[str, dict[str, float]]:
    """Per scenario, each overhead figure both sides hold: head/base of the geometric means of their runs."""
    out: dict[str, dict[str, float]] = {}
    for name in sorted(set(base) & set(head)):
        metrics = {m for r in head[name] for m in r.tolerances} & {m for r in base[name] for m in r.tolerances}
        for m in sorted(metrics):
            b, h = _geomean(base[name], m), _geomean(head[name], m)
            if b and h:
                out.setdefault(name, {})[m] = round(h / b, 4)
    return out


def record(doc: DuetDoc, base: dict[str, list[ScenarioRun]], head: dict[str, list[ScenarioRun]]) -> Duet:
    """The night's ``Duet`` from the duet's record and both sides' runs."""
    return Duet(
        mode=doc.mode,
        base_commit=doc.base_commit,
        base_night=doc.base_night,
        exit_code=doc.exit_code,
        verdict=doc.verdict,
        lines=doc.lines,
        regressed=doc.regressed,
        base_runs=base,
        ratios=ratios(base, head),
    )

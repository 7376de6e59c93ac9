"""``history check``: every overhead series of a history through the detector, each change point judged and blamed.

A change point is a regression when the figure got slower by at least its tolerance (the one the gate judges it by,
stored with each night), its whole interval included: the detector picks the night that splits a series best, so the
significance of that split is optimistic, and a series of quiet nights would otherwise cry wolf (benchmarks/
history_power.py). Confirmed, it fails the check (exit 1) with the verl commits between the last night before and
the first after, or, when msprobe changed between those two nights, msprobe named as the likely cause. Where torch or
the image changed there, the environment is the likely cause: no verdict on verl, and the check says so with exit 2
until a person accepts the change. A regression still waiting for its further nights, or whose interval still
reaches below the tolerance, is SUSPECTED (exit 3). Improvements, changes within tolerance and accepted changes are
reported and pass. A change of the harness's own commit or of the scenario's file between the two nights is an
environment change too: what measured changed, not verl. Disk and dump structure keep their exact per-night gate
(``harness gate``); the history judges overhead, the figure one night cannot decide.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from harness import outcomes
from harness.history.detect import Change, Settings, changes
from harness.history.series import Reading, read
from harness.history.store import Acceptance, History, HistoryError, Identity
from harness.outside import shown
from harness.targets.spec import reproduce_compare, reproducible

# an acceptance names the change point's first night after; the detector may place the same change one night
# earlier or later as nights are added, and the acceptance still holds it
PUBLIC_VERL = "https://github.com/verl-project/verl"  # where the nights' commits are, unless HARNESS_VERL_URL says
ACCEPT_SLACK = 1


@dataclass(frozen=True)
class Finding:
    change: Change
    status: outcomes.HistoryStatus
    line: str
    accepted: Acceptance | None = None


@dataclass
class HistoryCheck:
    findings: list[Finding]
    reading: Reading
    settings: Settings
    nights: int
    judged: int  # series of two nights or more
    total: int
    exit_code: int = 0
    word: str = ""
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        head = f"history: {self.nights} nights, {self.total} overhead series; {self.settings.text()}"
        body = [f.line for f in self.findings]
        if not self.findings and self.judged:
            body = [f"no change point in {self.judged} series"]
        return [head, *self.notes, *self.reading.notes, *body, f"history check: {self.word}"]


def _range(before: Identity, after: Identity) -> str:
    """The verl commits a change came in with: ``abc..def (3 commits)``."""
    if before.verl_commit == after.verl_commit and before.verl == after.verl:
        return "no verl commit between them"
    if before.verl_commit and after.verl_commit:
        count = ""
        if before.verl_position is not None and after.verl_position is not None:
            n = after.verl_position - before.verl_position
            count = f" ({n} commit{'s' if n != 1 else ''})"
        return f"verl commits {before.verl_commit[:12]}..{after.verl_commit[:12]}{count}"
    return f"verl {before.verl} -> {after.verl}"


def _moved(before: Identity, after: Identity, fields: tuple[str, ...]) -> list[str]:
    return [
        f"{f} {getattr(before, f)} -> {getattr(after, f)}" for f in fields if getattr(before, f) != getattr(after, f)
    ]


def _measured_with(before: Identity, after: Identity, scenario: str) -> list[str]:
    """What measured changed between two nights: the harness's commit, the scenario's file. Unknown on either night
    (a night appended by schema 2): not said to have changed."""
    out = []
    if before.harness and after.harness and before.harness != after.harness:
        out.append(f"the harness {before.harness[:12]} -> {after.harness[:12]}")
    was, now = before.scenarios.get(scenario), after.scenarios.get(scenario)
    if was and now and was != now:
        out.append(f"the scenario file scenarios/{scenario}.yaml (sha256 {was[:12]} -> {now[:12]})")
    return out


def _accepted(change: Change, accepted: list[Acceptance]) -> Acceptance | None:
    key = change.series.key
    ids = [p.night.id for p in change.series.points]
    for a in accepted:
        named, _, night = a.change.rpartition("@")
        if (
            named == f"{key.scenario}:{key.metric}"
            and night in ids
            and abs(ids.index(night) - change.at) <= ACCEPT_SLACK
        ):
            return a
    return None


def finding(change: Change, settings: Settings, accepted: list[Acceptance]) -> Finding:
    before, after = change.before.identity, change.after.identity
    tolerance = change.series.tolerance
    slower = change.size > 1
    where = (
        f"{change.series.key.text()}: {change.size_text()} "
        f"{'slower' if slower else 'faster'} (p={change.pvalue:.2g}); last night before {change.before.night.id} "
        f"({before.date}, {before.commit_text()}), first after {change.after.night.id} ({after.date}, "
        f"{after.commit_text()}), {change.nights_before} nights before, {change.nights_after} after"
    )
    env = _moved(before, after, ("torch", "image")) + _measured_with(before, after, change.series.key.scenario)
    probe = _moved(before, after, ("msprobe",))
    cause = (
        f"likely cause: {', '.join(env + probe)} (the environment, not verl; {_range(before, after)})"
        if env
        else f"likely cause: {probe[0]} ({_range(before, after)} too)"
        if probe
        else _range(before, after)
    )
    ok = f"[{change.name}]"
    if (a := _accepted(change, accepted)) is not None:
        return Finding(change, "ok", f"accepted: {where}; '{a.reason}' ({a.accepted}) {ok}", a)
    if not slower:
        return Finding(change, "ok", f"improved: {where}; {cause} {ok}")
    if change.size - 1 < tolerance:
        return Finding(change, "ok", f"within tolerance ({tolerance:.1%}): {where} {ok}")
    if not change.confirmed or change.low - 1 < tolerance:
        more = settings.confirm_nights - change.further
        wait = (
            f"confirmed or dropped after {more} more night{'s' if more > 1 else ''}"
            if not change.confirmed
            else f"its interval still reaches below the tolerance ({tolerance:.1%}): decided as nights are added"
        )
        status: outcomes.HistoryStatus = "suspected"
        return Finding(change, status, f"{outcomes.HISTORY_WORDS[status]}: {where}; {cause}; {wait} {ok}; "
                       f"{reproduce(change)}")  # fmt: skip
    status = "environment" if env else "regressed"
    find = "" if env or probe else f"{find_commit(change)}; "
    return Finding(change, status, f"{outcomes.HISTORY_WORDS[status]}: {where}; tolerance {tolerance:.1%}; {cause}; "
                   f"{find}accept an intended change: history accept HISTORY {change.name} --reason TEXT; "
                   f"{reproduce(change)}")  # fmt: skip


def find_commit(change: Change) -> str:
    """How to name the one verl commit of a regression: it already is where one commit lies between the nights,
    else the overhead bisect between them (each probe a comparison against the last night's commit)."""
    before, after = change.before.identity, change.after.identity
    if not (before.verl_commit and after.verl_commit):
        return "the nights ran verl releases: compare them with python -m harness compare"
    if (
        before.verl_position is not None
        and after.verl_position is not None
        and after.verl_position - 1 == before.verl_position
    ):
        return f"the commit: {after.verl_commit[:12]}"
    return (
        f"find the commit: python -m harness bisect scenarios/{change.series.key.scenario}.yaml --verl-repo VERL "
        f"--good {before.verl_commit[:12]} --bad {after.verl_commit[:12]} --check overhead"
    )


def reproduce(change: Change) -> str:
    """The command that reproduces a change on a developer's machine: the night before it against the night after,
    base against head, from verl's public repository (``HARNESS_VERL_URL`` names another)."""
    before, after = change.before.identity, change.after.identity
    specs = (reproducible(i.verl_commit, PUBLIC_VERL, i.verl) for i in (before, after))
    return f"reproduce: {reproduce_compare(change.series.key.scenario, *specs)}"


def check_history(history: History, settings: Settings | None = None) -> HistoryCheck:
    settings = settings or Settings()
    reading = read(history)
    found: list[Finding] = []
    judged = 0
    for s in reading.series.values():
        if len(s.points) >= 2:
            judged += 1
        found += [finding(c, settings, history.accepted) for c in changes(s, settings)]
    verdict = HistoryCheck(found, reading, settings, len(history.nights), judged, len(reading.series))
    if not history.nights:
        verdict.notes.append("no nights in the history: append one (history append HISTORY RESULTS_DIR)")
    elif judged == 0:
        verdict.notes.append(f"{len(history.nights)} night(s): a series needs two nights or more to be judged")
    held = {id(f.accepted) for f in found if f.accepted is not None}
    verdict.notes += [
        f"accepted {a.change} ({a.accepted}): '{a.reason}'; no change point is there now"
        for a in history.accepted
        if id(a) not in held
    ]
    verdict.exit_code, verdict.word = outcomes.history_final((f.status for f in found), judged, verdict.total)
    return verdict


def accept(history: History, change: str, reason: str, settings: Settings | None = None) -> History:
    """``history`` with ``change`` (a change point found now, by the name the check prints) accepted."""
    if not reason.strip():
        raise HistoryError("--reason: empty: say why the change is intended (reports show it)")
    names = [f.change.name for f in check_history(history, settings).findings]
    if change not in names:
        listed = ", ".join(names) if names else "none"
        raise HistoryError(f"{shown(change)}: no such change point in the history now (its change points: {listed})")
    if any(a.change == change for a in history.accepted):
        raise HistoryError(f"{change}: already accepted")
    made = Acceptance(
        change=change, reason=reason.strip(), accepted=datetime.now(timezone.utc).isoformat(timespec="seconds")
    )
    return history.model_copy(update={"accepted": [*history.accepted, made]})

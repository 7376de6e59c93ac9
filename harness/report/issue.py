"""The morning after: the issue a nightly opens or updates when the night is a verdict on verl.

Read from what the night's jobs left, never from their consoles: each night's job outcome (``outcome.json``, written by
``python3 -m harness.job run --record``) with its annotations (``annotations.txt``, one finding a line, each ending
with the command that reproduces it), and each history check (``history check --json``: a confirmed regression with
its verl commit range). A night that failed for an error, or one that passed, files nothing: an error is not a verdict
on verl (its job is red and says what to do), and an issue nobody needs to act on is noise. Each finding is outside
text (a verl commit's field in a history, a line of a night's annotations): one line of the issue each, escaped
(``harness.outside.shown``), never markup or lines of its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from harness import job, outcomes
from harness.errors import HarnessError
from harness.history.checkdoc import HistoryCheckDoc
from harness.outside import shown
from harness.safeio import MB, InputError, read_text

MAX_INPUT = 16 * MB
LINE = 4000  # characters of one finding in the issue (a history's line, its range and reproduce command: ~600)
LABEL = "precision-debugger-regression"  # the one open issue is found by it


@dataclass
class Morning:
    """What the night found on verl: per night (a results dir) or history file, its findings."""

    sections: dict[str, list[str]] = field(default_factory=dict)
    undecided: list[str] = field(default_factory=list)  # nights that ended in an error, or never ended

    def __bool__(self) -> bool:
        return any(self.sections.values())

    @property
    def state(self) -> str:
        """``verdict`` (file or update the issue), ``green`` (every night passed and the history confirms nothing:
        the open issue is closed) or ``undecided`` (a night ended in an error: the issue is left as it is, neither
        updated nor closed: an error says nothing of verl either way)."""
        return "verdict" if self else "undecided" if self.undecided else "green"

    def body(self, title: str, run: str, pages: list[str]) -> str:
        out = [f"## {title}", "", f"The night's run: {run}" if run else "The night's run: (not named)"]
        out += [f"The page of the nights: {p}" for p in pages] or ["The page of the nights: not published"]
        for name, lines in self.sections.items():
            if lines:
                out += ["", f"### {name}", "", *(f"- {shown(line, LINE)}" for line in lines)]
        out += ["", "Each line ends with the command that reproduces it on a developer's machine. An intended change: "
                "accept it (`history accept`, or the nightly's dispatch with accept-baseline) and close this issue."]
        return "\n".join(out) + "\n"


def _text(path: Path) -> str:
    try:
        return read_text(path, MAX_INPUT)
    except InputError as exc:
        raise HarnessError(f"{path}: {exc}") from None


def night_action(night: Path) -> str | None:
    """What the night's job did with its exit (``harness.outcomes.JobAction``); None where it never ended."""
    record = night / "outcome.json"
    if not record.is_file():
        return None
    try:
        return str(json.loads(_text(record))["action"])
    except (ValueError, KeyError, TypeError):
        raise HarnessError(f"{record}: not a job outcome (python3 -m harness.job run --record writes one)") from None


def night_findings(night: Path) -> list[str] | None:
    """A night's findings on verl, or None when the night is no verdict on verl (it passed, was accepted, or failed
    for an error): its ``outcome.json`` (absent: the night never ended, nothing to say) and its annotations' errors,
    the harness's own verdict lines and the errors that are no verdict left out."""
    if night_action(night) != outcomes.JOB_ACTION[outcomes.EXIT_FAIL]:  # only a verdict on verl files an issue
        return None
    outcome = json.loads(_text(night / "outcome.json"))
    found = []
    notes = night / "annotations.txt"
    for line in _text(notes).splitlines() if notes.is_file() else []:
        head, sep, message = line.partition("::")[2].partition("::")
        title = job.unescape(head.partition("title=")[2])
        if sep and head.startswith("error ") and not title.startswith((f"{outcomes.ERROR} ", "precision_debugger")):
            found.append(job.unescape(message))
    return found or [str(outcome.get("line", "a verdict on verl (see the run)"))]


def history_findings(path: Path) -> list[str]:
    """A history check's confirmed regressions (not accepted), each with its range and reproduce command."""
    try:
        doc = HistoryCheckDoc.of(json.loads(_text(path)))
    except (InputError, ValueError) as exc:
        raise HarnessError(f"{path}: not a history check (history check --json): {exc}") from None
    return [f.line for f in doc.findings if f.status == "regressed" and not f.accepted]


def morning(nights: list[Path], checks: list[Path]) -> Morning:
    m = Morning()
    for night in nights:
        if (found := night_findings(night)) is not None:
            m.sections[f"the night of {night.name}"] = found
        elif night_action(night) not in ("pass", "warn"):
            m.undecided.append(night.name)
    if not nights:
        m.undecided.append("no night's results")
    for check in checks:
        m.sections[f"the history: {check.name.removesuffix('-check.json')}"] = history_findings(check)
    return m

"""What a GitHub job publishes of a comparison (``compare.json``) or a nightly gate (``gate --json``): one
workflow command per finding (``::error``, shown on the pull request and the run) and the step summary's head.

Read from the JSON the harness wrote, never from its console output: a line the console wrapped or a verdict it
reworded must not change what the pull request shows. Every finding becomes one annotation, up to GitHub's ten per
level and step (more are dropped by the runner without a word): the tenth then says how many more there are and
where they are. The verdict comes first and names the party, as the exit code does: 1 is a verdict on verl (or
msprobe), 2 an error of the harness, the runner or the input and never a pass, 3 undecided.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness import job, outcomes
from harness.errors import HarnessError
from harness.gate.files import CompareDoc, GateDoc
from harness.history.checkdoc import HistoryCheckDoc
from harness.safeio import MB, InputError, read_text

MAX_PER_LEVEL = 10  # GitHub shows at most 10 error and 10 warning annotations per step
MAX_INPUT = 64 * MB
TITLE = "precision_debugger gate"
Level = outcomes.Level
Doc = CompareDoc | GateDoc | HistoryCheckDoc


def load(path: Path) -> Doc:
    """compare.json, a gate's JSON (harness.gate.files) or history check's (harness.history.checkdoc), each typed
    and versioned, told apart by their keys; a file that is none of them is one line naming it."""
    try:
        raw = json.loads(read_text(path, MAX_INPUT))
    except (InputError, ValueError) as exc:
        raise HarnessError(
            f"{path}: not a readable JSON file ({exc}): pass compare.json, gate --json's or history check --json's file"
        ) from None
    keys = raw if isinstance(raw, dict) else {}
    model: type[Doc] = CompareDoc if "order" in keys else HistoryCheckDoc if "nightly_exit" in keys else GateDoc
    try:
        return model.of(raw)
    except InputError as exc:
        raise HarnessError(f"{path}: {exc}") from None


def _word(finding: str) -> str:
    """A finding line's own verdict word (``MISSING tiny: numerics ...``), REGRESSED for a line that has none."""
    word = finding.split(" ", 1)[0]
    return word if word in (outcomes.REGRESSED, outcomes.MISSING) else outcomes.REGRESSED


HISTORY_LEVELS: dict[outcomes.HistoryStatus, Level] = {
    "regressed": "error",
    "environment": "error",
    "suspected": "warning",
    "ok": "notice",
}


def _findings(doc: Doc) -> list[tuple[Level, str, str]]:
    """(level, title, message) per finding, in the order the console prints them."""
    out: list[tuple[Level, str, str]] = []
    if isinstance(doc, HistoryCheckDoc):  # improvements and changes within tolerance are the summary's, not notices
        return [(HISTORY_LEVELS[f.status], f"{f.line.split(':', 1)[0]} {f.scenario}", f.line) for f in doc.findings
                if f.status != "ok" or f.accepted]  # fmt: skip
    if isinstance(doc, CompareDoc):
        found: Level = "warning" if doc.accepted else "error"  # an accepted change is reported, not failed
        out += [(found, f"{outcomes.REGRESSED} census (head's annotated stages)", c) for c in doc.census]
        out += [("notice", f"{outcomes.ACCEPTED} as intended", doc.accepted)] if doc.accepted else []
        out += [("notice", outcomes.SKIPPED, why) for why in doc.skipped]
        for s in doc.scenarios:
            mine: list[tuple[Level, str, str]] = [("error", f"{outcomes.ERROR} {s.scenario} (not a verdict on verl)", e)
                                                  for e in s.errors]  # fmt: skip
            mine += [(found, f"{_word(f)} {s.scenario}", f) for f in s.findings]
            mine += [(found, f"{f.verdict.upper()} {s.scenario}", f.line) for f in s.figures
                     if f.verdict in ("regressed", "missing")]  # fmt: skip
            mine += [("warning", f"{outcomes.INCONCLUSIVE} {s.scenario}", u) for u in s.undecided]
            mine += [("warning", f"{outcomes.INCONCLUSIVE} {s.scenario}", f.line) for f in s.figures
                     if f.verdict == "inconclusive"]  # fmt: skip
            if s.status == "inconclusive" and s.crowding:  # said with its figure, not a bare INCONCLUSIVE
                mine.append(("warning", f"{outcomes.INCONCLUSIVE} {s.scenario}", s.crowding))
            out += _reproduced(mine, s.reproduce)
        return out
    for g in doc.scenarios:
        mine = [("error", f"{outcomes.ERROR} {g.scenario} (not a verdict on verl)", e) for e in g.errors]
        mine += [("error", f"{outcomes.REGRESSED} {g.scenario}", c) for c in g.crashes]
        mine += [("error", f"{m.verdict.upper()} {g.scenario}", m.line) for m in g.figures
                 if m.verdict in ("regressed", "missing")]  # fmt: skip
        mine += [("warning", f"{outcomes.INCONCLUSIVE} {g.scenario}", m.line) for m in g.figures
                 if m.verdict == "inconclusive"]  # fmt: skip
        if g.status not in ("ok", "improved", "regressed", "inconclusive", "error"):  # not compared: the note says why
            mine += [("error", f"{g.status} {g.scenario}", "; ".join(g.notes) or g.status)]
        out += _reproduced(mine, g.reproduce)
    return out


def _reproduced(items: list[tuple[Level, str, str]], command: str) -> list[tuple[Level, str, str]]:
    """Each finding ending with the command that reproduces it, as the console and the summary end its scenario."""
    return [(lv, t, f"{m}; reproduce: {command}") for lv, t, m in items] if command else items


def verdict_of(doc: Doc) -> tuple[int, str]:
    """The exit code and verdict a job publishes: a history check's as its nightly job exits."""
    if isinstance(doc, HistoryCheckDoc):
        return doc.nightly_exit, doc.nightly_verdict
    return doc.exit_code, doc.verdict


def annotation_lines(doc: Doc) -> list[str]:
    """The verdict (when not a pass) and one command per finding, at most ``MAX_PER_LEVEL`` per level: the last
    kept one of a crowded level says how many were left out and where they all are."""
    items = _findings(doc)
    name = "compare" if isinstance(doc, CompareDoc) else "history-check" if isinstance(doc, HistoryCheckDoc) else "gate"
    where = f"{name}.txt in the results artifact"
    code, verdict = verdict_of(doc)
    if code:
        items.insert(0, (outcomes.level(code), TITLE, f"{verdict} (exit {code}: {outcomes.meaning(code)})"))
    out: list[str] = []
    for level in ("error", "warning", "notice"):
        mine = [(t, m) for lv, t, m in items if lv == level]
        if len(mine) > MAX_PER_LEVEL:
            left = len(mine) - MAX_PER_LEVEL + 1
            mine = [*mine[: MAX_PER_LEVEL - 1], (TITLE, f"{left} more {level}s: every finding is in {where}")]
        out += [job.command(level, t, m) for t, m in mine]
    return out


def summary(doc: Doc, markdown: str = "", heading: str = "") -> str:
    """The step summary: the verdict and what its exit code means, then the harness's markdown report (a history
    check's: its lines, each change point with its range and how to name its commit)."""
    code, verdict = verdict_of(doc)
    icon = {"pass": "✅", "warn": "⚠️"}.get(outcomes.job_action(code), "❌")
    head = [f"## {heading}", ""] if heading else []
    head.append(f"{icon} **{verdict}**: exit {code}, {outcomes.meaning(code)}")
    if isinstance(doc, HistoryCheckDoc) and not markdown:
        markdown = "\n".join(f"- {line}" for line in doc.lines)
    return "\n".join([*head, "", markdown.rstrip()]).rstrip() + "\n"

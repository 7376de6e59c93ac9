"""Verdict words and exit codes, decided here and nowhere else: the CLI, pytest, compare, gate and the reports
all end in these functions, so one scenario reads the same everywhere.

Exit codes: 0 PASS; 1 FAIL, a verdict on the code under test (a check failed, a regression, verl or msprobe
crashed a training); 2 an error that is no verdict on verl (invalid input, the harness, the environment, the
runner) and NOTHING COMPARED (a gate or comparison that judged nothing: never a pass); 3 INCONCLUSIVE (nothing
failed, the noise left a figure undecided).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, Protocol

EXIT_PASS, EXIT_FAIL, EXIT_ERROR, EXIT_INCONCLUSIVE = 0, 1, 2, 3
_RANK = [EXIT_PASS, EXIT_INCONCLUSIVE, EXIT_FAIL, EXIT_ERROR]  # what says more: an error over a failure over ...
NOTHING_COMPARED = "NOTHING COMPARED"

CheckOutcome = Literal["pass", "fail", "inconclusive", "not checked", "xfail", "xpass"]


class Judged(Protocol):
    """What a check's result says (``harness.checks.CheckResult``)."""

    problems: list[str]
    inconclusive: list[str]
    not_checked: str


WORDS: dict[CheckOutcome, str] = {
    "pass": "pass",
    "fail": "FAIL",
    "inconclusive": "INCONCLUSIVE",
    "not checked": "not checked",
    "xfail": "xfail (known, declared in the scenario)",
    "xpass": "XPASS: the declared gap or bug is gone, remove its declaration",
}


def worse(code: int, new: int) -> int:
    """The exit code that says more: an error (2) over a failure (1) over INCONCLUSIVE (3) over a pass (0)."""
    return max(code, new, key=_RANK.index)


def exit_code(statuses: Iterable[str]) -> int:
    """A gate's or comparison's code from its scenarios' statuses: an error outranks a regression, which outranks
    an undecided figure."""
    seen = set(statuses)
    if "error" in seen:
        return EXIT_ERROR
    return EXIT_FAIL if "regressed" in seen else EXIT_INCONCLUSIVE if "inconclusive" in seen else EXIT_PASS


def exit_word(code: int) -> str:
    """The last word of a gate or comparison: PASS, FAIL (a regression or an error) or INCONCLUSIVE."""
    return {EXIT_PASS: "PASS", EXIT_INCONCLUSIVE: "INCONCLUSIVE"}.get(code, "FAIL")


# The pull-request label that says a change of head is intended (docs/verl-caller-example.yml's changes job reads it
# and passes ``compare --accept``); the report names it wherever a regression could be one.
ACCEPT_LABEL = "precision-debugger-intended"
ACCEPT_HINT = (
    f"an intended change? label the pull request {ACCEPT_LABEL} and re-run the gate (or compare --accept REASON): "
    "the findings stay listed, the verdict becomes ACCEPTED"
)


def final(statuses: Iterable[str], compared: int, total: int, accepted: str | None = None) -> tuple[int, str]:
    """The exit code and last words of a gate or comparison of ``total`` scenarios, ``compared`` of which had at
    least one figure or check judged on both sides: none compared is NOTHING COMPARED (exit 2), never a pass; a
    partial one says how many were. ``accepted`` (why: the pull request's label, a maintainer's input): head's
    regressions are an intended change, so a regression alone passes, as ACCEPTED; an error (2) stays one, and
    an undecided figure keeps the comparison INCONCLUSIVE."""
    seen = list(statuses)
    code = exit_code(seen)
    if compared == 0 and code in (EXIT_PASS, EXIT_INCONCLUSIVE):
        return EXIT_ERROR, f"{NOTHING_COMPARED} (0 of {total} scenarios had a figure or check judged on both sides)"
    word = exit_word(code)
    if accepted and code == EXIT_FAIL:
        code = EXIT_INCONCLUSIVE if "inconclusive" in seen else EXIT_PASS
        word = f"ACCEPTED as intended ({accepted})" + (", INCONCLUSIVE otherwise" if code else "")
    return code, word if compared == total else f"{word} ({compared} of {total} scenarios compared)"


def check_outcome(result: Judged, expected_failure: bool = False) -> CheckOutcome:
    """One check's outcome; ``expected_failure``: a declared known gap or known bug (a strict xfail)."""
    if result.not_checked:
        return "not checked"
    failed = bool(result.problems)
    if expected_failure:
        return "xfail" if failed else "xpass"
    return "fail" if failed else "inconclusive" if result.inconclusive else "pass"


def check_exit(outcome: CheckOutcome) -> int:
    """A check outcome's exit code: a strict xfail that passes (the gap or bug is fixed) fails, so it is removed."""
    return {"fail": EXIT_FAIL, "xpass": EXIT_FAIL, "inconclusive": EXIT_INCONCLUSIVE}.get(outcome, EXIT_PASS)


# ``history check`` (harness.history): what a change point of an overhead series, decided across nights, says.
# ``regressed``: confirmed (still significant after the shipped number of further nights) and at least the figure's
# tolerance slower, with verl or msprobe the likely cause (exit 1); ``environment``: the same, but torch or the image
# changed between the two nights (no verdict on verl: exit 2 until a person accepts it); ``suspected``: a regression
# waiting for its further nights (exit 3); ``ok``: accepted, an improvement, or within tolerance.
HistoryStatus = Literal["regressed", "environment", "suspected", "ok"]
HISTORY_EXIT: dict[HistoryStatus, int] = {
    "regressed": EXIT_FAIL,
    "environment": EXIT_ERROR,
    "suspected": EXIT_INCONCLUSIVE,
    "ok": EXIT_PASS,
}
HISTORY_WORDS: dict[HistoryStatus, str] = {
    "regressed": "REGRESSED",
    "environment": "CHANGED WITH THE ENVIRONMENT (not a verdict on verl)",
    "suspected": "SUSPECTED (waits for more nights)",
    "ok": "ok",
}


def history_final(statuses: Iterable[HistoryStatus], judged: int, total: int) -> tuple[int, str]:
    """``history check``'s exit code and last words over ``total`` overhead series, ``judged`` of which had two nights
    or more: none judged is NOTHING COMPARED (exit 2), never a pass."""
    code = EXIT_PASS
    for status in statuses:
        code = worse(code, HISTORY_EXIT[status])
    if judged == 0:
        return EXIT_ERROR, f"{NOTHING_COMPARED} (0 of {total} overhead series had two nights or more)"
    word = {EXIT_FAIL: "FAIL", EXIT_ERROR: "FAIL", EXIT_INCONCLUSIVE: "INCONCLUSIVE"}.get(code, "PASS")
    return code, word if judged == total else f"{word} ({judged} of {total} overhead series judged)"


def history_nightly(code: int, word: str, total: int) -> tuple[int, str]:
    """What a nightly's history job exits with, from ``history check``'s ``code`` and ``word`` over ``total`` overhead
    series. A confirmed regression fails the night (1) and a change that came with the environment is an error (2),
    as in the check. A suspected regression is a warning (0): one more night cannot be had by rerunning, and the
    night's own exact gate (structure, layout, disk) decides the night meanwhile. A history whose every series has
    its first night has started (0, said so), as the nightly's first baseline does; no overhead series at all is
    NOTHING COMPARED (2), never a pass."""
    if code == EXIT_INCONCLUSIVE:
        return EXIT_PASS, f"PASS with a warning: {word}, a regression SUSPECTED waits for its further nights"
    if code == EXIT_ERROR and word.startswith(NOTHING_COMPARED) and total > 0:
        return EXIT_PASS, f"STARTED: each of the {total} overhead series has one night (the next nights judge them)"
    return code, word

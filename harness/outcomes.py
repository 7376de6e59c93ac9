"""Verdict words and exit codes, decided here and nowhere else: the CLI, pytest, compare, gate and the reports
all end in these functions, so one scenario reads the same everywhere.

Exit codes: 0 PASS; 1 FAIL, a verdict on the code under test (a check failed, a regression, verl or msprobe
crashed a training); 2 an error that is no verdict on verl (invalid input, the harness, the environment, the
runner) and NOTHING COMPARED (a gate or comparison that judged nothing: never a pass); 3 INCONCLUSIVE (nothing
failed, the noise left a figure undecided).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

EXIT_PASS, EXIT_FAIL, EXIT_ERROR, EXIT_INCONCLUSIVE = 0, 1, 2, 3
_RANK = [EXIT_PASS, EXIT_INCONCLUSIVE, EXIT_FAIL, EXIT_ERROR]  # what says more: an error over a failure over ...
NOTHING_COMPARED = "NOTHING COMPARED"
NOTHING_CHECKED = "NOTHING CHECKED"
# A figure family no training of these runs measured (overhead, where only the on run was trained: base against head
# on a tier whose overhead it does not decide): a check's "not checked" outcome, never a pass, and a comparison's note.
NOT_MEASURED = "NOT MEASURED"
# The verdict words a line opens with, spelt here and nowhere else (tests/test_verdict_words.py holds every other
# module of the harness to these names).
PASS, FAIL, INCONCLUSIVE, ERROR, XPASS, XFAIL = "PASS", "FAIL", "INCONCLUSIVE", "ERROR", "XPASS", "XFAIL"
REGRESSED, IMPROVED, MISSING, ACCEPTED, SKIPPED = "REGRESSED", "IMPROVED", "MISSING", "ACCEPTED", "SKIPPED"
VERDICT_WORDS = (
    PASS, FAIL, INCONCLUSIVE, ERROR, XPASS, XFAIL, REGRESSED, IMPROVED, MISSING, ACCEPTED, SKIPPED, NOTHING_CHECKED,
    NOT_MEASURED,
)  # fmt: skip

CheckOutcome = Literal["pass", "fail", "inconclusive", "not checked", "not gated", "xfail", "xpass"]


class Judged(Protocol):
    """What a check's result says (``harness.checks.CheckResult``)."""

    problems: list[str]
    inconclusive: list[str]
    not_checked: str
    not_gated: str


# A check outcome's word (bisect's probe lines), and as a run says it (``WORDS``: with what to do about an XPASS).
SHORT_WORDS: dict[CheckOutcome, str] = {
    "pass": "pass",
    "fail": FAIL,
    "inconclusive": INCONCLUSIVE,
    "not checked": "not checked",
    "not gated": "not gated",
    "xfail": "xfail (known, declared in the scenario)",
    "xpass": XPASS,
}
WORDS: dict[CheckOutcome, str] = SHORT_WORDS | {
    "xpass": f"{XPASS}: the declared gap or bug is gone, remove its declaration"
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


# Base against head: head fails to train the same way with precision_debugger off as on, in verl's (or msprobe's)
# code, where base trained on the same runner in the same job: the pull request breaks the training itself, a verdict
# on it (a regression, exit 1, never retried as the runner's). With no base to have trained (one target's run) the
# same failure stays an error (exit 2): the inputs, the runner or verl's trainer, nothing tells them apart. Where verl
# failed only on the harness's own CPU platform, lagging a method verl's platforms define, it is the harness's (2).
CANNOT_TRAIN = "head cannot train (precision_debugger off too)"


def exit_word(code: int) -> str:
    """The last word of a gate or comparison: PASS, FAIL (a regression or an error) or INCONCLUSIVE."""
    return {EXIT_PASS: PASS, EXIT_INCONCLUSIVE: INCONCLUSIVE}.get(code, FAIL)


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


def run_final(code: int, ran: int, total: int) -> tuple[int, str | None]:
    """``harness run``'s exit code from its checks' worst (``code``) and, where it must be said, its last line: where
    none of its ``total`` scenarios ran here (each skipped: a device this host lacks, heavy without ``--heavy``, no
    Ray cluster named), NOTHING CHECKED, exit 2, never a pass."""
    if total and not ran:
        why = "each skipped above, saying how to run it"
        return EXIT_ERROR, f"{NOTHING_CHECKED}: 0 of {total} scenarios ran here ({why})"
    return code, None


def check_outcome(result: Judged, expected_failure: bool = False) -> CheckOutcome:
    """One check's outcome; ``expected_failure``: a declared known gap or known bug (a strict xfail). A check whose
    every budget decision was recorded and none gated (timing recorded, budgets provisional) and which found nothing
    else wrong is "not gated" (exit 0, a skip under pytest, its figures in the reason): green means decided."""
    if result.not_checked:
        return "not checked"
    failed = bool(result.problems)
    if expected_failure:
        return "xfail" if failed else "xpass"
    if failed or result.inconclusive:
        return "fail" if failed else "inconclusive"
    return "not gated" if result.not_gated else "pass"


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


# ``harness duet`` (harness.history.duet): a night's overhead decided side by side. ``duet``: tonight's verl against
# the last good night's, interleaved pairs: the comparison's own exit and words (``final``). ``noise``: verl did not
# move, the pairs are its noise record and nothing is compared with itself: a pass, unless no pair ran (an error).
# ``history``: no base could be had (the duet's lines say why): INCONCLUSIVE (the job warns, never a silent pass), and
# the history job decides the night's overhead alone.
DuetMode = Literal["duet", "noise", "history"]
DUET_NOISE = "NOISE RECORDED (verl did not move: pairs added to its noise record, nothing compared with itself)"
DUET_ALONE = "NOT SIDE BY SIDE (no base: this night's overhead is decided by the history alone)"


def duet_outcome(mode: DuetMode, compare_code: int = EXIT_PASS, compare_word: str = "") -> tuple[int, str]:
    """The duet's exit code and last words, from its mode and (duet, noise) its comparison's."""
    if mode == "history":
        return EXIT_INCONCLUSIVE, DUET_ALONE
    if mode == "noise":
        return (EXIT_ERROR, f"{compare_word}: no pair of the noise record ran") if compare_code == EXIT_ERROR else (
            EXIT_PASS, DUET_NOISE)  # fmt: skip
    return compare_code, compare_word


# -- What a CI job does with an exit: the one table of job outcomes -------------------------------------------------
# Every workflow step and .ci script that runs the harness ends through ``python3 -m harness.job`` (harness/job.py),
# which reads this table; no workflow, script or report decides what an exit means anywhere else (a test greps).
# 0 passes; 1 fails the job (a verdict on verl); 3 passes the job with a warning quoting the undecided figures (the
# noise decides nothing about verl, and a red job on every unchanged pull request teaches people to ignore it); 2 (and
# any code that is no verdict: a crash of the step itself, a missing command) is retried once where the job's time
# allows, then fails the job with a line saying it is not a verdict on the pull request and what to do; a signal
# (the job cancelled, or its time limit) fails it, never retried.
JobAction = Literal["pass", "fail", "warn", "error"]
CODES = {"pass": EXIT_PASS, "fail": EXIT_FAIL, "error": EXIT_ERROR, "inconclusive": EXIT_INCONCLUSIVE}  # by name
Level = Literal["error", "warning", "notice"]
SIGNALLED = 128  # 128+N: stopped by signal N
KILLED = 9  # SIGKILL: what the out-of-memory killer sends (a cancelled job gets SIGTERM first, then SIGKILL)

EXIT_MEANING: dict[int, str] = {
    EXIT_PASS: "pass",
    EXIT_FAIL: "a regression of head: a verdict on the verl (or msprobe) under test",
    EXIT_ERROR: (
        "an error of the harness, the runner or the input, or nothing compared: not a verdict on verl, never a pass"
    ),
    EXIT_INCONCLUSIVE: "INCONCLUSIVE: the runner's noise left a figure undecided (rerun, or more repeats)",
}
JOB_ACTION: dict[int, JobAction] = {
    EXIT_PASS: "pass",
    EXIT_FAIL: "fail",
    EXIT_ERROR: "error",
    EXIT_INCONCLUSIVE: "warn",
}
JOB_EXIT: dict[JobAction, int] = {"pass": 0, "warn": 0, "fail": 1, "error": 1}  # the job's own: green 0, red 1
JOB_LEVEL: dict[JobAction, Level] = {"pass": "notice", "warn": "warning", "fail": "error", "error": "error"}
WHAT_TO_DO = (
    "re-run the failed job; if it fails the same way again, the runner or the harness is at fault (the job's log and "
    "its results artifact hold the error): tell the harness's maintainers, not the pull request's author"
)
# An error in the job's own input, a scenario that does not validate (a caller's ``scenarios`` naming no file, a field
# misspelt): a re-run fails the same way, so it is not retried, and neither the runner nor the pull request is at fault.
# The word is harness.errors.ScenarioError's label (a layer beside this one: a test holds them equal).
INPUT_ERROR = "INVALID SCENARIO"
FIX_INPUT = (
    "fix the job's scenarios (the calling workflow's `scenarios` input, or the scenario file it names) and run it "
    "again: a re-run as it is fails the same way; neither the runner nor the pull request is at fault"
)


def input_error(why: str) -> bool:
    """Whether a step's error line (its first error annotation) is an error of the job's own input."""
    return f"{INPUT_ERROR}:" in why


def meaning(code: int, verdicts: bool = True) -> str:
    """What an exit code says and of whom (a signal, an unknown code, any failure of a step that gives no verdict:
    not a verdict on verl)."""
    if not verdicts and code != EXIT_PASS:
        return f"exit {code} of a step that gives no verdict on verl (a set-up, a build, a query)"
    if code == SIGNALLED + KILLED:
        return (f"killed (signal {KILLED}, exit {code}): out of memory (the kernel's OOM killer, or the runner's "
                "memory limit, ends a process so; its log's last lines say what it was doing), or the runner stopped "
                "it by force: not a verdict on verl")
    if code > SIGNALLED:  # 128 itself is no signal: git's fatal error exits 128
        return f"stopped by signal {code - SIGNALLED} (the job cancelled or past its time limit): not a verdict on verl"
    return EXIT_MEANING.get(code, f"exit {code}, no exit of the harness: {EXIT_MEANING[EXIT_ERROR]}")


def level(code: int) -> Level:
    """The annotation level of a verdict line: an error for a verdict on verl or an error, a warning for undecided."""
    return "notice" if code == EXIT_PASS else JOB_LEVEL[job_action(code)]


def job_action(code: int, verdicts: bool = True) -> JobAction:
    """What the job does with a step's exit ``code`` once it stands (after any retry). ``verdicts`` False: a step that
    decides nothing about verl (a set-up, an image build, a query), whose every failure is an error, never a verdict
    (pip's exit 1 is not a regression)."""
    if not verdicts and code != EXIT_PASS:
        return "error"
    return JOB_ACTION.get(code, "error")


def publishes_baseline(code: int, accepted: bool = False) -> bool:
    """Whether a night that exited ``code`` publishes its figures as the next baseline: a pass or an undecided figure
    does; a verdict on verl only when a maintainer accepts it (``accept-baseline``); an error never (its figures are a
    broken runner's). A night that does not publish one carries the last good baseline forward."""
    action = job_action(code)
    return action in ("pass", "warn") or (action == "fail" and accepted)


def retries(code: int, attempt: int, took_s: float, left_s: float | None, verdicts: bool = True, why: str = "") -> bool:
    """Whether a step that exited ``code`` on its ``attempt`` (1: the first), which took ``took_s``, runs once more:
    only an error that is no verdict (2 or no harness exit at all, never a signal: a cancelled job stays cancelled)
    and not of the job's own input (``why``, its error line: ``input_error``), only once, and only where another
    attempt as long as this one ends within the ``left_s`` the job has left (None: no limit was given)."""
    if job_action(code, verdicts) != "error" or code > SIGNALLED or attempt > 1 or input_error(why):
        return False
    return left_s is None or took_s <= left_s


def steps_exit(codes: Iterable[int]) -> int:
    """One exit for a job of several steps (a night: its runs, its baseline, its gate, its report): a verdict on verl
    stands whatever else failed (a later step's error does not hide it: 1 over 2), then an error, then undecided."""
    seen = set(codes)
    for code in (EXIT_FAIL, *sorted(c for c in seen if job_action(c) == "error"), EXIT_INCONCLUSIVE):
        if code in seen:
            return code
    return EXIT_PASS


@dataclass(frozen=True)
class JobOutcome:
    """What a job publishes of a step's exit: its action, the job's own exit, the annotation's level and line."""

    code: int
    action: JobAction
    exit: int
    level: Level
    line: str


ACCEPTED_BASELINE = (
    f"{ACCEPTED} (exit 1 accepted: accept-baseline): the findings listed above are an intended change, so this "
    "night's figures are the next baseline; no issue is filed"
)
ONCE = "not run again: this step has side effects (a push, an issue's comment) that a second attempt would repeat"


def job_outcome(
    code: int, attempts: int = 1, why: str = "", undecided: Iterable[str] = (), verdicts: bool = True,
    accepted: bool = False,
) -> JobOutcome:  # fmt: skip
    """The table applied to a step's final exit ``code`` after ``attempts`` runs; ``why``: the step's last error line
    (exit 2), ``undecided``: the figures the noise left undecided (exit 3), quoted in the warning; ``verdicts``:
    ``job_action``'s; ``accepted``: a maintainer's dispatch accepts a verdict on verl as an intended change (the
    nightlies' accept-baseline): the job passes, its findings still annotated, as ``ACCEPTED``, and it publishes its
    baseline (``publishes_baseline``) and files no issue (``harness.report.issue`` reads the action)."""
    action = job_action(code, verdicts)
    tried = f" ({attempts} attempts)" if attempts > 1 else ""
    if action == "fail" and accepted:
        return JobOutcome(code, "pass", JOB_EXIT["pass"], "notice", ACCEPTED_BASELINE)
    if action == "pass":
        line = f"PASS (exit 0){tried}: no regression"
    elif action == "fail":
        line = f"FAIL (exit 1): {EXIT_MEANING[EXIT_FAIL]}; the findings are listed above and in the summary"
    elif action == "warn":
        shown = list(undecided)
        figures = "; ".join(shown[:3]) + (f" (+{len(shown) - 3} more)" if len(shown) > 3 else "")
        line = (
            "INCONCLUSIVE (exit 3), the job passes with this warning: the runner's noise left a figure undecided, "
            f"not a verdict on verl{': ' + figures if figures else ''}"
        )
    else:
        because = f": {why}" if why else ""
        said = meaning(code, verdicts)
        todo = FIX_INPUT if input_error(why) else WHAT_TO_DO
        line = f"ERROR{tried}, not a verdict on the pull request: {said}{because}. What to do: {todo}"
    return JobOutcome(code, action, JOB_EXIT[action], JOB_LEVEL[action], line)

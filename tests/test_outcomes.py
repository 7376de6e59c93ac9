"""Verdict words and exit codes (harness.outcomes): the one place the CLI, pytest, compare and gate end."""

from __future__ import annotations

from harness import outcomes
from harness.checks import CheckResult


def test_exit_words_and_ranks() -> None:
    assert [outcomes.exit_word(c) for c in (0, 1, 2, 3)] == ["PASS", "FAIL", "FAIL", "INCONCLUSIVE"]
    assert outcomes.exit_code(["ok", "inconclusive", "regressed"]) == 1
    assert outcomes.exit_code(["regressed", "error"]) == 2 and outcomes.exit_code(["ok", "inconclusive"]) == 3
    assert outcomes.worse(3, 1) == 1 and outcomes.worse(1, 2) == 2 and outcomes.worse(0, 3) == 3


def test_nothing_compared_is_never_a_pass() -> None:
    assert outcomes.final([], 0, 0) == (
        2,
        "NOTHING COMPARED (0 of 0 scenarios had a figure or check judged on both sides)",
    )
    assert outcomes.final(["environment differs"], 0, 1)[0] == 2
    assert outcomes.final(["inconclusive"], 0, 1)[0] == 2
    assert outcomes.final(["ok", "new scenario"], 1, 2) == (0, "PASS (1 of 2 scenarios compared)")
    assert outcomes.final(["regressed"], 1, 1) == (1, "FAIL")
    assert outcomes.final(["error"], 0, 1) == (2, "FAIL (0 of 1 scenarios compared)")  # the error says more


def test_check_outcomes() -> None:
    ok, failed = CheckResult("layout"), CheckResult("layout", problems=["x"])
    assert outcomes.check_outcome(ok) == "pass" and outcomes.check_outcome(failed) == "fail"
    assert outcomes.check_outcome(CheckResult("overhead", inconclusive=["?"])) == "inconclusive"
    assert outcomes.check_outcome(CheckResult("disk", not_checked="crashed")) == "not checked"
    assert outcomes.check_outcome(failed, expected_failure=True) == "xfail"
    assert outcomes.check_outcome(ok, expected_failure=True) == "xpass"
    assert [outcomes.check_exit(o) for o in ("pass", "fail", "xpass", "xfail", "inconclusive", "not checked")] == [
        0, 1, 1, 0, 3, 0,
    ]  # fmt: skip
    assert not CheckResult("disk", not_checked="crashed").passed  # nothing checked is never a pass

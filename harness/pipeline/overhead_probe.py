"""Bisect's probe for overhead: each commit compared against the reference the way ``harness compare`` decides it.

A timing ratio from one run per probe lets machine load pick the commit. Here a probe is a whole base-against-head
comparison (``run_comparison``) of the reference (the known-good commit) and the probed commit: interleaved pairs
(ABBA), its repeats and its stopping rule (one more pair while INCONCLUSIVE, up to ``max_repeats`` a side, else the
compare's default time budget). Its overhead figures decide the probe:
- ``fail``: an overhead figure of some scenario is REGRESSED against the reference;
- ``pass``: every overhead figure was decided and none regressed;
- ``skip``: undecided within the budget (INCONCLUSIVE), or the commit gives no timing to judge (it crashes, cannot
  be installed, or the harness failed): the search goes around it and names it, so an undecided range is reported
  as the range it could narrow to, never a guess;
- ``infra``: the runner failed (asked once more by the search).
Structure, checks and numerics of the probe are reported in its results dir but do not decide it: a commit that
changes them is bisected with ``--check`` on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.errors import HarnessError, InfraError, one_line
from harness.gate.judge import ComparePolicy, Judgement
from harness.pipeline.base_head import comparison_session, run_comparison
from harness.report.verdicts import compare_line
from harness.scenario.model import Scenario
from harness.targets.commits import Commit, Probe, ProbeFn
from harness.targets.environment import ensure_env
from harness.targets.spec import parse_target
from harness.training.monitor import Watch
from harness.training.runs import check_target

OVERHEAD = "overhead."


def probe_of(judgement: Judgement) -> Probe:
    """The verdict a base-against-head comparison (the reference against the probed commit) gives the probe."""
    checks: dict[str, tuple[str, str]] = {}
    regressed = undecided = decided = 0
    no_timing = []
    for sc in judgement.scenarios:
        if sc.crashes or sc.errors:
            no_timing.append(f"{sc.scenario}: {(sc.crashes or sc.errors)[0]}")
            continue
        figures = [f for f in sc.figures if f.metric.startswith(OVERHEAD) and f.judged]
        for f in figures:
            name = f.metric if len(judgement.scenarios) == 1 else f"{sc.scenario}:{f.metric}"
            word = f.verdict.upper() if f.verdict in ("regressed", "inconclusive") else "pass"
            checks[name] = (word, compare_line(f).partition(f"{f.metric} ")[2])  # base .. head ..: head/base ..
        regressed += sum(f.verdict == "regressed" for f in figures)
        undecided += sum(f.verdict == "inconclusive" for f in figures)
        decided += sum(f.verdict not in ("inconclusive", "missing", "new") for f in figures)
    if regressed:
        return Probe("fail", checks)
    if no_timing:
        return Probe("skip", checks, f"no timing to judge ({'; '.join(no_timing)})")
    if undecided:
        why = f"overhead undecided: {undecided} figure(s) INCONCLUSIVE within the budget"
        return Probe("skip", checks, why, undecided=True)
    if not decided:
        return Probe("skip", checks, "no overhead figure was compared")
    return Probe("pass", checks)


def overhead_probe(
    repo: str,
    scenarios: list[Scenario],
    reference: str,
    results: Path,
    executor: str | None,
    msprobe: str | None,
    max_repeats: int | None,
    say: Callable[[str], None],
) -> ProbeFn:
    """A probe comparing each commit (``<repo>@<sha>``) against ``reference`` (a sha: the known-good endpoint, whose
    own probe is the reference itself), its comparison in ``results/<sha12>``."""
    base = parse_target(f"{repo}@{reference}", msprobe)

    def probe(commit: Commit) -> Probe:
        if commit.sha == reference:
            return Probe("pass", {"overhead": ("pass", "the reference every probe is compared against")})
        try:
            head = parse_target(f"{repo}@{commit.sha}", msprobe)
            env = ensure_env(head)
            for s in scenarios:
                check_target(s, env)
        except HarnessError as exc:
            return Probe("skip", why=f"cannot be installed or API drift: {one_line(exc)}")
        where = results / commit.sha[:12]
        session = comparison_session(where, executor, Watch.configure())
        try:
            judgement, _ = run_comparison(
                scenarios, base, head, where, ComparePolicy.repeats, session, say=say, judge={"overhead"},
                max_repeats=max_repeats,
            )  # fmt: skip
        except InfraError as exc:
            return Probe("infra", why=one_line(exc).splitlines()[0])
        except HarnessError as exc:
            return Probe("skip", why=one_line(exc).splitlines()[0])
        return probe_of(judgement)

    return probe

"""Bisect's probe for overhead: each commit compared against the reference the way ``harness compare`` decides it.

A timing ratio from one run per probe lets machine load pick the commit. Here a probe is a whole base-against-head
comparison (``run_comparison``) of the reference (the known-good commit) and the probed commit: interleaved pairs
(ABBA), its repeats and its stopping rule (one more pair while INCONCLUSIVE, up to ``max_repeats`` a side, else the
compare's default time budget). Its overhead figures decide the probe (``BisectPolicy.of_comparison``):
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
from harness.gate.judge import BisectPolicy
from harness.pipeline.base_head import comparison_session, run_comparison
from harness.report.verdicts import probe_figure
from harness.scenario.model import Scenario
from harness.targets.commits import Commit, Probe, ProbeFn
from harness.targets.environment import ensure_env
from harness.targets.spec import parse_target
from harness.training.monitor import Watch
from harness.training.runs import check_target


def overhead_probe(
    repo: str,
    scenarios: list[Scenario],
    reference: str,
    results: Path,
    executor: str | None,
    msprobe: str | None,
    policy: BisectPolicy,
    say: Callable[[str], None],
) -> ProbeFn:
    """A probe comparing each commit (``<repo>@<sha>``) against ``reference`` (a sha: the known-good endpoint, whose
    own probe is the reference itself), its comparison in ``results/<sha12>``, run and decided as ``policy`` says
    (``BisectPolicy``: its families, repeats and max_repeats)."""
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
                scenarios, base, head, where, policy.repeats, session, say=say, judge=policy.families,
                max_repeats=policy.max_repeats,
            )  # fmt: skip
        except InfraError as exc:
            return Probe("infra", why=one_line(exc).splitlines()[0])
        except HarnessError as exc:
            return Probe("skip", why=one_line(exc).splitlines()[0])
        return policy.of_comparison(judgement, probe_figure)

    return probe

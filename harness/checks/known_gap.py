"""Known gaps: expected stages declared as producing nothing (reported as a strict xfail)."""

from __future__ import annotations

from harness.artifacts import figures as fig
from harness.checks.base import CheckContext, CheckResult
from harness.scenario.blocks import KnownGap

PREFIX = "known_gap"


def gap_name(gap: KnownGap) -> str:
    """The gap's check name, in results.json and as its pytest item: ``known_gap[compute_values+critic_update]``."""
    return f"{PREFIX}[{'+'.join(gap.stages)}]"


def is_gap(check: str) -> bool:
    return check.startswith(PREFIX)


def check_gap(ctx: CheckContext, gap: KnownGap) -> CheckResult:
    """Fails while any stage of the gap has no dumps at the expected steps and ranks."""
    s = ctx.scenario
    res = CheckResult(gap_name(gap), xfail_reason=gap.reason)
    found = {(d.step, d.stage, d.rank) for d in ctx.tree.dirs}
    for stage in gap.stages:
        missing = [(n, r) for n in s.expected_steps for r in s.expected_ranks if (n, stage, r) not in found]
        res.figures[fig.gap_missing(stage)] = len(missing)
        if missing:
            where = ", ".join(f"step_{n}/rank{r}" for n, r in missing)
            res.problems.append(f"expected stage {stage} produced no dumps ({where})")
    res.summary = f"{len(res.problems)} of {len(gap.stages)} gap stages without dumps"
    return res

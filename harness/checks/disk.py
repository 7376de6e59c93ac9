"""Disk: dump bytes per step, per stage, per rank and in total, against the scenario's budgets."""

from __future__ import annotations

from collections import defaultdict

from harness.checks.base import CheckContext, CheckResult, mb


def check_disk(ctx: CheckContext) -> CheckResult:
    budget = ctx.scenario.budgets.disk
    res = CheckResult("disk")
    per_step: dict[int, int] = defaultdict(int)
    per_stage_step: dict[tuple[str, int], int] = defaultdict(int)
    per_rank: dict[str, int] = defaultdict(int)
    for d in ctx.tree.dirs:
        per_step[d.step] += d.bytes
        per_stage_step[(d.stage, d.step)] += d.bytes
        per_rank[f"rank{d.rank}" if d.rank is not None else "proc"] += d.bytes
    total = sum(per_step.values())

    res.figures["disk.total_bytes"] = total
    for step, n in sorted(per_step.items()):
        res.figures[f"disk.step{step}_bytes"] = n
    for stage in sorted({st for st, _ in per_stage_step}):
        res.figures[f"disk.stage.{stage}_bytes"] = max(n for (st, _), n in per_stage_step.items() if st == stage)
    for rank, n in sorted(per_rank.items()):
        res.figures[f"disk.{rank}_bytes"] = n

    def over(what: str, n: int, limit: int | None, field: str) -> None:
        if limit is not None and n > limit:
            res.problems.append(f"{what}: {mb(n)} > budgets.disk.{field} {mb(limit)}")

    over("all dumps", total, budget.max_total, "max_total")
    for step, n in sorted(per_step.items()):
        over(f"step_{step}", n, budget.max_per_step, "max_per_step")
    for (stage, step), n in sorted(per_stage_step.items()):
        over(f"step_{step}/{stage}", n, budget.max_per_stage, "max_per_stage")
    for rank, n in sorted(per_rank.items()):
        over(rank, n, budget.max_per_rank, "max_per_rank")
    res.summary = f"{mb(total)} total, max {mb(max(per_step.values(), default=0))} per step"
    res.notes.append(
        f"total {mb(total)}; per step " + ", ".join(f"step_{s}: {mb(n)}" for s, n in sorted(per_step.items()))
    )
    return res

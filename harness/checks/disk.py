"""Disk: dump bytes per step, per stage, per rank, per node (a run on a Ray cluster) and in total, against the
scenario's budgets.

A run the monitor stopped at the dump cap (``harness.training.monitor``) fails here first, with how far it got."""

from __future__ import annotations

from collections import defaultdict

from harness.artifacts import figures as fig
from harness.artifacts.figures import mb
from harness.checks.base import CheckContext, CheckResult, provisional


def check_disk(ctx: CheckContext) -> CheckResult:
    budget = ctx.scenario.budgets.disk
    res = CheckResult("disk", problems=list(ctx.stopped))
    per_step: dict[int, int] = defaultdict(int)
    per_stage_step: dict[tuple[str, int], int] = defaultdict(int)
    per_rank: dict[int | None, int] = defaultdict(int)
    for d in ctx.tree.dirs:
        per_step[d.step] += d.bytes
        per_stage_step[(d.stage, d.step)] += d.bytes
        per_rank[d.rank] += d.bytes
    total = sum(per_step.values())

    res.figures[fig.DISK_TOTAL] = total
    for step, n in sorted(per_step.items()):
        res.figures[fig.disk_step(step)] = n
    for stage in sorted({st for st, _ in per_stage_step}):
        res.figures[fig.disk_stage(stage)] = max(n for (st, _), n in per_stage_step.items() if st == stage)
    ranks = sorted(per_rank.items(), key=lambda kv: -1 if kv[0] is None else kv[0])
    for rank, n in ranks:
        res.figures[fig.disk_rank(rank)] = n

    ungated_by, ungated = provisional(ctx.scenario.budgets), []

    def over(what: str, n: int, limit: int | None, field: str) -> None:
        if limit is not None and ungated_by:
            ungated.append(f"{what} {mb(n)} against {field} {mb(limit)}: {'over' if n > limit else 'within'}")
        elif limit is not None and n > limit:
            res.problems.append(f"{what}: {mb(n)} > budgets.disk.{field} {mb(limit)}")

    # what each node's own disk held: the budget a node's disk has to give. The nodes of the ranks that dump, and any
    # other that held dumps all the same: a node whose ranks all lie outside precision_debugger.ranks has no figure
    # (0 bytes there is what the subset asks for, and layout fails it should it hold any)
    dumping = set(ctx.scenario.expected_ranks)
    numbered = ctx.nodes.numbered() if ctx.nodes else []
    nodes = [(i, n) for i, n in numbered if dumping & set(n.ranks) or n.bytes]
    for index, node in nodes:
        res.figures[fig.disk_node(index)] = node.bytes

    over("all dumps", total, budget.max_total, "max_total")
    for step, n in sorted(per_step.items()):
        over(f"step_{step}", n, budget.max_per_step, "max_per_step")
    for (stage, step), n in sorted(per_stage_step.items()):
        over(f"step_{step}/{stage}", n, budget.max_per_stage, "max_per_stage")
    for rank, n in ranks:
        over(f"rank{rank}" if rank is not None else "proc", n, budget.max_per_rank, "max_per_rank")
    for index, node in nodes:
        over(f"node{index}: {node.name} (ranks {node.ranks})", node.bytes, budget.max_per_node, "max_per_node")
    if ungated:  # measured against budgets never measured on the device: said, not gated, never a pass
        res.not_gated = f"{ungated_by}: {'; '.join(ungated)}"
        res.notes.append(res.not_gated)
    if budget.max_per_node is not None and ctx.nodes is None:
        res.notes.append("budgets.disk.max_per_node: not judged, the run was on one host (no nodes.json)")
    res.summary = f"{mb(total)} total, max {mb(max(per_step.values(), default=0))} per step"
    res.notes.append(
        f"total {mb(total)}; per step " + ", ".join(f"step_{s}: {mb(n)}" for s, n in sorted(per_step.items()))
    )
    if nodes:
        res.notes.append("per node: " + ", ".join(f"node{i} {n.name} ranks {n.ranks}: {mb(n.bytes)}" for i, n in nodes))
    return res

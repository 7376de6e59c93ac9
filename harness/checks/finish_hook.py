"""verl's finish hook, judged within layout where a scenario opts in (``precision_debugger.finish_hook_ranks``).

verl runs ``finish_hook_cmd`` on each selected rank once, after the last profiled step, to ship its node's save_path
(``harness.artifacts.finish_hook``: the harness's command records what it would ship). What a multi-node user relies
on, and what this judges: the hook ran exactly once on each selected rank and on no other; it ran after the last
profiled step (its listing holds that step's dumps of the node's dumping ranks); and what it listed is what the node
held, file for file, byte for byte (sha256): the dumps the job gathered from the node the rank ran on (on one host,
every dump). A listing that differs is a hook that would ship too little, too much or a file still being written;
one that names a file it could not read, or one that went while it listed, is a hook that would not ship it. A run
verl gave no rank (``VERL_PROFILE_RANK`` unset or no number) is named: the hook cannot say which rank it ran on."""

from __future__ import annotations

import re
from collections import defaultdict

from harness.artifacts.finish_hook import HookRun, listing, read_runs
from harness.checks.base import CheckContext
from harness.outside import shown

RANK_PART = re.compile(r"(?:^|/)rank(\d+)(?:/|$)")
SHOWN = 3  # paths named a difference; the count says the rest


def _few(paths: list[str]) -> str:
    return ", ".join(paths[:SHOWN]) + (f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else "")


def compare(listed: dict[str, tuple[int, str]], held: dict[str, tuple[int, str]]) -> str:
    """What differs between a hook's listing and what its node held (path -> size, sha256), "" when nothing does."""
    only_listed = sorted(listed.keys() - held.keys())
    only_held = sorted(held.keys() - listed.keys())
    other = sorted(p for p in listed.keys() & held.keys() if listed[p] != held[p])
    parts = [
        *([f"{len(only_listed)} listed but not held ({_few(only_listed)})"] if only_listed else []),
        *([f"{len(only_held)} held but not listed ({_few(only_held)})"] if only_held else []),
        *([f"{len(other)} with other bytes ({_few(other)})"] if other else []),
    ]
    return "; ".join(parts)


def hook_problems(ctx: CheckContext) -> tuple[list[str], list[str]]:
    """(problems, notes) of the finish hook's runs in the on run."""
    s = ctx.scenario
    selected = list(s.precision_debugger.finish_hook_ranks or [])
    on = ctx.dir.run("on")
    runs, problems = read_runs(on.finish_hook)
    notes: list[str] = []
    by_rank: defaultdict[int, list[HookRun]] = defaultdict(list)
    for run in runs:
        if run.rank is None:
            problems.append(
                f"finish hook: a run on {shown(run.host)} had no rank (VERL_PROFILE_RANK unset or not a whole "
                "number): verl exports the rank it runs the hook on"
            )
        else:
            by_rank[run.rank].append(run)
    gathered = listing(str(on.dumps))[0]
    last = max(s.precision_debugger.steps)
    stages = [st for st in s.expected_stages if st not in s.gap_stages]
    for rank in sorted(by_rank.keys() - set(selected)):
        problems.append(
            f"finish hook: rank {rank}{ctx.on_node(rank)} ran it, not selected (finish_hook_ranks {selected})"
        )
    for rank in selected:
        where = ctx.on_node(rank)
        done = by_rank.get(rank, [])
        if not done:
            problems.append(f"finish hook: rank {rank}{where} never ran it (no listing in {on.finish_hook})")
            continue
        if len(done) > 1:
            problems.append(f"finish hook: rank {rank}{where} ran it {len(done)} times, once expected")
        run = done[-1]
        node = ctx.nodes.node_of(rank) if ctx.nodes else None
        if ctx.nodes is not None and node is None:
            problems.append(f"finish hook: rank {rank}: Ray placed no worker with that RANK, its node's dumps unknown")
            continue
        ranks = set(node.ranks) if node else None  # None: one host, every dump
        held = {p: v for p, v in gathered.items() if ranks is None or _rank(p) in ranks}
        dumping = [r for r in s.expected_ranks if ranks is None or r in ranks]
        wanted = [f"step_{last}/{st}/step0/rank{r}/dump.json" for r in dumping for st in stages]
        listed = run.sizes
        named = {entry.rpartition(": ")[0] for entry in run.refused}  # found, not listed: said once, with its reason
        held = {p: v for p, v in held.items() if p not in named}
        if missing := [p for p in wanted if p not in listed and p not in named]:
            problems.append(
                f"finish hook: rank {rank}{where} ran before the last profiled step's dumps (step {last}) were "
                f"written: its listing lacks {_few(missing)}"
            )
        if diff := compare(listed, held):
            problems.append(
                f"finish hook: rank {rank}{where} listed {len(run.files)} file(s), its node held {len(held)}: {diff}"
            )
        problems += [f"finish hook: rank {rank}{where} found {shown(entry)}: not shippable" for entry in run.refused]
        nbytes = sum(size for size, _ in listed.values())
        notes.append(
            f"finish hook: rank {rank}{where} ran {len(done)} time(s), listed {len(run.files)} file(s) "
            f"({nbytes} bytes) of {shown(run.save_path)} on {shown(run.host)}"
        )
    return problems, notes


def _rank(path: str) -> int | None:
    m = RANK_PART.search(path)
    return int(m.group(1)) if m else None

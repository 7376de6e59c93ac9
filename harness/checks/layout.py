"""Layout: exactly the expected ``step_N/stage/step0/rankR`` dirs, each with its files; nothing else. On a cluster,
each node judged whole; where the scenario sets verl's finish hook, what the hook listed on each node
(``harness.checks.finish_hook``)."""

from __future__ import annotations

from harness.artifacts.nodes import NodesRecord
from harness.checks.base import CheckContext, CheckResult
from harness.checks.finish_hook import hook_problems


def check_layout(ctx: CheckContext) -> CheckResult:
    s = ctx.scenario
    res = CheckResult("layout")
    gaps = s.gap_stages
    stages = [st for st in s.expected_stages if st not in gaps]
    expected = {(step, st, r) for step in s.expected_steps for st in stages for r in s.expected_ranks}
    found = {(d.step, d.stage, d.rank): d for d in ctx.tree.dirs}
    profiled, allowed_stages = set(s.precision_debugger.steps), set(s.expected_stages)

    for key in sorted(expected - found.keys()):
        res.problems.append("missing dump dir step_{}/{}/step0/rank{}".format(*key) + ctx.on_node(key[2]))
    if ctx.nodes is not None:
        res.problems += node_problems(ctx.nodes, expected, set(found), s.expected_ranks)
    for (step, st, r), d in sorted(found.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or -1)):
        rel = d.path.relative_to(ctx.tree.root)
        if (step, st, r) in expected:
            continue
        if st in gaps and step in s.expected_steps and r in s.expected_ranks:
            continue  # a known gap that produced dumps: its own item reports that
        if r is None:
            why = "msprobe wrote proc<pid>, not rank<R>: torch.distributed was not initialised"
        elif step not in profiled:
            why = f"step {step} is not profiled (precision_debugger.steps {sorted(profiled)})"
        elif st not in allowed_stages:
            why = f"stage {st} is not in the stage set {sorted(allowed_stages)}"
        elif r not in s.expected_ranks:
            why = f"rank {r} is not among the expected ranks {s.expected_ranks}"
        else:
            why = f"step {step} is not expected"
        res.problems.append(f"unexpected dump dir {rel}{ctx.on_node(r)}: {why}")
    for tree in (ctx.tree, ctx.off_tree):
        if tree.link is not None:
            res.problems.append(f"{tree.root}: a symlink to {tree.link}, not followed (dumps must lie in the run dir)")
    for stray in ctx.tree.strays:
        res.problems.append(f"unexpected path {stray} under the dump root (not step_N/stage/step0/rankR)")

    want = {"dump.json"} | ({"stack.json", "construct.json"} if s.precision_debugger.extra_info else set())
    for key in sorted(expected & found.keys()):
        d = found[key]
        where = d.path.relative_to(ctx.tree.root).as_posix()
        if missing := sorted(want - d.files):
            res.problems.append(f"{where}: missing {', '.join(missing)}")
        for name in sorted(want & d.not_regular.keys()):  # a reader would hang on a FIFO or never end on a device
            res.problems.append(f"{where}/{name}: not a regular file ({d.not_regular[name]})")
    if ctx.off_tree.dirs or ctx.off_tree.strays:  # a link is reported above
        res.problems.append(f"the off run (precision_debugger disabled) wrote dumps under {ctx.off_tree.root}")
    if ctx.untrained("off"):  # said, never taken for an off run that wrote nothing
        res.notes.append("the off run was not trained: that precision_debugger disabled writes no dumps is not checked")

    if ctx.nodes is not None:
        none = f"expected no dumps (expected ranks {s.expected_ranks})"
        res.notes += [
            f"{n.name}: ranks {n.ranks} (Ray), {f'expected the dumps of ranks {mine}' if mine else none}, "
            f"rank dirs {n.dump_ranks} gathered"
            for n, mine in ctx.nodes.holders(s.expected_ranks)
        ]
    if s.precision_debugger.finish_hook_ranks is not None:  # what verl's finish hook would ship: the node's dumps
        hook, notes = hook_problems(ctx)
        res.problems += hook
        res.notes += notes
    res.figures["layout.expected_dirs"] = len(expected)
    res.figures["layout.found_dirs"] = len(found)
    res.summary = f"{len(expected & found.keys())}/{len(expected)} expected dirs, {len(found)} found"
    return res


def node_problems(
    nodes: NodesRecord,
    expected: set[tuple[int, str, int]],
    found: set[tuple[int, str, int | None]],
    ranks: list[int],
) -> list[str]:
    """Each node judged whole against the ranks that dump (``ranks``: a subset such as precision_debugger.ranks
    leaves the nodes of the other ranks with nothing to hold): its ranks' expected dirs missing (all: its dumps never
    reached the results dir; some: partial), dumps of its ranks outside the subset, its gathering cut short, what it
    held that was refused (links, FIFOs, devices, never followed), dumps of a rank Ray placed elsewhere, and expected
    ranks Ray placed on no node."""
    out = []
    placed = {r for n in nodes.nodes for r in n.ranks}
    if not placed:
        out.append(f"no rank's node was read from Ray ({nodes.placement}): the nodes cannot be judged")
    for n, selected in nodes.holders(ranks):
        mine = {k for k in expected if k[2] in selected}
        if missing := mine - found:
            what = "none reached the results dir" if missing == mine else f"{len(missing)} missing (partial)"
            out.append(f"{n.name} (ranks {n.ranks}): of its {len(mine)} expected dump dirs, {what}")
        if outside := sorted((set(n.dump_ranks) & set(n.ranks)) - set(selected)):
            out.append(f"{n.name} (ranks {n.ranks}) held the dumps of ranks {outside}, not among the expected ranks "
                       f"{ranks}")  # fmt: skip
        if not n.alive:
            out.append(f"{n.name} (ranks {n.ranks}) was gone when the job gathered: its dumps are lost")
        elif n.problem:
            out.append(f"{n.name} (ranks {n.ranks}): {n.problem}")
        out += [f"{n.name}: {entry}: not gathered" for entry in n.refused]
        for r in sorted(set(n.dump_ranks) - set(n.ranks)):
            other = nodes.node_of(r)
            out.append(f"{n.name} held rank{r}'s dumps, Ray placed rank {r} on {other.name if other else 'no node'}")
    ranks = sorted({k[2] for k in expected if k[2] is not None} - placed)
    if placed and ranks:
        out.append(f"ranks {ranks}: Ray placed no worker of this run with that RANK ({nodes.placement})")
    return out

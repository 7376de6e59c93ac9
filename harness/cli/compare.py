"""``python -m harness compare --base SPEC --head SPEC SCENARIO...``: base against head on one machine, the pull-request
gate (docs/base-against-head.md): 0 pass, 1 a regression, 2 an error, 3 inconclusive (as ``gate``)."""

from __future__ import annotations

import argparse
import time

from rich.markup import escape

from harness import config, outcomes
from harness.artifacts.figures import FAMILIES
from harness.cli.arguments import families
from harness.cli.console import console, live_line, sweep, watching
from harness.errors import ScenarioError
from harness.gate.judge import ComparePolicy
from harness.outcomes import ACCEPT_LABEL
from harness.pipeline import options as shared
from harness.pipeline.session import Session
from harness.report import verdicts
from harness.scenario.loader import load_scenarios
from harness.targets.pair import merge_base
from harness.targets.spec import SERIES_HELP, TARGET_HELP, parse_target
from harness.training.runs import results_dir


def say(line: str) -> None:
    console.print(escape(line), soft_wrap=True)


def cmd_compare(args: argparse.Namespace) -> int:
    scenarios, problems = load_scenarios(args.paths, args.executor)
    if problems:
        raise ScenarioError(problems)
    base = parse_target(args.base, args.msprobe, args.series, "--base", args.stack)
    head = parse_target(args.head, args.msprobe, args.series, "--head", args.stack)
    notes = []
    if args.merge_base:  # the pull request's change alone: base is the branch point (harness.targets.pair)
        verl, line = merge_base(base.verl, head.verl)
        base, notes = base.model_copy(update={"verl": verl}), [f"the pair: {line}"]
        console.print(escape(notes[0]), soft_wrap=True)
    results = results_dir(args.results)
    session = Session(results, args.executor, watching(live_line(15.0)), heavy=shared.runs_heavy(args.heavy), say=say)
    runnable, skipped = [], []
    for s in scenarios:
        if reason := session.skip(s):
            console.print(f"[yellow]{outcomes.SKIPPED}[/] {escape(reason)}", soft_wrap=True)
            skipped.append(reason)
        else:
            runnable.append(s)
    started = time.monotonic()
    sweep(scenarios)
    policy = ComparePolicy(families=args.judge, repeats=args.repeats, max_repeats=args.max_repeats)
    compared = session.compare(runnable, base, head, policy)
    comparison = compared.judgement(skipped, args.accept, notes)
    verdicts.write_comparison(comparison, results)
    for line in verdicts.lines(comparison):
        print(line)
    from harness.report.compare import write_reports  # matplotlib: only where reports are written

    reports = write_reports(comparison, compared.observed, results / "report")
    print(f"compare.json, compare.txt in {results}; report: {', '.join(str(p) for p in reports)}")
    print(f"wall {time.monotonic() - started:.1f}s")
    return comparison.exit_code


def declare(sub: argparse._SubParsersAction) -> None:
    """``compare``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser(
        "compare",
        help="base against head: each scenario run for both verl targets, interleaved; exit 1 on a regression, 3 "
        "INCONCLUSIVE (more repeats up to --max-repeats did not decide)",
    )
    p.add_argument("paths", nargs="+")
    p.add_argument("--base", required=True, metavar="SPEC", help=f"the verl before the change: {TARGET_HELP}")
    p.add_argument("--head", required=True, metavar="SPEC", help="the verl with the change (SPEC as --base)")
    p.add_argument("--msprobe", metavar="SPEC", help="the msprobe of both sides: a version or a .whl")
    p.add_argument("--series", help=SERIES_HELP)
    p.add_argument("--results", default="results/compare")
    shared.add(
        p.add_argument,
        (shared.REPEATS, shared.MAX_REPEATS, shared.EXECUTOR, shared.RAY_ADDRESS, shared.STACK, shared.HEAVY),
    )
    p.add_argument(
        "--judge",
        type=families,
        default=FAMILIES,
        metavar="FAMILY[,FAMILY]",
        help=f"figure families decided ({','.join(FAMILIES)}; default all); others are reported. Checks and dump "
        "entry names are always decided",
    )
    p.add_argument(
        "--accept",
        metavar="REASON",
        default=config.ACCEPT.get(),
        type=_accept_reason,
        help=f"head's regressions are an intended change (REASON: the pull request's label {ACCEPT_LABEL}, who "
        "decided): every finding is still reported, the verdict is ACCEPTED (exit 0) unless an error or an undecided "
        "figure remains; default $HARNESS_ACCEPT",
    )
    p.add_argument(
        "--merge-base",
        action="store_true",
        help="compare head with the merge base of --base and --head (both <repository>@<ref> of one repository): "
        "the pull request's change alone, not what the base branch merged after it branched (a merge commit with "
        "--base its first parent compares as given); a head that is not a descendant of the base is refused",
    )
    p.set_defaults(func=cmd_compare)


def _accept_reason(text: str) -> str:
    """``--accept``'s reason: printed in the verdict line, so one printable line of reasonable length."""
    if not text.strip() or not text.isprintable() or len(text) > 200:
        raise argparse.ArgumentTypeError(
            f"{text[:60]!r}: the reason an intended change is accepted is one printable line of 1-200 characters "
            f"(e.g. 'label {ACCEPT_LABEL}')"
        )
    return text.strip()

"""``python -m harness compare --base SPEC --head SPEC SCENARIO...``: base against head on one machine, the pull-request
gate (docs/base-against-head.md): 0 pass, 1 a regression, 2 an error, 3 inconclusive (as ``gate``)."""

from __future__ import annotations

import argparse
import time

from rich.markup import escape

from harness import outcomes
from harness.cli.console import console, live_line, sweep
from harness.errors import HarnessError, ScenarioError
from harness.pipeline import options as shared
from harness.pipeline.base_head import comparison_session, run_comparison, write_reports
from harness.report import verdicts
from harness.scenario.loader import load_scenarios
from harness.targets.pair import merge_base
from harness.targets.spec import parse_target
from harness.training.monitor import Show, Watch
from harness.training.runs import results_dir


def _watch(show: Show) -> Watch:
    try:
        return Watch.configure(show=show)
    except ValueError as exc:
        raise HarnessError(str(exc)) from None


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
    session = comparison_session(results, args.executor, _watch(live_line(15.0)), shared.runs_heavy(args.heavy))
    runnable, skipped = [], []
    for s in scenarios:
        if reason := session.skip(s):
            console.print(f"[yellow]{outcomes.SKIPPED}[/] {escape(reason)}", soft_wrap=True)
            skipped.append(reason)
        else:
            runnable.append(s)
    started = time.monotonic()
    sweep(scenarios)
    comparison, observed = run_comparison(
        runnable,
        base,
        head,
        results,
        args.repeats,
        session,
        say=lambda m: console.print(escape(m), soft_wrap=True),
        judge=args.judge,
        max_repeats=args.max_repeats,
        skipped=skipped,
        accepted=args.accept,
        notes=notes,
    )
    for line in verdicts.lines(comparison):
        print(line)
    reports = write_reports(comparison, observed, results / "report")
    print(f"compare.json, compare.txt in {results}; report: {', '.join(str(p) for p in reports)}")
    print(f"wall {time.monotonic() - started:.1f}s")
    return comparison.exit_code

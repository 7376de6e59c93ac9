"""``python -m harness compare --base SPEC --head SPEC SCENARIO...``: base against head on one machine, the pull-request
gate (docs/base-against-head.md): 0 pass, 1 a regression, 2 an error, 3 inconclusive (as ``gate``)."""

from __future__ import annotations

import argparse
import time

import psutil
from rich.markup import escape

from harness import outcomes
from harness.artifacts.results import PhaseDoc
from harness.cli.console import console, live_line, sweep, watching
from harness.errors import ScenarioError
from harness.gate.judge import ComparePolicy
from harness.pipeline import options as shared
from harness.pipeline.session import Session
from harness.report import verdicts
from harness.scenario.loader import load_scenarios
from harness.targets.pair import merge_base
from harness.targets.spec import parse_target
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
    setup = PhaseDoc(phase="set-up", seconds=round(time.time() - psutil.Process().create_time(), 3))  # to here
    sweep(scenarios)
    policy = ComparePolicy(families=args.judge, repeats=args.repeats, max_repeats=args.max_repeats)
    compared = session.compare(runnable, base, head, policy)
    comparison = compared.judgement(skipped, args.accept, notes)
    reporting = time.monotonic()
    from harness.report.compare import write_plots, write_summary  # matplotlib: only where reports are written

    plots = write_plots(compared.observed, results / "report")
    reports = PhaseDoc(phase="reports", seconds=round(time.monotonic() - reporting, 3))  # its last writes aside
    comparison.phases = [setup, *comparison.phases, reports]
    verdicts.write_comparison(comparison, results)
    for line in verdicts.lines(comparison):
        print(line)
    wall = setup.seconds + time.monotonic() - started
    summary = write_summary(comparison, results / "report", wall)
    print(f"compare.json, compare.txt in {results}; report: {', '.join(str(p) for p in [summary, *plots])}")
    print(f"wall {time.monotonic() - started:.1f}s")
    return comparison.exit_code

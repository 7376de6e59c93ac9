"""``python -m harness run SCENARIO...``: each scenario's trainings off and on and every check, outside pytest, into a
results dir; a table of verdicts and the wall time spent in and outside the trainings."""

from __future__ import annotations

import argparse
import sys
import time

from rich.markup import escape
from rich.table import Table

from harness import outcomes
from harness.cli.console import COLOURS, console, live_line, sweep
from harness.errors import HarnessError, one_line
from harness.pipeline import options as shared
from harness.pipeline.session import Session
from harness.scenario.loader import load_scenarios
from harness.targets.spec import parse_target
from harness.training.monitor import WatchSettings
from harness.training.runs import results_dir


def cmd_run(args: argparse.Namespace) -> int:
    scenarios, problems = load_scenarios(args.paths, args.executor)
    if problems:
        for line in problems:
            print(line, file=sys.stderr)
        return outcomes.EXIT_ERROR
    try:
        watch = WatchSettings.configure(args.max_dump, args.min_free, show=live_line(args.progress_every))
    except ValueError as exc:
        print(f"harness run: {exc}", file=sys.stderr)
        return outcomes.EXIT_ERROR
    results, status, ran = results_dir(args.results), 0, 0
    why: str | None = None  # the first line that explains a non-zero exit, said last on stderr (below)
    session = Session(
        results, args.executor, watch, shared.gates_timing(args.timing), args.reuse, shared.runs_heavy(args.heavy)
    )
    sweep(scenarios)
    started, trained = time.monotonic(), 0.0
    env = session.env(parse_target(args.verl, args.msprobe, args.series, stack=args.stack))  # once, for every scenario
    console.print(f"target: {escape(env.label())}", soft_wrap=True)
    table = Table("scenario", "check", "verdict", "key figures", title=f"results in {results}")
    for s in scenarios:
        if reason := session.skip(s):
            said = f"[yellow]{outcomes.SKIPPED}[/] {escape(reason)}"
            console.print(said, soft_wrap=True)  # one line, as pytest shows it
            table.add_row(s.name, "-", "[yellow]skipped[/]", "")
            continue
        console.print(
            f"[bold]{s.name}[/]: training off and on ({s.executor.kind if not args.executor else args.executor})"
        )
        ran += 1
        try:
            runs, checks = session.evaluate(s, env)
            trained += runs.trained_s
        except HarnessError as exc:
            console.print(f"[red]{escape(one_line(exc))}[/]", soft_wrap=True)
            why = why or one_line(exc).splitlines()[0]
            table.add_row(s.name, "-", f"[red]{outcomes.ERROR}[/]", "")
            status = outcomes.worse(status, outcomes.EXIT_ERROR)
            continue
        for r in checks:
            outcome = outcomes.check_outcome(r, expected_failure=bool(r.xfail_reason))
            status = outcomes.worse(status, outcomes.check_exit(outcome))
            verdict = f"[{COLOURS[outcome]}]{escape(outcomes.WORDS[outcome])}[/]"
            table.add_row(s.name, r.check, verdict, r.not_checked or r.summary)
            mark = "[yellow]~" if r.xfail_reason else "[red]-"
            for p in r.problems:
                console.print(f"  {mark}[/] {r.check}: {escape(p)}", soft_wrap=True)
                if not r.xfail_reason:
                    why = why or f"{s.name} {r.check}: {p}".splitlines()[0]
            for p in r.inconclusive:
                console.print(f"  [magenta]?[/] {r.check}: {escape(p)}", soft_wrap=True)
            if outcome == "not gated":
                console.print(f"  [yellow]~[/] {r.check}: {escape(r.not_gated)}", soft_wrap=True)
            if outcome in ("xfail", "xpass"):
                line = f"{outcomes.WORDS[outcome]}: {r.xfail_reason}"
                console.print(f"  [yellow]~[/] {r.check}: {escape(line)}", soft_wrap=True)
    console.print(table)
    wall = time.monotonic() - started
    console.print(
        f"wall {wall:.1f}s; inside training processes {trained:.1f}s; "
        f"harness overhead {wall - trained:.1f}s ({100 * (wall - trained) / max(wall, 1e-9):.0f}%)"
    )
    status, last = outcomes.run_final(status, ran, len(scenarios))
    if last:
        console.print(f"[red]{escape(last)}[/]", soft_wrap=True)
    if status != outcomes.EXIT_PASS and (reason := last or why):
        # the table and every line above are the standard output's; a CI step's wrapper (python3 -m harness.job)
        # quotes the last line of the standard error as the reason of a red job: without it, "no error line"
        print(reason, file=sys.stderr)
    return status


def declare(sub: argparse._SubParsersAction) -> None:
    """``run``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser("run", help="run scenarios (trainings off and on, then checks) into a results dir")
    p.add_argument("paths", nargs="+")
    p.add_argument("--results", default="results")
    shared.add(
        p.add_argument,
        (
            shared.EXECUTOR, shared.RAY_ADDRESS, shared.REUSE, *shared.TARGET, shared.STACK, *shared.WATCH,
            shared.TIMING, shared.HEAVY,
        ),
    )  # fmt: skip
    p.set_defaults(func=cmd_run)

"""Command line: ``python -m harness {validate,run,dry-run,image,schema} ...``.

Exit codes: 0 all good; 1 a check failed; 2 invalid input or an infrastructure error; 128+N on signal N
(SIGINT, SIGTERM, SIGHUP: the running training is stopped first).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, TaskID, TextColumn
from rich.progress import Progress as Bars
from rich.table import Table

from harness.checks import CHECKS, CheckContext, CheckResult
from harness.checks.known_gap import check_gap, is_gap
from harness.cli_gate import add_gate_commands
from harness.devices import skip_reason
from harness.errors import HarnessError, ScenarioError, one_line
from harness.loader import load_scenario, scenario_files
from harness.monitor import MAX_DUMP_ENV, MIN_FREE_ENV, PeriodicLines, Progress, Show, Watch
from harness.registry import EXECUTORS
from harness.results import record_check
from harness.runs import ensure_runs
from harness.scenario import ExecutorSettings, Scenario
from harness.signals import describe, interrupts

console = Console(highlight=False)


def _load_all(paths: list[str]) -> tuple[list[Scenario], list[str]]:
    scenarios, problems = [], []
    files = scenario_files(paths)
    if not files:
        problems.append(f"no scenario files found in {' '.join(paths)}")
    for f in files:
        try:
            scenarios.append(load_scenario(f))
        except ScenarioError as exc:
            problems += exc.problems
    return scenarios, problems


def cmd_validate(args: argparse.Namespace) -> int:
    scenarios, problems = _load_all(args.paths)
    for line in problems:
        print(line, file=sys.stderr)
    for s in scenarios:
        print(f"ok  {s.name}")
    return 2 if problems else 0


def cmd_schema(args: argparse.Namespace) -> int:
    text = json.dumps(Scenario.model_json_schema(by_alias=True), indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def evaluate(
    scenario: Scenario, results: Path, session: str, executor: str | None, reuse: bool, watch: Watch | None = None
) -> tuple[float, list[CheckResult]]:
    """The same runs and checks as the pytest items, outside pytest; returns the training time too."""
    runs = ensure_runs(scenario, results, session, executor, reuse=reuse, watch=watch)
    ctx = CheckContext(scenario, runs.dir)
    out = []
    for check in CHECKS.values():
        out.append(result := check(ctx))
        record_check(scenario, runs, result)
    for gap in scenario.expect.known_gaps:
        out.append(result := check_gap(ctx, gap))
        record_check(scenario, runs, result, xfail_reason=gap.reason)
    return runs.trained_s, out


class LiveBars:
    """The live line in a terminal: a bar per running training, left behind as its last line when it ends."""

    def __init__(self, console: Console) -> None:
        self.bars = Bars(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[detail]}"),
            console=console,
            transient=True,
        )
        self.tasks: dict[tuple[str, str], TaskID] = {}

    def __call__(self, p: Progress) -> None:
        key = (p.scenario, p.mode)
        if key not in self.tasks:
            if not self.tasks:
                self.bars.start()
            self.tasks[key] = self.bars.add_task(escape(p.label), total=p.steps, detail="")
        self.bars.update(self.tasks[key], completed=p.done, detail=escape(p.detail()))
        if p.outcome:
            self.bars.remove_task(self.tasks.pop(key))
            self.bars.console.print(escape(p.line()), soft_wrap=True, highlight=False)
            if not self.tasks:
                self.bars.stop()


def live_line(every_s: float) -> Show:
    """Bars in a terminal; plain lines every ``every_s`` elsewhere (a CI log)."""
    if console.is_terminal:
        return LiveBars(console)
    return PeriodicLines(lambda line: console.print(escape(line), soft_wrap=True), every_s)


def sweep() -> None:
    """Remove what dead harnesses left (containers of a SIGKILLed harness), one line each."""
    for executor in EXECUTORS.values():
        for line in executor.sweep():
            console.print(f"harness: {escape(line)}", soft_wrap=True)


def cmd_run(args: argparse.Namespace) -> int:
    scenarios, problems = _load_all(args.paths)
    if problems:
        for line in problems:
            print(line, file=sys.stderr)
        return 2
    try:
        watch = Watch.configure(args.max_dump, args.min_free, show=live_line(args.progress_every))
    except ValueError as exc:
        print(f"harness run: {exc}", file=sys.stderr)
        return 2
    sweep()
    session, results, status = uuid.uuid4().hex, Path(args.results).resolve(), 0
    started, trained = time.monotonic(), 0.0
    table = Table("scenario", "check", "verdict", "key figures", title=f"results in {results}")
    for s in scenarios:
        if reason := skip_reason(s):
            console.print(f"[yellow]SKIPPED[/] {escape(reason)}", soft_wrap=True)  # one line, as pytest shows it
            table.add_row(s.name, "-", "[yellow]skipped[/]", "")
            continue
        console.print(
            f"[bold]{s.name}[/]: training off and on ({s.executor.kind if not args.executor else args.executor})"
        )
        try:
            seconds, checks = evaluate(s, results, session, args.executor, args.reuse, watch)
            trained += seconds
        except HarnessError as exc:
            console.print(f"[red]{exc.label}[/] {escape(str(exc))}")
            table.add_row(s.name, "-", "[red]ERROR[/]", "")
            status = 2
            continue
        for r in checks:
            gap = is_gap(r.check)
            if gap:
                verdict = "[red]XPASS: the gap is fixed, remove it[/]" if r.passed else "[yellow]xfail (known gap)[/]"
            else:
                verdict = "[green]pass[/]" if r.passed else "[red]FAIL[/]"
            if r.passed == gap:
                status = max(status, 1)
            table.add_row(s.name, r.check, verdict, r.summary)
            for p in r.problems:
                console.print(f"  {'[yellow]~' if gap else '[red]-'}[/] {r.check}: {escape(p)}", soft_wrap=True)
    console.print(table)
    wall = time.monotonic() - started
    console.print(
        f"wall {wall:.1f}s; inside training processes {trained:.1f}s; "
        f"harness overhead {wall - trained:.1f}s ({100 * (wall - trained) / max(wall, 1e-9):.0f}%)"
    )
    return status


def cmd_dry_run(args: argparse.Namespace) -> int:
    from harness.dry_run import dry_run

    return dry_run(args.paths, Path(args.results).resolve())


def cmd_image_build_cpu(args: argparse.Namespace) -> int:
    from harness.executors.docker_image import cmd_build_cpu  # imports the docker SDK only when used

    return cmd_build_cpu(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="schema-check scenario files (one line per problem)")
    p.add_argument("paths", nargs="+")
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("run", help="run scenarios (trainings off and on, then checks) into a results dir")
    p.add_argument("paths", nargs="+")
    p.add_argument("--results", default="results")
    p.add_argument("--executor", choices=list(EXECUTORS))
    p.add_argument("--reuse", action="store_true", help="reuse earlier successful trainings of unchanged scenarios")
    p.add_argument(
        "--max-dump",
        metavar="SIZE",
        help=f"stop any run whose dumps grow past SIZE, whatever its budgets (default: ${MAX_DUMP_ENV}, else none)",
    )
    p.add_argument(
        "--min-free",
        metavar="SIZE",
        help=f"stop a run when the results filesystem has less free (default: ${MIN_FREE_ENV}, else 1GB)",
    )
    p.add_argument(
        "--progress-every", type=float, default=15.0, metavar="S", help="seconds between live lines in a log"
    )
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("dry-run", help="print what each training would run (image, devices, mounts, env, argv)")
    p.add_argument("paths", nargs="+")
    p.add_argument("--results", default="results", help="the results dir the real run would use (nothing written)")
    p.set_defaults(func=cmd_dry_run)
    p = sub.add_parser("image", help="make container images for the docker executor")
    isub = p.add_subparsers(dest="image_command", required=True)
    p = isub.add_parser("build-cpu", help="import a bare rootfs image that runs this venv (no registry; CI uses it)")
    p.add_argument("--tag", default=ExecutorSettings().options("docker").image)
    p.add_argument("--check", action="store_true", help="then import torch, msprobe, verl and harness inside it")
    p.set_defaults(func=cmd_image_build_cpu)
    p = sub.add_parser("schema", help="print (or write) the scenario format's JSON Schema")
    p.add_argument("-o", "--output")
    p.set_defaults(func=cmd_schema)
    add_gate_commands(sub)  # baseline merge, calibrate, gate, report, junit-merge
    args = parser.parse_args(argv)
    try:
        with interrupts():
            return args.func(args)
    except HarnessError as exc:  # every bad input and failed run: one line, exit 2
        print(one_line(exc), file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # SIGINT, SIGTERM, SIGHUP: what was stopped, exit 128+N
        line, code = describe(exc)
        print(line, file=sys.stderr)
        return code

"""Command line: ``python -m harness {validate,run,dry-run,target,image,schema} ...``.

Exit codes: 0 all good; 1 a check failed (or, for gate and compare, a regression); 2 invalid input or an
infrastructure error; 3 INCONCLUSIVE: nothing failed, but the noise left a figure undecided (its line says how
wide the noise was and how many more repeats would decide it); 128+N on signal N (SIGINT, SIGTERM, SIGHUP: the
running training is stopped first).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import uuid
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, TaskID, TextColumn
from rich.progress import Progress as Bars
from rich.table import Table

from harness import outcomes
from harness.artifacts.figures import FAMILIES
from harness.cli.bisect import add_bisect_command
from harness.cli.gate import add_gate_commands
from harness.cli.numerics import add_numerics_command
from harness.errors import HarnessError, ScenarioError, one_line, unexpected
from harness.pipeline import options as shared
from harness.pipeline.base_head import run_comparison, write_reports
from harness.pipeline.evaluate import evaluate
from harness.safeio import output_path, write_atomic
from harness.scenario.loader import load_scenario, scenario_files
from harness.scenario.model import ExecutorSettings, Scenario
from harness.signals import describe, interrupts
from harness.targets.environment import ensure_env
from harness.targets.spec import SERIES_HELP, TARGET_HELP, parse_target
from harness.training.devices import skip_reason
from harness.training.monitor import PeriodicLines, Progress, Show, Watch
from harness.training.registry import EXECUTORS
from harness.training.runs import results_dir

console = Console(highlight=False)


def _load_all(paths: list[str], executor: str | None = None) -> tuple[list[Scenario], list[str]]:
    """Every scenario file (``executor``: checked as that executor runs it); two of one name are a problem: their
    results would land in one directory, the second's replacing the first's."""
    scenarios, problems = [], []
    files = scenario_files(paths)
    if not files:
        problems.append(f"no scenario files found in {' '.join(paths)}")
    seen: dict[str, Path] = {}
    for f in files:
        if (first := seen.setdefault(f.stem, f)) is not f:  # the same file named twice runs once
            if first.resolve() != f.resolve():
                problems.append(f"{f}: scenario name {f.stem!r} is also {first}'s: one results dir each (rename one)")
            continue
        try:
            scenarios.append(load_scenario(f, executor))
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
        write_atomic(output_path(args.output, "-o"), text)
    else:
        sys.stdout.write(text)
    return 0


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
    scenarios, problems = _load_all(args.paths, args.executor)
    if problems:
        for line in problems:
            print(line, file=sys.stderr)
        return 2
    try:
        watch = Watch.configure(args.max_dump, args.min_free, show=live_line(args.progress_every))
    except ValueError as exc:
        print(f"harness run: {exc}", file=sys.stderr)
        return 2
    session, results, status = uuid.uuid4().hex, results_dir(args.results), 0
    sweep()
    started, trained = time.monotonic(), 0.0
    gate_timing = shared.gates_timing(args.timing)
    env = ensure_env(parse_target(args.verl, args.msprobe, args.series))  # once, for every scenario
    console.print(f"target: {escape(env.label())}", soft_wrap=True)
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
            seconds, checks = evaluate(s, results, session, args.executor, args.reuse, env, watch, gate_timing)
            trained += seconds
        except HarnessError as exc:
            console.print(f"[red]{escape(one_line(exc))}[/]", soft_wrap=True)
            table.add_row(s.name, "-", "[red]ERROR[/]", "")
            status = outcomes.worse(status, outcomes.EXIT_ERROR)
            continue
        for r in checks:
            outcome = outcomes.check_outcome(r, expected_failure=bool(r.xfail_reason))
            status = outcomes.worse(status, outcomes.check_exit(outcome))
            verdict = f"[{_COLOURS[outcome]}]{escape(outcomes.WORDS[outcome])}[/]"
            table.add_row(s.name, r.check, verdict, r.not_checked or r.summary)
            mark = "[yellow]~" if r.xfail_reason else "[red]-"
            for p in r.problems:
                console.print(f"  {mark}[/] {r.check}: {escape(p)}", soft_wrap=True)
            for p in r.inconclusive:
                console.print(f"  [magenta]?[/] {r.check}: {escape(p)}", soft_wrap=True)
            if outcome in ("xfail", "xpass"):
                line = f"{outcomes.WORDS[outcome]}: {r.xfail_reason}"
                console.print(f"  [yellow]~[/] {r.check}: {escape(line)}", soft_wrap=True)
    console.print(table)
    wall = time.monotonic() - started
    console.print(
        f"wall {wall:.1f}s; inside training processes {trained:.1f}s; "
        f"harness overhead {wall - trained:.1f}s ({100 * (wall - trained) / max(wall, 1e-9):.0f}%)"
    )
    return status


_COLOURS = {
    "pass": "green",
    "fail": "red",
    "inconclusive": "magenta",
    "not checked": "yellow",
    "xfail": "yellow",
    "xpass": "red",
}


def _families(text: str) -> tuple[str, ...]:
    if bad := [f for f in text.split(",") if f not in FAMILIES]:
        raise argparse.ArgumentTypeError(f"unknown figure families {bad}; expected some of {', '.join(FAMILIES)}")
    return tuple(text.split(","))


def _watch(show: Show) -> Watch:
    try:
        return Watch.configure(show=show)
    except ValueError as exc:
        raise HarnessError(str(exc)) from None


def cmd_compare(args: argparse.Namespace) -> int:
    """Base against head on this machine: 0 pass, 1 a regression, 2 an error, 3 inconclusive (as ``gate``)."""
    scenarios, problems = _load_all(args.paths, args.executor)
    if problems:
        raise ScenarioError(problems)
    base = parse_target(args.base, args.msprobe, args.series, "--base")
    head = parse_target(args.head, args.msprobe, args.series, "--head")
    runnable, skipped = [], []
    for s in scenarios:
        if reason := skip_reason(s):
            console.print(f"[yellow]SKIPPED[/] {escape(reason)}", soft_wrap=True)
            skipped.append(reason)
        else:
            runnable.append(s)
    results = results_dir(args.results)
    started = time.monotonic()
    sweep()
    comparison, observed = run_comparison(
        runnable,
        base,
        head,
        results,
        args.repeats,
        args.executor,
        say=lambda m: console.print(escape(m), soft_wrap=True),
        judge=args.judge,
        watch=_watch(live_line(15.0)),
        max_repeats=args.max_repeats,
        skipped=skipped,
    )
    for line in comparison.lines():
        print(line)
    reports = write_reports(comparison, observed, results / "report")
    print(f"compare.json, compare.txt in {results}; report: {', '.join(str(p) for p in reports)}")
    print(f"wall {time.monotonic() - started:.1f}s")
    return comparison.exit_code


def cmd_dry_run(args: argparse.Namespace) -> int:
    from harness.cli.dry_run import dry_run

    env = ensure_env(parse_target(args.verl, args.msprobe, args.series))
    print(f"target: {env.label()}\n")
    return dry_run(args.paths, Path(args.results).resolve(), env, args.executor)


def cmd_target(args: argparse.Namespace) -> int:
    """Make (or reuse) the target's environment and say what it holds: CI runs it once before the scenarios."""
    env = ensure_env(parse_target(args.verl, args.msprobe, args.series))
    print(f"target: {env.target.describe()}")
    print(f"python: {env.python or sys.executable}")
    how = "project venv (no environment of its own)" if env.root is None else f"{env.root}"
    print(f"environment: {how}; {'reused' if env.reused else 'made'} in {env.setup_s:.2f}s")
    if args.json:
        print(json.dumps(env.target.block(), indent=1))
    return 0


def cmd_image_build_cpu(args: argparse.Namespace) -> int:
    from harness.training.executors.docker_image import cmd_build_cpu  # imports the docker SDK only when used

    return cmd_build_cpu(args)


def cmd_image_ascend_context(args: argparse.Namespace) -> int:
    from harness.training.executors.ascend_image import cmd_ascend_context

    return cmd_ascend_context(args)


def _key_value(text: str) -> str:
    if "=" not in text or not text.split("=", 1)[0]:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return text


def _unprintable(arg: str) -> str:
    """Why an argument is refused before anything reads it: a byte that is not UTF-8 (Python keeps it as a lone
    surrogate) ends a report or a print in a traceback; a line break or another control character, printed in a
    verdict line, could forge one (``--series $'main\\nREGRESSED'``)."""
    try:
        arg.encode()
    except UnicodeEncodeError:
        return f"{os.fsencode(arg)!r} is not UTF-8 (a path with such a byte: rename it)"
    return f"{arg!r} holds a line break or another control character"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="schema-check scenario files (one line per problem)")
    p.add_argument("paths", nargs="+")
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("run", help="run scenarios (trainings off and on, then checks) into a results dir")
    p.add_argument("paths", nargs="+")
    p.add_argument("--results", default="results")
    shared.add(p.add_argument, (shared.EXECUTOR, shared.REUSE, *shared.TARGET, *shared.WATCH, shared.TIMING))
    p.set_defaults(func=cmd_run)
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
    shared.add(p.add_argument, (shared.REPEATS, shared.MAX_REPEATS, shared.EXECUTOR))
    p.add_argument(
        "--judge",
        type=_families,
        default=FAMILIES,
        metavar="FAMILY[,FAMILY]",
        help=f"figure families decided ({','.join(FAMILIES)}; default all); others are reported. Checks and dump "
        "entry names are always decided",
    )
    p.set_defaults(func=cmd_compare)
    p = sub.add_parser("dry-run", help="print what each training would run (image, devices, mounts, env, argv)")
    p.add_argument("paths", nargs="+")
    p.add_argument("--results", default="results", help="the results dir the real run would use (nothing written)")
    p.add_argument("--executor", choices=list(EXECUTORS), help="as run's: describe the runs under this executor")
    shared.add(p.add_argument, shared.TARGET)
    p.set_defaults(func=cmd_dry_run)
    p = sub.add_parser("target", help="make (or reuse) the environment of a verl/msprobe under test and describe it")
    shared.add(p.add_argument, shared.TARGET)
    p.add_argument("--json", action="store_true", help="also print the target block results.json records")
    p.set_defaults(func=cmd_target)
    p = sub.add_parser("image", help="make container images for the docker executor")
    isub = p.add_subparsers(dest="image_command", required=True)
    p = isub.add_parser("build-cpu", help="import a bare rootfs image that runs this venv (no registry; CI uses it)")
    p.add_argument("--tag", default=ExecutorSettings().options("docker").image)
    p.add_argument("--check", action="store_true", help="then import torch, msprobe, verl and harness inside it")
    p.set_defaults(func=cmd_image_build_cpu)
    p = isub.add_parser("ascend-context", help="the Ascend image's build context for a verl under test, and its build")
    shared.add(p.add_argument, shared.TARGET)
    p.add_argument("--out", required=True, help="an empty dir for the build context")
    p.add_argument("--tag", default="verl-msprobe-harness:ascend-target")
    p.add_argument("--build", action="store_true", help="then run docker build (Ascend runners)")
    p.add_argument("--base-tag", help="the base image's tag to build on (default: Dockerfile.ascend's)")
    p.add_argument(
        "--build-arg",
        action="append",
        default=[],
        type=_key_value,
        metavar="KEY=VALUE",
        help="one more Dockerfile.ascend ARG (VERL_ASCEND_IMAGE, PIP_INDEX_URL, PIP_TRUSTED_HOST, VERL_NO_DEPS_EXTRAS)",
    )
    p.set_defaults(func=cmd_image_ascend_context)
    p = sub.add_parser("schema", help="print (or write) the scenario format's JSON Schema")
    p.add_argument("-o", "--output")
    p.set_defaults(func=cmd_schema)
    add_gate_commands(sub)  # baseline merge, calibrate, gate, report, junit-merge
    add_numerics_command(sub)  # numerics BASE HEAD: two runs' dumps
    add_bisect_command(sub)
    argv = sys.argv[1:] if argv is None else argv
    if bad := next((a for a in argv if not a.isprintable()), None):
        print(f"{parser.prog}: argument {_unprintable(bad)}", file=sys.stderr)
        return 2
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
    except Exception as exc:  # a harness bug: one line, exit 2 (never 1: a verdict on verl), the traceback kept
        print(unexpected(exc) + _keep_traceback(args), file=sys.stderr)
        return outcomes.EXIT_ERROR


def _keep_traceback(args: argparse.Namespace) -> str:
    """The whole traceback of a harness bug, for its report: in the command's results dir when it has one (where
    everything a run writes stays), else nowhere (the line names the innermost frame)."""
    results = getattr(args, "results", None)
    if not results:
        return ""
    path = Path(results) / "harness-error.txt"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, traceback.format_exc())
    except (OSError, HarnessError):
        return ""
    return f"; traceback in {path}"

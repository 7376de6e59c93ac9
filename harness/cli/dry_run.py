"""``python -m harness dry-run SCENARIOS``: print exactly what each training would run, start nothing.

For the operator who checks a runner's scenarios by eye before the first night: image, devices, mounts,
environment, argv and msprobe config, for the off and the on run, as the executor would hand them to
Docker (``container_spec``) or to a local process. The runs are prepared in a temporary directory (the only
thing written) and its path is shown as the results path the real run would use.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path

from harness.artifacts.rundir import MODES, ScenarioDir
from harness.errors import HarnessError, ScenarioError
from harness.pipeline import options as shared
from harness.scenario import settings
from harness.scenario.loader import ScenarioList, scenario_files
from harness.scenario.model import Scenario
from harness.targets.environment import TargetEnv, ensure_env
from harness.targets.spec import parse_target
from harness.training.devices import device_problem
from harness.training.registry import EXECUTORS, WORKLOADS
from harness.training.runs import LABEL_PREFIX


def describe(
    scenario: Scenario, path: Path, results: Path, env: TargetEnv | None = None, executor: str | None = None
) -> list[str]:
    """The dry-run text of one scenario with the target's environment ``env`` (None: the pinned releases) under
    ``executor`` (None: the scenario's; ``local`` is the job-container mode); raises WorkloadError when its runs
    cannot be prepared."""
    python = env.python if env else None
    if executor:  # as runs.ensure_runs: the kind changes, the options blocks stay
        scenario = scenario.model_copy(update={"executor": scenario.executor.model_copy(update={"kind": executor})})
    ex = scenario.executor
    lines = [
        f"=== {scenario.name} ({path})",
        f"device {scenario.device}, engine {scenario.engine}, world_size {scenario.world_size}, "
        f"{scenario.steps} steps, profiled {scenario.precision_debugger.steps}, executor {ex.kind}",
    ]
    if why := device_problem(scenario):
        lines.append(f"on this host: skipped ({why})")
    workload, at = WORKLOADS[scenario.workload.kind], len(lines)
    with tempfile.TemporaryDirectory(prefix="harness-dry-run-") as tmp:
        sdir = ScenarioDir(Path(tmp) / scenario.name)
        for mode in MODES:
            run = sdir.run(mode)
            launch = workload.prepare(scenario, run, enabled=mode == "on", dry=True, python=python)
            if env is not None:  # the verl the runs would test (the rayjob executor's payload and bundle name it)
                launch = replace(launch, verl=env.target.verl)
            labels = {
                f"{LABEL_PREFIX}.session": "<session>",
                f"{LABEL_PREFIX}.scenario": scenario.name,
                f"{LABEL_PREFIX}.run": mode,
            }
            lines.append(f"--- {mode} run (precision_debugger {'enabled' if mode == 'on' else 'disabled'})")
            lines += EXECUTORS[ex.kind].describe(launch, run, ex, labels)
            if mode == "on" and run.msprobe_config.is_file():
                lines.append(f"msprobe config ({run.msprobe_config}):")
                lines += [
                    f"  {ln}" for ln in json.dumps(json.loads(run.msprobe_config.read_text()), indent=2).splitlines()
                ]
        lines[at:at] = workload.describe(scenario, sdir.run("on"), python)
        real = str(results / scenario.name)
        return [ln.replace(str(sdir.root), real) for ln in lines]


def cmd_dry_run(args: argparse.Namespace) -> int:
    env = ensure_env(parse_target(args.verl, args.msprobe, args.series, stack=args.stack))
    print(f"target: {env.label()}\n")
    return dry_run(args.paths, Path(args.results).resolve(), env, args.executor)


def dry_run(args: list[str], results: Path, env: TargetEnv | None = None, executor: str | None = None) -> int:
    """Print every scenario's dry run; 2 when a file is invalid or a run cannot be prepared, else 0. ScenarioError
    when no file is named or found."""
    status, loaded = 0, ScenarioList()  # each file as it is: ``executor`` is described, not checked
    for path in scenario_files(args):
        try:
            if (scenario := loaded.load(path)) is None:
                continue
            print("\n".join(describe(scenario, path, results, env, executor)))
        except ScenarioError as exc:
            print(f"=== {path}\nINVALID SCENARIO:\n{exc}")
            status = 2
        except HarnessError as exc:
            print(f"=== {path}\nCANNOT PREPARE: {exc}")
            status = 2
        print()
    return status


def declare(sub: argparse._SubParsersAction) -> None:
    """``dry-run``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser("dry-run", help="print what each training would run (image, devices, mounts, env, argv)")
    p.add_argument("paths", nargs="+")
    p.add_argument("--results", default="results", help="the results dir the real run would use (nothing written)")
    p.add_argument(
        "--executor", choices=list(settings.EXECUTORS), help="as run's: describe the runs under this executor"
    )
    shared.add(p.add_argument, (shared.RAY_ADDRESS,))
    shared.add(p.add_argument, (*shared.TARGET, shared.STACK))
    p.set_defaults(func=cmd_dry_run)

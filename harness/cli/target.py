"""``python -m harness target``: make (or reuse) the environment of a verl / msprobe under test and describe it; CI
runs it once before the scenarios. ``--stages``: which stages that verl annotates and what its precision_debugger
does with each (read from its source, no environment made where it has one); ``--trigger``: the pull-request
gate's trigger that census implies (docs/verl-caller-example.yml's ``changes`` job); ``--pins``: what that verl's own
uv.lock pins (harness.targets.stack), and what the package index gives of it, read without installing anything.
``--stack verl``: the environment is made on that lock, and what it was installed from is said."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from harness.pipeline import options as shared
from harness.targets.census import census_of, trigger_of
from harness.targets.environment import ensure_env, source_tree, uv_bin
from harness.targets.spec import Target, cache_dir, parse_target
from harness.targets.stack import locked_stack


def pin_lines(target: Target) -> list[str]:
    """What the target's own uv.lock pins, or that it has none (a release, a wheel, a verl before #7127)."""
    pkg = target.verl
    if pkg.kind not in ("checkout", "git"):
        return [f"stack: {pkg.identity} is a {pkg.kind}, no uv.lock: the harness's lock (.ci/cpu.lock)"]
    (cache_dir() / "tmp").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir() / "tmp") as tmp:
        tree = Path(source_tree(pkg, Path(tmp)))
        stack = locked_stack(tree, uv_bin())
    if stack is None:
        return [f"stack: {pkg.identity} has no uv.lock: the harness's lock (.ci/cpu.lock)"]
    return stack.lines()


def cmd_target(args: argparse.Namespace) -> int:
    target = parse_target(args.verl, args.msprobe, args.series, stack=args.stack)
    if args.pins:
        print("\n".join(pin_lines(target)))
    if args.stages or args.trigger:
        found = census_of(target)
        if args.stages:
            print("\n".join(found.lines()))
        if args.trigger:
            trigger = trigger_of(found)
            print(f"trigger paths: {trigger.path_regex()}")
            print(f"trigger lines: {trigger.lines}")
    if args.stages or args.trigger or args.pins:
        return 0
    env = ensure_env(target)
    print(f"target: {env.target.describe()}")
    print(f"python: {env.python or sys.executable}")
    how = "project venv (no environment of its own)" if env.root is None else f"{env.root}"
    print(f"environment: {how}; {'reused' if env.reused else 'made'} in {env.setup_s:.2f}s")
    print("\n".join(env.stack.lines()))
    if args.json:
        print(json.dumps(env.target.block(), indent=1))
    return 0


def declare(sub: argparse._SubParsersAction) -> None:
    """``target``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser("target", help="make (or reuse) the environment of a verl/msprobe under test and describe it")
    shared.add(p.add_argument, (*shared.TARGET, shared.STACK))
    p.add_argument("--json", action="store_true", help="also print the target block results.json records")
    p.add_argument(
        "--stages",
        action="store_true",
        help="list every DistProfiler.annotate role of that verl (file:line) and what its precision_debugger does "
        "with each (read by ast, not imported; no environment made for a checkout, a repository or a wheel)",
    )
    p.add_argument(
        "--trigger", action="store_true", help="the pull-request gate's trigger (paths, changed lines) it implies"
    )
    p.add_argument(
        "--pins",
        action="store_true",
        help="what that verl's own uv.lock pins (its cpu extra) and where each pin comes from; without the lock's "
        "own sources, what the package index gives instead (read, nothing installed)",
    )
    p.set_defaults(func=cmd_target)

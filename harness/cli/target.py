"""``python -m harness target``: make (or reuse) the environment of a verl / msprobe under test and describe it; CI
runs it once before the scenarios. ``--stages``: which stages that verl annotates and what its precision_debugger
does with each (read from its source, no environment made where it has one); ``--trigger``: the pull-request
gate's trigger that census implies (docs/verl-caller-example.yml's ``changes`` job)."""

from __future__ import annotations

import argparse
import json
import sys

from harness.targets.census import census_of, trigger_of
from harness.targets.environment import ensure_env
from harness.targets.spec import parse_target


def cmd_target(args: argparse.Namespace) -> int:
    target = parse_target(args.verl, args.msprobe, args.series)
    if args.stages or args.trigger:
        found = census_of(target)
        if args.stages:
            print("\n".join(found.lines()))
        if args.trigger:
            trigger = trigger_of(found)
            print(f"trigger paths: {trigger.path_regex()}")
            print(f"trigger lines: {trigger.lines}")
        return 0
    env = ensure_env(target)
    print(f"target: {env.target.describe()}")
    print(f"python: {env.python or sys.executable}")
    how = "project venv (no environment of its own)" if env.root is None else f"{env.root}"
    print(f"environment: {how}; {'reused' if env.reused else 'made'} in {env.setup_s:.2f}s")
    if args.json:
        print(json.dumps(env.target.block(), indent=1))
    return 0

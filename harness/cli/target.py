"""``python -m harness target``: make (or reuse) the environment of a verl / msprobe under test and describe it; CI
runs it once before the scenarios."""

from __future__ import annotations

import argparse
import json
import sys

from harness.targets.environment import ensure_env
from harness.targets.spec import parse_target


def cmd_target(args: argparse.Namespace) -> int:
    env = ensure_env(parse_target(args.verl, args.msprobe, args.series))
    print(f"target: {env.target.describe()}")
    print(f"python: {env.python or sys.executable}")
    how = "project venv (no environment of its own)" if env.root is None else f"{env.root}"
    print(f"environment: {how}; {'reused' if env.reused else 'made'} in {env.setup_s:.2f}s")
    if args.json:
        print(json.dumps(env.target.block(), indent=1))
    return 0

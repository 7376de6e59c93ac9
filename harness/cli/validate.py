"""``python -m harness validate SCENARIO...``: the schema check, one line per problem
(``file:line: field: problem``)."""

from __future__ import annotations

import argparse
import sys

from harness.scenario.loader import load_scenarios


def cmd_validate(args: argparse.Namespace) -> int:
    scenarios, problems = load_scenarios(args.paths)
    for line in problems:
        print(line, file=sys.stderr)
    for s in scenarios:
        print(f"ok  {s.name}")
    return 2 if problems else 0


def declare(sub: argparse._SubParsersAction) -> None:
    """``validate``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser("validate", help="schema-check scenario files (one line per problem)")
    p.add_argument("paths", nargs="+")
    p.set_defaults(func=cmd_validate)

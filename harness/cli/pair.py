"""``python -m harness pair --base SPEC --head SPEC``: the pair a pull-request gate compares (harness.targets.pair):
``base=SHA`` and ``head=SHA`` on stdout (a step's outputs, as a workflow reads them), the line saying why on stderr;
a head that is not a descendant of the base, or refs of two repositories, one line, exit 2."""

from __future__ import annotations

import argparse
import sys

from harness import outcomes
from harness.targets.pair import merge_base
from harness.targets.spec import parse_target


def cmd_pair(args: argparse.Namespace) -> int:
    base = parse_target(args.base, verl_option="--base").verl
    head = parse_target(args.head, verl_option="--head").verl
    branch_point, line = merge_base(base, head)
    print(f"base={branch_point.commit}\nhead={head.commit}")
    print(f"the pair: {line}", file=sys.stderr)
    return outcomes.EXIT_PASS


def declare(sub: argparse._SubParsersAction) -> None:
    """``pair``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser("pair", help="the pair a pull-request gate compares: head and its merge base with --base")
    p.add_argument("--base", required=True, metavar="SPEC", help="<repository>@<ref>: the base branch's commit")
    p.add_argument("--head", required=True, metavar="SPEC", help="<repository>@<ref> of the same repository")
    p.set_defaults(func=cmd_pair)

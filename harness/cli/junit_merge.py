"""``python -m harness junit-merge OUT IN...``: JUnit files merged, each testcase once, with its properties."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.errors import HarnessError
from harness.safeio import output_path


def cmd_junit_merge(args: argparse.Namespace) -> int:
    from harness.report.junit import merge_junit

    inputs = [Path(p) for p in args.inputs]
    if missing := [str(p) for p in inputs if not p.is_file()]:
        raise HarnessError(f"no such JUnit file: {', '.join(missing)}")
    written, folded = merge_junit(inputs, output_path(args.output, "OUT", inputs))
    print(f"wrote {args.output}: {written} testcases from {len(inputs)} file(s), {folded} duplicates folded")
    return 0


def declare(sub: argparse._SubParsersAction) -> None:
    """``junit-merge``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser("junit-merge", help="merge JUnit files: each testcase once, with its properties")
    p.add_argument("output", metavar="OUT")
    p.add_argument("inputs", nargs="+", metavar="IN")
    p.set_defaults(func=cmd_junit_merge)

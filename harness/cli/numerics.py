"""``python -m harness numerics BASE HEAD``: the numerics report of base against head for two runs' dumps.

For engineers who already have two runs' dumps: two "on" dump trees (``<results>/<scenario>/on/dumps``, the
``step_N/<stage>/step0/rank*`` dirs) or two dump.json files. Prints what ``harness compare`` prints for numerics
(its REGRESSED / MISSING findings and its notes), the CSVs in msprobe's layout under ``--results``. Exit codes as
everywhere (``harness.outcomes``): 0 every row passes, 1 rows beyond msprobe's thresholds or a stage missing on
head, 2 an error or nothing compared.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

from harness import outcomes
from harness.errors import InfraError
from harness.gate.numerics.compare import ENGINES, compare_numerics
from harness.training.runs import results_dir


def cmd_numerics(args: argparse.Namespace) -> int:
    base, head = (Path(p).resolve() for p in (args.base, args.head))
    for side, path in (("BASE", base), ("HEAD", head)):
        if not (path.is_dir() or path.is_file()):
            raise InfraError(f"{side} {path}: no such dump tree or dump.json")
    if base.is_file() != head.is_file():
        raise InfraError(f"{base} and {head}: give two dump trees or two dump.json files, not one of each")
    results = Path(args.results).resolve()
    ours = (results / "head_vs_base", results / "msprobe")  # what a rerun clears
    for path in (base, head):
        if results.is_relative_to(path if path.is_dir() else path.parent) or any(path.is_relative_to(o) for o in ours):
            raise InfraError(
                f"--results {results}: overlaps the input {path}; name a dir apart (outputs never overwrite inputs)"
            )
    results = results_dir(args.results)
    report = compare_numerics([base], head, results, args.nonfinite_ok, python=args.python, engine=args.engine)
    for line in report.findings(args.label) + report.notes():
        print(line)
    stages = report.head_vs_base.stages
    print(f"CSVs in {results / 'head_vs_base'}")
    if nothing := report.nothing_compared():  # no entry, or none in common: never "all pass"
        print(nothing)
        return outcomes.EXIT_ERROR
    if any(s.status == "error" for s in stages):
        return outcomes.EXIT_ERROR
    return outcomes.EXIT_FAIL if report.findings(args.label) else outcomes.EXIT_PASS


def declare(sub: argparse._SubParsersAction) -> None:
    """``numerics``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser("numerics", help="the numerics report of two runs' dumps: HEAD against BASE")
    p.add_argument("base", help="base's on-dump tree (<results>/<scenario>/on/dumps) or a dump.json")
    p.add_argument("head", help="head's, the same kind")
    p.add_argument("--results", default="numerics-results", help="where the CSVs go (default ./numerics-results)")
    p.add_argument("--nonfinite-ok", action="append", default=[], metavar="REGEX", type=_regex,
                   help="entries whose non-pass rows are counted apart (a scenario's expect.nonfinite_ok)")  # fmt: skip
    p.add_argument(
        "--engine", choices=ENGINES, help="who computes the statistics (default HARNESS_NUMERICS, else harness)"
    )
    p.add_argument("--python", default=sys.executable, type=_executable,
                   help="the python with msprobe, for -da and --engine msprobe")  # fmt: skip
    p.add_argument("--label", default="numerics", help="the name the findings carry (a scenario's)")
    p.set_defaults(func=cmd_numerics)


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression ({exc})") from None
    return text


def _executable(text: str) -> str:
    """A program to run: a path or a name on PATH that is an executable file (it was only started where a stage
    diverged: a traceback there, a pass where none did)."""
    if (found := shutil.which(text)) is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an executable file (a path, or a name on PATH)")
    return found

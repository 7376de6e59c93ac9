"""``python -m harness report``: the markdown summary, a PNG per scenario and verl's doc tables of results dirs, with
what ``gate --json`` decided (the report never judges again)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.gate.files import GateDoc
from harness.safeio import output_path


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report.build import build_report  # matplotlib only for this command

    inputs = [*args.results, *(args.gate or [])]
    out = output_path(args.out, "--out", inputs, directory=True)
    gates = [GateDoc.read(Path(g)) for g in args.gate or []]
    rep = build_report([Path(r) for r in args.results], out, gates)
    print(f"summary: {rep.summary}\ntables:  {rep.tables}")
    for p in rep.pngs:
        print(f"plot:    {p}")
    return 0


def declare(sub: argparse._SubParsersAction) -> None:
    """``report``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser("report", help="markdown summary, PNG per scenario and verl's doc tables")
    p.add_argument("results", nargs="+", metavar="RESULTS_DIR")
    p.add_argument(
        "--gate",
        action="append",
        metavar="GATE_JSON",
        help="what `gate --json` decided for these results dirs (repeatable: one per gate run); the report never "
        "judges again",
    )
    p.add_argument("--out", default="report")
    p.set_defaults(func=cmd_report)

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

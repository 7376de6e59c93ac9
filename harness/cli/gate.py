"""``python -m harness gate``: results against a baseline. Exit codes as everywhere in the harness
(``harness.outcomes``): 0 good; 1 a regression; 2 invalid input, an error or nothing compared; 3 inconclusive."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.artifacts.figures import FAMILIES
from harness.cli.arguments import families
from harness.gate.against_baseline import gate
from harness.gate.baseline import Baseline
from harness.gate.observe import Observation, observe_dir
from harness.report import verdicts
from harness.safeio import output_path


def cmd_gate(args: argparse.Namespace) -> int:
    output = output_path(args.json, "--json", [args.baseline, *args.results]) if args.json else None
    baseline = Baseline.read(Path(args.baseline))
    results = [Path(r) for r in args.results]
    observations: dict[str, Observation] = {}
    for d in results:
        observations.update(observe_dir(d))
    judgement = gate(baseline, observations, across_env=args.compare_across_env, families=args.judge)
    for line in verdicts.lines(judgement):
        print(line)
    if output:
        verdicts.gate_doc(judgement, baseline, observations, results).write(output)
    return judgement.exit_code


def declare(sub: argparse._SubParsersAction) -> None:
    """``gate``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser(
        "gate", help="compare results against a baseline; exit 1 on a regression, 3 when the noise leaves one undecided"
    )
    p.add_argument("--baseline", required=True)
    p.add_argument("--results", required=True, nargs="+", metavar="RESULTS_DIR")
    p.add_argument("--compare-across-env", action="store_true", help="compare even across device kind / msprobe")
    p.add_argument("--json", metavar="FILE", help="also write the verdicts as JSON")
    p.add_argument("--judge", type=families, default=FAMILIES, metavar="FAMILY[,FAMILY]",
                   help=f"figure families decided ({','.join(FAMILIES)}; default all); others are reported (a "
                   "nightly whose duet decides overhead side by side gates disk,structure)")  # fmt: skip
    p.set_defaults(func=cmd_gate)

"""``python -m harness schema``: the scenario format's JSON Schema (``scenarios/scenario.schema.json``)."""

from __future__ import annotations

import argparse
import json
import sys

from harness.safeio import output_path, write_atomic
from harness.scenario.model import Scenario


def cmd_schema(args: argparse.Namespace) -> int:
    text = json.dumps(Scenario.model_json_schema(by_alias=True), indent=2) + "\n"
    if args.output:
        write_atomic(output_path(args.output, "-o"), text)
    else:
        sys.stdout.write(text)
    return 0


def declare(sub: argparse._SubParsersAction) -> None:
    """``schema``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser("schema", help="print (or write) the scenario format's JSON Schema")
    p.add_argument("-o", "--output")
    p.set_defaults(func=cmd_schema)

"""``python -m harness github annotations|summary JSON``: what a GitHub job publishes of compare.json or a gate's
JSON: ``::error`` annotations, one per finding, or the step summary."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.safeio import MB, read_text

MAX_MARKDOWN = 16 * MB


def cmd_github(args: argparse.Namespace) -> int:
    from harness.report.github import annotation_lines, load, summary  # matplotlib (harness.report) only when used

    doc = load(Path(args.json))
    if args.what == "annotations":
        for line in annotation_lines(doc):
            print(line)
    else:
        md = read_text(Path(args.markdown), MAX_MARKDOWN) if args.markdown else ""
        print(summary(doc, md, args.heading), end="")
    return 0


def declare(sub: argparse._SubParsersAction) -> None:
    """``github``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser(
        "github",
        help="what a GitHub job publishes of compare.json or a gate's JSON (stdout): annotations (::error lines, "
        "one per finding) or the step summary",
    )
    p.add_argument("what", choices=["annotations", "summary"])
    p.add_argument("json", metavar="JSON", help="compare.json, or the file of `harness gate --json`")
    p.add_argument("--markdown", metavar="MD", help="summary: the report below the verdict (report/summary.md)")
    p.add_argument("--heading", default="", help="summary: a heading above the verdict")
    p.set_defaults(func=cmd_github)

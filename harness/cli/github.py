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

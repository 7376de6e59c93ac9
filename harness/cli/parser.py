"""The command line: every command declares its own arguments beside it (``declare`` in ``harness.cli.<command>``);
here they are gathered, in the order ``--help`` lists them."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from harness.cli import (
    baseline,
    bisect,
    caller,
    compare,
    dry_run,
    duet,
    gate,
    github,
    history,
    image,
    issue,
    junit_merge,
    numerics,
    pair,
    report,
    run,
    schema,
    target,
    validate,
    wheelhouse,
)

DESCRIPTION = """Exit codes: 0 all good; 1 a check failed (or, for gate and compare, a regression); 2 invalid input or
an infrastructure error; 3 INCONCLUSIVE: nothing failed, but the noise left a figure undecided (its line says how
wide the noise was and how many more repeats would decide it); 128+N on signal N (SIGINT, SIGTERM, SIGHUP: the
running training is stopped first)."""


COMMANDS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    validate.declare,
    run.declare,
    compare.declare,
    duet.declare,
    issue.declare,
    caller.declare,
    pair.declare,
    dry_run.declare,
    target.declare,
    image.declare,
    schema.declare,
    wheelhouse.declare,
    baseline.declare,  # baseline merge and calibrate
    gate.declare,
    report.declare,
    junit_merge.declare,
    github.declare,
    numerics.declare,
    bisect.declare,
    history.declare,
)


def build() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for declare in COMMANDS:
        declare(sub)
    return parser


def unprintable(arg: str) -> str:
    """Why an argument is refused before anything reads it: a byte that is not UTF-8 (Python keeps it as a lone
    surrogate) ends a report or a print in a traceback; a line break or another control character, printed in a
    verdict line, could forge one (``--series $'main\\nREGRESSED'``)."""
    try:
        arg.encode()
    except UnicodeEncodeError:
        return f"{os.fsencode(arg)!r} is not UTF-8 (a path with such a byte: rename it)"
    return f"{arg!r} holds a line break or another control character"

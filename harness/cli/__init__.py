"""Command line: ``python -m harness COMMAND ...``, one module a command (``harness.cli.<command>``), each declaring
its own arguments (gathered by ``harness.cli.parser``). Here: how every command ends (``harness.outcomes``): its exit
code, or one line and exit 2 for any error, 128+N on signal N."""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from harness import outcomes
from harness.cli.parser import build, unprintable
from harness.errors import HarnessError, one_line, unexpected
from harness.outside import RedactingStream
from harness.pipeline.options import executor_choice
from harness.safeio import write_atomic
from harness.signals import describe, interrupts


def main(argv: list[str] | None = None) -> int:
    """Every line the command prints goes through ``harness.outside``'s redaction: a credential a server echoed,
    or one in a URL an error line names, is never shown, whichever module printed it."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(out), RedactingStream(err)
    try:
        return _main(argv)
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        sys.stdout, sys.stderr = out, err


def _main(argv: list[str] | None) -> int:
    parser = build()
    argv = sys.argv[1:] if argv is None else argv
    if bad := next((a for a in argv if not a.isprintable()), None):
        print(f"{parser.prog}: argument {unprintable(bad)}", file=sys.stderr)
        return outcomes.EXIT_ERROR
    args = parser.parse_args(argv)
    try:
        if hasattr(args, "ray_address"):  # a cluster named: the ray executor, its address in the environment
            args.executor = executor_choice(args.executor, args.ray_address)
        with interrupts():
            return args.func(args)
    except HarnessError as exc:  # every bad input and failed run: one line, exit 2
        print(one_line(exc), file=sys.stderr)
        return outcomes.EXIT_ERROR
    except KeyboardInterrupt as exc:  # SIGINT, SIGTERM, SIGHUP: what was stopped, exit 128+N
        line, code = describe(exc)
        print(line, file=sys.stderr)
        return code
    except Exception as exc:  # a harness bug: one line, exit 2 (never 1: a verdict on verl), the traceback kept
        print(unexpected(exc) + _keep_traceback(args), file=sys.stderr)
        return outcomes.EXIT_ERROR


def _keep_traceback(args: argparse.Namespace) -> str:
    """The whole traceback of a harness bug, for its report: in the command's results dir when it has one (where
    everything a run writes stays), else nowhere (the line names the innermost frame)."""
    results = getattr(args, "results", None)
    if not isinstance(results, str) or not results:  # a list: the results dirs a command reads, never written to
        return ""
    path = Path(results) / "harness-error.txt"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, traceback.format_exc())
    except (OSError, HarnessError):
        return ""
    return f"; traceback in {path}"
